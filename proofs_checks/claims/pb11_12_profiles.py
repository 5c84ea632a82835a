"""Claims PB11 and PB12 of [A]: U-shaped profiles at finite depth, and the closed form of the
uniform-kernel rollout with its n → ∞ limit law.

A *U* here is a dip of stated relative depth with its minimum away from both ends
(:func:`valley`): the argmin k of the profile lies at least ``margin·(n−1)`` positions from
either end and ``1 − p(k)/min(p(0), p(n−1)) ≥ depth``. The two numbers are modelling parameters
that [A] does not fix (:data:`U_MIN_DEPTH`, :data:`U_END_MARGIN`); every verdict that uses them
comes with a sensitivity table. PB14 and the ``residual`` relaxation of PB11 use the same test.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp
from scipy import stats

from posflow.proofs_checks.kit import (
    RESIDUAL_STEP,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    param_tol,
    register,
    scaled_argument,
    stat_tol,
)
from posflow.simulate.compare import profile_shape
from posflow.simulate.kernels import alibi_kernel, alibi_slopes, uniform_kernel
from posflow.simulate.rollout import influence
from posflow.theory import rollout as th

__all__ = ["U_END_MARGIN", "U_MIN_DEPTH", "is_u", "valley"]

# A U needs a dip at least this deep relative to the lower end: p(argmin) ≤ (1 − 0.1)·min(p(0),
# p(n−1)). A modelling choice ([A] states no depth); sensitivity tables vary it 0.01 … 0.5.
U_MIN_DEPTH = 0.1
# … with the argmin at least this fraction of the positions from either end (13 tokens at
# n = 256), so that a minimum at j = 1…12 or 243…254 is not a U. Varied 0.01 … 0.2.
U_END_MARGIN = 0.05

DEPTHS = (0.01, 0.05, 0.1, 0.2, 0.5)
MARGINS = (0.01, 0.02, 0.05, 0.1, 0.2)


def valley(p, margin: float = U_END_MARGIN) -> tuple[int, float, bool]:
    """The dip of a profile: ``(k, depth, away)``.

    ``k`` is the argmin of ``p``, ``depth = 1 − p(k)/min(p(0), p(n−1))`` (0 when an end is the
    minimum, NaN when both ends are 0) and ``away`` says whether ``k`` lies at least
    ``ceil(margin·(n−1))`` positions (at least 1) from both ends.
    """
    a = np.asarray(p, dtype=np.float64)
    n = a.size
    k = int(np.argmin(a))
    ends = min(a[0], a[-1])
    depth = float(1.0 - a[k] / ends) if ends > 0 else math.nan
    gap = max(1, math.ceil(margin * (n - 1)))
    return k, depth, bool(gap <= k <= n - 1 - gap)


def is_u(p, depth: float = U_MIN_DEPTH, margin: float = U_END_MARGIN) -> bool:
    """A U: the argmin away from both ends (``margin``) and a dip of relative ``depth``."""
    _, d, away = valley(p, margin)
    return away and d >= depth


# ------------------------------------------------------------------------------------------
# PB11: U-shapes at finite depth

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
            row = np.zeros((1, n))
            row[0, -1] = 1.0
            done = 0
            for T in Ts:  # extend the same chain: P^{(T)} for growing T
                for _ in range(T - done):
                    row = K._residual_step(row, float(lam))
                done = T
                cells[(name, float(lam), int(T))] = row[0].copy()
    return n, lams, Ts, list(settings), cells


def _u_cells(cells, depth, margin, residual=True):
    """The U cells with λ < 1 (the claim's assumption), or with λ = 1 when ``residual=False``."""
    return {
        key for key, p in cells.items() if (key[1] < 1.0) == residual and is_u(p, depth, margin)
    }


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
        "U_MIN_DEPTH",
        U_MIN_DEPTH,
        f"a U needs p(argmin) ≤ (1 − {U_MIN_DEPTH})·min(p(0), p(n−1)); [A] states no depth; "
        "table pb11_u_sensitivity varies it",
    )
    margin_tol = param_tol(
        "U_END_MARGIN",
        U_END_MARGIN,
        f"the argmin must lie ≥ ceil({U_END_MARGIN}·(n−1)) = {math.ceil(U_END_MARGIN * (n - 1))} "
        "positions from both ends; table pb11_u_sensitivity varies it",
    )
    ref_tol = fp_tol(
        1e-11,
        "32 convex steps on n = 256 against 32 dense vector–matrix products: each entry of a "
        "probability vector rounds by ≤ 32·256·2.2e-16 = 1.8e-12 per side; 2 sides ≤ 1e-11",
    )
    ms = [
        holds("u_in_plane", bool(us), depth_tol, label="a U somewhere in the (λ, T, m, c) plane"),
        holds(
            "strict_u_in_plane",
            bool(strict),
            margin_tol,
            label="a strict U (one sign change, and a U) somewhere in the plane",
        ),
        holds(
            "recency_at_smallest_sum_lambda",
            bool(recency),
            label=f"pure recency (argmin at token 0) at the smallest Σλ = {small[0] * small[1]:g} "
            "in some setting",
        ),
        holds(
            "no_u_at_smallest_sum_lambda",
            no_u_small,
            label=f"no U at the smallest Σλ = {small[0] * small[1]:g}",
        ),
        holds(
            "collapse_at_depth",
            collapsed,
            label=f"minimum at the last token (collapse onto token 0) for λ ≥ 0.2 at T = {Ts[-1]}",
        ),
    ]
    lam_r, T_r = _REF_CELL
    for nm in names:
        p = cells[(nm, lam_r, T_r)]
        p0, k_ref, plast = PB11_REFERENCE[nm]
        tag = _tag(nm)
        ms += [
            close(f"ref_p0_{tag}", float(p[0]), p0, ref_tol,
                  label=f"p(0) at λ = {lam_r}, T = {T_r}, {nm}, vs the stored dense reference"),
            close(f"ref_p_last_{tag}", float(p[-1]), plast, ref_tol,
                  label=f"p(n−1) at λ = {lam_r}, T = {T_r}, {nm}, vs the stored reference"),
            close(f"ref_argmin_{tag}", int(np.argmin(p)), k_ref, exact_tol("an index"),
                  label=f"argmin at λ = {lam_r}, T = {T_r}, {nm}, vs the stored reference"),
        ]  # fmt: skip
    for nm in names:
        sl = [lam * T for (s, lam, T) in us if s == nm]
        ms.append(info(f"u_cells_{_tag(nm)}", len(sl), label=f"U cells, {nm}"))
        ms.append(
            info(
                f"u_sum_lambda_range_{_tag(nm)}",
                f"{min(sl):g} … {max(sl):g}" if sl else "none",
                label=f"Σλ range of the U cells, {nm}",
            )
        )
    att = _u_cells(cells, U_MIN_DEPTH, U_END_MARGIN, residual=False)
    ms.append(
        info(
            "u_cells_attention_only",
            len(att),
            label="U cells at λ = 1 (no residual: the multi-head kernel's own diagonal makes them; "
            "not counted above)",
        )
    )
    ms.append(info("grid_cells", len(cells)))
    return Evidence(
        ms,
        figures=[_pb11_figure(n, lams, Ts, names, cells)],
        tables=[_pb11_sensitivity(names, cells), _pb11_valleys(n, names, cells)],
        setup=f"n = {n}; constant λ ∈ {lams.tolist()}, depths T ∈ {Ts.tolist()}; settings: "
        f"{', '.join(names)}; U: relative depth ≥ {U_MIN_DEPTH}, argmin ≥ {U_END_MARGIN}·(n−1) "
        "from both ends; strict U: also profile_shape == strict_u.",
    )


