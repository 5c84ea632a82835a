"""Claims PB1–PB2 of [A]: closure of the rollout and the diagonal identity (the diagonal bound
PB3 is in :mod:`posflow.proofs_checks.claims.pb03_diagonal_bound`).

Each check pairs an exact statement from :mod:`posflow.theory.rollout` with a numeric experiment
from :mod:`simulate` and returns the measured evidence; the verdict comes from the comparison.
PB2's relaxation ``causal`` drops causality: a Hypothesis search space of non-causal kernels and
the error of the product formula on them.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from posflow.proofs_checks.claims import pb01_02_diagonal_identity_refs as refs
from posflow.proofs_checks.kit import (
    CHAIN,
    RESIDUAL_STEP,
    Context,
    Evidence,
    Relaxation,
    add_mutant,
    add_relaxation,
    at_most,
    cite,
    exact_tol,
    fp_tol,
    info,
    leaky_residual_step,
    random_layers,
    register,
    rejects,
    reversed_layer_order,
    scaled_argument,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.kernels import dense_kernel
from posflow.simulate.rollout import diagonal, rollout_matrix
from posflow.theory import rollout as th

__all__ = ["DIAG_TOL", "causal_violation", "noncausal_examples", "pb1", "pb2"]

DIAG_TOL = 1e-9  # PB2: |P_ii - product formula| up to this is rounding


def _closure_pairs(rng, cases):
    """(got, reference) pairs over ``cases`` random rollouts: P against the dense product, the
    row sums against 1, the entries above the diagonal against 0 and P[0,0] against 1."""
    dense, rows, upper, p00 = [], [], [], []
    for _ in range(cases):
        n, T = int(rng.integers(1, 33)), int(rng.integers(1, 101))
        ks, lam = random_layers(rng, n, T)  # non-commuting layers: the order matters
        P = rollout_matrix(ks, lam)
        dense.append((P, refs.dense_reference(ks, lam)))
        rows.append((P.sum(axis=1), np.ones(n)))
        upper.append((np.triu(P, 1), np.zeros((n, n))))
        p00.append((P[:1, :1], np.ones((1, 1))))
    return dense, rows, upper, p00


def _pb1_controls(dense, sym_rev, sym_ref, fp):
    """Negative controls of PB1's judges: one wrong row (the worst must be seen), the symbolic P
    against the reversed layer order, residuals of a non-stochastic rollout."""
    P, ref = max(dense, key=lambda pr: pr[0].shape[0])  # the largest rollout
    nonstoch = th.symbolic_rollout(2, 1)
    return [
        rejects("worst_judge_control_one_row_wrong",
                refs.worst_judge("c", [(refs.one_row_wrong(P, 1e-9), ref)], fp, "c"),
                "the last row of P moved by 1e-9 (row sums kept): only the worst row shows it"),
        rejects("entries_judge_control_reversed_order",
                refs.entries_judge("c", sym_ref, sym_rev, "c"),
                "R_0⋯R_{T−1} against R_{T−1}⋯R_0: same diagonal and row sums, other entries"),
        rejects("zero_judge_control_non_stochastic",
                refs.zero_judge("c", [sum(nonstoch.P.row(i)) - 1 for i in range(2)], "c"),
                "row sums − 1 of a rollout whose kernels are not row-stochastic"),
    ]  # fmt: skip


_CITES_PB1 = (
    cite("posflow.simulate.rollout:rollout_matrix",
         "a dense NumPy product R_{T−1}⋯R_0 of the kernels' dense matrices (all entries), "
         "row sums against 1, zeros above the diagonal", "max_error_vs_dense_product",
         "max_row_sum_error", "max_upper_entry", "max_P00_error"),
    cite("posflow.theory.rollout:symbolic_rollout",
         "all n² entries of P at a random rational point against a Fraction product "
         "R_{T−1}⋯R_0 by plain loops (non-commuting layers)", "symbolic_P_entries_mismatched"),
    cite("posflow.theory.rollout:row_sum_residual",
         "0, and the row sums of the Fraction product (exactly 1)", "symbolic_row_sums_zero",
         "fraction_row_sums_mismatched"),
)  # fmt: skip


@register(
    "PB1",
    "[D]",
    "R and P stay lower-triangular and row-stochastic; P[0,0] = 1",
    assumptions=("causal row-stochastic kernels", "λ_t ∈ [0, 1]"),
    compares=_CITES_PB1,
)
def pb1(ctx: Context) -> Evidence:
    """Claim PB1: ``rollout_matrix`` against a dense NumPy product (every entry, the worst row),
    its row sums, upper triangle and P[0,0]; ``th.symbolic_rollout``'s P (n = 3, T = 3,
    stochastic kernels) at a rational point against a Fraction product, entry by entry;
    ``th.row_sum_residual`` identically 0. Negative controls: one wrong row, the reversed layer
    order, a non-stochastic rollout."""
    rng = np.random.default_rng(ctx.seed)
    sym = th.row_sum_residual(3, 2)
    got, ref, rev, _, _ = refs.symbolic_entries(rng, 3, 3, stochastic=True)
    cases = 200 if ctx.full else 60
    dense, rows, upper, p00 = _closure_pairs(rng, cases)
    fp = fp_tol(1e-12, _FP_REASON)
    ms = [
        refs.zero_judge("symbolic_row_sums_zero", [*sum(sym.R, ()), *sym.P],
                    "sympy: R and P row sums − 1 = 0 (n = 3, T = 2)"),
        refs.entries_judge("symbolic_P_entries_mismatched", got, ref,
                       "entries of symbolic P (n = 3, T = 3) ≠ Fraction R_2 R_1 R_0"),
        at_most("fraction_row_sums_mismatched", sum(sum(r) != 1 for r in got), 0,
                exact_tol("exact rationals"), label="rows of symbolic P at the point with sum ≠ 1"),
        refs.worst_judge("max_row_sum_error", rows, fp, "max |row sum of P − 1|"),
        refs.worst_judge("max_upper_entry", upper,
                     exact_tol("causal kernels have exact zeros above the diagonal"),
                     "max |P[i,j]|, j > i"),
        refs.worst_judge("max_P00_error", p00, fp, "max |P[0,0] − 1|"),
        refs.worst_judge("max_error_vs_dense_product", dense, fp,
                     "max |P − R_{T−1}⋯R_0 (dense NumPy product)|, worst row"),
        info("reversed_order_entries_differing",
             sum(g != r for gr, rr in zip(ref, rev, strict=True)
                 for g, r in zip(gr, rr, strict=True)),
             label="entries of R_0R_1R_2 ≠ R_2R_1R_0 (their diagonals and row sums agree)"),
        info("random_rollouts", cases),
    ]  # fmt: skip
    return Evidence(
        ms + _pb1_controls(dense, rev, ref, fp),
        setup=f"{cases} seeded random rollouts, n ≤ 32, T ≤ 100, each layer an ALiBi+content "
        "or a Dirichlet kernel (non-commuting), λ_t ~ U[0, 1]; sympy on n = 3, T = 2 (row sums) "
        "and n = 3, T = 3 at a random rational point (all entries).",
    )


# rounding bound of the random-rollout comparisons (n ≤ 32, T ≤ 100, entries in [0, 1])
_FP_REASON = (
    "T ≤ 100 convex steps of n ≤ 32 terms each add ≤ n·ε per entry: 100·32·2.2e-16 = 7e-13 ≤ 1e-12"
)
_FP_DIAG = fp_tol(
    1e-12,
    "T ≤ 20 factors, each with relative rounding ≤ 2ε, against a dense "
    "product of T n×n matrices (n ≤ 24): ≤ 20·(2 + 24)·2.2e-16 = 1.1e-13",
)


def _pb2_symbolic(rng):
    """symbolic_rollout (general causal kernels, n = 3, T = 3) at a rational point: its entries
    against the Fraction product, and its diagonal against ∏(1 − λ_t(1 − A_t[i,i]))."""
    got, ref, rev, As, lams = refs.symbolic_entries(rng, 3, 3, stochastic=False)
    formula = [math.prod((1 - lt * (1 - A[i][i]) for A, lt in zip(As, lams, strict=True)),
                         start=Fraction(1)) for i in range(3)]  # fmt: skip
    return got, ref, rev, formula


_CITES_PB2 = (
    cite("posflow.simulate.rollout:diagonal",
         "the diagonal of a dense NumPy product R_{T−1}⋯R_0 (relative, every entry)",
         "max_relative_error_vs_dense_product"),
    cite("posflow.theory.rollout:diagonal_identity_residual",
         "0, and the Fraction product formula against the Fraction rollout's diagonal",
         "symbolic_identity_3x3_T3", "symbolic_identity_4x4_T2", "fraction_diagonal_mismatched"),
    cite("posflow.theory.rollout:symbolic_rollout",
         "all entries at a rational point against a Fraction product R_2 R_1 R_0",
         "symbolic_P_entries_mismatched"),
)  # fmt: skip


@register(
    "PB2",
    "[D]",
    "P_ii = ∏_t (1 − λ_t (1 − A_t[i,i]))",
    assumptions=("causal (lower-triangular) kernels",),
    compares=_CITES_PB2,
)
def pb2(ctx: Context) -> Evidence:
    """Claim PB2: ``th.diagonal_identity_residual`` identically 0; ``th.symbolic_rollout`` at a
    rational point against a Fraction product (all entries) whose diagonal is the product
    formula; ``diagonal`` against the diagonal of a dense product, relative, on random
    rollouts. Negative controls: the wrong formula ∏(1 − λ_t A_t[i,i]), one wrong entry, a
    tiny entry off by a factor 2 (relative, not absolute, error)."""
    rng = np.random.default_rng(ctx.seed + 2)
    sizes = ((3, 3), (4, 2))
    got_sym, ref_sym, rev_sym, formula = _pb2_symbolic(rng)
    cases = 200 if ctx.full else 60
    pairs = []
    for _ in range(cases):
        n, T = int(rng.integers(1, 25)), int(rng.integers(1, 21))
        ks, lam = random_layers(rng, n, T)
        pairs.append((diagonal(ks, lam), np.diag(refs.dense_reference(ks, lam))))
    ms = [
        refs.zero_judge(f"symbolic_identity_{n}x{n}_T{T}", th.diagonal_identity_residual(n, T),
                    f"sympy: identity residual = 0 (n = {n}, T = {T})")
        for n, T in sizes
    ]  # fmt: skip
    ms += [
        refs.entries_judge("symbolic_P_entries_mismatched", got_sym, ref_sym,
                       "entries of symbolic P (n = 3, T = 3) ≠ Fraction R_2 R_1 R_0"),
        at_most("fraction_diagonal_mismatched",
                sum(ref_sym[i][i] != formula[i] for i in range(3)), 0,
                exact_tol("exact rationals"),
                label="i with Fraction P_ii ≠ ∏(1 − λ_t(1 − A_t[i,i]))"),
        refs.rel_judge("max_relative_error_vs_dense_product", pairs, _FP_DIAG,
                   "max |diagonal(ks, λ)/diag(dense product) − 1|"),
        info("random_rollouts", cases),
    ]  # fmt: skip
    return Evidence(
        ms + _pb2_controls(pairs, ref_sym, rev_sym),
        setup=f"sympy on n×n, T = {sizes}; n = 3, T = 3 at a random rational point; {cases} "
        "seeded random rollouts, n ≤ 24, T ≤ 20, against the diagonal of a dense NumPy product "
        "(entries below 1e-280 skipped).",
    )


def _pb2_controls(pairs, ref_sym, rev_sym):
    ro = th.symbolic_rollout(2, 2)
    wrong = [ro.P[i, i] - sp.Mul(*[1 - lam * A[i, i] for A, lam in
                                   zip(ro.kernels, ro.lambdas, strict=True)])
             for i in range(2)]  # fmt: skip
    g, r = max(pairs, key=lambda pr: pr[1].size)
    g1 = np.array(g, copy=True)
    g1[-1] *= 1 + 1e-9
    tiny = np.array([1e-200, 0.5])
    moved = [list(row) for row in ref_sym]
    moved[2][0] += Fraction(1, 7)
    moved[2][1] -= Fraction(1, 7)
    return [
        rejects("zero_judge_control_wrong_formula", refs.zero_judge("c", wrong, "c"),
                "residuals of P_ii − ∏(1 − λ_t A_t[i,i]) (1 − A dropped to A)"),
        rejects("entries_judge_control_reversed_order",
                refs.entries_judge("c", ref_sym, rev_sym, "c"),
                "R_0R_1R_2 against R_2R_1R_0: same diagonal, other entries"),
        rejects("entries_judge_control_entry_moved_in_row",
                refs.entries_judge("c", ref_sym, moved, "c"),
                "1/7 moved from P[2,1] to P[2,0]: same diagonal and row sums"),
        rejects("rel_judge_control_one_entry_wrong", refs.rel_judge("c", [(g1, r)], _FP_DIAG, "c"),
                "the last diagonal entry off by a relative 1e-9"),
        rejects("rel_judge_control_tiny_entry_doubled",
                refs.rel_judge("c", [(tiny * [2, 1], tiny)], _FP_DIAG, "c"),
                "an entry 1e-200 doubled: absolute error 1e-200, relative error 1"),
    ]  # fmt: skip


# -- mutants: small realistic breaks each claim above must catch ----------------------------------
add_mutant(("PB1",), "reversed-layer-order", CHAIN, reversed_layer_order(),
           "the layer product taken as R_0 ⋯ R_{T−1} instead of R_{T−1} ⋯ R_0")  # fmt: skip
add_mutant(("PB1",), "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
add_mutant("PB2", "lambda-off-by-0.1%", "posflow.simulate.rollout:diagonal",
           scaled_argument(1, 0.999, "lambdas"),
           "the product formula uses 0.999·λ_t")  # fmt: skip


def _drop_last_layer(original):
    def diagonal_without_last_layer(kernels, lambdas, log=False):
        if isinstance(kernels, list | tuple) and len(kernels) > 1:
            return original(kernels[:-1], lambdas[:-1], log=log)
        return original(kernels, lambdas, log=log)

    return diagonal_without_last_layer


add_mutant("PB2", "last-layer-dropped", "posflow.simulate.rollout:diagonal", _drop_last_layer,
           "an off-by-one: the product formula stops before the last layer")  # fmt: skip


_ME = "posflow.proofs_checks.claims.pb01_02_diagonal_identity_refs"
# fmt: off
add_mutant(("PB1", "PB2"), "symbolic-P-reversed", "posflow.theory.rollout:symbolic_rollout",
           refs.symbolic_reversed,
           "theory.symbolic_rollout multiplies R_0 ⋯ R_{T−1} (diagonals and row sums unchanged)")
add_mutant("PB1", "judge-best-row", f"{_ME}:worst_judge", refs.best_row_judge,
           "the worst-row judge takes the best row of each rollout")
add_mutant("PB1", "judge-self-comparison", f"{_ME}:worst_judge", refs.self_judge,
           "the worst-row judge compares each value with itself")
add_mutant(("PB1", "PB2"), "entries-judge-diagonal-only", f"{_ME}:entries_judge",
           refs.diag_entries_only,
           "the symbolic judge compares only the diagonal and the row sums of P")
add_mutant("PB2", "judge-absolute-error", f"{_ME}:rel_judge", refs.absolute_judge,
           "the diagonal judge uses the absolute error instead of the relative one")
# fmt: on


# -- relaxation: P_ii = prod_t (1 - λ_t (1 - A[i,i])) — drop causality ----------------------------


def noncausal_examples():
    """Examples for PB2 without causality: ``{"n", "A", "lambdas"}`` (claim PB2).

    ``n`` in [2, 5]; ``A`` a nonnegative row-stochastic ``n x n`` matrix (any entries above the
    diagonal; a row of zero weights becomes ``e_i``); 1–4 values ``λ_t`` in [0, 1].
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(2, 5))
        row = st.lists(ex.floats(0.0, 1.0), min_size=n, max_size=n)
        raw = draw(st.lists(row, min_size=n, max_size=n))
        A = []
        for i, r in enumerate(raw):
            s = math.fsum(r)
            A.append([x / s for x in r] if s > 0 else [float(j == i) for j in range(n)])
        lambdas = draw(st.lists(ex.floats(0.0, 1.0), min_size=1, max_size=4))
        return {"n": n, "A": A, "lambdas": lambdas}

    return draw()


