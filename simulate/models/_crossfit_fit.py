"""The pieces of :mod:`posflow.simulate.models.crossfit`: the one-parameter rollout and its fit,
the fixed-parameter nulls, the mean-free shape metric and the jackknife interval (claim PB15)."""

from __future__ import annotations

import numpy as np

__all__ = [
    "ROLLOUT_KEYS",
    "centred_w1",
    "fit_scale",
    "geometric_profile",
    "jackknife_interval",
    "ramp_profile",
    "scaled_rollout",
    "split_interval",
]

# the rollouts of posflow.simulate.models.profiles, each given the scale α of its λ
ROLLOUT_KEYS = ("a", "b", "c", "a_c", "d", "e", "uniform", "shuffled")
GRID = 33  # the α grid that brackets the first match of the mean position


def scaled_rollout(kernels, lambdas, alpha) -> np.ndarray:
    """The last row p = e_{n−1}ᵀ R_{L−1} ⋯ R_0 with R_t = (1 − λ'_t) I + λ'_t K_t,
    λ'_t = clip(α λ_t, 0, 1), for one α or a vector of them at once.

    Parameters
    ----------
    kernels : array_like, shape (L, n, n)
        Dense causal row-stochastic kernels K_0 … K_{L−1}.
    lambdas : array_like, shape (L,)
        Base mixing coefficients λ_t (≥ 0).
    alpha : float or array_like, shape (A,)
        Scales α ≥ 0.

    Returns
    -------
    ndarray, shape (n,) for a scalar α, (A, n) for a vector. Cost O(A L n²).
    """
    K = np.asarray(kernels, dtype=np.float64)
    lam = np.asarray(lambdas, dtype=np.float64)
    a = np.asarray(alpha, dtype=np.float64)
    if K.ndim != 3 or K.shape[1] != K.shape[2] or K.shape[0] != lam.size or lam.ndim != 1:
        raise ValueError(f"kernels must have shape (L, n, n) with L = lambdas.size; got "
                         f"{K.shape} and lambdas {lam.shape}")  # fmt: skip
    if a.ndim > 1 or not np.isfinite(a).all() or (a < 0).any():
        raise ValueError("alpha must be a finite scalar or vector >= 0")
    if not np.isfinite(lam).all() or (lam < 0).any():
        raise ValueError("lambdas must be finite and >= 0")
    p = _rollout(K, lam, np.atleast_1d(a))
    return p[0] if a.ndim == 0 else p


def _rollout(K: np.ndarray, lam: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """:func:`scaled_rollout` for checked float64 arrays and a vector α, shape (A, n)."""
    p = np.zeros((alphas.size, K.shape[-1]))
    p[:, -1] = 1.0
    for t in range(lam.size - 1, -1, -1):
        mix = np.minimum(alphas * lam[t], 1.0)[:, None]
        p = p + mix * (p @ K[t] - p)
    return p


def fit_scale(kernels, lambdas, mean: float, *, grid: int = GRID) -> tuple[float, bool]:
    """The smallest α in [0, α_max] whose rollout has mean position ``mean``, and whether one does.

    m(α) = Σ_j j p_α(j) of :func:`scaled_rollout` starts at m(0) = n − 1 (no mixing: all mass on
    the last token); α_max = 1 / min_{λ_t > 0} λ_t puts every positive λ'_t at 1 (beyond it
    nothing changes). The first sign change of m − ``mean`` on a ``grid`` of equally spaced α
    is refined by Brent's method (``scipy.optimize.brentq``, α to 1e-13 α_max); with none, the α
    of the least m on the grid, refined by ``scipy.optimize.minimize_scalar`` between its
    neighbours, is returned unmatched (the family cannot reach the mean).

    Parameters
    ----------
    kernels : array_like, shape (L, n, n)
    lambdas : array_like, shape (L,)
    mean : float in [0, n − 1]

    Returns
    -------
    (alpha, matched) : (float, bool)
        ``matched`` when |m(α) − mean| ≤ 1e-9 (n − 1).
    """
    from scipy.optimize import brentq, minimize_scalar

    K = np.asarray(kernels, dtype=np.float64)
    lam = np.asarray(lambdas, dtype=np.float64)
    scaled_rollout(K, lam, 0.0)  # checks the shapes and values once
    n = K.shape[-1]
    mu = float(mean)
    if not 0.0 <= mu <= n - 1:
        raise ValueError(f"mean must lie in [0, n − 1] = [0, {n - 1}]; got {mean!r}")
    if isinstance(grid, bool) or not isinstance(grid, int) or grid < 3:
        raise ValueError(f"grid must be an integer >= 3; got {grid!r}")
    j = np.arange(n, dtype=np.float64)
    tol = 1e-9 * (n - 1)

    def gap(a):
        return float(_rollout(K, lam, np.array([a]))[0] @ j) - mu

    if not (lam > 0).any():
        return 0.0, abs(gap(0.0)) <= tol
    top = 1.0 / lam[lam > 0].min()
    alphas = np.linspace(0.0, top, grid)
    f = _rollout(K, lam, alphas) @ j - mu
    if f[0] <= 0.0:  # mean = n − 1: no mixing at all
        return 0.0, abs(f[0]) <= tol
    hit = np.flatnonzero(f <= 0.0)
    if hit.size:
        k = int(hit[0])
        if f[k] == 0.0:
            return float(alphas[k]), True
        a = brentq(gap, alphas[k - 1], alphas[k], xtol=1e-13 * top, rtol=8 * np.finfo(float).eps)
        return float(a), abs(gap(a)) <= tol
    k = int(np.argmin(f))
    lo, hi = alphas[max(k - 1, 0)], alphas[min(k + 1, grid - 1)]
    res = minimize_scalar(gap, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12 * top})
    a = float(res.x) if gap(float(res.x)) < f[k] else float(alphas[k])
    return a, abs(gap(a)) <= tol