def _tag(name: str) -> str:
    return {
        "bloom-7b1 slopes (32 heads), c = 0": "bloom_c0",
        "bloom-7b1 slopes, c = 2": "bloom_c2",
        "single head m = 0.05, c = 0": "m0.05",
    }[name]


def _pb11_sensitivity(names, cells) -> Table:
    rows = []
    for d in DEPTHS:
        for mg in MARGINS:
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
# PB12: the closed form of the uniform-kernel rollout and its limit law


def _hoeffding_bound(law, x, N):
    """A bound on |Pr(J/N ≤ x) − Pr(X ≤ x)| for J | X ~ Binomial(N, X) (array of x > w).

    Hoeffding: |Pr(Bin(N, y) ≤ xN) − 1[y ≤ x]| ≤ exp(−2N(x − y)²), and the atom of X at 1 adds
    nothing for x < 1, so the gap is ≤ ∫ f(y) e^{−2N(x−y)²} dy. The density f is nonincreasing
    (each term (−ln y)^{k−1} is), so with w = 3/√N: ≤ f(x − w)·√(π/(2N)) + e^{−2Nw²}.
    """
    w = 3.0 / math.sqrt(N)
    return law.pdf(x - w) * math.sqrt(math.pi / (2 * N)) + math.exp(-2 * N * w * w)


