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

from posflow.proofs_checks.claims import pb11_u_shape_refs as refs
from posflow.proofs_checks.claims.pb11_u_shape_refs import u_cells as _u_cells
from posflow.proofs_checks.kit import (
    U_DEPTHS,
    U_END_MARGIN,
    U_MARGINS,
    U_MIN_DEPTH,
    U_TEST,
    Context,
    Evidence,
    Relaxation,
    Table,
    add_mutant,
    add_relaxation,
    cite,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    is_u,
    loose_is_u,
    param_tol,
    register,
    rejects,
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


def _pb11_references(names, cells):
    """The judge of the stored references: the profile at the reference cell against
    :data:`PB11_REFERENCE`, per setting (p(0), p(n−1), argmin)."""
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


def _edge_judges(names, cells, small, deep):
    """Pure recency (argmin at token 0) in some setting at the smallest Σλ, and collapse (the
    minimum at the last token) in every deep cell."""
    recency = [nm for nm in names if int(np.argmin(cells[(nm, *small)])) == 0]
    collapsed = all(cells[key][-1] <= cells[key].min() for key in deep)  # ties: underflow
    return [
        holds("recency_at_smallest_sum_lambda", bool(recency),
              label="pure recency (argmin at token 0) at the smallest "
              f"Σλ = {small[0] * small[1]:g} in some setting"),
        holds("collapse_at_depth", collapsed,
              label=f"minimum at the last token (collapse onto token 0) for λ ≥ 0.2 at "
              f"T = {deep[-1][2]}"),
    ]  # fmt: skip


def _controls(n, names, cells, small, deep, tols):
    """Negative controls: the U judges on profiles that are no U, the reference judge with the
    last setting's profile taken at the wrong depth, the recency and collapse judges on a V."""
    lam_r, T_r = _REF_CELL
    wrong = dict(cells)
    wrong[(names[-1], lam_r, T_r)] = cells[(names[-1], lam_r, 64)]
    v = refs.SHAPES["strict_u"]
    vs = {key: v for key in cells}
    return [
        *refs.u_controls(n, *tols),
        rejects("reference_judge_control_last_setting_wrong_depth",
                _pb11_references(names, wrong),
                f"the last setting's profile at T = 64 instead of {T_r} (the others right)"),
        rejects("edge_judges_control_v_profiles", _edge_judges(names, vs, small, deep),
                "every cell a V: neither recency at the smallest Σλ nor collapse at depth"),
    ]  # fmt: skip


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


_CITES = (
    cite("posflow.simulate.rollout:stationary_profiles",
         "dense vector–matrix products e_{n−1}ᵀ R^T with an entry-by-entry softmax kernel, and "
         "the stored dense references at λ = 0.1, T = 32",
         "max_stationary_profiles_error_vs_dense", "ref_p0_bloom_c0", "ref_p_last_bloom_c2",
         "ref_argmin_m0.05"),
    cite("posflow.simulate.kernels:alibi_kernel",
         "the head average of softmax_{j≤i}(c[i=j] − m_h(i−j)) built entry by entry",
         "max_alibi_kernel_error_vs_softmax"),
    cite("posflow.simulate.kernels:alibi_slopes", "the direct formula 2^{−8(h+1)/H}",
         "max_alibi_slopes_error_vs_formula"),
    cite("posflow.simulate.compare:profile_shape",
         "constructed profiles of known shape (V, W, ramp up, ramp down)",
         "profile_shape_misnamed"),
)  # fmt: skip


@register(
    "PB11",
    "[A]",
    "finite depth gives broad, often U-shaped profiles: for intermediate Σλ an interior minimum "
    "below both ends (a dip of relative depth ≥ U_MIN_DEPTH with the argmin ≥ U_END_MARGIN·(n−1) "
    "from both ends); strict U (one sign change) in part of the (λ, T, m, c) plane",
    assumptions=("residual connections (λ < 1)", "finite depth"),
    compares=_CITES,
)
def pb11(ctx: Context) -> Evidence:
    """Claim PB11: a U (and a strict U) somewhere in the (λ, T, m, c) plane of ALiBi rollouts.

    The grid of profiles by ``stationary_profiles`` of ``alibi_kernel`` with ``alibi_slopes``
    (each against entry-by-entry softmax kernels and dense vector–matrix products, and the
    reference cell against stored dense references); the U test of the kit; ``profile_shape``
    against constructed profiles of known shape. Negative controls: flat, monotone, shallow-dip,
    end-dip and shallow-against-the-lower-end profiles are no U; a W is no strict U; the
    reference, recency and collapse judges reject wrong profiles.
    """
    n, lams, Ts, names, cells = _regime_grid(ctx)
    small = (float(lams[0]), int(Ts[0]))
    deep = [(nm, float(lam), int(Ts[-1])) for nm in names for lam in lams if lam >= 0.2]
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
    us = _u_cells(cells, U_MIN_DEPTH, U_END_MARGIN)
    ms = [
        refs.plane_judge("u_in_plane", cells, depth_tol,
                         label="a U somewhere in the (λ, T, m, c) plane"),
        refs.strict_judge("strict_u_in_plane", cells, margin_tol,
                          label="a strict U (one sign change, and a U) somewhere in the plane"),
        holds("no_u_at_smallest_sum_lambda", all((nm, *small) not in us for nm in names),
              label=f"no U at the smallest Σλ = {small[0] * small[1]:g}"),
    ]  # fmt: skip
    ms += _edge_judges(names, cells, small, deep) + _pb11_references(names, cells)
    ms += refs.routine_comparisons(n) + _controls(n, names, cells, small, deep,
                                                  (depth_tol, margin_tol))
    ms += _pb11_counts(names, cells, us)
    return Evidence(
        ms,
        figures=[refs.regime_figure(n, lams, Ts, names, cells)],
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
_U = "posflow.proofs_checks.kit._u_test"
add_mutant("PB11", "u-test-or-for-and", U_TEST, loose_is_u,
           "the U test accepts the argmin away from the ends OR a deep dip")  # fmt: skip
add_mutant("PB11", "valley-depth-vs-higher-end", f"{_U}:valley", refs.loose_valley,
           "the dip depth measured against the higher end instead of the lower")  # fmt: skip
add_mutant("PB11", "profile-shape-wiggles-as-strict", "posflow.simulate.compare:profile_shape",
           refs.loose_profile_shape, "profile_shape calls a wiggly U (weak_u) strict")  # fmt: skip
add_mutant("PB11", "plane-judge-depth-dropped",
           "posflow.proofs_checks.claims.pb11_u_shape_refs:plane_judge", refs.loose_plane_judge,
           "the plane's U judge drops the depth: any argmin away from the ends")  # fmt: skip
