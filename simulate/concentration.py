"""Concentration of far scores (paper [B], claims AT7–AT9): exact laws and the bounds they meet.

* :func:`cap_lower_bound` — an exact lower bound on a spherical-cap tail (AT7);
* :func:`i0_series_dominated`, :func:`block_norms` — the I₀ sub-Gaussian tail of a score of
  fully mixed SO(2) blocks (AT8);
* :func:`balanced_score_tail`, :func:`max_score_tail`, :func:`max_score_quantile` — the exact
  law of a balanced unit query's far score and of the largest of M of them (AT9).

Everything is NumPy float64 (sympy for :func:`i0_series_dominated`).
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp
from scipy.optimize import brentq
from scipy.special import betaln, j0

__all__ = [
    "SERIES_TERMS",
    "balanced_score_tail",
    "block_norms",
    "cap_lower_bound",
    "i0_series_dominated",
    "max_score_quantile",
    "max_score_tail",
]

SERIES_TERMS = 4096
"""Terms of the Fourier (J₀) series of :func:`balanced_score_tail`."""


def cap_lower_bound(d, eps):
    """Exact lower bound on Pr(|u₁| > ε) for u uniform on S^{d−1} (claim AT7).

    Pr = I_x(a, ½) with x = 1 − ε², a = (d − 1)/2, and B(x; a, ½) = ∫₀ˣ t^{a−1}(1 − t)^{−½} dt
    ≥ ∫₀ˣ t^{a−1} dt = x^a/a, so Pr ≥ x^a/(a B(a, ½)); hence −ln(Pr/2) ≤ −a ln(1 − ε²) +
    ln(2a B(a, ½)), linear in d up to ½ ln d. Computed in log space.

    Parameters
    ----------
    d : int or array_like
        Dimension(s) ≥ 2, broadcasting with ``eps``.
    eps : float or array_like
        Levels in [0, 1].

    Returns
    -------
    numpy.ndarray
        The bound, of the broadcast shape of ``d`` and ``eps``.
    """
    a = 0.5 * (np.asarray(d, dtype=float) - 1.0)
    e = np.asarray(eps, dtype=float)
    with np.errstate(divide="ignore"):
        return np.exp(a * np.log1p(-e * e) - np.log(a) - betaln(a, 0.5))


def i0_series_dominated(order: int = 12) -> bool:
    """I₀(x) = Σ_k (x²/4)^k/(k!)² ≤ Σ_k (x²/4)^k/k! = e^{x²/4}, termwise (claim AT8).

    sympy: the series of ``besseli(0, x)`` equals Σ_{k<order} x^{2k}/(4^k (k!)²) exactly, and
    k! − 1 ≥ 0 for every integer k ≥ 0 (so (k!)² ≥ k!). Cost ≈ 0.1 s.

    Parameters
    ----------
    order : int
        Number of series coefficients compared.

    Returns
    -------
    bool
        True when both facts are proven.
    """
    x = sp.Symbol("x", positive=True)
    k = sp.Symbol("k", integer=True, nonnegative=True)
    ser = sp.series(sp.besseli(0, x), x, 0, 2 * order).removeO()
    same = all(
        ser.coeff(x, 2 * j) == sp.Rational(1, 4**j) / sp.factorial(j) ** 2 for j in range(order)
    )
    return bool(same and (sp.factorial(k) - 1).is_nonnegative)


def block_norms(x):
    """Norms of the half-split SO(2) blocks (x_b, x_{b + d/2}) of ``x``.

    Parameters
    ----------
    x : numpy.ndarray, shape (..., d)
        Vectors with d even.

    Returns
    -------
    numpy.ndarray, shape (..., d/2)
        ‖x_b‖ = hypot(x_b, x_{b + d/2}).
    """
    h = x.shape[-1] // 2
    return np.hypot(x[..., :h], x[..., h:])


@functools.cache
def _bessel_coefficients(d: int) -> np.ndarray:
    n = np.arange(1, SERIES_TERMS + 1)
    return j0(2.0 * np.pi * n / d) ** (d // 2) / (np.pi * n)


def balanced_score_tail(t, d: int):
    """Exact Pr(|s| ≥ t) for s = (2/d) Σ_{b<d/2} cos ψ_b, ψ_b i.i.d. uniform (claim AT9).

    s is the score qᵀR(ψ)q of a balanced unit query (‖q_b‖² = 2/d) with itself. Its law lives on
    [−1, 1] with characteristic function φ(ω) = J₀(2ω/d)^{d/2}, so its density is the Fourier
    series ½ + Σ_{n≥1} φ(πn) cos(πnx) on the period [−1, 1], and

    .. math:: \\Pr(|s| \\ge t) = 1 - t
              - 2\\sum_{n\\ge1} \\varphi(\\pi n)\\,\\frac{\\sin(\\pi n t)}{\\pi n}.

    4096 terms; with |J₀(x)| ≤ √(2/(πx)) the remainder is below (d/(π²·4096))^{d/4}·2/π, i.e.
    < 1e-20 for d ≥ 16. Cost O(4096) per t.

    Parameters
    ----------
    t : float or array_like
        Levels in [0, 1], any shape.
    d : int
        Even dimension ≥ 16.

    Returns
    -------
    numpy.ndarray
        The tail, of the shape of ``t``, clipped to [0, 1].

    Raises
    ------
    ValueError
        If d is odd or below 16.
    """
    if d < 16 or d % 2:
        raise ValueError(f"d must be even and >= 16 for the truncated series; got {d}")
    t = np.asarray(t, dtype=float)
    n = np.arange(1, SERIES_TERMS + 1)
    series = np.sin(np.pi * np.multiply.outer(t, n)) @ _bessel_coefficients(d)
    return np.clip(1.0 - t - 2.0 * series, 0.0, 1.0)


def max_score_tail(t, d: int, M: int):
    """Pr(max of M i.i.d. |s_j| ≥ t) = 1 − (1 − p(t))^M, p = :func:`balanced_score_tail`.

    Parameters
    ----------
    t : float or array_like
        Levels in [0, 1], any shape.
    d : int
        Even dimension ≥ 16.
    M : int
        Number of far scores.

    Returns
    -------
    numpy.ndarray
        The tail of the maximum, of the shape of ``t`` (1 at t = 0).
    """
    with np.errstate(divide="ignore"):  # p = 1 at t = 0: log1p(−1) = −inf, the max tail is 1
        return -np.expm1(M * np.log1p(-balanced_score_tail(t, d)))


def max_score_quantile(prob: float, d: int, M: int) -> float:
    """The level t in [0, 1] with Pr(max_j |s_j| ≥ t) = ``prob`` (:func:`max_score_tail`).

    Parameters
    ----------
    prob : float
        Probability in (0, 1).
    d : int
        Even dimension ≥ 16.
    M : int
        Number of far scores.

    Returns
    -------
    float
        The root, by Brent's method to 1e-14.
    """
    return brentq(lambda t: max_score_tail(t, d, M) - prob, 0.0, 1.0, xtol=1e-14)
