"""Null influence profiles: simple position profiles a rollout prediction must beat (claim PB15).

A measured input-token influence profile p̂ over positions 0..n−1 has a mean position
μ = Σ_j j p̂(j). The nulls here use nothing of a model but μ (or a permutation of its λ_t):

* :func:`geometric_recency` — p(j) ∝ r^{n−1−j}, the ratio r fitted so that the mean position is μ
  (r < 1 is recency, r > 1 primacy, r = 1 uniform);
* :func:`linear_ramp` — p(j) ∝ 1 + s·(j − c)/c, c = (n−1)/2, s ∈ [−1, 1] fitted to μ in closed
  form; a nonnegative ramp has mean within c ± σ²/c (σ² = (n²−1)/12, the variance of a uniform
  position), so a μ outside that range gets the extreme ramp s = ±1;
* :func:`derangement` — a seeded permutation of 0..L−1 with no fixed point (a shuffled-λ null
  moves every λ_t to another layer).

All functions are vectorised over a leading batch of means and pure NumPy.
"""

from __future__ import annotations

import numpy as np

__all__ = ["derangement", "geometric_recency", "linear_ramp", "ramp_slope"]


def _n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 2:
        raise ValueError(f"n must be an integer >= 2; got {n!r}")
    return int(n)


def _means(mean, n: int) -> np.ndarray:
    mu = np.asarray(mean, dtype=np.float64)
    if not np.isfinite(mu).all():
        raise ValueError("mean must be finite")
    if ((mu < 0) | (mu > n - 1)).any():
        raise ValueError(f"mean must lie in [0, n − 1] = [0, {n - 1}]")
    return mu


def _geometric(theta: np.ndarray, n: int) -> np.ndarray:
    """p(j) ∝ exp(θ (n−1−j)), rows for each θ (θ = log r), computed stably."""
    k = np.arange(n - 1, -1, -1, dtype=np.float64)  # n−1−j
    e = theta[..., None] * k
    e -= e.max(axis=-1, keepdims=True)
    p = np.exp(e)
    return p / p.sum(axis=-1, keepdims=True)


def geometric_recency(n, mean, *, iterations: int = 200) -> tuple[np.ndarray, np.ndarray]:
    """Geometric profile p(j) ∝ r^{n−1−j} with mean position ``mean`` (claim PB15).

    The mean position of p decreases strictly in θ = log r (from n−1 at θ → −∞ to 0 at θ → +∞),
    so θ is found by bisection on [−700, 700] (e^700 stays below the float64 maximum; there
    every weight but one end's is below 1e-304 of that end's); ``iterations`` = 200 halvings
    reach the float64 resolution of θ. A mean of 0 or n − 1 gives the point mass at that end
    (up to e^{−700} per other position).

    Parameters
    ----------
    n : int, n ≥ 2
    mean : float or array_like, shape (...), values in [0, n − 1]

    Returns
    -------
    p : ndarray, shape (..., n), probability vectors
    ratio : ndarray, shape (...), r = e^θ
    """
    n = _n(n)
    mu = _means(mean, n)
    top = 700.0
    lo = np.full(mu.shape, -top)
    hi = np.full(mu.shape, top)
    j = np.arange(n, dtype=np.float64)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        m = _geometric(mid, n) @ j
        above = m > mu  # mean too large: increase θ (more weight on early tokens)
        lo = np.where(above, mid, lo)
        hi = np.where(above, hi, mid)
        if np.all(hi - lo <= 4 * np.finfo(float).eps * np.maximum(1.0, np.abs(mid))):
            break
    theta = 0.5 * (lo + hi)
    return _geometric(theta, n), np.exp(theta)


def ramp_slope(n, mean) -> np.ndarray:
    """The slope s ∈ [−1, 1] of :func:`linear_ramp` for ``mean``: s = (μ − c)·c/σ², clipped."""
    n = _n(n)
    mu = _means(mean, n)
    c = (n - 1) / 2
    var = (n * n - 1) / 12
    return np.clip((mu - c) * c / var, -1.0, 1.0)


def linear_ramp(n, mean) -> np.ndarray:
    """Linear profile p(j) ∝ 1 + s (j − c)/c with mean position ``mean`` (claim PB15).

    With c = (n − 1)/2 the mean is c + s σ²/c, σ² = (n² − 1)/12, so s = (μ − c) c / σ²; it is
    clipped to [−1, 1] (the steepest nonnegative ramps, p ∝ n−1−j and p ∝ j), so means beyond
    c ± σ²/c get the closest ramp, not their own mean.

    Parameters
    ----------
    n : int, n ≥ 2
    mean : float or array_like, shape (...), values in [0, n − 1]

    Returns
    -------
    p : ndarray, shape (..., n), probability vectors
    """
    n = _n(n)
    s = ramp_slope(n, mean)
    c = (n - 1) / 2
    u = (np.arange(n, dtype=np.float64) - c) / c
    p = 1.0 + s[..., None] * u
    return p / p.sum(axis=-1, keepdims=True)


def derangement(L, rng) -> np.ndarray:
    """A uniformly random permutation of 0..L−1 with no fixed point (rejection sampling).

    Parameters
    ----------
    L : int, L ≥ 2 (L = 1 has no derangement)
    rng : numpy.random.Generator or int seed
    """
    if isinstance(L, bool) or not isinstance(L, int | np.integer) or L < 2:
        raise ValueError(f"L must be an integer >= 2 (one layer has no derangement); got {L!r}")
    rng = np.random.default_rng(rng)
    while True:  # the acceptance probability tends to 1/e (at least 1/3 for L >= 2)
        perm = rng.permutation(int(L))
        if not (perm == np.arange(L)).any():
            return perm
