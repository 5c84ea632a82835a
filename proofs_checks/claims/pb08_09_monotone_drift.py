"""Claims PB8 and PB9 of [A]: stochastic monotonicity of ALiBi+content kernels (with the
relaxation that drops ``m ≥ 0``), and the four forces as drift terms.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from posflow.proofs_checks.claims import pb08_09_monotone_drift_refs as refs
from posflow.proofs_checks.kit import (
    CHAIN,
    Context,
    Evidence,
    Relaxation,
    add_mutant,
    add_relaxation,
    at_most,
    cite,
    close,
    constant_result,
    exact_tol,
    fp_tol,
    holds,
    info,
    random_alibi,
    register,
    reversed_layer_order,
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


_EXACT_GRID = [(Fraction(1), Fraction(1, 100)), (Fraction(1, 2), Fraction(1)),
               (Fraction(1, 10), Fraction(100)), (Fraction(9, 10), Fraction(1, 3))]  # fmt: skip


def _multi_head(rng, n):
    """Textbook-slope kernels, H ∈ {1, 32, 64, 112}, c ~ U[−20, 20]."""
    return [alibi_kernel(n, alibi_slopes(H), rng.uniform(-20, 20, H)) for H in (1, 32, 64, 112)]


def _products(rng, products):
    """Rollouts of 6 random ALiBi+content layers (n = 48)."""
    out = []
    for _ in range(products):
        ks = [random_alibi(rng, 48, slope_max=2.0, content_abs=20.0) for _ in range(6)]
        out.append(rollout_matrix(ks, rng.uniform(0, 1, 6)))
    return out


_PB8_CITES = (
    cite("posflow.simulate.kernels:monotonicity_deficit",
         "brute force over every row pair i < i' and every k", "max_deficit_error_vs_brute_force",
         "negative_slope_deficit"),
    cite("posflow.simulate.kernels:alibi_kernel", "kernels built entry by entry from softmax",
         "max_alibi_kernel_error_vs_softmax"),
    cite("posflow.simulate.kernels:alibi_slopes", "the direct formula 2^{−8(h+1)/H}",
         "max_alibi_slopes_error_vs_formula"),
    cite("posflow.simulate.rollout:rollout_matrix", "dense products R_{T−1} ⋯ R_0",
         "max_rollout_matrix_error_vs_dense"),
)  # fmt: skip


@register(
    "PB8",
    "[A]",
    "ALiBi+content kernels are stochastically monotone for all m ≥ 0, "
    "c ∈ ℝ; head averages, residual mixing and products preserve it",
    assumptions=("slopes m ≥ 0",),
    compares=_PB8_CITES,
    basis="[A]'s monotonicity of its kernels, reconstructed from its definitions ([D]): the "
    "lemma's text was not available",
)
def pb8(ctx: Context) -> Evidence:
    """Claim PB8: the CDF deficit of ALiBi+content kernels, head averages and rollouts is 0.

    ``monotonicity_deficit`` (against brute force over row pairs) of ``alibi_kernel`` with
    ``alibi_slopes`` (against entry-by-entry softmax and the slope formula) and of
    ``rollout_matrix`` (against dense products); exact rationals on n = 7. Negative controls:
    the deficit judge on kernels of which only the last is not monotone, the exact judge with a
    negative slope, and m = −1, c = 5 detected at its brute-force value.
    """
    rng = np.random.default_rng(ctx.seed + 8)
    n = 256 if ctx.full else 96
    ms = np.linspace(0, 2, 41 if ctx.full else 11)
    cs = np.linspace(-20, 20, 21 if ctx.full else 9)
    products, exact_n = (10 if ctx.full else 4), 7
    # the control: a negative slope with large content breaks monotonicity; the detector must
    # see it, at the value a brute-force comparison of every row pair gives
    anti = monotonicity_deficit(alibi_kernel(8, -1.0, 5.0))
    anti_ref = refs.brute_deficit(refs.softmax_kernel(8, -1.0, 5.0))
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
    exact_tol_ = exact_tol("exact rational arithmetic (fractions), n = 7, e^{-m}, e^c rational")
    return Evidence(
        [
            refs.deficit_judge("max_deficit_single_head",
                               (alibi_kernel(n, m, c) for m in ms for c in cs), fp,
                               label="max CDF deficit, single head, m ∈ [0, 2], c ∈ [−20, 20]"),
            refs.deficit_judge("max_deficit_multi_head", _multi_head(rng, n), fp,
                               label="max CDF deficit, textbook slopes, H ∈ {1, 32, 64, 112}, "
                               "random c"),
            refs.deficit_judge("max_deficit_rollout_products", _products(rng, products), fp,
                               label="max CDF deficit of rollouts P = R_5⋯R_0 (per-layer random "
                               "kernels)"),
            refs.exact_judge("exact_single_head_deficit_zero", _EXACT_GRID, exact_n, exact_tol_,
                             label=f"exact (rational) CDF deficit of {len(_EXACT_GRID)} "
                             "single-head kernels is 0"),
            close("negative_slope_deficit", anti, anti_ref, fp_ctrl, role="control",
                  label="control: deficit of m = −1, c = 5 (n = 8) vs brute force over row pairs"),
            holds("negative_slope_breaks_monotonicity", anti > 1e-12,
                  fp_tol(1e-12, "the deficit must exceed the 1e-12 rounding floor above"),
                  role="control", label="control: m = −1, c = 5 is detected as not monotone"),
            *refs.pb8_comparisons(rng),
            *refs.pb8_controls(fp, _EXACT_GRID, exact_n),
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


_PB9_CITES = (
    cite("posflow.theory.rollout:alibi_drift",
         "the direct sum Σ k e^{−mk} / (e^c + Σ e^{−mk}), and the drift of dense kernels",
         "alibi_drift_rel_error_vs_direct_sum", "alibi_closed_form_rel_error"),
    cite("posflow.theory.rollout:alibi_drift_limit",
         "the stated formula q/((1 − q)(e^c(1 − q) + q)), and row n − 1 of a long kernel",
         "alibi_drift_limit_rel_error_vs_stated", "alibi_limit_rel_error"),
    cite("posflow.theory.rollout:alibi_drift_limit_expr",
         "sympy: the stated formula and 1/(e^m − 1) at c = 0",
         "content_limit_matches_statement", "alibi_limit_is_1/(e^m-1)"),
    cite("posflow.theory.rollout:alibi_drift_limit_dc",
         "sympy's d/dc of the stated formula at 3 points, and its sign",
         "d_mu_dc_rel_error_vs_sympy_diff", "d_mu_dc_negative"),
    cite("posflow.theory.rollout:uniform_drift", "sympy: i/2", "uniform_drift_is_i/2"),
    cite("posflow.theory.rollout:background_shift_residual",
         "sympy: every entry of kernel(b) − kernel(0) is 0", "background_shift_zero"),
    cite("posflow.theory.rollout:residual_drift_residual",
         "sympy: every entry of drift(R) − λ drift(A) is 0", "residual_scales_by_lambda"),
    cite("posflow.simulate.kernels:uniform_kernel", "the lower triangle 1/(i+1)",
         "uniform_kernel_error_vs_formula", "uniform_drift_error"),
    cite("posflow.simulate.kernels:alibi_kernel",
         "the closed-form drift of its rows (and PB8's entry-by-entry softmax)",
         "alibi_closed_form_rel_error"),
)  # fmt: skip


@register(
    "PB9",
    "[A]",
    "the four forces as drift terms: μ(i) = Σ_j A_ij (i−j); uniform i/2; "
    "residual scales by λ; ALiBi μ → 1/(e^m − 1); content μ_∞(m,c), c > 0 shrinks it; "
    "background b has no effect",
    assumptions=("causal kernels",),
    compares=_PB9_CITES,
    basis="[A]'s four forces (causal mask, residual, ALiBi, content), written as drift terms "
    "reconstructed from its definitions ([D])",
)
def pb9(ctx: Context) -> Evidence:
    """Claim PB9: the four forces as drift terms, symbolically and numerically.

    sympy: ``uniform_drift``, ``alibi_drift_limit_expr`` against the stated formula,
    ``alibi_drift_limit_dc`` negative, ``background_shift_residual`` and
    ``residual_drift_residual`` entrywise 0. Numerically: ``alibi_drift`` and
    ``alibi_drift_limit`` against direct sums and the stated formula, and against the drifts of
    ``alibi_kernel`` and ``uniform_kernel``. Negative control: the relative-error judge rejects
    one row off by one.
    """
    ns = 4 if ctx.full else 2  # symbolic kernel size (sympy: 0.4 s at n = 2, 2.4 s at n = 4)
    n, n_far, rows, lam = 400, 20_000, (1, 7, 50, 399), 0.3
    sym = _pb9_symbolic(ns)
    err_uniform = float(np.abs(_numeric_drift(uniform_kernel(n).dense()) - np.arange(n) / 2).max())
    worst_closed, worst_limit, limits = _pb9_alibi(n, rows, n_far)
    fp_rel = fp_tol(1e-13, "mpmath closed form vs a float loop of ≤ 399 positive terms with "
                    f"relative rounding ≤ 2ε each: 399·2·2.2e-16 = {399 * 2 * _EPS:.1e} ≤ 1e-13")
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
    ms += refs.pb9_comparisons(_PB9_CASES, rows, fp_rel)
    ms.append(info("mu_infinity_m0.1_c0", limits[(0.1, 0.0)], label="μ_∞(0.1, 0) = 1/(e^0.1 − 1)"))
    return Evidence(ms, figures=[refs.drift_figure()], setup=(
        f"sympy on symbolic kernels (n = {ns} where finite); numeric drifts of dense kernels, n = "
        f"{n}, (m, c) ∈ {_PB9_CASES}; the limit from row {n_far - 1} of an n = {n_far} kernel."
    ))  # fmt: skip


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks each claim above must catch


add_mutant("PB8", "deficit-detector-returns-0", "posflow.simulate._monotone:monotonicity_deficit",
           constant_result(0.0), "the monotonicity detector returns 0 whatever the kernel")
add_mutant("PB8", "slope-sign-flipped", "posflow.simulate.kernels:alibi_kernel",
           scaled_argument(1, -1.0, "slopes"), "ALiBi bias +m(i−j) instead of −m(i−j)")
add_mutant("PB8", "transposed-kernel", "posflow.simulate._monotone:monotonicity_deficit",
           refs.transposed_detector, "the detector reads the kernel transposed (columns as rows)")
add_mutant("PB8", "deficit-judge-first-kernel-only",
           "posflow.proofs_checks.claims.pb08_09_monotone_drift_refs:deficit_judge",
           refs.first_kernel_judge, "the deficit judge looks at the first kernel only")
add_mutant("PB8", "slopes-off-by-one", "posflow.simulate._alibi:alibi_slopes",
           refs.slopes_from_zero, "textbook slopes 2^{−8h/H} (h from 0) instead of 2^{−8(h+1)/H}")
add_mutant("PB8", "reversed-layer-order", CHAIN, reversed_layer_order(),
           "the layer product taken as R_0 ⋯ R_{T−1} instead of R_{T−1} ⋯ R_0")
add_mutant("PB9", "rel-judge-best-row",
           "posflow.proofs_checks.claims.pb08_09_monotone_drift_refs:rel_judge",
           refs.best_row_judge, "the drift judge takes the best row instead of the worst")
add_mutant("PB9", "content-sign-in-limit", "posflow.theory._drift:alibi_drift_limit",
           scaled_argument(1, -1.0, "c"), "μ_∞(m, c) evaluated at −c")
add_mutant("PB9", "closed-form-off-by-one", "posflow.theory._drift:alibi_drift",
           refs.drift_off_by_one, "the closed-form drift μ(i) evaluated at row i + 1")
add_mutant("PB9", "kernel-content-sign", "posflow.simulate.kernels:alibi_kernel",
           scaled_argument(2, -1.0, "content"), "the kernel applies diagonal content −c")
