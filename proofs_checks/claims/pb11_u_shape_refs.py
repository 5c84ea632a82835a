"""Claim PB11: independent references for the routines its check runs, and the known-wrong
profiles that the U test must reject (the negative controls of its judges).

References: ALiBi kernels built entry by entry from the softmax definition with the slopes
2^{−8(h+1)/H} written out; stationary profiles by dense vector–matrix products; profile shapes of
constructed profiles whose shape is known by construction.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.kit import (
    PALETTE,
    U_END_MARGIN,
    U_MIN_DEPTH,
    Figure,
    Panel,
    Series,
    at_most,
    close,
    exact_tol,
    fp_tol,
    holds,
    is_u,
    rejects,
    valley,
)
from posflow.simulate.compare import profile_shape
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import stationary_profiles

__all__ = [
    "SHAPES",
    "loose_plane_judge",
    "loose_profile_shape",
    "loose_valley",
    "plane_judge",
    "regime_figure",
    "routine_comparisons",
    "softmax_dense",
    "strict_judge",
    "u_cells",
    "u_control_profiles",
    "u_controls",
]

_EPS = float(np.finfo(np.float64).eps)


def softmax_dense(n, slopes, content):
    """Head average of softmax_{j≤i}(c [i=j] − m_h (i−j)), all heads at once, shape (n, n)."""
    m = np.asarray(slopes, dtype=float)[:, None, None]
    c = np.broadcast_to(np.asarray(content, dtype=float), m.shape[:1])[:, None, None]
    d = (np.arange(n)[:, None] - np.arange(n)[None, :]).astype(float)[None]
    logit = np.where(d == 0, c, -m * d)
    w = np.where(d < 0, 0.0, np.exp(logit - logit.max(axis=2, keepdims=True)))
    return (w / w.sum(axis=2, keepdims=True)).mean(axis=0)


def u_control_profiles(n):
    """Profiles that are NOT a U by construction: ``{name: (profile, how it is wrong)}``."""
    j = np.arange(n, dtype=float)
    c = (n - 1) / 2
    bump = np.exp(-((j - c) ** 2) / (2 * (n / 16) ** 2))
    ramp = np.linspace(1.0, 0.5, n)
    return {
        "flat": (np.full(n, 1.0 / n), "a flat profile (no dip at all)"),
        "monotone": (1.0 + j / n, "a strictly increasing profile (pure recency)"),
        "shallow_dip": (1.0 - 0.05 * bump,
                        "a dip of relative depth 0.05 < U_MIN_DEPTH in the middle"),
        "dip_at_end": (np.abs(j - 5) + 10.0,
                       "a deep V whose argmin j = 5 lies inside the end margin"),
        "shallow_vs_lower_end": (ramp - (ramp[int(c)] - 0.48) * bump,
                                 "a dip 4.5 % below the lower end p(n−1) = 0.5 (52 % below "
                                 "the higher end p(0) = 1)"),
    }  # fmt: skip


# the constructed shapes profile_shape must name: a V, a W (two dips), a ramp up, a ramp down
def _shapes(n):
    j = np.arange(n, dtype=float)
    return {
        "strict_u": np.abs(j - n / 2) + 1.0,
        "weak_u": np.minimum(np.abs(j - n / 3), np.abs(j - 2 * n / 3) + 0.5) + 1.0,
        "increasing": 1.0 + j,
        "decreasing": float(n) - j,
    }


SHAPES = _shapes(64)


def routine_comparisons(n):
    """alibi_slopes, alibi_kernel, stationary_profiles and profile_shape against independent
    references (a direct formula, entry-by-entry softmax kernels, dense vector–matrix products,
    constructed profiles of known shape)."""
    h = np.arange(32, dtype=float)
    slopes_err = float(np.max(np.abs(alibi_slopes(32) - 2.0 ** (-8.0 * (h + 1) / 32))))
    ref = softmax_dense(n, 2.0 ** (-8.0 * (h + 1) / 32), 2.0)
    kern_err = float(np.max(np.abs(np.asarray(alibi_kernel(n, alibi_slopes(32), 2.0).dense())
                                   - ref)))  # fmt: skip
    lam, Ts = 0.1, (2, 8, 32, 128)
    prof = stationary_profiles(alibi_kernel(n, 0.05), lam, Ts)
    A = softmax_dense(n, [0.05], [0.0])
    R = (1 - lam) * np.eye(n) + lam * A
    p, dense, done = np.eye(n)[-1], [], 0
    for T in Ts:
        for _ in range(T - done):
            p = p @ R
        done = T
        dense.append(p.copy())
    stat_err = float(np.max(np.abs(np.asarray(prof) - np.array(dense))))
    wrong = sum(profile_shape(p) != name for name, p in SHAPES.items())
    return [
        at_most("max_alibi_slopes_error_vs_formula", slopes_err, 0.0,
                fp_tol(4 * _EPS, "2^x in float64: a few ulps of values ≤ 1"),
                label="max |alibi_slopes(32) − 2^{−8(h+1)/32}|"),
        at_most("max_alibi_kernel_error_vs_softmax", kern_err, 0.0,
                fp_tol(1e-14, f"two softmax routes over ≤ {n} terms in [0, 1]: each entry within "
                       f"{n}·4·2.2e-16 = {n * 4 * _EPS:.1e} ≤ 1e-14 (closed-form partial sums vs "
                       "a direct sum)"),
                label=f"max |alibi_kernel − entry-by-entry softmax|, 32 heads, c = 2, n = {n}"),
        at_most("max_stationary_profiles_error_vs_dense", stat_err, 0.0,
                fp_tol(1e-12, f"≤ 128 convex steps on n = {n}, each entry of a probability "
                       f"vector rounding by ≤ {n}·2.2e-16 per step per side: "
                       f"2·128·{n}·2.2e-16 = {2 * 128 * n * _EPS:.1e} ≤ 1e-12"),
                label="max |stationary_profiles − dense e_{n−1}ᵀ R^T|, m = 0.05, λ = 0.1, "
                f"T ∈ {Ts}"),
        close("profile_shape_misnamed", wrong, 0, exact_tol("a count of labels"),
              label="constructed profiles (V, W, ramp up, ramp down) that profile_shape misnames"),
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------
# the judges of PB11 and their negative controls


def u_cells(cells, depth, margin, residual=True):
    """The U cells with λ < 1 (the claim's assumption), or with λ = 1 when ``residual=False``."""
    return {
        key for key, p in cells.items() if (key[1] < 1.0) == residual and is_u(p, depth, margin)
    }


def plane_judge(key, cells, tol, label=""):
    """The U judge of the plane: some cell with λ < 1 passes the U test (``kit.is_u`` at
    U_MIN_DEPTH, U_END_MARGIN)."""
    return holds(key, bool(u_cells(cells, U_MIN_DEPTH, U_END_MARGIN)), tol, label=label)


def strict_judge(key, cells, tol, label=""):
    """The strict-U judge: some U cell whose profile_shape is ``strict_u``."""
    us = u_cells(cells, U_MIN_DEPTH, U_END_MARGIN)
    return holds(key, any(profile_shape(cells[k]) == "strict_u" for k in us), tol, label=label)


def u_controls(n, depth_tol, margin_tol):
    """The plane judge on one-cell planes that are NOT a U by construction, and the strict-U
    judge on a W (a U with two dips): each must reject."""
    out = [
        rejects(f"u_test_control_{name}", plane_judge("c", {("control", 0.5, 1): p}, depth_tol),
                wrong)
        for name, (p, wrong) in u_control_profiles(n).items()
    ]  # fmt: skip
    w = {("control", 0.5, 1): _shapes(n)["weak_u"]}
    out.append(rejects("strict_u_control_two_dips", strict_judge("c", w, margin_tol),
                       "a W (two dips, the deeper one away from the ends): a U, not strict"))
    return out


# ------------------------------------------------------------------------------------------
# mutants: loosened judges


def loose_valley(original):
    """The dip measured against the higher end max(p(0), p(n−1)) instead of the lower one."""

    @functools.wraps(original)
    def valley_loose(p, margin=U_END_MARGIN):
        k, _, away = original(p, margin)
        a = np.asarray(p, dtype=np.float64)
        ends = max(a[0], a[-1])
        return k, float(1.0 - a[k] / ends) if ends > 0 else math.nan, away

    return valley_loose


def loose_profile_shape(original):
    """Wiggles ignored: every interior valley below both ends is called ``strict_u``."""

    @functools.wraps(original)
    def shape(p, rtol=1e-9):
        out = original(p, rtol)
        return "strict_u" if out == "weak_u" else out

    return shape


def loose_plane_judge(original):
    """The plane judge with the depth dropped: any interior argmin away from the ends."""

    @functools.wraps(original)
    def judge(key, cells, tol, label=""):
        us = [k for k, p in cells.items() if k[1] < 1.0 and is_u(p, 0.0, U_END_MARGIN)]
        return holds(key, bool(us), tol, label=label)

    return judge


# ------------------------------------------------------------------------------------------
# the figure of PB11


def regime_figure(n, lams, Ts, names, cells) -> Figure:
    cmap = PALETTE
    panels = []
    for nm in names:
        depth_series, loc_series = [], []
        for col, lam in zip(cmap, lams, strict=True):
            x = [float(lam * T) for T in Ts]
            vs = [valley(cells[(nm, float(lam), int(T))]) for T in Ts]
            depth_series.append(
                Series(f"λ = {lam:g}", x, [d if away else 0.0 for _, d, away in vs],
                       kind="line", color=col)
            )  # fmt: skip
            loc_series.append(
                Series(f"λ = {lam:g}", x, [k / (n - 1) for k, _, _ in vs], kind="line", color=col)
            )
        panels.append(
            Panel(f"{nm}: dip depth", "Σλ = λ·T", "relative dip depth (0: no dip away from ends)",
                  depth_series, logx=True, hlines=[(U_MIN_DEPTH, "least depth of a U")],
                  ylim=(0, 1), legend="shared")
        )  # fmt: skip
        panels.append(
            Panel(f"{nm}: argmin", "Σλ = λ·T", "argmin / (n − 1)", loc_series, logx=True,
                  hlines=[(U_END_MARGIN, ""), (1 - U_END_MARGIN, "")], ylim=(0, 1),
                  legend="shared")
        )  # fmt: skip
    return Figure(
        "PB11_regime_map",
        f"profile valleys against total mixing Σλ, n = {n}",
        panels,
        caption="For each setting: the relative depth of the dip (counted only when the argmin "
        "is away from both ends) and the argmin's location, against Σλ = λ·T. Small Σλ: the "
        "minimum sits at token 0 (recency); large Σλ: at the last token (collapse onto token 0); "
        "a U lies between. Dashed: the U test's least depth (depth panels) and its end margins "
        "(argmin panels: a U's minimum lies between them).",
    )
