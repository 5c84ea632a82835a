"""Statistical helpers shared by the checks: family-wise z limits, means with standard errors,
log-log fits, per-claim random streams, and plain-data conversion.

* :func:`z_limit` — the standard-error multiple used for a family of Monte Carlo comparisons;
* :func:`mean_se`, :func:`loglog_slope` — sample means with standard errors, log-log fits;
* :func:`claim_rng` — the independent random stream of one claim under a context's seed.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

__all__ = ["FAMILY_Z", "claim_rng", "loglog_slope", "mean_se", "plain", "z_limit"]

FAMILY_Z = 4.0
"""A Monte Carlo estimate agrees with its exact value when within this many standard errors."""


def claim_rng(ctx, claim: int) -> np.random.Generator:
    """The random stream of claim AT<claim> under ``ctx.seed`` (independent streams per claim)."""
    return np.random.default_rng([abs(int(ctx.seed)), 1000 + int(claim)])


def z_limit(n_comparisons: int, z: float = FAMILY_Z) -> float:
    """Standard-error multiple for ``n`` Monte Carlo comparisons made together.

    .. math:: z_n = \\Phi^{-1}\\Big(1 - \\frac{2\\,(1 - \\Phi(z))}{2 n}\\Big)

    (Bonferroni): the chance that any of n correct estimates strays beyond z_n standard errors
    equals the chance that one strays beyond z = 4, about 6e-5. z_1 = 4, z_100 ≈ 5.0.
    """
    n = int(n_comparisons)
    if n < 1:
        raise ValueError(f"n_comparisons must be >= 1; got {n_comparisons}")
    return float(z) if n == 1 else float(max(z, norm.isf(norm.sf(z) / n)))


def mean_se(x, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Sample mean and its standard error s/√N along ``axis`` (N ≥ 2)."""
    x = np.asarray(x, dtype=float)
    n = x.shape[axis]
    if n < 2:
        raise ValueError(f"x must have at least 2 samples along axis {axis}; got {n}")
    return x.mean(axis=axis), x.std(axis=axis, ddof=1) / np.sqrt(n)


def loglog_slope(x, y) -> tuple[float, float, float]:
    """Least-squares fit ln y = p ln x + b: returns (p, b, standard error of p)."""
    lx, ly = np.log(np.asarray(x, dtype=float)), np.log(np.asarray(y, dtype=float))
    if lx.size < 3:
        raise ValueError(f"need at least 3 points for a slope with an error; got {lx.size}")
    (p, b), res, *_ = np.polyfit(lx, ly, 1, full=True)
    s2 = float(res[0]) / (lx.size - 2) if res.size else 0.0
    se = np.sqrt(s2 / np.sum((lx - lx.mean()) ** 2))
    return float(p), float(b), float(se)


def plain(x):
    """Round-trip numpy scalars and arrays to Python floats, ints, bools and lists."""
    if isinstance(x, dict):
        return {str(k): plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [plain(v) for v in x]
    if isinstance(x, np.ndarray):
        return plain(x.tolist())
    if isinstance(x, bool | np.bool_):
        return bool(x)
    if isinstance(x, int | np.integer):
        return int(x)
    if isinstance(x, float | np.floating):
        return float(x)
    return x
