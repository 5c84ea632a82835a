"""Claims PB1–PB3 of [A]: closure, the diagonal identity and the diagonal bound (PB4–PB7 in
:mod:`posflow.proofs_checks.claims.pb04_07_depth`).

Each check pairs an exact statement from :mod:`posflow.theory.rollout` with a numeric experiment
from :mod:`simulate` and returns the measured evidence; the verdict comes from the comparison. The
profile claims PB8–PB14 live in :mod:`posflow.proofs_checks.claims.pb08_10_13_shape`.
"""

from __future__ import annotations

import functools
import types

import numpy as np

from posflow.proofs_checks.kit import (
    CHAIN,
    RESIDUAL_STEP,
    Context,
    Evidence,
    add_mutant,
    at_least,
    at_most,
    close,
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
from posflow.simulate.kernels import alibi_kernel, uniform_kernel
from posflow.simulate.rollout import diagonal, power_decay, rollout_matrix
from posflow.theory import rollout as th


def _dense_reference(ks, lam):
    n = ks[0].n
    P = np.eye(n)
    for K, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * K.dense()) @ P
    return P


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
    worst_row = worst_upper = worst_p00 = worst_dense = 0.0
    for _ in range(cases):
        n, T = int(rng.integers(1, 33)), int(rng.integers(1, 101))
        ks, lam = random_layers(rng, n, T)  # non-commuting layers: the order matters
        P = rollout_matrix(ks, lam)
        worst_row = max(worst_row, float(np.abs(P.sum(axis=1) - 1).max()))
        worst_upper = max(worst_upper, float(np.abs(np.triu(P, 1)).max(initial=0.0)))
        worst_p00 = max(worst_p00, abs(P[0, 0] - 1.0))
        worst_dense = max(worst_dense, float(np.abs(P - _dense_reference(ks, lam)).max()))
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


@register(
    "PB3",
    "[D]",
    "min_i P_ii ≥ ∏(1 − λ_t δ_t) ≥ ∏(1 − λ_t), δ_t = max_i(1 − A_t[i,i]); "
    "equality at row n−1 for stationary ALiBi",
    assumptions=("causal kernels", "λ_t ∈ [0, 1]"),
)
def pb3(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 3)
    cert = th.diagonal_bound_certificate(4)
    # (a) the chain on random non-stationary rollouts, in log space: slack ≥ 0 means it holds
    cases = 120 if ctx.full else 16
    slack_mid = slack_low = np.inf
    for _ in range(cases):
        n, T = int(rng.integers(2, 41)), int(rng.integers(1, 101))
        ks, lam = random_layers(rng, n, T)
        logd = diagonal(ks, lam, log=True)
        log_mid, log_low = _log_middle_lower(ks, lam)
        scale = max(1.0, abs(log_mid), abs(log_low))
        slack_mid = min(slack_mid, (logd.min() - log_mid) / scale)
        slack_low = min(slack_low, (log_mid - log_low) / scale)
    # (b) theory.diagonal_bound (exact rationals from the float diagonals and λ) against the
    # numeric sides: min diag of the rollout matrix and of the product formula, and the two
    # float products computed here from the kernels' diagonals
    exact_cases = 24 if ctx.full else 8
    err = {"min": 0.0, "min_formula": 0.0, "middle": 0.0, "lower": 0.0}
    chain_exact = True
    for _ in range(exact_cases):
        n, T = int(rng.integers(2, 13)), int(rng.integers(1, 21))
        ks, lam = random_layers(rng, n, T)
        db = th.diagonal_bound([k.diagonal() for k in ks], lam, exact="rational")
        chain_exact &= bool(db.min_diagonal >= db.middle >= db.lower)
        delta = np.array([np.max(1 - k.diagonal()) for k in ks])
        numeric = {
            "min": float(np.diag(rollout_matrix(ks, lam)).min()),
            "min_formula": float(diagonal(ks, lam).min()),
            "middle": float(np.prod(1 - lam * delta)),
            "lower": float(np.prod(1 - lam)),
        }
        exact = {
            "min": db.min_diagonal,
            "min_formula": db.min_diagonal,
            "middle": db.middle,
            "lower": db.lower,
        }
        for k, v in numeric.items():
            err[k] = max(err[k], abs(v / float(exact[k]) - 1))
    # (c) equality for stationary ALiBi: the minimising row is n−1 and min P_ii = ∏(1 − λ δ)
    eq_err = last_gap = 0.0
    for _ in range(20):
        n, T, H = int(rng.integers(2, 300)), int(rng.integers(1, 200)), int(rng.integers(1, 9))
        K = alibi_kernel(n, rng.uniform(0, 3, H), rng.uniform(-20, 20, H))
        lam = rng.uniform(0, 1, T)
        logd = diagonal(K, lam, log=True)
        log_mid, _ = _log_middle_lower([K] * T, lam)
        scale = max(1.0, abs(log_mid))
        eq_err = max(eq_err, abs(logd.min() - log_mid) / scale)
        last_gap = max(last_gap, (logd[-1] - logd.min()) / scale)
    # (d) the digest's example: uniform kernel n = 64, λ_t = 0.5/(t+1)², T = 100
    U, lam_ex = uniform_kernel(64), power_decay(0.5, 2.0, 100)
    ex = th.diagonal_bound(U.diagonal().reshape(1, -1).repeat(100, 0), lam_ex, exact="rational")
    ex_num = float(np.exp(diagonal(U, lam_ex, log=True).min()))
    log_fp = fp_tol(
        1e-13,
        "relative: ≤ 100 log1p terms of one sign, each within 2ε, summed with ≤ 100 roundings: "
        "(2 + 100)·2.2e-16 = 2.3e-14 per side",
    )
    prod_fp = fp_tol(
        1e-12,
        "relative: T ≤ 20 factors, each rounded ≤ 4 times (1 − λ(1 − a), the chain's "
        "(1 − λ)p + λ pA on the diagonal): 4·20·2.2e-16 = 1.8e-14, the exact side rounded once",
    )
    labels = {
        "min": "max |min_i diag(rollout matrix) / exact min_i P_ii − 1|",
        "min_formula": "max |min_i diagonal(ks, λ) / exact min_i P_ii − 1|",
        "middle": "max |∏(1 − λ_t δ_t) (float) / diagonal_bound middle (exact) − 1|",
        "lower": "max |∏(1 − λ_t) (float) / diagonal_bound lower (exact) − 1|",
    }
    ms = [
        holds("symbolic_certificate_T4", cert.holds, label="sympy telescoping certificate, T = 4"),
        at_least("min_log_slack_middle", float(slack_mid), 0.0, log_fp,
                 label="min (log min_i P_ii − log ∏(1 − λδ)) / scale"),
        at_least("min_log_slack_lower", float(slack_low), 0.0, log_fp,
                 label="min (log ∏(1 − λδ) − log ∏(1 − λ)) / scale"),
        holds("exact_chain_ordered", chain_exact,
              label="diagonal_bound: min P_ii ≥ middle ≥ lower (exact)"),
    ]  # fmt: skip
    ms += [at_most(f"exact_vs_numeric_{k}", err[k], 0.0, prod_fp, label=labels[k]) for k in labels]
    ms += [
        at_most("alibi_equality_log_error", eq_err, 0.0, fp_tol(1e-13, _EQ_REASON),
                label="max |log min_i P_ii − log ∏(1 − λδ)| / scale, stationary ALiBi"),
        at_most("alibi_last_row_gap", last_gap, 0.0, fp_tol(1e-13, _EQ_REASON),
                label="max (log P_{n−1,n−1} − log min_i P_ii) / scale, stationary ALiBi"),
        close("uniform_n64_T100_exact_vs_numeric", ex_num, float(ex.min_diagonal),
              fp_tol(1e-13, "100 log1p terms within 2ε each, one exp: ≈ 103·2.2e-16 = 2.3e-14"),
              label="uniform n = 64, T = 100: min P_ii numeric vs exact"),
        close("uniform_n64_T100_min_Pii_exact", float(ex.min_diagonal), 0.3675,
              fp_tol(5e-5, "the digest prints 4 decimals (papers/A §6.3 item 3): ±5e-5"),
              label="uniform n = 64, T = 100: exact min P_ii vs the digest's 0.3675"),
        info("random_rollouts", cases),
        info("exact_rollouts", exact_cases),
    ]  # fmt: skip
    return Evidence(
        ms,
        setup=f"{cases} seeded random rollouts (n ≤ 40, T ≤ 100, ALiBi+content or Dirichlet "
        f"layers, λ ~ U[0, 1]); {exact_cases} of n ≤ 12, T ≤ 20 through theory.diagonal_bound in "
        "exact rationals; 20 stationary ALiBi rollouts (n < 300, T < 200, ≤ 8 heads); "
        "sympy certificate for T = 4.",
    )