@register(
    "PB12",
    "[D, ours]",
    "closed form for the uniform kernel: p(j) = C(n−1,j) E[X^j "
    "(1−X)^{n−1−j}], X = ∏X_t; n → ∞ limit: atom ∏(1−λ_t) at 1 plus density "
    "Σ_k Pr(K=k)(−ln x)^{k−1}/(k−1)!",
    assumptions=("uniform causal kernel",),
)
def pb12(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 12)
    lam_exact = [sp.Rational(1, 3), sp.Rational(1, 2), sp.Rational(1, 5), sp.Rational(3, 4)]
    lam = np.array([float(x) for x in lam_exact])
    n = 128
    exact = np.array([float(x) for x in th.influence_exact(n, lam_exact)])
    numeric = influence(uniform_kernel(n), lam)
    err_exact = float(np.abs(exact - numeric).max())
    # Monte Carlo of X = ∏ X_t, X_t = 1 w.p. 1 − λ_t else U(0, 1)
    N = 400_000 if ctx.full else 100_000
    u = rng.random((N, lam.size))
    lazy = rng.random((N, lam.size)) >= lam
    X = np.where(lazy, 1.0, u).prod(axis=1)
    js = np.array([0, 5, 40, 100, n - 2])
    samples = stats.binom.pmf(js[None, :], n - 1, X[:, None])
    mc, se = samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(N)
    alpha = 1e-3
    z = float(stats.norm.ppf(1 - alpha / (2 * js.size)))
    law = th.limit_law(lam_exact)
    atom_ok = law.atom == sp.Mul(*[1 - x for x in lam_exact])
    ms = [
        at_most(
            "max_abs_error_exact_vs_numeric",
            err_exact,
            0.0,
            fp_tol(1e-13, "exact rationals rounded once (ε·p ≤ 2.2e-16) against 4 layers of "
                   f"reversed cumulative sums of ≤ {n} terms: 4·{n}·2.2e-16 = "
                   f"{4 * n * _EPS:.1e} ≤ 1e-13"),
            label=f"max_j |p(j) closed form (rationals) − numeric rollout|, n = {n}",
        ),
        holds("atom_is_product", atom_ok, exact_tol("sympy Rationals"),
              label="limit-law atom = ∏(1 − λ_t) exactly"),
    ]  # fmt: skip
    for j, m_j, s_j, e_j in zip(js, mc, se, exact[js], strict=True):
        ms.append(
            close(f"monte_carlo_p{j}", float(m_j), float(e_j),
                  stat_tol(z * float(s_j), f"{N} samples of X; standard error {s_j:.2e} × "
                           f"z = {z:.2f} (two-sided, family-wise level {alpha:g} over "
                           f"{js.size} positions, Bonferroni)"),
                  label=f"Monte Carlo E[C(n−1,j) X^j (1−X)^(n−1−j)] at j = {j} vs closed form")
        )  # fmt: skip
    sizes = (4000, 64000)
    gaps = {}
    for Nn in sizes:
        p_big = influence(uniform_kernel(Nn), lam)
        x = np.linspace(0.1, 0.95, 86)
        j = np.floor(x * (Nn - 1)).astype(int)
        xj = j / (Nn - 1)
        gap = np.cumsum(p_big)[j] - law.cdf(xj)
        bound = _hoeffding_bound(law, xj, Nn - 1)
        gaps[Nn] = (xj, gap, bound)
        ms.append(
            at_most(
                f"cdf_gap_excess_n{Nn}",
                float(np.max(np.abs(gap) - bound)),
                0.0,
                fp_tol(1e-12, f"cumulative sums of ≤ {Nn} terms (≤ {Nn}·2.2e-16 = "
                       f"{Nn * _EPS:.1e}) and the incomplete-gamma cdf (≤ 1e-14)"),
                label=f"max_x (|F_n(x) − F(x)| − Hoeffding bound), n = {Nn}",
            )
        )  # fmt: skip
        ms.append(info(f"cdf_gap_n{Nn}", float(np.abs(gap).max()),
                       label=f"max_x |F_n(x) − F(x)|, n = {Nn}, x ∈ [0.1, 0.95]"))  # fmt: skip
        ms.append(info(f"bound_n{Nn}", float(bound.max()),
                       label=f"largest Hoeffding bound, n = {Nn}"))  # fmt: skip
    ms.append(info("atom", float(law.atom)))
    ms.append(info("monte_carlo_samples", N))
    return Evidence(
        ms,
        figures=[_pb12_figure(n, numeric, exact, law, gaps)],
        setup=f"λ = (1/3, 1/2, 1/5, 3/4); closed form (sympy Rationals) vs the rollout at n = {n}; "
        f"{N} Monte Carlo draws of X at j ∈ {js.tolist()}; the discrete cdf of j/(n−1) against the "
        f"limit law at n ∈ {sizes} for x ∈ [0.1, 0.95], held to the Hoeffding bound "
        "f(x − 3/√n)·√(π/(2n)) + e^{−18} (→ 0 as n → ∞).",
    )


