"""Claims PB1–PB2 of [A]: closure of the rollout and the diagonal identity (the diagonal bound
PB3 is in :mod:`posflow.proofs_checks.claims.pb03_diagonal_bound`).

Each check pairs an exact statement from :mod:`posflow.theory.rollout` with a numeric experiment
from :mod:`simulate` and returns the measured evidence; the verdict comes from the comparison.
PB2's relaxation ``causal`` drops causality: a Hypothesis search space of non-causal kernels and
the error of the product formula on them.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from posflow.proofs_checks.kit import (
    CHAIN,
    RESIDUAL_STEP,
    Context,
    Evidence,
    Relaxation,
    add_mutant,
    add_relaxation,
    at_most,
    exact_tol,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    random_layers,
    register,
    reversed_layer_order,
    scaled_argument,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.kernels import dense_kernel
from posflow.simulate.rollout import diagonal, rollout_matrix
from posflow.theory import rollout as th

__all__ = ["DIAG_TOL", "causal_violation", "noncausal_examples", "pb1", "pb2"]

DIAG_TOL = 1e-9  # PB2: |P_ii - product formula| up to this is rounding


def _dense_reference(ks, lam):
    """R_{T−1} ⋯ R_0 as a dense NumPy product, R_t = (1 − λ_t) I + λ_t A_t, shape (n, n)."""
    n = ks[0].n
    P = np.eye(n)
    for K, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * K.dense()) @ P
    return P


def _closure_errors(rng, cases):
    """Worst |row sum − 1|, |P[i,j]| (j > i), |P[0,0] − 1| and |P − dense product| over
    ``cases`` random rollouts."""
    worst_row = worst_upper = worst_p00 = worst_dense = 0.0
    for _ in range(cases):
        n, T = int(rng.integers(1, 33)), int(rng.integers(1, 101))
        ks, lam = random_layers(rng, n, T)  # non-commuting layers: the order matters
        P = rollout_matrix(ks, lam)
        worst_row = max(worst_row, float(np.abs(P.sum(axis=1) - 1).max()))
        worst_upper = max(worst_upper, float(np.abs(np.triu(P, 1)).max(initial=0.0)))
        worst_p00 = max(worst_p00, abs(P[0, 0] - 1.0))
        worst_dense = max(worst_dense, float(np.abs(P - _dense_reference(ks, lam)).max()))
    return worst_row, worst_upper, worst_p00, worst_dense


@register(
    "PB1",
    "[D]",
    "R and P stay lower-triangular and row-stochastic; P[0,0] = 1",
    assumptions=("causal row-stochastic kernels", "λ_t ∈ [0, 1]"),
)
def pb1(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed)
    sym = th.row_sum_residual(3, 2)
    sym_zero = all(e == 0 for row in sym.R for e in row) and all(e == 0 for e in sym.P)
    cases = 200 if ctx.full else 60
    worst_row, worst_upper, worst_p00, worst_dense = _closure_errors(rng, cases)
    fp = fp_tol(1e-12, _FP_REASON)
    return Evidence(
        [
            holds("symbolic_row_sums_zero", sym_zero, label="sympy: R and P row sums − 1 = 0"),
            at_most("max_row_sum_error", worst_row, 0.0, fp, label="max |row sum of P − 1|"),
            at_most(
                "max_upper_entry",
                worst_upper,
                0.0,
                exact_tol("causal kernels have exact zeros above the diagonal"),
                label="max |P[i,j]|, j > i",
            ),
            at_most("max_P00_error", worst_p00, 0.0, fp, label="max |P[0,0] − 1|"),
            at_most(
                "max_error_vs_dense_product",
                worst_dense,
                0.0,
                fp,
                label="max |P − R_{T−1}⋯R_0 (dense NumPy product)|",
            ),
            info("random_rollouts", cases),
        ],
        setup=f"{cases} seeded random rollouts, n ≤ 32, T ≤ 100, each layer an ALiBi+content "
        "or a Dirichlet kernel (non-commuting), λ_t ~ U[0, 1]; sympy on n = 3, T = 2.",
    )


# rounding bound of the random-rollout comparisons (n ≤ 32, T ≤ 100, entries in [0, 1])
_FP_REASON = (
    "T ≤ 100 convex steps of n ≤ 32 terms each add ≤ n·ε per entry: 100·32·2.2e-16 = 7e-13 ≤ 1e-12"
)


@register(
    "PB2",
    "[D]",
    "P_ii = ∏_t (1 − λ_t (1 − A_t[i,i]))",
    assumptions=("causal (lower-triangular) kernels",),
)
def pb2(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 2)
    sizes = ((3, 3), (4, 2))
    sym = [all(r == 0 for r in th.diagonal_identity_residual(n, T)) for n, T in sizes]
    cases = 200 if ctx.full else 60
    worst = 0.0
    for _ in range(cases):
        n, T = int(rng.integers(1, 25)), int(rng.integers(1, 21))
        ks, lam = random_layers(rng, n, T)
        ref = np.diag(_dense_reference(ks, lam))
        got = diagonal(ks, lam)
        mask = ref > 1e-280
        worst = max(worst, float(np.max(np.abs(got[mask] / ref[mask] - 1), initial=0.0)))
    ms = [
        holds(f"symbolic_identity_{n}x{n}_T{T}", ok, label=f"sympy: identity residual = 0 "
              f"(n = {n}, T = {T})")
        for (n, T), ok in zip(sizes, sym, strict=True)
    ]  # fmt: skip
    ms += [
        at_most(
            "max_relative_error_vs_dense_product",
            worst,
            0.0,
            fp_tol(
                1e-12,
                "T ≤ 20 factors, each with relative rounding ≤ 2ε, against a dense "
                "product of T n×n matrices (n ≤ 24): ≤ 20·(2 + 24)·2.2e-16 = 1.1e-13",
            ),
            label="max |diagonal(ks, λ)/diag(dense product) − 1|",
        ),
        info("random_rollouts", cases),
    ]
    return Evidence(
        ms,
        setup=f"sympy on n×n, T = {sizes}; {cases} seeded random rollouts, n ≤ 24, T ≤ 20, "
        "against the diagonal of a dense NumPy product (entries below 1e-280 skipped).",
    )


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
