"""Claim PB11 of [A]: U-shaped profiles at finite depth, with the relaxation that drops the
residual (λ ≡ 1).

The U test (:func:`posflow.proofs_checks.kit.valley`, :func:`~posflow.proofs_checks.kit.is_u`,
``U_MIN_DEPTH``, ``U_END_MARGIN``) is shared with PB14 and lives in the kit; every verdict that
uses it comes with a sensitivity table.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import strategies as st

from posflow.proofs_checks.kit import (
    U_DEPTHS,
    U_END_MARGIN,
    U_MARGINS,
    U_MIN_DEPTH,
    Context,
    Evidence,
    Figure,
    Panel,
    Relaxation,
    Series,
    Table,
    add_mutant,
    add_relaxation,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    is_u,
    param_tol,
    register,
    scaled_argument,
    valley,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.compare import profile_shape
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import influence, stationary_profiles

__all__ = ["PB11_REFERENCE", "U_TOL", "no_residual_examples", "residual_violation"]

# Stored references (claim PB11): the profile at λ = 0.1, T = 32, n = 256 for each setting,
# computed once by an independent dense rollout — kernels built entry by entry as
# softmax_{j≤i}(c[i=j] − m_h(i−j)) with m_h = 2^{−8(h+1)/32} written out, p = e_{n−1}ᵀ R^32 by
# 32 dense vector–matrix products (NumPy, float64). (p(0), argmin, p(n−1)).
PB11_REFERENCE = {
    "bloom-7b1 slopes (32 heads), c = 0": (0.013554392156640251, 54, 0.05503426866324092),
    "bloom-7b1 slopes, c = 2": (0.005899272111141047, 54, 0.1296574182142127),
    "single head m = 0.05, c = 0": (0.0004053216032089356, 10, 0.040819405545478714),
}
_REF_CELL = (0.1, 32)
_TAGS = {
    "bloom-7b1 slopes (32 heads), c = 0": "bloom_c0",
    "bloom-7b1 slopes, c = 2": "bloom_c2",
    "single head m = 0.05, c = 0": "m0.05",
}
U_TOL = 1e-12  # the relaxation: an interior dip must be deeper than this to count as a U


def _regime_grid(ctx):
    n = 256
    lams = np.array([0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0])
    Ts = np.array([2, 4, 8, 16, 32, 64, 128, 256] + ([512, 1024] if ctx.full else []))
    settings = {
        "bloom-7b1 slopes (32 heads), c = 0": alibi_kernel(n, alibi_slopes(32)),
        "bloom-7b1 slopes, c = 2": alibi_kernel(n, alibi_slopes(32), 2.0),
        "single head m = 0.05, c = 0": alibi_kernel(n, 0.05),
    }
    cells = {}  # (setting, λ, T) -> profile
    for name, K in settings.items():
        for lam in lams:
            for T, p in zip(Ts, stationary_profiles(K, float(lam), Ts), strict=True):
                cells[(name, float(lam), int(T))] = p
    return n, lams, Ts, list(settings), cells


def _u_cells(cells, depth, margin, residual=True):
    """The U cells with λ < 1 (the claim's assumption), or with λ = 1 when ``residual=False``."""
    return {
        key for key, p in cells.items() if (key[1] < 1.0) == residual and is_u(p, depth, margin)
    }


def _pb11_references(names, cells):
    """The profile at the reference cell against :data:`PB11_REFERENCE`, per setting."""
    tol = fp_tol(
        1e-11,
        "32 convex steps on n = 256 against 32 dense vector–matrix products: each entry of a "
        "probability vector rounds by ≤ 32·256·2.2e-16 = 1.8e-12 per side; 2 sides ≤ 1e-11",
    )
    lam_r, T_r = _REF_CELL
    ms = []
    for nm in names:
        p = cells[(nm, lam_r, T_r)]
        p0, k_ref, plast = PB11_REFERENCE[nm]
        ms += [
            close(f"ref_p0_{_TAGS[nm]}", float(p[0]), p0, tol,
                  label=f"p(0) at λ = {lam_r}, T = {T_r}, {nm}, vs the stored dense reference"),
            close(f"ref_p_last_{_TAGS[nm]}", float(p[-1]), plast, tol,
                  label=f"p(n−1) at λ = {lam_r}, T = {T_r}, {nm}, vs the stored reference"),
            close(f"ref_argmin_{_TAGS[nm]}", int(np.argmin(p)), k_ref, exact_tol("an index"),
                  label=f"argmin at λ = {lam_r}, T = {T_r}, {nm}, vs the stored reference"),
        ]  # fmt: skip
    return ms


def _pb11_counts(names, cells, us):
    """Informational counts: U cells and their Σλ range per setting, U cells at λ = 1."""
    ms = []
    for nm in names:
        sl = [lam * T for (s, lam, T) in us if s == nm]
        ms.append(info(f"u_cells_{_TAGS[nm]}", len(sl), label=f"U cells, {nm}"))
        ms.append(info(f"u_sum_lambda_range_{_TAGS[nm]}",
                       f"{min(sl):g} … {max(sl):g}" if sl else "none",
                       label=f"Σλ range of the U cells, {nm}"))  # fmt: skip
    att = _u_cells(cells, U_MIN_DEPTH, U_END_MARGIN, residual=False)
    ms.append(info("u_cells_attention_only", len(att),
                   label="U cells at λ = 1 (no residual: the multi-head kernel's own diagonal "
                   "makes them; not counted above)"))  # fmt: skip
    ms.append(info("grid_cells", len(cells)))
    return ms


@register(
    "PB11",
    "[A]",
    "finite depth gives broad, often U-shaped profiles: for intermediate Σλ an interior minimum "
    "below both ends (a dip of relative depth ≥ U_MIN_DEPTH with the argmin ≥ U_END_MARGIN·(n−1) "
    "from both ends); strict U (one sign change) in part of the (λ, T, m, c) plane",
    assumptions=("residual connections (λ < 1)", "finite depth"),
)
def pb11(ctx: Context) -> Evidence:
    n, lams, Ts, names, cells = _regime_grid(ctx)
    us = _u_cells(cells, U_MIN_DEPTH, U_END_MARGIN)
    strict = {key for key in us if profile_shape(cells[key]) == "strict_u"}
    small = (float(lams[0]), int(Ts[0]))
    recency = [nm for nm in names if int(np.argmin(cells[(nm, *small)])) == 0]
    no_u_small = all((nm, *small) not in us for nm in names)
    deep = [(nm, float(lam), int(Ts[-1])) for nm in names for lam in lams if lam >= 0.2]
    collapsed = all(cells[key][-1] <= cells[key].min() for key in deep)  # ties: underflow
    depth_tol = param_tol(
        "U_MIN_DEPTH", U_MIN_DEPTH,
        f"a U needs p(argmin) ≤ (1 − {U_MIN_DEPTH})·min(p(0), p(n−1)); [A] states no depth; "
        "table pb11_u_sensitivity varies it",
    )  # fmt: skip
    margin_tol = param_tol(
        "U_END_MARGIN", U_END_MARGIN,
        f"the argmin must lie ≥ ceil({U_END_MARGIN}·(n−1)) = {math.ceil(U_END_MARGIN * (n - 1))} "
        "positions from both ends; table pb11_u_sensitivity varies it",
    )  # fmt: skip
    ms = [
        holds("u_in_plane", bool(us), depth_tol, label="a U somewhere in the (λ, T, m, c) plane"),
        holds("strict_u_in_plane", bool(strict), margin_tol,
              label="a strict U (one sign change, and a U) somewhere in the plane"),
        holds("recency_at_smallest_sum_lambda", bool(recency),
              label="pure recency (argmin at token 0) at the smallest "
              f"Σλ = {small[0] * small[1]:g} in some setting"),
        holds("no_u_at_smallest_sum_lambda", no_u_small,
              label=f"no U at the smallest Σλ = {small[0] * small[1]:g}"),
        holds("collapse_at_depth", collapsed,
              label="minimum at the last token (collapse onto token 0) for λ ≥ 0.2 at "
              f"T = {Ts[-1]}"),
    ]  # fmt: skip
    ms += _pb11_references(names, cells) + _pb11_counts(names, cells, us)
    return Evidence(
        ms,
        figures=[_pb11_figure(n, lams, Ts, names, cells)],
        tables=[_pb11_sensitivity(names, cells), _pb11_valleys(n, names, cells)],
        setup=f"n = {n}; constant λ ∈ {lams.tolist()}, depths T ∈ {Ts.tolist()}; settings: "
        f"{', '.join(names)}; U: relative depth ≥ {U_MIN_DEPTH}, argmin ≥ {U_END_MARGIN}·(n−1) "
        "from both ends; strict U: also profile_shape == strict_u.",
    )


def _pb11_sensitivity(names, cells) -> Table:
    rows = []
    for d in U_DEPTHS:
        for mg in U_MARGINS:
            us = _u_cells(cells, d, mg)
            strict = sum(profile_shape(cells[k]) == "strict_u" for k in us)
            per = [sum(1 for (s, _, _) in us if s == nm) for nm in names]
            rows.append([d, mg, *per, strict, "HOLDS" if us and strict else "FAILS"])
    return Table(
        "pb11_u_sensitivity",
        "PB11: U cells of the grid for each relative depth and end margin",
        ["U_MIN_DEPTH", "U_END_MARGIN", *[f"U cells, {nm}" for nm in names], "strict U cells",
         "U and strict U in the plane"],
        rows,
        note=f"the verdict uses U_MIN_DEPTH = {U_MIN_DEPTH}, U_END_MARGIN = {U_END_MARGIN}",
    )  # fmt: skip


def _pb11_valleys(n, names, cells) -> Table:
    rows = []
    for (nm, lam, T), p in cells.items():
        k, d, away = valley(p)
        if 0 < k < n - 1:
            rows.append([nm, lam, T, lam * T, k, d, away, is_u(p), profile_shape(p)])
    return Table(
        "pb11_valleys",
        "PB11: every grid cell with an interior argmin — dip location and relative depth",
        ["setting", "λ", "T", "Σλ", "argmin", "relative depth", "away from ends", "U",
         "shape"],
        rows,
    )  # fmt: skip


def _pb11_figure(n, lams, Ts, names, cells) -> Figure:
    cmap = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#000000"]
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
                  depth_series, logx=True, hlines=[(U_MIN_DEPTH, "U_MIN_DEPTH")], ylim=(0, 1))
        )  # fmt: skip
        panels.append(
            Panel(f"{nm}: argmin", "Σλ = λ·T", "argmin / (n − 1)", loc_series, logx=True,
                  hlines=[(U_END_MARGIN, "U_END_MARGIN"), (1 - U_END_MARGIN, "1 − U_END_MARGIN")],
                  ylim=(0, 1))
        )  # fmt: skip
    return Figure(
        "PB11_regime_map",
        f"profile valleys against total mixing Σλ, n = {n}",
        panels,
        caption="For each setting: the relative depth of the dip (counted only when the argmin "
        "is away from both ends) and the argmin's location, against Σλ = λ·T. Small Σλ: the "
        "minimum sits at token 0 (recency); large Σλ: at the last token (collapse onto token 0); "
        "a U lies between.",
    )


