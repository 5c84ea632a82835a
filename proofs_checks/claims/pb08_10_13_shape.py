"""Claims PB8–PB10 and PB13 of [A]: stochastic monotonicity, the four forces as drift terms, the
edge masses and the W1 conventions.

The profile-shape claims live beside this module: PB11 (U-shapes) and PB12 (the closed form of
the uniform-kernel rollout) in :mod:`posflow.proofs_checks.claims.pb11_12_profiles`, PB14 (the
five real models) in :mod:`posflow.proofs_checks.claims.pb14_real_configs`; both are imported at the
bottom so that they register with this module.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import (
    CHAIN,
    RESIDUAL_STEP,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    add_mutant,
    at_most,
    close,
    constant_result,
    exact_tol,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    random_alibi,
    random_causal,
    register,
    reversed_layer_order,
    scaled_argument,
)
from posflow.simulate.compare import mean_position, w1, w1_normalised
from posflow.simulate.kernels import (
    alibi_kernel,
    alibi_slopes,
    dense_kernel,
    monotonicity_deficit,
    uniform_kernel,
)
from posflow.simulate.rollout import constant, influence, rollout_matrix
from posflow.theory import rollout as th

_EPS = float(np.finfo(np.float64).eps)  # 2.2e-16


# ------------------------------------------------------------------------------------------
# PB8: stochastic monotonicity


def _softmax_kernel(n, slopes, content):
    """Head average of softmax_{j<=i}(c [i=j] − m (i−j)), entry by entry (an independent
    reference for :func:`alibi_kernel`)."""
    A = np.zeros((n, n))
    for m, c in zip(np.atleast_1d(slopes), np.atleast_1d(content), strict=True):
        for i in range(n):
            logits = np.array([c if j == i else -m * (i - j) for j in range(i + 1)])
            w = np.exp(logits - logits.max())
            A[i, : i + 1] += w / w.sum()
    return A / np.atleast_1d(slopes).size


def _brute_deficit(A):
    """max over all pairs i < i' and all k of F_{i'}(k) − F_i(k), clipped at 0."""
    F = np.cumsum(A, axis=1)
    n = F.shape[0]
    return max([0.0] + [float((F[b] - F[a]).max()) for a in range(n) for b in range(a + 1, n)])


def _exact_single_head_deficit(n: int, q: Fraction, ec: Fraction) -> Fraction:
    """The largest CDF deficit of the single-head kernel with e^{-m} = q, e^{c} = ec, exactly."""
    rows = []
    for i in range(n):
        w = [q ** (i - j) for j in range(i)] + [ec]
        z = sum(w)
        rows.append([x / z for x in w] + [Fraction(0)] * (n - i - 1))
    F = [[sum(r[: k + 1]) for k in range(n)] for r in rows]
    return max(
        [Fraction(0)]
        + [F[b][k] - F[a][k] for a in range(n) for b in range(a + 1, n) for k in range(n)]
    )


_EXACT_GRID = [(Fraction(1), Fraction(1, 100)), (Fraction(1, 2), Fraction(1)),
               (Fraction(1, 10), Fraction(100)), (Fraction(9, 10), Fraction(1, 3))]  # fmt: skip


@register(
    "PB8",
    "[A, D]",
    "ALiBi+content kernels are stochastically monotone for all m ≥ 0, "
    "c ∈ ℝ; head averages, residual mixing and products preserve it",
    assumptions=("slopes m ≥ 0",),
)
def pb8(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 8)
    n = 256 if ctx.full else 96
    ms = np.linspace(0, 2, 41 if ctx.full else 11)
    cs = np.linspace(-20, 20, 21 if ctx.full else 9)
    worst_single = max(monotonicity_deficit(alibi_kernel(n, m, c)) for m in ms for c in cs)
    worst_multi = 0.0
    for H in (1, 32, 64, 112):
        c = rng.uniform(-20, 20, H)
        worst_multi = max(worst_multi, monotonicity_deficit(alibi_kernel(n, alibi_slopes(H), c)))
    worst_products = 0.0
    products = 10 if ctx.full else 4
    for _ in range(products):
        ks = [random_alibi(rng, 48, slope_max=2.0, content_abs=20.0) for _ in range(6)]
        lam = rng.uniform(0, 1, 6)
        worst_products = max(worst_products, monotonicity_deficit(rollout_matrix(ks, lam)))
    exact_n = 7
    exact_worst = max(_exact_single_head_deficit(exact_n, q, ec) for q, ec in _EXACT_GRID)
    # the control: a negative slope with large content breaks monotonicity; the detector must
    # see it, at the value a brute-force comparison of every row pair gives
    anti = monotonicity_deficit(alibi_kernel(8, -1.0, 5.0))
    anti_ref = _brute_deficit(_softmax_kernel(8, -1.0, 5.0))
    fp = fp_tol(
        1e-12,
        f"a CDF entry is a running sum of ≤ {n} weights in [0, 1] with relative rounding ≤ 4ε "
        f"each; two such sums differ by rounding ≤ 2·{n}·4·2.2e-16 = {2 * n * 4 * _EPS:.1e} "
        "≤ 1e-12",
    )
    fp_ctrl = fp_tol(
        1e-13,
        "8×8 kernels from two softmax implementations: entries agree to ~4ε, CDF sums of ≤ 8 "
        "terms to 8·4·2.2e-16 = 7e-15 each, a difference of two to 1.4e-14 ≤ 1e-13",
    )
    return Evidence(
        [
            at_most(
                "max_deficit_single_head",
                worst_single,
                0.0,
                fp,
                label="max CDF deficit, single head, m ∈ [0, 2], c ∈ [−20, 20]",
            ),
            at_most(
                "max_deficit_multi_head",
                worst_multi,
                0.0,
                fp,
                label="max CDF deficit, textbook slopes, H ∈ {1, 32, 64, 112}, random c",
            ),
            at_most(
                "max_deficit_rollout_products",
                worst_products,
                0.0,
                fp,
                label="max CDF deficit of rollouts P = R_5⋯R_0 (per-layer random kernels)",
            ),
            holds(
                "exact_single_head_deficit_zero",
                exact_worst == 0,
                exact_tol("exact rational arithmetic (fractions), n = 7, e^{-m}, e^c rational"),
                label=f"exact (rational) CDF deficit of {len(_EXACT_GRID)} single-head kernels "
                "is 0",
            ),
            close(
                "negative_slope_deficit",
                anti,
                anti_ref,
                fp_ctrl,
                role="control",
                label="control: deficit of m = −1, c = 5 (n = 8) vs brute force over row pairs",
            ),
            holds(
                "negative_slope_breaks_monotonicity",
                anti > 1e-12,
                fp_tol(1e-12, "the deficit must exceed the 1e-12 rounding floor above"),
                role="control",
                label="control: m = −1, c = 5 is detected as not monotone",
            ),
            info("grid", f"n = {n}, {ms.size} slopes × {cs.size} contents"),
            info("rollout_products", products),
        ],
        setup=f"single heads on n = {n} for m ∈ [0, 2] ({ms.size}), c ∈ [−20, 20] ({cs.size}); "
        "textbook slopes 2^{−8(h+1)/H} with c ~ U[−20, 20] per head; "
        f"{products} rollouts of 6 random ALiBi+content layers (n = 48, λ ~ U[0, 1]); exact "
        f"rationals on n = {exact_n}; the control m = −1, c = 5 on n = 8.",
    )


# ------------------------------------------------------------------------------------------
# PB9: the four forces as drift terms


def _numeric_drift(A):
    i = np.arange(A.shape[0])
    return (A * (i[:, None] - i[None, :])).sum(axis=1)


_PB9_CASES = ((0.1, 0.0), (0.5, 2.0), (1.0, -3.0), (0.05, 5.0), (2.0, -20.0))


@register(
    "PB9",
    "[A, D]",
    "the four forces as drift terms: μ(i) = Σ_j A_ij (i−j); uniform i/2; "
    "residual scales by λ; ALiBi μ → 1/(e^m − 1); content μ_∞(m,c), c > 0 shrinks it; "
    "background b has no effect",
    assumptions=("causal kernels",),
)
def pb9(ctx: Context) -> Evidence:
    i_ = sp.Symbol("i", positive=True)
    m_r, c_r = sp.Symbol("m", positive=True), sp.Symbol("c", real=True)
    stated = sp.exp(-m_r) / ((1 - sp.exp(-m_r)) * (sp.exp(c_r) * (1 - sp.exp(-m_r)) + sp.exp(-m_r)))
    derived = th.alibi_drift_limit_expr(m_r, c_r)
    ns = 4 if ctx.full else 2  # symbolic kernel size (sympy: 0.4 s at n = 2, 2.4 s at n = 4)
    sym = [
        ("uniform_drift_is_i/2", "sympy: uniform-kernel drift − i/2 = 0",
         sp.simplify(th.uniform_drift(i_) - i_ / 2) == 0),
        ("alibi_limit_is_1/(e^m-1)", "sympy: μ_∞(m, 0) − 1/(e^m − 1) = 0",
         sp.simplify(th.alibi_drift_limit_expr(m_r, 0) - 1 / (sp.exp(m_r) - 1)) == 0),
        ("content_limit_matches_statement", "sympy: derived μ_∞(m, c) − stated formula = 0",
         sp.simplify(derived - stated) == 0),
        ("d_mu_dc_negative", "sympy: ∂μ_∞/∂c < 0 (c > 0 shrinks the drift)",
         bool(th.alibi_drift_limit_dc(m_r, c_r).negative)),
        ("background_shift_zero", f"sympy: kernel(b) − kernel(0) = 0 (n = {ns})",
         all(e == 0 for e in th.background_shift_residual(ns))),
        ("residual_scales_by_lambda", f"sympy: drift(R) − λ drift(A) = 0 (n = {ns})",
         all(e == 0 for e in th.residual_drift_residual(ns))),
    ]  # fmt: skip
    n = 400
    err_uniform = float(np.abs(_numeric_drift(uniform_kernel(n).dense()) - np.arange(n) / 2).max())
    worst_closed, worst_limit = 0.0, 0.0
    n_far = 20_000  # row n_far − 1 of a long kernel, by one vector product (no n×n matrix)
    e_last = np.zeros(n_far)
    e_last[-1] = 1.0
    rows = (1, 7, 50, n - 1)
    limits = {}
    for m, c in _PB9_CASES:
        mu = _numeric_drift(alibi_kernel(n, m, c).dense())
        closed = np.array([th.alibi_drift(i, m, c) for i in rows])
        worst_closed = max(worst_closed, float(np.max(np.abs(mu[list(rows)] / closed - 1))))
        row = alibi_kernel(n_far, m, c).apply_left(e_last)
        mu_far = float(row @ (n_far - 1 - np.arange(n_far)))
        limits[(m, c)] = float(th.alibi_drift_limit(m, c))
        worst_limit = max(worst_limit, abs(mu_far / limits[(m, c)] - 1))
    lam = 0.3
    A = alibi_kernel(n, 0.4, 1.0).dense()
    R = (1 - lam) * np.eye(n) + lam * A
    err_res = float(np.abs(_numeric_drift(R) - lam * _numeric_drift(A)).max())
    ms = [holds(k, ok, label=lab) for k, lab, ok in sym]
    ms += [
        at_most(
            "uniform_drift_error",
            err_uniform,
            0.0,
            fp_tol(1e-10, f"μ(i) sums ≤ {n} terms (i−j)/(i+1) ≤ {n}, each rounded by ≤ ε: "
                   f"≤ {n}·{n}·2.2e-16 = {n * n * _EPS:.1e} ≤ 1e-10"),
            label=f"max_i |μ(i) − i/2|, uniform kernel (n = {n})",
        ),
        at_most(
            "alibi_closed_form_rel_error",
            worst_closed,
            0.0,
            fp_tol(1e-12, f"a sum of ≤ {n} positive terms, each with relative rounding ≤ 4ε, "
                   f"against mpmath: ≤ {n}·4·2.2e-16 = {n * 4 * _EPS:.1e} ≤ 1e-12 relative"),
            label=f"max relative error of μ(i) vs the closed form, i ∈ {rows}, "
            f"{len(_PB9_CASES)} (m, c)",
        ),
        at_most(
            "alibi_limit_rel_error",
            worst_limit,
            0.0,
            fp_tol(1e-10, f"a sum of {n_far} positive terms with relative rounding ≤ 4ε: "
                   f"{n_far}·4·2.2e-16 = {n_far * 4 * _EPS:.1e} ≤ 1e-10 (the truncated tail "
                   f"i e^{{−m i}} at i = {n_far - 1}, m ≥ 0.05 is below 1e-400)"),
            label=f"max relative error of μ({n_far - 1}) vs μ_∞(m, c)",
        ),
        at_most(
            "residual_factor_error",
            err_res,
            0.0,
            fp_tol(1e-11, f"two sums of ≤ {n} terms ≤ {n} with rounding ε each: "
                   f"2·{n}·{n}·2.2e-16 = {2 * n * n * _EPS:.1e} ≤ 1e-11"),
            label="max_i |μ_R(i) − λ μ_A(i)|, λ = 0.3, m = 0.4, c = 1",
        ),
    ]  # fmt: skip
    ms.append(info("mu_infinity_m0.1_c0", limits[(0.1, 0.0)], label="μ_∞(0.1, 0) = 1/(e^0.1 − 1)"))
    return Evidence(ms, figures=[_pb9_figure()], setup=(
        f"sympy on symbolic kernels (n = {ns} where finite); numeric drifts of dense kernels, n = "
        f"{n}, (m, c) ∈ {_PB9_CASES}; the limit from row {n_far - 1} of an n = {n_far} kernel."
    ))  # fmt: skip


def _pb9_figure() -> Figure:
    nf = 120
    i = np.arange(1, nf)
    K = uniform_kernel(nf).dense()
    series = [
        Series("causal mask: i/2", i, _numeric_drift(K)[1:], color="attention_only"),
        Series("+ residual λ = 0.3: 0.3·i/2", i, 0.3 * _numeric_drift(K)[1:], color="residual",
               style="--"),
    ]  # fmt: skip
    hl = []
    for c, style, col in ((0.0, "-", "exact"), (3.0, ":", "residual_content"),
                          (-3.0, "-.", "residual_content")):  # fmt: skip
        mu = _numeric_drift(alibi_kernel(nf, 0.1, c).dense())[1:]
        series.append(Series(f"ALiBi m = 0.1, c = {c:+g}", i, mu, color=col, style=style))
        hl.append((float(th.alibi_drift_limit(0.1, c)), f"μ_∞(0.1, {c:+g})"))
    return Figure(
        "PB9_drift",
        "the four forces as drift terms (n = 120)",
        [Panel("drift toward token 0", "token position i", "μ(i)", series, logy=True, hlines=hl)],
        caption="ALiBi drifts saturate at their limits μ_∞(m, c) (horizontal lines); c > 0 "
        "lowers the limit, c < 0 raises it; the causal mask alone grows like i/2.",
    )


# ------------------------------------------------------------------------------------------
# PB10: edge masses


def _dense_last_row(ks, lam):
    """e_{n−1}ᵀ R_{T−1} ⋯ R_0 by dense NumPy matrix products (``ks[0]`` the input layer)."""
    n = ks[0].n
    P = np.eye(n)
    for K, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * np.asarray(K.dense())) @ P
    return P[-1]


@register(
    "PB10",
    "[D]",
    "edge masses: p(n−1) = ∏(1 − λ_t(1 − A_t[n−1,n−1])); p(0) nondecreasing "
    "in depth for stationary kernels (and for any kernels when layers are added at the input "
    "side)",
    assumptions=("causal kernels",),
)
def pb10(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 10)
    cases = 60 if ctx.full else 25
    worst_last = 0.0
    for _ in range(cases):
        n, T = int(rng.integers(2, 64)), int(rng.integers(1, 40))
        ks = [
            random_alibi(rng, n) if rng.random() < 0.5 else dense_kernel(random_causal(rng, n))
            for _ in range(T)
        ]
        lam = rng.uniform(0, 1, T)
        p = influence(ks, lam)
        prod = np.prod([1 - lt * (1 - k.diagonal()[-1]) for k, lt in zip(ks, lam, strict=True)])
        worst_last = max(worst_last, abs(p[-1] - prod) / max(prod, 1e-300))
    stationary = 20 if ctx.full else 8
    worst_drop = 0.0
    for _ in range(stationary):
        n = int(rng.integers(2, 128))
        K = random_alibi(rng, n) if rng.random() < 0.5 else dense_kernel(random_causal(rng, n))
        lam = float(rng.uniform(0.01, 1))
        row = np.zeros((1, n))
        row[0, -1] = 1.0
        p0 = []
        for _T in range(200):  # p^{(T)}(0) for T = 1..200 (a stationary kernel)
            row = K._residual_step(row, lam)
            p0.append(row[0, 0])
        worst_drop = max(worst_drop, float(-np.diff(p0).min(initial=0.0)))
    # non-stationary layers added at the input side: depth T uses layers L_T (input), …, L_1
    # (output); p^{(T+1)}(0) = Σ_j p^{(T)}(j) R_{T+1}[j, 0] ≥ p^{(T)}(0) since R[0, 0] = 1
    stacks = 10 if ctx.full else 5
    worst_input_drop = worst_dense = 0.0
    for _ in range(stacks):
        n, depth = int(rng.integers(4, 40)), 30
        layers = [dense_kernel(random_causal(rng, n)) for _ in range(depth)]
        lam = rng.uniform(0.05, 1, depth)
        p0 = [influence(layers[:T][::-1], lam[:T][::-1])[0] for T in range(1, depth + 1)]
        worst_input_drop = max(worst_input_drop, float(-np.diff(p0).min(initial=0.0)))
        ref = _dense_last_row(layers[::-1], lam[::-1])  # R_{T−1} ⋯ R_0 by dense products
        worst_dense = max(worst_dense, abs(p0[-1] - ref[0]))
    return Evidence(
        [
            at_most(
                "max_rel_error_p_last",
                worst_last,
                0.0,
                fp_tol(1e-12, "T ≤ 39 factors, each with relative rounding ≤ 3ε, against a "
                       "chain of T convex steps (≤ 2ε relative each on the last entry): "
                       "39·5·2.2e-16 = 4.3e-14 ≤ 1e-12"),
                label="max |p(n−1)/∏(1 − λ_t(1 − A_t[n−1,n−1])) − 1|",
            ),
            at_most(
                "max_decrease_p0_stationary",
                worst_drop,
                0.0,
                fp_tol(1e-15, "p(0) ≤ 1 changes by a convex step with rounding ≤ 4ε·p(0) ≤ "
                       "8.9e-16 ≤ 1e-15"),
                label="max decrease of p^{(T)}(0) from T to T + 1, stationary kernels",
            ),
            at_most(
                "max_decrease_p0_input_side",
                worst_input_drop,
                0.0,
                fp_tol(1e-13, "two rollouts of ≤ 30 layers on n ≤ 39 tokens, each entry with "
                       "rounding ≤ 30·39·2.2e-16 = 2.6e-13 relative to p(0) ≤ 1; the "
                       "difference of two: 5e-13, rounded down since p(0) < 0.2 here"),
                label="max decrease of p^{(T)}(0) when a layer is added at the input side",
            ),
            at_most(
                "max_error_p0_vs_dense_product",
                worst_dense,
                0.0,
                fp_tol(1e-13, "30 layers on n ≤ 39 tokens, products of stochastic matrices: "
                       "each entry rounds by ≤ 30·39·2.2e-16 = 2.6e-13 of a row mass ≤ 1, "
                       "p(0) < 0.4 here, so ≤ 1e-13"),
                label="max |p^{(30)}(0) − (R_29⋯R_0)[n−1, 0]| (dense NumPy product)",
            ),
            info("random_rollouts", cases),
            info("stationary_kernels", stationary),
            info("input_side_stacks", stacks),
        ],
        setup=f"{cases} rollouts of random ALiBi+content or Dirichlet layers (n < 64, T < 40); "
        f"{stationary} stationary kernels over 200 layers; {stacks} stacks of 30 Dirichlet "
        "layers (n < 40) grown at the input side.",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------
# PB13: the W1 conventions of this code


@register(
    "PB13",
    "[convention]",
    "W1 conventions: W1(δ_0, q) = Σ_j j q(j); for p ⪯_st q, W1 = E_q − E_p; "
    "normalised W1 = W1/(n−1)",
    assumptions=("profiles on positions 0..n−1",),
)
def pb13(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 13)
    cases = 200 if ctx.full else 60
    e1 = e2 = e3 = e4 = 0.0
    in_range = ordered = True
    for _ in range(cases):
        n = int(rng.integers(2, 300))
        q = rng.exponential(size=n)
        q /= q.sum()
        delta0 = np.zeros(n)
        delta0[0] = 1.0
        ref_mean = float(np.arange(n) @ q)
        e1 = max(e1, abs(w1(delta0, q) - ref_mean))
        e4 = max(e4, abs(mean_position(q) - ref_mean))
        # stochastically ordered pair: two rows of a monotone rollout, i < i'
        P = rollout_matrix(
            random_alibi(rng, n, slope_max=2.0, content_abs=10.0),
            constant(float(rng.uniform(0.1, 1)), int(rng.integers(1, 8))),
        )
        i, k = sorted(rng.choice(n, 2, replace=False))
        Fi, Fk = np.cumsum(P[i]), np.cumsum(P[k])
        ordered &= bool((Fk <= Fi + 1e-12).all())
        e2 = max(e2, abs(w1(P[i], P[k]) - (mean_position(P[k]) - mean_position(P[i]))))
        wn = w1_normalised(q, delta0)
        in_range &= 0.0 <= wn <= 1.0
        e3 = max(e3, abs(wn * (n - 1) - ref_mean))
    fp = fp_tol(1e-10, "positions ≤ 300 times weights summing to 1, ≤ 300 terms each rounded: "
                "300·300·2.2e-16 = 2e-11 ≤ 1e-10")  # fmt: skip
    return Evidence(
        [
            at_most("max_err_W1_delta0", e1, 0.0, fp,
                    label="max |W1(δ_0, q) − Σ_j j q(j)| (sum computed here)"),
            at_most("max_err_mean_position", e4, 0.0, fp,
                    label="max |mean_position(q) − Σ_j j q(j)|"),
            holds("pairs_are_ordered", ordered, fp_tol(1e-12, "CDFs compared to 1e-12"),
                  label="premise: the rollout row pairs are stochastically ordered"),
            at_most("max_err_ordered_pairs", e2, 0.0, fp,
                    label="max |W1(p, q) − (E_q − E_p)| over ordered pairs"),
            at_most("max_err_normalisation", e3, 0.0, fp,
                    label="max |(n−1)·W1_normalised(q, δ_0) − Σ_j j q(j)|"),
            holds("normalised_in_unit_interval", in_range, label="W1_normalised ∈ [0, 1]"),
            info("cases", cases),
        ],
        setup=f"{cases} random profiles (Exp(1) weights, n < 300) and ordered pairs from rows "
        "i < i' of ALiBi+content rollouts (≤ 7 layers).",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks each claim above must catch


def _transposed_detector(original):
    @functools.wraps(original)
    def deficit(K):
        M = np.asarray(K.dense() if hasattr(K, "dense") else K, dtype=np.float64)
        return original(M.T)

    return deficit


def _drift_off_by_one(original):
    @functools.wraps(original)
    def drift(i, m, c=0.0):
        return original(i + 1, m, c)

    return drift


def _positions_from_one(original):
    @functools.wraps(original)
    def mean(p):
        return original(p) + 1.0

    return mean


def _normalised_by_n(original):
    @functools.wraps(original)
    def normalised(p, q):
        n = np.asarray(p).size
        return original(p, q) * (n - 1) / n

    return normalised


add_mutant(
    "PB8",
    "deficit-detector-returns-0",
    "posflow.simulate._monotone:monotonicity_deficit",
    constant_result(0.0),
    "the monotonicity detector returns 0 whatever the kernel",
)
add_mutant(
    "PB8",
    "slope-sign-flipped",
    "posflow.simulate.kernels:alibi_kernel",
    scaled_argument(1, -1.0, "slopes"),
    "ALiBi bias +m(i−j) instead of −m(i−j)",
)
add_mutant(
    "PB8",
    "transposed-kernel",
    "posflow.simulate._monotone:monotonicity_deficit",
    _transposed_detector,
    "the detector reads the kernel transposed (columns as rows)",
)
add_mutant(
    "PB9",
    "content-sign-in-limit",
    "posflow.theory._drift:alibi_drift_limit",
    scaled_argument(1, -1.0, "c"),
    "μ_∞(m, c) evaluated at −c",
)
add_mutant(
    "PB9",
    "closed-form-off-by-one",
    "posflow.theory._drift:alibi_drift",
    _drift_off_by_one,
    "the closed-form drift μ(i) evaluated at row i + 1",
)
add_mutant(
    "PB9",
    "kernel-content-sign",
    "posflow.simulate.kernels:alibi_kernel",
    scaled_argument(2, -1.0, "content"),
    "the kernel applies diagonal content −c",
)
add_mutant(
    "PB10",
    "leaky-attention-branch",
    RESIDUAL_STEP,
    leaky_residual_step(1e-6),
    "the attention branch of each step loses 1e-6 of its mass",
)
add_mutant(
    "PB10",
    "reversed-layer-order",
    CHAIN,
    reversed_layer_order(),
    "the layer product taken as R_0 ⋯ R_{T−1} instead of R_{T−1} ⋯ R_0",
)
add_mutant(
    "PB13",
    "normalised-by-n",
    "posflow.simulate.compare:w1_normalised",
    _normalised_by_n,
    "normalised W1 divides by n instead of n − 1",
)
add_mutant(
    "PB13",
    "positions-from-1",
    "posflow.simulate.compare:mean_position",
    _positions_from_one,
    "mean position counts tokens from 1 instead of 0",
)
