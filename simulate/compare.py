"""Comparing influence profiles: normalised W1, Spearman, shape classes (claims PB11, PB13–PB15).

Profiles are probability vectors over token positions 0..n-1. Distances follow [A]'s
convention: ``scipy.stats.wasserstein_distance`` on positions, divided by ``n - 1``.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate._validate import as_vector

__all__ = [
    "SHAPES",
    "mean_position",
    "profile_shape",
    "spearman",
    "w1",
    "w1_normalised",
]

SHAPES = ("strict_u", "weak_u", "increasing", "decreasing", "other")


def _probability(p, name: str) -> np.ndarray:
    v = as_vector(p, name, allow_scalar=False)
    if (v < 0).any():
        raise ValueError(f"{name} must be nonnegative")
    s = v.sum()
    if s <= 0:
        raise ValueError(f"{name} must have a positive sum")
    return v / s


def _pair(p, q):
    a, b = _probability(p, "p"), _probability(q, "q")
    if a.size != b.size:
        raise ValueError(f"p and q must have the same length; got {a.size} and {b.size}")
    return a, b


def w1(p, q) -> float:
    """Wasserstein-1 distance between two profiles on positions 0..n-1 (claim PB13).

    .. math:: W_1(p, q) = \\sum_k |F_p(k) - F_q(k)|

    Both are renormalised to sum 1 first (as in [A]); computed by
    ``scipy.stats.wasserstein_distance``.
    """
    a, b = _pair(p, q)
    pos = np.arange(a.size, dtype=np.float64)
    from scipy import stats  # imported on first use: it dominates posflow's import time

    return float(stats.wasserstein_distance(pos, pos, a, b))


def w1_normalised(p, q) -> float:
    """``W1(p, q) / (n - 1)`` in [0, 1], [A]'s convention (claims PB13, PB15); 0 when n = 1."""
    a, b = _pair(p, q)
    return 0.0 if a.size == 1 else w1(a, b) / (a.size - 1)


def spearman(p, q) -> float:
    """Spearman rank correlation of two profiles over positions (claim PB15).

    Raises ValueError naming ``p`` or ``q`` when it is constant (every entry equal, n = 1
    included): a constant profile has no ranks, so ρ is undefined (scipy would return NaN).
    """
    a, b = _pair(p, q)
    for name, v in (("p", a), ("q", b)):
        if v.min() == v.max():
            raise ValueError(
                f"{name} must not be constant (all {v.size} entries equal): a constant profile "
                "has no ranks, so its Spearman correlation is undefined"
            )
    from scipy import stats

    return float(stats.spearmanr(a, b).statistic)


def mean_position(p) -> float:
    """``E_p[j] = Σ_j j p(j)`` (after renormalising), the W1 distance from δ_0 (PB13)."""
    a = _probability(p, "p")
    return float(np.arange(a.size) @ a)


def profile_shape(p, rtol: float = 1e-9) -> str:
    """Classify a profile's shape (claims PB11, PB14).

    * ``strict_u`` — nonincreasing then nondecreasing (one sign change of the differences) with
      the minimum strictly inside and below both ends;
    * ``weak_u`` — an interior minimum below both ends, but the differences change sign more
      than once (wiggles);
    * ``increasing`` / ``decreasing`` — no interior valley: the minimum sits at the first / last
      token (pure recency / primacy; the differences may still wiggle);
    * ``other`` — none of these (e.g. an interior minimum not below both ends).

    Differences smaller than ``rtol · max p`` count as flat. Raises ValueError for an empty
    ``p`` (no shape to classify).
    """
    a = as_vector(p, "p", allow_scalar=False)
    if a.size == 0:
        raise ValueError("p must have at least one entry; got an empty profile")
    if a.size < 3:
        return "other"
    d = np.diff(a)
    tol = rtol * np.abs(a).max()
    s = np.sign(np.where(np.abs(d) <= tol, 0.0, d))
    s = s[s != 0]
    if s.size == 0:
        return "other"
    changes = int(np.count_nonzero(np.diff(s)))
    k = int(np.argmin(a))
    interior = 0 < k < a.size - 1 and a[k] < min(a[0], a[-1]) - tol
    if interior:
        return "strict_u" if changes == 1 and s[0] < 0 else "weak_u"
    if k == 0 or (changes == 0 and s[0] > 0):
        return "increasing"
    if k == a.size - 1 or (changes == 0 and s[0] < 0):
        return "decreasing"
    return "other"