def geometric_profile(n: int, ratio: float) -> np.ndarray:
    """p(j) ∝ r^{n−1−j} on 0..n−1 for a fixed ratio r > 0 (the fitted geometric null scored on
    other windows; :func:`posflow.simulate.nulls.geometric_recency` fits r), computed stably."""
    r = float(ratio)
    if not (np.isfinite(r) and r > 0):
        raise ValueError(f"ratio must be finite and > 0; got {ratio!r}")
    e = np.log(r) * np.arange(n - 1, -1, -1, dtype=np.float64)
    p = np.exp(e - e.max())
    return p / p.sum()


def ramp_profile(n: int, slope: float) -> np.ndarray:
    """p(j) ∝ 1 + s (j − c)/c, c = (n − 1)/2, for a fixed slope s ∈ [−1, 1] (the fitted linear
    null scored on other windows; :func:`posflow.simulate.nulls.ramp_slope` fits s)."""
    s = float(slope)
    if not -1.0 <= s <= 1.0:
        raise ValueError(f"slope must lie in [-1, 1]; got {slope!r}")
    c = (n - 1) / 2
    p = 1.0 + s * (np.arange(n, dtype=np.float64) - c) / c
    return p / p.sum()


def centred_w1(p, q):
    """The mean-free shape metric: W1 between p and q each shifted to mean position 0, / (n − 1).

    .. math::
        \\frac{1}{n-1} W_1\\big(p(\\cdot + \\mu_p),\\ q(\\cdot + \\mu_q)\\big)
        = \\frac{1}{n-1}\\int |F_p(x + \\mu_p) - F_q(x + \\mu_q)|\\,dx,
        \\qquad \\mu_p = \\textstyle\\sum_j j\\,p(j)

    (what ``scipy.stats.wasserstein_distance`` of the positions j − μ_p and j − μ_q weighted by
    p and q gives; here the two step CDFs are merged and integrated directly, row by row). It is
    0 exactly when one profile is a translate of the other, and
    W1(p, q) ≤ (n − 1)·centred_w1 + |μ_p − μ_q|: what W1 measures beyond the means.

    Parameters
    ----------
    p, q : array_like, shape (..., n), n ≥ 2
        Nonnegative with positive sums (renormalised first); broadcast against each other.

    Returns
    -------
    float for two vectors, else ndarray of shape (...); values in [0, 1]. Cost O(n log n) a row.
    """
    a = np.asarray(p, dtype=np.float64)
    b = np.asarray(q, dtype=np.float64)
    if a.ndim < 1 or b.ndim < 1 or a.shape[-1] != b.shape[-1] or a.shape[-1] < 2:
        raise ValueError(f"p and q must have one last dimension n >= 2; got {a.shape}, {b.shape}")
    for name, v in (("p", a), ("q", b)):
        if not np.isfinite(v).all() or (v < 0).any() or (v.sum(axis=-1) <= 0).any():
            raise ValueError(f"{name} must be finite and nonnegative with positive sums")
    a, b = np.broadcast_arrays(a / a.sum(axis=-1, keepdims=True),
                               b / b.sum(axis=-1, keepdims=True))  # fmt: skip
    n = a.shape[-1]
    j = np.arange(n, dtype=np.float64)
    x = np.concatenate([j - (a @ j)[..., None], j - (b @ j)[..., None]], axis=-1)
    w = np.concatenate([a, -b], axis=-1)
    order = np.argsort(x, axis=-1, kind="stable")
    x = np.take_along_axis(x, order, axis=-1)
    gap = np.cumsum(np.take_along_axis(w, order, axis=-1), axis=-1)[..., :-1]
    d = (np.abs(gap) * np.diff(x, axis=-1)).sum(axis=-1) / (n - 1)
    return float(d) if d.ndim == 0 else d