def _log_middle_lower(ks, lam):
    """log ∏(1 − λ_t δ_t) and log ∏(1 − λ_t), δ_t = max_i (1 − A_t[i,i]) from the diagonals."""
    delta = np.array([np.max(1 - k.diagonal()) for k in ks])
    with np.errstate(divide="ignore"):
        return float(np.log1p(-lam * delta).sum()), float(np.log1p(-lam).sum())


_EQ_REASON = (
    "relative: both sides are sums of T < 200 log1p terms of one sign, each within 2ε: "
    "(2 + 200)·2.2e-16 = 4.5e-14"
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


def _delta_from_min(original):
    """theory.diagonal_bound with δ_t = min_i (1 − A_t[i,i]) instead of max: the routine's own
    code, run with the builtin ``max`` (used only for δ_t) bound to ``min``."""
    glb = dict(original.__globals__, max=min)
    fn = types.FunctionType(original.__code__, glb, original.__name__, original.__defaults__)
    fn.__kwdefaults__ = original.__kwdefaults__
    return functools.wraps(original)(fn)


def _complement_of_diagonals(original):
    @functools.wraps(original)
    def diagonal_bound_of_off_diagonal_mass(diagonals, lambdas, *, exact=None):
        return original(1.0 - np.asarray(diagonals, dtype=float), lambdas, exact=exact)

    return diagonal_bound_of_off_diagonal_mass


def _first_layer_for_all(original):
    @functools.wraps(original)
    def diagonal_of_first_layer(kernels, lambdas, log=False):
        if isinstance(kernels, list | tuple) and kernels:
            return original(kernels[0], lambdas, log=log)
        return original(kernels, lambdas, log=log)

    return diagonal_of_first_layer


add_mutant("PB3", "delta-from-min", "posflow.theory.rollout:diagonal_bound", _delta_from_min,
           "theory.diagonal_bound takes δ_t = min_i (1 − A_t[i,i]) instead of the max")  # fmt: skip
add_mutant("PB3", "off-diagonal-mass-as-diagonal", "posflow.theory.rollout:diagonal_bound",
           _complement_of_diagonals,
           "theory.diagonal_bound is fed 1 − A_t[i,i] where it expects A_t[i,i]")  # fmt: skip
add_mutant("PB3", "first-layer-for-every-layer", "posflow.simulate.rollout:diagonal",
           _first_layer_for_all,
           "the product formula treats a list of kernels as the first one repeated "
           "(a stationary shortcut)")  # fmt: skip
