"""Claims PB8 and PB9 of [A]: stochastic monotonicity of ALiBi+content kernels (with the
relaxation that drops ``m ≥ 0``), and the four forces as drift terms.
"""

from __future__ import annotations

import functools
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Relaxation,
    Series,
    add_mutant,
    add_relaxation,
    at_most,
    close,
    constant_result,
    exact_tol,
    fp_tol,
    holds,
    info,
    random_alibi,
    register,
    scaled_argument,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.kernels import (
    alibi_kernel,
    alibi_slopes,
    monotonicity_deficit,
    uniform_kernel,
)
from posflow.simulate.rollout import rollout_matrix
from posflow.theory import rollout as th

__all__ = ["MONOTONE_TOL", "slope_examples", "slope_violation"]

_EPS = float(np.finfo(np.float64).eps)  # 2.2e-16
MONOTONE_TOL = 1e-12  # PB8: a CDF deficit up to this is rounding


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


def _worst_multi_head(rng, n):
    """The largest deficit of textbook-slope kernels, H ∈ {1, 32, 64, 112}, c ~ U[−20, 20]."""
    worst = 0.0
    for H in (1, 32, 64, 112):
        c = rng.uniform(-20, 20, H)
        worst = max(worst, monotonicity_deficit(alibi_kernel(n, alibi_slopes(H), c)))
    return worst


def _worst_products(rng, products):
    """The largest deficit of rollouts of 6 random ALiBi+content layers (n = 48)."""
    worst = 0.0
    for _ in range(products):
        ks = [random_alibi(rng, 48, slope_max=2.0, content_abs=20.0) for _ in range(6)]
        lam = rng.uniform(0, 1, 6)
        worst = max(worst, monotonicity_deficit(rollout_matrix(ks, lam)))
    return worst


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
    products, exact_n = (10 if ctx.full else 4), 7
    worst_single = max(monotonicity_deficit(alibi_kernel(n, m, c)) for m in ms for c in cs)
    worst_multi = _worst_multi_head(rng, n)
    worst_products = _worst_products(rng, products)
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
            at_most("max_deficit_single_head", worst_single, 0.0, fp,
                    label="max CDF deficit, single head, m ∈ [0, 2], c ∈ [−20, 20]"),
            at_most("max_deficit_multi_head", worst_multi, 0.0, fp,
                    label="max CDF deficit, textbook slopes, H ∈ {1, 32, 64, 112}, random c"),
            at_most("max_deficit_rollout_products", worst_products, 0.0, fp,
                    label="max CDF deficit of rollouts P = R_5⋯R_0 (per-layer random kernels)"),
            holds("exact_single_head_deficit_zero", exact_worst == 0,
                  exact_tol("exact rational arithmetic (fractions), n = 7, e^{-m}, e^c rational"),
                  label=f"exact (rational) CDF deficit of {len(_EXACT_GRID)} single-head kernels "
                  "is 0"),
            close("negative_slope_deficit", anti, anti_ref, fp_ctrl, role="control",
                  label="control: deficit of m = −1, c = 5 (n = 8) vs brute force over row pairs"),
            holds("negative_slope_breaks_monotonicity", anti > 1e-12,
                  fp_tol(1e-12, "the deficit must exceed the 1e-12 rounding floor above"),
                  role="control", label="control: m = −1, c = 5 is detected as not monotone"),
            info("grid", f"n = {n}, {ms.size} slopes × {cs.size} contents"),
            info("rollout_products", products),
        ],
        setup=f"single heads on n = {n} for m ∈ [0, 2] ({ms.size}), c ∈ [−20, 20] ({cs.size}); "
        "textbook slopes 2^{−8(h+1)/H} with c ~ U[−20, 20] per head; "
        f"{products} rollouts of 6 random ALiBi+content layers (n = 48, λ ~ U[0, 1]); exact "
        f"rationals on n = {exact_n}; the control m = −1, c = 5 on n = 8.",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------
# PB8 relaxed: ALiBi + content kernels are stochastically monotone for m >= 0 — drop m >= 0


