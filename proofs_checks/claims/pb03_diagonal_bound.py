"""Claim PB3 of [A]: the diagonal bound min_i P_ii ≥ ∏(1 − λ_t δ_t) ≥ ∏(1 − λ_t), with equality
for stationary ALiBi (closure and the diagonal identity PB1–PB2 are in
:mod:`posflow.proofs_checks.claims.pb01_02_diagonal_identity`).

The chain is checked four ways: in log space on random non-stationary rollouts, against
:func:`posflow.theory.rollout.diagonal_bound` in exact rationals, at its equality case
(stationary ALiBi, row n−1) and on the digest's worked example.
"""

from __future__ import annotations

import functools
import types

import numpy as np

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    add_mutant,
    at_least,
    at_most,
    close,
    fp_tol,
    holds,
    info,
    random_layers,
    register,
)
from posflow.simulate.kernels import alibi_kernel, uniform_kernel
from posflow.simulate.rollout import diagonal, power_decay, rollout_matrix
from posflow.theory import rollout as th

_EQ_REASON = (
    "relative: both sides are sums of T < 200 log1p terms of one sign, each within 2ε: "
    "(2 + 200)·2.2e-16 = 4.5e-14"
)
_LOG_FP = fp_tol(
    1e-13,
    "relative: ≤ 100 log1p terms of one sign, each within 2ε, summed with ≤ 100 roundings: "
    "(2 + 100)·2.2e-16 = 2.3e-14 per side",
)
_PROD_FP = fp_tol(
    1e-12,
    "relative: T ≤ 20 factors, each rounded ≤ 4 times (1 − λ(1 − a), the chain's "
    "(1 − λ)p + λ pA on the diagonal): 4·20·2.2e-16 = 1.8e-14, the exact side rounded once",
)
_EXACT_LABELS = {
    "min": "max |min_i diag(rollout matrix) / exact min_i P_ii − 1|",
    "min_formula": "max |min_i diagonal(ks, λ) / exact min_i P_ii − 1|",
    "middle": "max |∏(1 − λ_t δ_t) (float) / diagonal_bound middle (exact) − 1|",
    "lower": "max |∏(1 − λ_t) (float) / diagonal_bound lower (exact) − 1|",
}


def _log_middle_lower(ks, lam):
    """log ∏(1 − λ_t δ_t) and log ∏(1 − λ_t), δ_t = max_i (1 − A_t[i,i]) from the diagonals."""
    delta = np.array([np.max(1 - k.diagonal()) for k in ks])
    with np.errstate(divide="ignore"):
        return float(np.log1p(-lam * delta).sum()), float(np.log1p(-lam).sum())


def _chain_slack(rng, cases):
    """(a) The chain on random non-stationary rollouts, in log space: the least relative slack
    of each inequality (≥ 0 means it holds)."""
    slack_mid = slack_low = np.inf
    for _ in range(cases):
        n, T = int(rng.integers(2, 41)), int(rng.integers(1, 101))
        ks, lam = random_layers(rng, n, T)
        logd = diagonal(ks, lam, log=True)
        log_mid, log_low = _log_middle_lower(ks, lam)
        scale = max(1.0, abs(log_mid), abs(log_low))
        slack_mid = min(slack_mid, (logd.min() - log_mid) / scale)
        slack_low = min(slack_low, (log_mid - log_low) / scale)
    return slack_mid, slack_low


def _exact_errors(rng, cases):
    """(b) theory.diagonal_bound (exact rationals from the float diagonals and λ) against the
    numeric sides: min diag of the rollout matrix and of the product formula, and the two
    float products computed here from the kernels' diagonals. Returns the worst relative
    errors and whether every exact chain is ordered."""
    err = {"min": 0.0, "min_formula": 0.0, "middle": 0.0, "lower": 0.0}
    chain_exact = True
    for _ in range(cases):
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
    return err, chain_exact


def _alibi_equality(rng):
    """(c) Equality for stationary ALiBi: the minimising row is n−1 and min P_ii = ∏(1 − λ δ);
    the worst relative log error and the worst gap of row n−1 above the minimum."""
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
    return eq_err, last_gap


def _digest_example():
    """(d) The digest's example, uniform kernel n = 64, λ_t = 0.5/(t+1)², T = 100: the exact
    min P_ii and the numeric one."""
    U, lam_ex = uniform_kernel(64), power_decay(0.5, 2.0, 100)
    ex = th.diagonal_bound(U.diagonal().reshape(1, -1).repeat(100, 0), lam_ex, exact="rational")
    return float(ex.min_diagonal), float(np.exp(diagonal(U, lam_ex, log=True).min()))


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
    cases = 120 if ctx.full else 16
    exact_cases = 24 if ctx.full else 8
    slack_mid, slack_low = _chain_slack(rng, cases)
    err, chain_exact = _exact_errors(rng, exact_cases)
    eq_err, last_gap = _alibi_equality(rng)
    ex_exact, ex_num = _digest_example()
    eq_fp = fp_tol(1e-13, _EQ_REASON)
    ms = [
        holds("symbolic_certificate_T4", cert.holds, label="sympy telescoping certificate, T = 4"),
        at_least("min_log_slack_middle", float(slack_mid), 0.0, _LOG_FP,
                 label="min (log min_i P_ii − log ∏(1 − λδ)) / scale"),
        at_least("min_log_slack_lower", float(slack_low), 0.0, _LOG_FP,
                 label="min (log ∏(1 − λδ) − log ∏(1 − λ)) / scale"),
        holds("exact_chain_ordered", chain_exact,
              label="diagonal_bound: min P_ii ≥ middle ≥ lower (exact)"),
        *[at_most(f"exact_vs_numeric_{k}", err[k], 0.0, _PROD_FP, label=lab)
          for k, lab in _EXACT_LABELS.items()],
        at_most("alibi_equality_log_error", eq_err, 0.0, eq_fp,
                label="max |log min_i P_ii − log ∏(1 − λδ)| / scale, stationary ALiBi"),
        at_most("alibi_last_row_gap", last_gap, 0.0, eq_fp,
                label="max (log P_{n−1,n−1} − log min_i P_ii) / scale, stationary ALiBi"),
        close("uniform_n64_T100_exact_vs_numeric", ex_num, ex_exact,
              fp_tol(1e-13, "100 log1p terms within 2ε each, one exp: ≈ 103·2.2e-16 = 2.3e-14"),
              label="uniform n = 64, T = 100: min P_ii numeric vs exact"),
        close("uniform_n64_T100_min_Pii_exact", ex_exact, 0.3675,
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


# -- mutants: small realistic breaks the claim above must catch -----------------------------------


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