def jackknife_interval(replicates, confidence: float) -> tuple[float, float, float, float]:
    """(estimate, se, lo, hi): the delete-one-group jackknife t interval of a statistic.

    .. math::
        \\widehat{se}^2 = \\frac{G-1}{G}\\sum_g (\\theta_{(-g)} - \\bar\\theta)^2,\\qquad
        \\hat\\theta \\pm t_{G-1,\\,(1+c)/2}\\,\\widehat{se}

    Parameters
    ----------
    replicates : array_like, shape (G + 1,), G ≥ 2
        θ̂ on the full sample, then θ_(−g) without each group g.
    confidence : float in (0, 1)

    Returns
    -------
    tuple of 4 floats; NaN throughout when a replicate is NaN (an undefined statistic).
    """
    from scipy.stats import t as student_t

    x = np.asarray(replicates, dtype=np.float64)
    if x.ndim != 1 or x.size < 3:
        raise ValueError(f"replicates must have shape (G + 1,) with G >= 2; got {x.shape}")
    c = float(confidence)
    if not 0.0 < c < 1.0:
        raise ValueError(f"confidence must lie in (0, 1); got {confidence!r}")
    G = x.size - 1
    if np.isnan(x).any():
        return (float("nan"),) * 4
    loo = x[1:]
    se = float(np.sqrt((G - 1) / G * ((loo - loo.mean()) ** 2).sum()))
    q = float(student_t.ppf(0.5 + c / 2, G - 1))
    return float(x[0]), se, float(x[0] - q * se), float(x[0] + q * se)


def split_interval(replicates, splits, confidence: float) -> tuple[float, float, float, float]:
    """(estimate, se, lo, hi) of a cross-fitted statistic averaged over S random splits.

    .. math::
        \\bar\\theta = \\frac1S \\sum_s \\hat\\theta_s,\\qquad
        \\widehat{se}^2 = \\widehat{se}^2_{\\mathrm{jack}} + \\frac{s^2_{\\mathrm{split}}}{S},
        \\qquad \\bar\\theta \\pm t_{G-1,\\,(1+c)/2}\\,\\widehat{se}

    :math:`\\widehat{se}_{\\mathrm{jack}}` is the delete-one-group jackknife of the seeded split
    (``replicates``, (G + 1,): the data's variance given a split) and :math:`s^2_{\\mathrm{split}}`
    the sample variance (ddof 1) of the S full-sample statistics ``splits`` (S,): the Monte
    Carlo variance of the average over splits, which one split leaves out of the interval.
    NaN throughout when any value is NaN.
    """
    from scipy.stats import t as student_t

    _, se, _, _ = jackknife_interval(replicates, confidence)
    sp = np.asarray(splits, dtype=np.float64)
    if sp.ndim != 1 or sp.size < 2:
        raise ValueError(f"splits must have shape (S,) with S >= 2; got {sp.shape}")
    if np.isnan(sp).any() or np.isnan(se):
        return (float("nan"),) * 4
    G = np.asarray(replicates).size - 1
    est = float(sp.mean())
    total = float(np.sqrt(se**2 + sp.var(ddof=1) / sp.size))
    q = float(student_t.ppf(0.5 + float(confidence) / 2, G - 1))
    return est, total, est - q * total, est + q * total