def slope_examples():
    """Examples for PB8 without ``m ≥ 0``: ``{"n", "slopes", "content"}`` (claim PB8).

    ``n`` in [2, 8], 1–3 heads, slopes in [-3, 3] (either sign), content in [-20, 20].
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(2, 8))
        heads = draw(st.integers(1, 3))
        slopes = draw(st.lists(ex.floats(-3.0, 3.0), min_size=heads, max_size=heads))
        content = draw(st.lists(ex.floats(-20.0, 20.0), min_size=heads, max_size=heads))
        return {"n": n, "slopes": slopes, "content": content}

    return draw()


def slope_violation(example) -> float:
    """Amount by which an ALiBi + content kernel fails stochastic monotonicity (claim PB8).

    .. math::
        v = \\max_{i < i'} \\max_k \\big(F_{i'}(k) - F_i(k)\\big)_+ - 10^{-12},
        \\qquad F_i(k) = \\sum_{j \\le k} A_{ij}

    with ``A = alibi_kernel(n, slopes, content)`` (head average). ``v > 0`` exactly when the
    deficit exceeds rounding. Cost O(n²·H).
    """
    n = ex.integer(example, "n", 1)
    K = alibi_kernel(n, ex.get(example, "slopes"), ex.get(example, "content"))
    return monotonicity_deficit(K) - MONOTONE_TOL


def _describe_slope(example) -> str:
    A = alibi_kernel(example["n"], example["slopes"], example["content"]).dense()
    F = np.cumsum(A, axis=1)
    best = (0.0, 0, 0, 0)
    for i2 in range(1, F.shape[0]):
        for i in range(i2):
            k = int(np.argmax(F[i2] - F[i]))
            best = max(best, (float(F[i2, k] - F[i, k]), i, i2, k))
    d, i, i2, k = best
    if d <= MONOTONE_TOL:
        return f"every later row dominates every earlier one (largest CDF deficit {d:.3g})"
    return (
        f"row {i2} puts more mass on tokens <= {k} than row {i} does: "
        f"F_{i2}({k}) - F_{i}({k}) = {d:.6g} > 0, so the later row does not dominate"
    )


add_relaxation(
    "PB8",
    Relaxation(
        "nonnegative_slope", "ALiBi slopes m_h ≥ 0", slope_examples, slope_violation,
        _describe_slope,
    ),
)  # fmt: skip


# ------------------------------------------------------------------------------------------
# PB9: the four forces as drift terms


def _numeric_drift(A):
    i = np.arange(A.shape[0])
    return (A * (i[:, None] - i[None, :])).sum(axis=1)


_PB9_CASES = ((0.1, 0.0), (0.5, 2.0), (1.0, -3.0), (0.05, 5.0), (2.0, -20.0))


def _pb9_symbolic(ns):
    """The sympy identities of PB9: (key, label, holds) on symbolic kernels of size ``ns``."""
    i_ = sp.Symbol("i", positive=True)
    m_r, c_r = sp.Symbol("m", positive=True), sp.Symbol("c", real=True)
    stated = sp.exp(-m_r) / ((1 - sp.exp(-m_r)) * (sp.exp(c_r) * (1 - sp.exp(-m_r)) + sp.exp(-m_r)))
    derived = th.alibi_drift_limit_expr(m_r, c_r)
    return [
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


def _pb9_alibi(n, rows, n_far):
    """Worst relative errors of the ALiBi drift against the closed form (rows ``rows`` of an
    n-token kernel) and against the limit μ_∞ (row n_far − 1 of an n_far-token kernel, by one
    vector product, no n_far × n_far matrix), and the limits by (m, c)."""
    worst_closed, worst_limit, limits = 0.0, 0.0, {}
    e_last = np.zeros(n_far)
    e_last[-1] = 1.0
    for m, c in _PB9_CASES:
        mu = _numeric_drift(alibi_kernel(n, m, c).dense())
        closed = np.array([th.alibi_drift(i, m, c) for i in rows])
        worst_closed = max(worst_closed, float(np.max(np.abs(mu[list(rows)] / closed - 1))))
        row = alibi_kernel(n_far, m, c).apply_left(e_last)
        mu_far = float(row @ (n_far - 1 - np.arange(n_far)))
        limits[(m, c)] = float(th.alibi_drift_limit(m, c))
        worst_limit = max(worst_limit, abs(mu_far / limits[(m, c)] - 1))
    return worst_closed, worst_limit, limits


@register(
    "PB9",
    "[A, D]",
    "the four forces as drift terms: μ(i) = Σ_j A_ij (i−j); uniform i/2; "
    "residual scales by λ; ALiBi μ → 1/(e^m − 1); content μ_∞(m,c), c > 0 shrinks it; "
    "background b has no effect",
    assumptions=("causal kernels",),
)
def pb9(ctx: Context) -> Evidence:
    ns = 4 if ctx.full else 2  # symbolic kernel size (sympy: 0.4 s at n = 2, 2.4 s at n = 4)
    n, n_far, rows, lam = 400, 20_000, (1, 7, 50, 399), 0.3
    sym = _pb9_symbolic(ns)
    err_uniform = float(np.abs(_numeric_drift(uniform_kernel(n).dense()) - np.arange(n) / 2).max())
    worst_closed, worst_limit, limits = _pb9_alibi(n, rows, n_far)
    A = alibi_kernel(n, 0.4, 1.0).dense()
    R = (1 - lam) * np.eye(n) + lam * A
    err_res = float(np.abs(_numeric_drift(R) - lam * _numeric_drift(A)).max())
    ms = [holds(k, ok, label=lab) for k, lab, ok in sym]
    ms += [
        at_most("uniform_drift_error", err_uniform, 0.0,
                fp_tol(1e-10, f"μ(i) sums ≤ {n} terms (i−j)/(i+1) ≤ {n}, each rounded by ≤ ε: "
                       f"≤ {n}·{n}·2.2e-16 = {n * n * _EPS:.1e} ≤ 1e-10"),
                label=f"max_i |μ(i) − i/2|, uniform kernel (n = {n})"),
        at_most("alibi_closed_form_rel_error", worst_closed, 0.0,
                fp_tol(1e-12, f"a sum of ≤ {n} positive terms, each with relative rounding ≤ 4ε, "
                       f"against mpmath: ≤ {n}·4·2.2e-16 = {n * 4 * _EPS:.1e} ≤ 1e-12 relative"),
                label=f"max relative error of μ(i) vs the closed form, i ∈ {rows}, "
                f"{len(_PB9_CASES)} (m, c)"),
        at_most("alibi_limit_rel_error", worst_limit, 0.0,
                fp_tol(1e-10, f"a sum of {n_far} positive terms with relative rounding ≤ 4ε: "
                       f"{n_far}·4·2.2e-16 = {n_far * 4 * _EPS:.1e} ≤ 1e-10 (the truncated tail "
                       f"i e^{{−m i}} at i = {n_far - 1}, m ≥ 0.05 is below 1e-400)"),
                label=f"max relative error of μ({n_far - 1}) vs μ_∞(m, c)"),
        at_most("residual_factor_error", err_res, 0.0,
                fp_tol(1e-11, f"two sums of ≤ {n} terms ≤ {n} with rounding ε each: "
                       f"2·{n}·{n}·2.2e-16 = {2 * n * n * _EPS:.1e} ≤ 1e-11"),
                label="max_i |μ_R(i) − λ μ_A(i)|, λ = 0.3, m = 0.4, c = 1"),
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


add_mutant("PB8", "deficit-detector-returns-0", "posflow.simulate._monotone:monotonicity_deficit",
           constant_result(0.0), "the monotonicity detector returns 0 whatever the kernel")
add_mutant("PB8", "slope-sign-flipped", "posflow.simulate.kernels:alibi_kernel",
           scaled_argument(1, -1.0, "slopes"), "ALiBi bias +m(i−j) instead of −m(i−j)")
add_mutant("PB8", "transposed-kernel", "posflow.simulate._monotone:monotonicity_deficit",
           _transposed_detector, "the detector reads the kernel transposed (columns as rows)")
add_mutant("PB9", "content-sign-in-limit", "posflow.theory._drift:alibi_drift_limit",
           scaled_argument(1, -1.0, "c"), "μ_∞(m, c) evaluated at −c")
add_mutant("PB9", "closed-form-off-by-one", "posflow.theory._drift:alibi_drift",
           _drift_off_by_one, "the closed-form drift μ(i) evaluated at row i + 1")
add_mutant("PB9", "kernel-content-sign", "posflow.simulate.kernels:alibi_kernel",
           scaled_argument(2, -1.0, "content"), "the kernel applies diagonal content −c")
