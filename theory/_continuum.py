"""The continuous-depth limit of the uniform-kernel rollout (claim PB18, ours).

PB12's Hausdorff representation writes the uniform-kernel profile as a binomial mixture over
``X = ∏_t X_t`` with ``X_t = 1`` (probability ``1 − λ_t``) or ``Uniform(0, 1)`` (probability
``λ_t``). Then ``−ln X = Σ_t B_t E_t`` with ``B_t ~ Bernoulli(λ_t)`` and ``E_t ~ Exp(1)``
independent. When ``max_t λ_t → 0`` with ``Σ_t λ_t = Λ`` fixed, ``Σ_t B_t → K ~ Poisson(Λ)``
(Le Cam), so ``−ln X → G ~ Gamma(K, 1)``, a compound Poisson law (``G = 0`` when ``K = 0``):

.. math::
    m_k = E[X^k] = \\prod_t \\Big(1 - λ_t \\frac{k}{k+1}\\Big)
    \\;\\longrightarrow\\; m_k^\\infty = \\exp\\Big(-Λ \\frac{k}{k+1}\\Big)
    = \\sum_{K \\ge 0} e^{-Λ}\\frac{Λ^K}{K!}(1+k)^{-K} = E\\big[e^{-kG}\\big].

The limiting profile is ``p∞(j) = C(n−1, j) E[X^j (1 − X)^{n−1−j}]`` with these moments. The
rate: ``ln m_k − ln m_k^∞ = −Σ_t Σ_{r≥2} (λ_t u)^r / r`` with ``u = k/(k+1)``, so to first order
``m_k − m_k^∞ ≈ −m_k^∞ u² Σ_t λ_t² / 2 ≤ −m_k^∞ u² Λ max_t λ_t / 2``: the profile approaches its
limit linearly in ``max_t λ_t`` (exactly ``Λ²/(2T)`` for constant ``λ_t = Λ/T``).

As ``n → ∞`` the law of ``j/(n−1)`` under ``p∞`` tends to the law of X (the binomial mixture
concentrates): an atom ``e^{−Λ}`` at x = 1, and for ``y = −ln x`` the density of G,
``f(y) = e^{−Λ−y} √(Λ/y) I₁(2√(Λy))`` (the Poisson mixture
``Σ_{K≥1} e^{−Λ} Λ^K y^{K−1} e^{−y}/(K!(K−1)!)`` of Gamma(K, 1) densities;
:func:`continuum_law_density`); in x it is ``f(−ln x)/x = e^{−Λ} √(Λ/y) I₁(2√(Λy))``.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import sympy as sp
from scipy import integrate, special

__all__ = [
    "continuum_correction",
    "continuum_law_density",
    "continuum_moment_derivation",
    "continuum_moments",
    "continuum_profile",
    "continuum_profile_quadrature",
    "profile_from_moments",
]


def _check(n, Lam):
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    Lam = float(Lam)
    if not (math.isfinite(Lam) and Lam >= 0):
        raise ValueError(f"Lam must be a finite number >= 0; got {Lam!r}")
    return int(n), Lam


def continuum_moments(Lam, kmax: int) -> np.ndarray:
    """``m_k^∞ = exp(−Λ k/(k+1))``, k = 0..kmax: moments of the continuous-depth law (PB18)."""
    _, Lam = _check(1, Lam)
    k = np.arange(int(kmax) + 1, dtype=float)
    return np.exp(-Lam * k / (k + 1))


def continuum_moment_derivation() -> dict:
    """sympy: the two identities behind PB18, each as a residual that simplifies to 0.

    ``lim_{T→∞} (1 − (Λ/T) u)^T − e^{−Λu}`` (constant λ_t = Λ/T) and
    ``Σ_K e^{−Λ}Λ^K/K! (1+k)^{−K} − e^{−Λ k/(k+1)}`` (the compound-Poisson Laplace transform).
    """
    Lam, u, T, k, K = sp.symbols("Lambda u T k K", positive=True)
    lim = sp.limit((1 - Lam * u / T) ** T, T, sp.oo) - sp.exp(-Lam * u)
    series = sp.summation(sp.exp(-Lam) * Lam**K / sp.factorial(K) * (1 + k) ** (-K), (K, 0, sp.oo))
    cp = sp.simplify(series - sp.exp(-Lam * k / (k + 1)))
    return {"discrete_limit": sp.simplify(lim), "compound_poisson": cp}


def profile_from_moments(moment, n: int, dps: int) -> np.ndarray:
    """The profile of n tokens whose law of j/(n−1) has the moments ``moment(k)``, shape (n,).

    .. math:: p(j) = \\binom{n-1}{j}\\sum_{r=0}^{n-1-j}\\binom{n-1-j}{r}(-1)^r\\,
              \\mathrm{moment}(j + r)

    evaluated with mpmath at ``dps`` digits: ``moment(k)`` (k = 0 … n−1, an int) must return an
    mpmath number. The alternating sum cancels about n digits, so ``dps`` must exceed n plus the
    digits wanted (:func:`continuum_profile` uses n + 40).

    The binomials are exact Python integers from the recurrences
    ``C(N, r+1) = C(N, r)(N − r)/(r + 1)`` and ``C(n−1, j+1) = C(n−1, j)(n−1−j)/(j+1)`` (each
    division exact); each term ``±C(N, r)·moment(j + r)`` is then one rounding at ``dps``
    digits, as with the exact integer-valued ``mpmath.binomial`` (they have ≤ 0.302·n digits
    < ``dps``), so the values are unchanged. Cost O(n²) multiprecision products.
    """
    with mpmath.workdps(dps):
        m = [mpmath.mpmathify(moment(kk)) for kk in range(n)]  # int × m stays an mpmath number
        out = []
        outer = 1  # C(n−1, j)
        for j in range(n):
            N = n - 1 - j
            terms = []
            c = 1  # (−1)^r C(N, r)
            for r in range(N + 1):
                terms.append(c * m[j + r])
                c = -(c * (N - r)) // (r + 1)  # exact: (r + 1) divides C(N, r)(N − r)
            out.append(outer * mpmath.fsum(terms))
            outer = outer * N // (j + 1)
        return np.array([float(x) for x in out])


def continuum_profile(n: int, Lam) -> np.ndarray:
    """The continuous-depth limit profile (claim PB18), shape (n,), a probability vector.

    .. math::
        p^\\infty(j) = \\binom{n-1}{j}\\sum_{r=0}^{n-1-j}\\binom{n-1-j}{r}(-1)^r
        e^{-Λ (j+r)/(j+r+1)}

    evaluated with mpmath at ``n + 40`` digits, so each entry is exact to float64 rounding.
    Cost O(n²) multiprecision operations (n = 256: about a second).
    """
    n, Lam = _check(n, Lam)
    L = mpmath.mpf(Lam)
    return profile_from_moments(lambda kk: mpmath.exp(-L * kk / (kk + 1)), n, n + 40)


def continuum_correction(n: int, Lam) -> np.ndarray:
    """First-order correction ``d`` with ``p_T ≈ p∞ + max_t λ_t · d`` for constant λ_t = Λ/T:

    .. math:: d(j) = \\binom{n-1}{j}\\sum_r \\binom{n-1-j}{r}(-1)^r
              \\Big(-\\frac{Λ}{2} u_{j+r}^2 m_{j+r}^\\infty\\Big),\\quad u_k = \\frac{k}{k+1}

    (``Σ_t λ_t² = Λ max λ`` for constant λ). Shape (n,), sums to 0.
    """
    n, Lam = _check(n, Lam)
    L = mpmath.mpf(Lam)

    def moment(kk):
        u = mpmath.mpf(kk) / (kk + 1)
        return -L / 2 * u**2 * mpmath.exp(-L * u)

    return profile_from_moments(moment, n, n + 40)


def continuum_law_density(y, Lam) -> np.ndarray:
    """Density of ``G = −ln X`` on y > 0 (its atom ``e^{−Λ}`` at 0 aside):

    .. math:: f(y) = e^{-Λ-y}\\sqrt{Λ / y}\\; I_1\\big(2\\sqrt{Λ y}\\big)
              = 2Λ\\, e^{z-Λ-y}\\, \\frac{e^{-z} I_1(z)}{z},\\quad z = 2\\sqrt{Λ y}

    (the Poisson mixture of Gamma(K, 1) densities, K ≥ 1). Computed in the second form with the
    exponentially scaled Bessel function: finite for large y, no division by y (its limit
    Λ e^{−Λ} as y → 0⁺, where e^{−z} I_1(z)/z → 1/2), and 0 for y ≤ 0 and y = +∞.
    ValueError for a NaN y.
    """
    _, Lam = _check(1, Lam)
    y = np.asarray(y, dtype=float)
    if np.isnan(y).any():
        raise ValueError("y must not be NaN")
    inside = (y > 0) & np.isfinite(y)
    pos = np.where(inside, y, 1.0)  # the formula only on the support
    z = 2 * np.sqrt(Lam * pos)
    safe = np.where(z > 0, z, 1.0)
    ratio = np.where(z > 0, special.ive(1, safe) / safe, 0.5)  # e^{-z} I_1(z)/z → 1/2 at z = 0
    f = 2 * Lam * np.exp(z - Lam - pos) * ratio  # z − y ≤ Λ
    return np.where(inside, f, 0.0)


def continuum_profile_quadrature(n: int, Lam) -> np.ndarray:
    """The same limit profile by quadrature over the law of G (an independent route):

    .. math:: p^\\infty(j) = e^{-Λ}[j = n-1] + \\int_0^\\infty
              \\mathrm{Binom}(j; n-1, e^{-y})\\, f(y)\\, dy

    (scipy.integrate.quad per j, over [0, a], [a, b] and [b, ∞) with [a, b] = Λ ± 12(√Λ + 1)
    holding the bulk of G, mean and variance 2Λ: one interval from 0 to ∞ misses it at large
    Λ). Cost O(n) quadratures.
    """
    n, Lam = _check(n, Lam)
    spread = 12.0 * (math.sqrt(2.0 * Lam) + 1.0)
    cuts = [0.0, max(0.0, Lam - spread), Lam + spread, np.inf]
    out = np.empty(n)
    for j in range(n):

        def integrand(y, j=j):
            x = math.exp(-y)
            return (
                special.binom(n - 1, j)
                * x**j
                * (1 - x) ** (n - 1 - j)
                * float(continuum_law_density(y, Lam))
            )

        out[j] = sum(integrate.quad(integrand, lo, hi, limit=200, epsabs=1e-14, epsrel=1e-12)[0]
                     for lo, hi in itertools.pairwise(cuts) if hi > lo)  # fmt: skip
    out[-1] += math.exp(-Lam)
    return out
