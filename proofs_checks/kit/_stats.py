"""Statistical judging shared by the checks: family-wise z limits and levels, z·SE tolerances,
binomial exceedance counts as z scores, means with standard errors, log-log fits, per-claim
random streams.

* :func:`z_limit`, :data:`FAMILY_LEVEL`, :func:`family_reason`, :func:`z_at_most` — the
  standard-error multiple of a family of Monte Carlo comparisons (Bonferroni at the family-wise
  level 2Φ(−4) ≈ 6.3e-5), its reason text, and the measurement max |estimate − exact|/SE ≤ z_n;
* :func:`z_se_tol` — z·SE of one Monte Carlo mean as a statistical tolerance with its reason;
* :func:`binomial_z_above`, :func:`binomial_z_below`, :func:`binomial_z_two_sided`,
  :func:`binomial_reason` — a count of hits of n draws at a claimed rate p, as the normal quantile
  of its exact binomial p-value (judged against :func:`z_limit` like any z score);
* :func:`mean_se`, :func:`loglog_slope` — sample means with standard errors, log-log fits;
* :func:`claim_rng` — the independent random stream of one claim under a context's seed.
"""

from __future__ import annotations

import numpy as np
from scipy import stats
from scipy.stats import binom, norm

from posflow.proofs_checks.kit._evidence import at_most, stat_tol

__all__ = [
    "FAMILY_LEVEL",
    "FAMILY_Z",
    "binomial_reason",
    "binomial_z_above",
    "binomial_z_below",
    "binomial_z_two_sided",
    "claim_rng",
    "family_reason",
    "loglog_slope",
    "mean_se",
    "plain",
    "z_at_most",
    "z_limit",
    "z_se_tol",
]

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


FAMILY_LEVEL = float(2 * stats.norm.sf(FAMILY_Z))
"""Family-wise false-alarm level of one claim's Monte Carlo comparisons: 2Φ(−4) ≈ 6.3e-5."""


def family_reason(n_cmp: int, samples: str) -> str:
    """The reason text of a Bonferroni z limit: sample count, comparisons, level."""
    return (
        f"{samples}; {n_cmp} Monte Carlo comparisons, Bonferroni limit z_{n_cmp} = "
        f"{z_limit(n_cmp):.2f} standard errors (family-wise level 2Φ(−{FAMILY_Z:g}) = "
        f"{FAMILY_LEVEL:.1e})"
    )


def z_at_most(key, z, n_cmp, samples, label, **kw):
    """max |estimate − exact|/SE over a family of ``n_cmp`` comparisons, ≤ z_limit(n_cmp).

    A :func:`~posflow.proofs_checks.kit.at_most` measurement in standard errors, its statistical
    tolerance ``z_limit(n_cmp)`` with the :func:`family_reason` of ``samples``.
    """
    tol = stat_tol(z_limit(n_cmp), family_reason(n_cmp, samples))
    return at_most(key, z, 0.0, tol, label=label, unit="SE", **kw)


def z_se_tol(se: float, z: float, draws: int, family: int, what: str = ""):
    """z·SE as a statistical tolerance, with its sample count and family-wise level.

    Parameters
    ----------
    se : float
        Standard error of the Monte Carlo estimate.
    z : float
        The Bonferroni z limit of the family (:func:`~posflow.proofs_checks.kit.z_limit`).
    draws : int
        Independent draws behind the estimate.
    family : int
        Monte Carlo comparisons in the claim's family.
    what : str
        Text put in front of the reason (e.g. ``"slope over 7 lengths; "``).
    """
    return stat_tol(
        z * se,
        f"{what}{draws} independent draws, standard error {se:.3g} × z = {z:.2f} (Bonferroni "
        f"over {family} Monte Carlo comparisons at family-wise level 2Φ(−{FAMILY_Z:g}) = "
        f"{FAMILY_LEVEL:.1e})",
    )




def binomial_reason(what: str, samples: str, n: int) -> str:
    """The tolerance reason of ``n`` binomial comparisons judged together (Bonferroni)."""
    return (
        f"{what}: exact binomial p-values as normal quantiles; {samples}; {n} comparisons, "
        f"Bonferroni z_limit({n}) = {z_limit(n):.2f}, family-wise level ≤ {FAMILY_LEVEL:.1e}"
    )


def binomial_z_two_sided(hits, n, p):
    """Normal quantile of the two-sided binomial p-value of ``hits`` of ``n`` at rate ``p``.

    Parameters
    ----------
    hits : int or array_like of int
        Exceedance counts, any shape broadcasting with ``p``.
    n : int
        Draws per count.
    p : float or array_like
        Claimed rates (clipped to [0, 1]).

    Returns
    -------
    numpy.ndarray
        z = Φ̄⁻¹(pv/2) with pv = min(1, 2 min(Pr(X ≤ hits), Pr(X ≥ hits))), X ~ Bin(n, p).
    """
    hits, p = np.asarray(hits), np.clip(np.asarray(p, dtype=float), 0.0, 1.0)
    pv = np.minimum(1.0, 2 * np.minimum(binom.cdf(hits, n, p), binom.sf(hits - 1, n, p)))
    return norm.isf(pv / 2)


def binomial_z_above(hits, n, p):
    """Normal quantile of Pr(X ≥ hits), X ~ Bin(n, p), floored at 0: large when ``hits``
    exceeds rate ``p`` (shapes as :func:`binomial_z_two_sided`)."""
    pv = binom.sf(np.asarray(hits) - 1, n, np.clip(np.asarray(p, dtype=float), 0.0, 1.0))
    return np.maximum(norm.isf(pv), 0.0)


def binomial_z_below(hits, n, p):
    """Normal quantile of Pr(X ≤ hits), X ~ Bin(n, p), floored at 0: large when ``hits`` falls
    short of rate ``p`` (shapes as :func:`binomial_z_two_sided`)."""
    pv = binom.cdf(np.asarray(hits), n, np.clip(np.asarray(p, dtype=float), 0.0, 1.0))
    return np.maximum(norm.isf(pv), 0.0)