# ------------------------------------------------------------------------------------------
# PB11 relaxed: finite depth gives U-shaped profiles — drop the residual (λ ≡ 1)


def no_residual_examples():
    """Examples for PB11 with λ ≡ 1: ``{"n", "slopes", "content", "T"}`` (claim PB11).

    ``n`` in [3, 12], 1–3 heads with slopes in [0, 3] and content in [-10, 10], depth ``T`` in
    [2, 12] (a multi-layer rollout with intermediate Σλ_t = T).
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(3, 12))
        heads = draw(st.integers(1, 3))
        slopes = draw(st.lists(ex.floats(0.0, 3.0), min_size=heads, max_size=heads))
        content = draw(st.lists(ex.floats(-10.0, 10.0), min_size=heads, max_size=heads))
        T = draw(st.integers(2, 12))
        return {"n": n, "slopes": slopes, "content": content, "T": T}

    return draw()


def _attention_only_profile(example) -> np.ndarray:
    n = ex.integer(example, "n", 3)
    K = alibi_kernel(n, ex.get(example, "slopes"), ex.get(example, "content"))
    return influence(K, np.ones(ex.integer(example, "T", 1)))


def residual_violation(example) -> float:
    """How far the attention-only profile is from a U (claim PB11).

    With ``p = e_{n-1}^T A^T`` (λ ≡ 1) for ``A = alibi_kernel(n, slopes, content)``:

    .. math::
        \\mathrm{dip} = \\min\\big(p(0), p(n-1)\\big) - \\min_{0<j<n-1} p(j),
        \\qquad v = 10^{-12} - \\mathrm{dip}.

    ``v > 0`` exactly when the attention-only profile has no interior point below both ends
    (dip ≤ 1e-12: monotone, flat, or collapsed onto token 0), not even the weakest dip. Needs
    n ≥ 3. Cost O(T·n·H).

    What a violation shows, precisely: *this* attention-only kernel has no dip at depth T. The
    kernel's own diagonal is kept: with diagonal content c the kernel is itself lazy,
    ``A = (1 − κ_i) I + κ_i A_0`` row by row, and where diagonal content alone makes a dip the
    example is *not* a violation (v < 0). So a counterexample shows that dropping the residual
    can remove the U; it does not show that every U needs the residual.
    """
    p = _attention_only_profile(example)
    dip = min(p[0], p[-1]) - p[1:-1].min()
    return U_TOL - float(dip)


def _describe_residual(example) -> str:
    p = _attention_only_profile(example)
    j = int(np.argmin(p[1:-1])) + 1
    d = np.diff(p)
    if min(p[0], p[-1]) - p[j] > U_TOL:
        shape = "an interior minimum below both ends (a U)"
    elif (d <= 0).all():
        shape = "nonincreasing (primacy toward token 0), so no U"
    elif (d >= 0).all():
        shape = "nondecreasing (recency), so no U"
    else:
        shape = "no interior minimum below both ends, so no U"
    A_diag = alibi_kernel(p.size, example["slopes"], example["content"]).diagonal()
    return (
        f"attention only (λ ≡ 1, T = {example['T']}): p(0) = {p[0]:.6g}, "
        f"p(n-1) = {p[-1]:.6g}, least interior p({j}) = {p[j]:.6g}, global argmin "
        f"{int(np.argmin(p))}; {shape}. The kernel's own diagonal (content "
        f"{example['content']}, largest self-weight A_ii = {float(A_diag[1:].max()):.4g}) is "
        "kept and makes no dip here: this attention-only kernel has no U, which does not mean "
        "that every U needs the residual (diagonal content alone can make one)"
    )


add_relaxation(
    "PB11",
    Relaxation(
        "residual",
        "the residual (λ_t < 1): here λ_t ≡ 1, attention only, the kernel's own diagonal "
        "(content, ALiBi self-weight) kept; a U that diagonal content alone makes is no "
        "violation",
        no_residual_examples,
        residual_violation,
        _describe_residual,
    ),
)


# ------------------------------------------------------------------------------------------
# mutants


def _lambda_scaled_step(factor):
    def make(original):
        @functools.wraps(original)
        def step(self, p, lam):
            return original(self, p, min(1.0, lam * factor))

        return step

    return make


def _slopes_scaled(factor):
    def make(original):
        @functools.wraps(original)
        def slopes(num_heads):
            return original(num_heads) * factor

        return slopes

    return make


add_mutant("PB11", "slopes-rescaled", "posflow.simulate._alibi:alibi_slopes", _slopes_scaled(0.5),
           "the textbook ALiBi slopes 2^{−8(h+1)/H} halved")  # fmt: skip
add_mutant("PB11", "content-sign-flipped", "posflow.simulate.kernels:alibi_kernel",
           scaled_argument(2, -1.0, "content"),
           "the kernel applies diagonal content −c")  # fmt: skip
add_mutant("PB11", "lambda-1%-high", "posflow.simulate._alibi:AlibiKernel._residual_step",
           _lambda_scaled_step(1.01), "each residual step mixes with 1.01·λ")  # fmt: skip
