"""PB15's references and mutant wrappers: the dense written-out reference of
``published_comparison``, the stored study's own W1 beside the stored comparison, and the breaks
PB15's mutants apply (registered in :mod:`.pb15_published`)."""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks.kit import U_END_MARGIN, at_most, fp_tol, interior_depth
from posflow.simulate.models.published import PAIRS, Published

__all__ = ["dense_reference", "dip_from_higher_end", "interior_depth_vs_direct", "point_decision",
           "residual_dropped", "swapped_pairs", "vs_dense", "vs_study"]  # fmt: skip

_EPS = float(np.finfo(np.float64).eps)


def dense_reference(data) -> dict:
    """W1/(n − 1) of [A]'s six profiles on the full sample, written out without the library:
    plain means over the windows, [A]'s kernels as dense softmaxes over each layer's band
    (0 ≤ i − j < w), the rollout p ← (1 − λ_t) p + λ_t p K_t from e_{n−1} down to layer 0, and
    W1 by ``scipy.stats.wasserstein_distance`` (the reference of ``published_comparison``)."""
    from scipy.stats import wasserstein_distance

    A = np.asarray(data.attention, dtype=np.float64).mean(axis=0)
    A = A / A.sum(axis=-1, keepdims=True)
    lam = np.clip(np.asarray(data.lambdas, dtype=np.float64).mean(axis=0), 0.0, 1.0)
    g = np.asarray(data.influence, dtype=np.float64).mean(axis=0)
    L, n = lam.size, g.size
    c = np.asarray(data.content, dtype=np.float64).mean(axis=0)  # (L, H)
    m = np.zeros(c.shape[1]) if data.slopes is None else np.asarray(data.slopes, float)
    wins = getattr(data, "windows", None) or (None,) * L
    gap = np.subtract.outer(np.arange(n), np.arange(n)).astype(np.float64)

    def kernel(t, content):
        w = n if wins[t] is None else min(int(wins[t]), n)
        z = -m[:, None, None] * gap + content[:, None, None] * np.eye(n)
        z = np.where((gap >= 0) & (gap < w), z, -np.inf)
        e = np.exp(z - z.max(axis=-1, keepdims=True))
        return (e / e.sum(axis=-1, keepdims=True)).mean(axis=0)

    def roll(Ks, lams):
        p = np.zeros(n)
        p[-1] = 1.0
        for t in reversed(range(L)):
            p = (1.0 - lams[t]) * p + lams[t] * (p @ Ks[t])
        return p

    ones = np.ones(L)
    K_a = [kernel(t, np.zeros(m.size)) for t in range(L)]
    K_c = [kernel(t, c[t]) for t in range(L)]
    prof = {"a": roll(A, ones), "b": roll(A, lam), "a_A": roll(K_a, ones), "b_A": roll(K_a, lam),
            "a_c": roll(K_c, ones), "c": roll(K_c, lam)}  # fmt: skip
    j = np.arange(n, dtype=np.float64)
    return {k: float(wasserstein_distance(j, j, p, g)) / (n - 1) for k, p in prof.items()}


def vs_dense(tag: str, name: str, pub: Published, data):
    ref = dense_reference(data)
    gap = max(abs(float(pub.w1[k][0]) - v) for k, v in ref.items())
    L, n = data.lambdas.shape[1], data.influence.shape[1]
    tol = 16 * L * n * n * _EPS
    return at_most(f"{tag}.published_vs_dense", gap, 0.0,
                   fp_tol(tol, f"float64 chains of L = {L} convex steps of n = {n}-term sums "
                          f"and W1 summing n of them, by two implementations: 16 L n² ε = "
                          f"{tol:.2g}"),
                   label=f"{name}: max |W1 of published_comparison − the dense written-out "
                   "reference (scipy's W1)| over [A]'s six profiles, full sample")  # fmt: skip


def vs_study(tag: str, name: str, pub: Published, run: dict):
    """published_comparison against the study's own W1 of (a), (b), (c) (full sample)."""
    gap = max(abs(float(pub.w1[k][0]) - float(run["stats"][f"w1.{s}"][0]))
              for k, s in (("a", "a"), ("b", "b"), ("c", "c")) if k in pub.w1)  # fmt: skip
    n = pub.measured.shape[1]
    tol = 16 * int(run["layers"]) * n * n * _EPS
    return at_most(f"{tag}.published_vs_study", gap, 0.0,
                   fp_tol(tol, f"the same pooled means and rollouts by two code paths, in "
                          f"float64: 16 L n² ε = {tol:.2g}"),
                   label=f"{name}: max |W1 of published_comparison − the stored study's W1| "
                   "over (a), (b), (c), full sample")  # fmt: skip


# -- mutant wrappers ------------------------------------------------------------------------------


def swapped_pairs(original):
    def published_profiles(*a, **kw):
        out = original(*a, **kw)
        for x, r in PAIRS.items():
            if x in out:
                out[x], out[r] = out[r], out[x]
        return out

    return published_profiles


def residual_dropped(original):
    def step(self, p, lam):
        return self._apply(p)

    return step


def point_decision(original):
    def crossfit_decision(label, replicates, level, bound):
        d = original(label, replicates, level, bound)
        d.lo = d.hi = d.estimate
        return d

    return crossfit_decision


def interior_depth_vs_direct(profiles) -> object:
    """``kit.interior_depth`` of each profile against a direct loop over its interior
    positions (the same float64 minimum and division: equal to a few ε)."""
    import math

    err = 0.0
    for p in profiles:
        a = [float(x) for x in p]
        n = len(a)
        g = max(1, math.ceil(U_END_MARGIN * (n - 1)))
        inner = min(a[j] for j in range(g, n - g))
        err = max(err, abs(interior_depth(p) - (1.0 - inner / min(a[0], a[-1]))))
    return at_most("interior_depth_vs_direct", err, 0.0,
                   fp_tol(4 * _EPS, "one minimum and one division in float64: 4 ε"),
                   label="max |kit.interior_depth − a direct loop over the interior| over "
                   "every model's measured profile")  # fmt: skip


def dip_from_higher_end(original):
    def interior_depth(p, margin=U_END_MARGIN):
        a = np.asarray(p, dtype=np.float64)
        g = max(1, int(np.ceil(margin * (a.size - 1))))
        return float(1.0 - a[g : a.size - g].min() / max(a[0], a[-1]))

    return interior_depth