def causal_violation(example) -> float:
    """Largest error of the diagonal product formula for one shared kernel (claim PB2).

    .. math::
        v = \\max_i \\Big| P_{ii} - \\prod_t \\big(1 - \\lambda_t (1 - A_{ii})\\big) \\Big|
            - 10^{-9},\\qquad P = R_{T-1} \\cdots R_0,\\ R_t = (1-\\lambda_t) I + \\lambda_t A

    ``P`` is the dense rollout (one vector chain per row), the product is
    :func:`posflow.simulate.rollout.diagonal`. ``A`` must be nonnegative and row-stochastic, shape
    (n, n); it need not be causal. Cost O(T·n³).
    """
    n = ex.integer(example, "n", 1)
    K = dense_kernel(ex.get(example, "A"), causal=False)
    if K.n != n:
        raise ValueError(f"example['A'] must be {n} x {n} (n = {n}); got {K.n} x {K.n}")
    lam = ex.get(example, "lambdas")
    P = rollout_matrix(K, lam)
    return float(np.max(np.abs(np.diag(P) - diagonal(K, lam)))) - DIAG_TOL


def _describe_causal(example) -> str:
    K = dense_kernel(example["A"], causal=False)
    P = rollout_matrix(K, example["lambdas"])
    formula = diagonal(K, example["lambdas"])
    i = int(np.argmax(np.abs(np.diag(P) - formula)))
    if abs(P[i, i] - formula[i]) <= DIAG_TOL:
        return f"the product formula matches the rollout diagonal (row {i} worst)"
    return (
        f"row {i}: the rollout gives P_ii = {P[i, i]:.6g} but the product formula gives "
        f"{formula[i]:.6g}; mass leaves token {i} and comes back through later tokens"
    )


add_relaxation(
    "PB2",
    Relaxation(
        "causal",
        "causality: every A_t lower-triangular",
        noncausal_examples,
        causal_violation,
        _describe_causal,
    ),
)
