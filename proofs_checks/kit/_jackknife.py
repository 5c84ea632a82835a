"""The jackknife judge of cross-fitted comparisons and its negative controls (PB15, PB19).

:func:`crossfit_decision` decides "W1(x) − W1(rival) ≤ bound" by :func:`~posflow.proofs_checks.
kit.decide` from the delete-one-window jackknife t interval of its replicates
(:func:`posflow.simulate.models.crossfit.jackknife_interval`); :func:`jackknife_controls` runs it
on replicates moved to known-wrong places inside the verdict and compares the interval with the
same interval through scipy (:func:`jackknife_scipy`: ``scipy.stats.t.interval`` with scale
(G − 1)·``scipy.stats.sem``). :func:`crossfit_library_reference` recomputes a
:class:`~posflow.simulate.models.crossfit.CrossFit` from the library's kernels, rollout, nulls and
metrics (the independent reference of ``crossfit`` and ``layerwise_crossfit``).
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.kit._controls import rejects
from posflow.proofs_checks.kit._decide import Decision
from posflow.proofs_checks.kit._evidence import FAILS, INCONCLUSIVE, at_most, fp_tol

__all__ = [
    "crossfit_decision",
    "crossfit_library_reference",
    "jackknife_controls",
    "jackknife_scipy",
]


def crossfit_decision(label: str, replicates, level: float, bound: float) -> Decision:
    """W1(x) − W1(rival) ≤ ``bound`` decided by ``kit.decide`` from the jackknife t interval of
    the ``replicates`` (full sample first, then one per left-out window) at coverage ``level``.

    .. math::
        \\hat\\theta \\pm t_{G-1,\\,(1+c)/2}\\,\\widehat{se},\\qquad
        \\widehat{se}^2 = \\frac{G-1}{G}\\sum_g (\\theta_{(-g)} - \\bar\\theta)^2

    Parameters
    ----------
    label : str
    replicates : array_like, shape (G + 1,), G ≥ 2
        θ̂ on every window, then θ_(−g) with window g left out of the whole cross-fit.
    level : float in (0, 1)
    bound : float

    The interval stays :func:`posflow.simulate.models.crossfit.jackknife_interval`, not
    ``scipy.stats.bootstrap``: scipy resamples observations and recomputes a statistic of them,
    whereas each θ_(−g) here is the whole cross-fitting procedure (every fit) redone without a
    window, so only the replicates exist, and scipy has no public delete-one-group jackknife
    nor a t-quantile jackknife interval (its jackknife serves only the BCa acceleration).
    :func:`jackknife_controls` checks the interval against ``scipy.stats.t.interval`` with
    scale (G − 1)·``scipy.stats.sem`` (the same formula through scipy), to a few ε.
    """
    from posflow.simulate.models.crossfit import jackknife_interval

    est, _, lo, hi = jackknife_interval(replicates, level)
    return Decision(label, est, lo, hi, bound, "le", level)


def jackknife_scipy(replicates, level: float) -> tuple[float, float]:
    """The jackknife t interval of ``replicates`` through scipy: ``scipy.stats.t.interval``
    at ``level`` with G − 1 degrees of freedom, centred on the full-sample estimate θ̂, scale

    .. math::
        (G - 1)\\,\\mathrm{sem}(\\theta_{(-1)}, …, \\theta_{(-G)})
        = (G - 1)\\,\\frac{s}{\\sqrt{G}} = \\sqrt{\\tfrac{G-1}{G}
          \\textstyle\\sum_g (\\theta_{(-g)} - \\bar\\theta)^2} = \\widehat{se}

    (s the sample standard deviation, ddof = 1, of the G left-out replicates).

    Parameters
    ----------
    replicates : array_like, shape (G + 1,), G ≥ 2
    level : float in (0, 1)

    Returns (lo, hi), the reference of :func:`crossfit_decision`'s interval (equal to it within
    a few ε of the interval ends: the same sums in another order, scipy's t quantile).
    """
    from scipy import stats

    d = np.asarray(replicates, dtype=np.float64)
    G = d.size - 1
    se = (G - 1) * stats.sem(d[1:])
    lo, hi = stats.t.interval(level, G - 1, loc=d[0], scale=se)
    return float(lo), float(hi)


def jackknife_controls(d, level: float, bound: float) -> list:
    """The jackknife judge on replicates moved to known-wrong places (3 interval widths above the
    bound must FAIL, centred on it must be INCONCLUSIVE), and ``jackknife_interval`` against the
    same interval through scipy (:func:`jackknife_scipy`)."""
    from posflow.simulate.models.crossfit import jackknife_interval

    d = np.asarray(d, dtype=np.float64)
    est, _, lo, hi = jackknife_interval(d, level)
    w = max(hi - lo, 1e-6)
    past = crossfit_decision("c", d - est + bound + 3 * w, level, bound)
    straddle = crossfit_decision("c", d - est + bound, level, bound)
    ref_lo, ref_hi = jackknife_scipy(d, level)
    err = max(abs(lo - ref_lo), abs(hi - ref_hi))
    return [
        rejects("crossfit_control_past_bound", past.decision != FAILS,
                "jackknife replicates 3 interval widths above the bound must FAIL"),
        rejects("crossfit_control_straddling", straddle.decision != INCONCLUSIVE,
                "jackknife replicates centred on the bound must be INCONCLUSIVE, not HOLD"),
        at_most("jackknife_interval_vs_direct", float(err), 0.0,
                fp_tol(1e-12 * max(1.0, abs(d[0]) + (hi - lo) / 2),
                       "the same float64 sums in another order: a few ε of the interval ends"),
                label="|jackknife_interval − the jackknife t interval written out through "
                "scipy.stats: t.interval, scale (G − 1)·sem| (first model, best rollout against "
                "(a))"),
    ]  # fmt: skip


def crossfit_library_reference(data, cf, lambdas=None) -> tuple[float, float, float, int]:
    """Both directions of ``cf`` recomputed from ``data`` without :mod:`~posflow.simulate.
    models.crossfit`: halves pooled by plain means, kernels from the library
    (``measured_kernels``, ``alibi_kernel``, ``value_norm_kernels``, ``sink_aware_kernels``,
    ``uniform_kernel``; for layers whose sliding window ``data.windows`` is shorter than n,
    ``models.bands.uniform_kernels`` and ``content_kernels``), rollouts by
    ``posflow.simulate.rollout.influence`` at the reported parameters, the nulls refitted by
    :mod:`posflow.simulate.nulls`, metrics by ``posflow.simulate.compare`` and
    ``scipy.stats.wasserstein_distance``.

    Returns (max profile gap, max metric gap, max fit residual |m(α) − μ̂_F| over the matched
    rollout fits on the fitting half, number of fits that did not reach the mean).
    """
    from scipy.stats import wasserstein_distance

    from posflow.simulate.compare import spearman, w1_normalised
    from posflow.simulate.kernels import alibi_kernel, uniform_kernel
    from posflow.simulate.models.bands import content_kernels, uniform_kernels
    from posflow.simulate.models.measure import measured_kernels
    from posflow.simulate.models.sinks import sink_aware_kernels, value_norm_kernels
    from posflow.simulate.nulls import geometric_recency, linear_ramp, ramp_slope
    from posflow.simulate.rollout import influence

    lam_all = data.lambdas if lambdas is None else np.asarray(lambdas, dtype=np.float64)
    n = data.influence.shape[1]
    # layers with a sliding window shorter than n: the library's banded kernels (models.bands)
    windows = getattr(data, "windows", None)
    banded = windows if windows is not None and any(
        w is not None and w < n for w in windows) else None  # fmt: skip
    j = np.arange(n)

    def side(h):
        rows = np.flatnonzero(np.isin(np.arange(lam_all.shape[0]), h))
        A = data.attention[rows].mean(0)
        lam = np.clip(lam_all[rows].mean(0), 0.0, 1.0)
        L, g = lam.size, data.influence[rows].mean(0)
        full = np.ones(L)
        ks = measured_kernels(A)
        uni = uniform_kernel(n) if banded is None else uniform_kernels(n, banded)
        base = {"a": (ks, full), "b": (ks, lam), "e": (sink_aware_kernels(A), lam),
                "uniform": (uni, lam), "shuffled": (ks, lam[cf.perm])}  # fmt: skip
        if "c" in cf.keys:
            c = data.content[rows].mean(0)
            kc = ([alibi_kernel(n, data.slopes, c[t]) for t in range(L)] if banded is None
                  else content_kernels(n, data.slopes, c, banded))  # fmt: skip
            base["c"], base["a_c"] = (kc, lam), (kc, full)
        if "d" in cf.keys:
            base["d"] = (value_norm_kernels(data.values[rows].mean(0)), lam)
        return base, g / g.sum()

    prof = resid = 0.0
    missed = 0
    both = {k: [] for k in cf.keys}
    for d, (fit, score) in enumerate(((cf.halves[0], cf.halves[1]),
                                      (cf.halves[1], cf.halves[0]))):  # fmt: skip
        (kf, pf), (ks, ps) = side(fit), side(score)
        mu = float(pf @ j)
        for k in cf.keys:
            x = float(cf.params[k][d])
            if k in kf:
                K, lam = ks[k]
                ref = influence(K, np.clip(x * lam, 0.0, 1.0))
                if cf.matched[k][d]:
                    K, lam = kf[k]
                    resid = max(resid, abs(influence(K, np.clip(x * lam, 0.0, 1.0)) @ j - mu))
            elif k == "geometric":
                ref, r = geometric_recency(n, mu)
                prof = max(prof, abs(x / float(r) - 1.0))
            else:
                ref = linear_ramp(n, mu)
                prof = max(prof, abs(x - float(ramp_slope(n, mu))))
            missed += not bool(cf.matched[k][d]) and k not in ("linear",)
            p = cf.profiles[k][d]
            prof = max(prof, float(np.abs(p - ref).max()))
            both[k].append((w1_normalised(p, ps), wasserstein_distance(j - p @ j, j - ps @ j, p,
                                                                       ps) / (n - 1),
                            spearman(p, ps), p[0], p[-1]))  # fmt: skip
        prof = max(prof, float(np.abs(cf.measured[d] - ps).max()))
    metric = max(abs(cf.metrics[m][k][0] - 0.5 * (both[k][0][i] + both[k][1][i]))
                 for k in cf.keys for i, m in enumerate(("w1", "shape", "spearman", "first",
                                                         "last")))  # fmt: skip
    return prof, metric, resid, missed