_EPS = float(np.finfo(np.float64).eps)


def _pb12_figure(n, numeric, exact, law, gaps) -> Figure:
    j = np.arange(n)
    xs = np.linspace(0.002, 0.998, 300)
    p1 = Panel(
        f"profile, n = {n}", "token position j", "p(j)",
        [Series("numeric rollout", j, numeric, color="profile"),
         Series("closed form (Hausdorff)", j, exact, color="exact", style="--")],
        logy=True,
    )  # fmt: skip
    big = max(gaps)
    xb, _, _ = gaps[big]
    p_big = influence(uniform_kernel(big), [float(v) for v in law.lambdas])
    p2 = Panel(
        "limit law", "x = j/(n−1)", "cdf",
        [Series(f"discrete cdf, n = {big}", xb,
                np.cumsum(p_big)[np.floor(xb * (big - 1)).astype(int)], kind="markers",
                color="profile"),
         Series("limit law Pr(X ≤ x)", xs, law.cdf(xs), color="exact")],
        hlines=[(1 - float(law.atom), "1 − atom")],
    )  # fmt: skip
    res = []
    for (Nn, (x, gap, bound)), col in zip(gaps.items(), ("#0072B2", "#D55E00"), strict=True):
        res.append(Series(f"F_n − F, n = {Nn}", x, gap, kind="markers", color=col))
        res.append(Series(f"± Hoeffding bound, n = {Nn}", x, np.zeros_like(x), kind="band",
                          lo=-bound, hi=bound, color=col))  # fmt: skip
    p3 = Panel("residual against the limit law", "x", "F_n(x) − F(x)", res)
    return Figure(
        "PB12_closed_form",
        "uniform kernel, λ = (1/3, 1/2, 1/5, 3/4)",
        [p1, p2, p3],
        caption="Left: the rollout equals the Hausdorff closed form. Middle: the discrete cdf of "
        "j/(n−1) and the limit law (atom ∏(1 − λ_t) at 1). Right: the residual with the "
        "Hoeffding band that shrinks like n^{−1/2}.",
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


def _law_drops_last_layer(original):
    @functools.wraps(original)
    def law(lambdas, **kw):
        return original(list(lambdas)[:-1], **kw)

    return law


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
add_mutant("PB12", "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
add_mutant("PB12", "limit-law-drops-a-layer", "posflow.theory._hausdorff:limit_law",
           _law_drops_last_layer, "the limit law built without the last layer")  # fmt: skip
