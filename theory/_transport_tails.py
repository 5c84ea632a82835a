"""Concentration tails of [B] (private; re-exported by :mod:`posflow.theory.transport`).

* AT7: Lévy / spherical-cap tail for a uniform unit vector, and its exact Beta-law tail.
* AT8: Hoeffding tail for a score made of fully mixed SO(2) blocks.
* AT9: union bound on the largest of M far scores, and the score level it guarantees.
"""

from __future__ import annotations

import numpy as np
from scipy.special import betainc

from ._transport_common import int_scalar, real_array, real_scalar, scalar_or_array


def levy_tail(d, eps) -> float | np.ndarray:
    """Spherical-cap (Lévy) bound on one coordinate of a uniform unit vector (claim AT7).

    .. math:: \\Pr(|\\langle u, e_1\\rangle| > \\varepsilon) \\le 2 e^{-d\\varepsilon^2/2},
              \\qquad u \\sim \\mathrm{Unif}(S^{d-1})

    By rotation invariance the same holds for ⟨q, P k⟩/(‖q‖‖k‖) once a Haar step has mixed
    the key. The value may exceed 1 (then the bound is void).

    Parameters
    ----------
    d : int
        Dimension of the ambient space, ≥ 2.
    eps : float or array_like
        Thresholds ε ≥ 0, finite.

    Returns
    -------
    float or ndarray (shape of ``eps``)
    """
    dim = int_scalar("d", d, lo=2)
    e = real_array("eps", eps, lo=0.0)
    return scalar_or_array(2.0 * np.exp(-0.5 * dim * e * e))


def sphere_coordinate_tail(d, eps) -> float | np.ndarray:
    """Exact tail of one coordinate of a uniform unit vector in R^d (claim AT7, reference).

    u_1² ~ Beta(1/2, (d-1)/2), hence, with the regularised incomplete beta function I,

    .. math:: \\Pr(|u_1| > \\varepsilon) = I_{1-\\varepsilon^2}\\big((d-1)/2,\\ 1/2\\big)
              \\quad (0 \\le \\varepsilon < 1), \\qquad 0 \\quad (\\varepsilon \\ge 1)

    (the complementary form avoids cancellation in the tail). Same arguments as
    :func:`levy_tail`; cost O(1) per entry.
    """
    dim = int_scalar("d", d, lo=2)
    e = real_array("eps", eps, lo=0.0)
    x = np.clip(1.0 - e * e, 0.0, 1.0)
    out = np.where(e < 1.0, betainc(0.5 * (dim - 1), 0.5, x), 0.0)
    return scalar_or_array(np.asarray(out, dtype=np.float64))


def hoeffding_tail(t, q_norms, k_norms) -> float | np.ndarray:
    """Hoeffding bound for a score of independent, fully mixed SO(2) blocks (claim AT8).

    With uniform block phases ψ_b, s = Σ_b ‖q_b‖‖k_b‖ cos ψ_b is a sum of independent, mean-zero
    terms bounded by c_b = ‖q_b‖‖k_b‖, so

    .. math:: \\Pr(|s| > t) \\le 2\\exp\\Big(-\\frac{t^2}{2\\sum_b \\|q_b\\|^2\\|k_b\\|^2}\\Big).

    For balanced blocks (‖q_b‖² = 2‖q‖²/d) and t = ε‖q‖‖k‖ the exponent is dε²/4, half the
    Lévy exponent of :func:`levy_tail`.

    Parameters
    ----------
    t : float or array_like
        Thresholds ≥ 0, finite.
    q_norms, k_norms : array_like, shape (B,)
        Per-block norms ‖q_b‖, ‖k_b‖ ≥ 0, finite, B ≥ 1.

    Returns
    -------
    float or ndarray (shape of ``t``)
        If every c_b is 0 the score is identically 0: the tail is 0 for t > 0 (2 at t = 0).
        Cost O(B) plus O(1) per threshold.
    """
    thr = real_array("t", t, lo=0.0)
    q = real_array("q_norms", q_norms, lo=0.0)
    k = real_array("k_norms", k_norms, lo=0.0)
    if q.ndim != 1 or q.size < 1:
        raise ValueError(f"q_norms must be a 1-D array with B >= 1 entries; got shape {q.shape}")
    if k.shape != q.shape:
        raise ValueError(f"k_norms must have the shape of q_norms {q.shape}; got {k.shape}")
    variance_proxy = float(np.sum((q * k) ** 2))
    if variance_proxy == 0.0:
        return scalar_or_array(np.where(thr > 0.0, 0.0, 2.0))
    return scalar_or_array(2.0 * np.exp(-(thr * thr) / (2.0 * variance_proxy)))


def score_gap_union_bound(t, M, d, rate=0.5) -> float | np.ndarray:
    """Union bound on the largest of M far scores of unit vectors (claim AT9).

    .. math:: \\Pr\\big(\\max_{j\\le M} |s_j| > t\\big) \\le 2M e^{-c\\,d\\,t^2}

    for s_j = ⟨q, P_j k_j⟩ with unit q, k_j (multiply t by ‖q‖‖k‖ otherwise). The rate c is 1/2
    for Haar-mixed keys (AT7) and 1/4 for balanced, fully mixed SO(2) blocks (AT8). The value
    may exceed 1 (void bound).

    Parameters
    ----------
    t : float or array_like
        Thresholds ≥ 0, finite.
    M : int
        Number of far scores, ≥ 1.
    d : int
        Head dimension, ≥ 1.
    rate : float, optional
        The exponent constant c > 0.

    Returns
    -------
    float or ndarray (shape of ``t``)
    """
    thr = real_array("t", t, lo=0.0)
    m = int_scalar("M", M, lo=1)
    dim = int_scalar("d", d, lo=1)
    c = real_scalar("rate", rate, lo=0.0, lo_open=True)
    return scalar_or_array(2.0 * m * np.exp(-c * dim * thr * thr))


def score_gap_quantile(delta, M, d, rate=0.5) -> float | np.ndarray:
    """Score level exceeded by no far score with probability ≥ 1 - δ (claim AT9).

    Solving 2M e^{-c d t²} = δ:

    .. math:: t_\\delta = \\sqrt{\\frac{\\ln(2M/\\delta)}{c\\,d}}

    so the largest far score grows only like √(ln M / d); with δ = 1 and c = 1/2 this is the
    familiar scale √(2 ln(2M)/d) (times ‖q‖‖k‖).

    Parameters
    ----------
    delta : float or array_like
        Failure probabilities in (0, 1].
    M, d, rate
        As in :func:`score_gap_union_bound`.

    Returns
    -------
    float or ndarray (shape of ``delta``)
    """
    dl = real_array("delta", delta, lo=0.0, lo_open=True, hi=1.0)
    m = int_scalar("M", M, lo=1)
    dim = int_scalar("d", d, lo=1)
    c = real_scalar("rate", rate, lo=0.0, lo_open=True)
    return scalar_or_array(np.sqrt((np.log(2.0 * m) - np.log(dl)) / (c * dim)))
