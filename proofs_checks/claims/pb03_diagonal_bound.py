"""Claim PB3 of [A]: the diagonal bound min_i P_ii ≥ ∏(1 − λ_t δ_t) ≥ ∏(1 − λ_t), with equality
for stationary ALiBi (closure and the diagonal identity PB1–PB2 are in
:mod:`posflow.proofs_checks.claims.pb01_02_diagonal_identity`).

The chain is checked four ways: in log space on random non-stationary rollouts, against
:func:`posflow.theory.rollout.diagonal_bound` in exact rationals, at its equality case
(stationary ALiBi, row n−1) and on the digest's worked example.
"""

from __future__ import annotations

import functools
import math
import types
from fractions import Fraction

import numpy as np

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    add_mutant,
    at_least,
    at_most,
    cite,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    random_layers,
    register,
    rejects,
)
from posflow.simulate.kernels import alibi_kernel, uniform_kernel
from posflow.simulate.rollout import diagonal, power_decay, rollout_matrix, total_mixing
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


def _chain_judge(key, pairs, label):
    """The judge of one inequality of the chain: over every (upper sides by row, lower side) pair,
    the least relative slack (min_i upper_i − lower)/scale — the WORST row — must be ≥ 0."""
    slack = np.inf
    for up, low in pairs:
        worst = float(np.min(up))
        slack = min(slack, (worst - low) / max(1.0, abs(worst), abs(low)))
    return at_least(key, float(slack), 0.0, _LOG_FP, label=label)


def _rel_judge(key, pairs, tol, label):
    """The judge of a routine against its reference: max |got/ref − 1| over every entry."""
    err = max(float(np.max(np.abs(np.asarray(g, float) / np.asarray(r, float) - 1)))
              for g, r in pairs)  # fmt: skip
    return at_most(key, err, 0.0, tol, label=label)


def _mix_judge(key, triples, label):
    """The judge of total_mixing: max |got − reference| / Σ_t λ_t over every (got, reference,
    Σλ) triple (δ_t = 1 − A_t[i,i] may cancel to 1e-6, so the error is bounded on the scale of
    Σλ_t, not of Σλ_tδ_t)."""
    err = max(abs(g - r) / max(s, 1e-300) for g, r, s in triples)
    return at_most(key, float(err), 0.0, _MIX_FP, label=label)


def _dense_product(ks, lam):
    """R_{T−1} ⋯ R_0 as a dense NumPy product of the kernels' dense matrices."""
    n = ks[0].n
    P = np.eye(n)
    for K, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * K.dense()) @ P
    return P


def _direct_mixing(ks, lam):
    """Σ_t λ_t max_i (1 − A_t[i,i]) by a plain loop over the dense matrices' diagonals."""
    deltas = {}
    for K in ks:  # one dense matrix per distinct kernel
        if id(K) not in deltas:
            D = K.dense()
            deltas[id(K)] = max(1.0 - float(D[i, i]) for i in range(K.n))
    return sum(float(lt) * deltas[id(K)] for K, lt in zip(ks, lam, strict=True))


def _chain_pairs(rng, cases):
    """(a) The chain on random non-stationary rollouts, in log space: the (log diagonal, log
    middle) and (log middle, log lower) pairs, and total_mixing against a direct loop."""
    mid, low, mixing = [], [], []
    for _ in range(cases):
        n, T = int(rng.integers(2, 41)), int(rng.integers(1, 101))
        ks, lam = random_layers(rng, n, T)
        logd = diagonal(ks, lam, log=True)
        log_mid, log_low = _log_middle_lower(ks, lam)
        mid.append((logd, log_mid))
        low.append(([log_mid], log_low))
        mixing.append((total_mixing(ks, lam), _direct_mixing(ks, lam), float(lam.sum())))
    return mid, low, mixing


def _exact_errors(rng, cases):
    """(b) theory.diagonal_bound (exact rationals from the float diagonals and λ) against the
    numeric sides and a direct Fraction computation; rollout_matrix and diagonal against a dense
    product. Returns the worst relative errors, the count of exact sides that differ from the
    direct Fractions, whether every exact chain is ordered, and the dense pairs."""
    err = {"min": 0.0, "min_formula": 0.0, "middle": 0.0, "lower": 0.0}
    chain_exact, mismatched, dense, diag = True, 0, [], []
    for _ in range(cases):
        n, T = int(rng.integers(2, 13)), int(rng.integers(1, 21))
        ks, lam = random_layers(rng, n, T)
        db = th.diagonal_bound([k.diagonal() for k in ks], lam, exact="rational")
        chain_exact &= bool(db.min_diagonal >= db.middle >= db.lower)
        mismatched += sum(a != b for a, b in zip(db[::2] + db[3:], _fraction_sides(ks, lam),
                                                 strict=True))  # fmt: skip
        delta = np.array([np.max(1 - k.diagonal()) for k in ks])
        P, ref = rollout_matrix(ks, lam), _dense_product(ks, lam)
        dense.append((P, ref))
        diag.append((diagonal(ks, lam), np.diag(ref)))
        numeric = {
            "min": float(np.diag(P).min()),
            "min_formula": float(diagonal(ks, lam).min()),
            "middle": float(np.prod(1 - lam * delta)),
            "lower": float(np.prod(1 - lam)),
        }
        exact = {"min": db.min_diagonal, "min_formula": db.min_diagonal, "middle": db.middle,
                 "lower": db.lower}  # fmt: skip
        for k, v in numeric.items():
            err[k] = max(err[k], abs(v / float(exact[k]) - 1))
    return err, mismatched, chain_exact, dense, diag


def _fraction_sides(ks, lam):
    """(min_i P_ii, middle, lower) by a direct Fraction computation from the same float
    diagonals and λ that diagonal_bound reads (a plain loop, its own min and max)."""
    diags = [[Fraction(float(x)) for x in K.diagonal()] for K in ks]  # diagonal_bound's input
    lams = [Fraction(float(x)) for x in lam]
    pii = [math.prod((1 - lt * (1 - d[i]) for d, lt in zip(diags, lams, strict=True)),
                     start=Fraction(1)) for i in range(ks[0].n)]  # fmt: skip
    mid = math.prod((1 - lt * max(1 - a for a in d) for d, lt in zip(diags, lams, strict=True)),
                    start=Fraction(1))  # fmt: skip
    return min(pii), mid, math.prod((1 - lt for lt in lams), start=Fraction(1))


def _alibi_equality(rng):
    """(c) Equality for stationary ALiBi: the minimising row is n−1 and min P_ii = ∏(1 − λ δ);
    the worst relative log error, the worst gap of row n−1 above the minimum, and total_mixing
    of the shared kernel against λ·Σ max_i(1 − A[i,i]) by a loop."""
    eq_err = last_gap = 0.0
    mixing = []
    for _ in range(20):
        n, T, H = int(rng.integers(2, 300)), int(rng.integers(1, 200)), int(rng.integers(1, 9))
        K = alibi_kernel(n, rng.uniform(0, 3, H), rng.uniform(-20, 20, H))
        lam = rng.uniform(0, 1, T)
        logd = diagonal(K, lam, log=True)
        log_mid, _ = _log_middle_lower([K] * T, lam)
        scale = max(1.0, abs(log_mid))
        eq_err = max(eq_err, abs(logd.min() - log_mid) / scale)
        last_gap = max(last_gap, (logd[-1] - logd.min()) / scale)
        mixing.append((total_mixing(K, lam), _direct_mixing([K] * T, lam), float(lam.sum())))
    return eq_err, last_gap, mixing


def _digest_example():
    """(d) The digest's example, uniform kernel n = 64, λ_t = 0.5/(t+1)², T = 100: the exact
    min P_ii, the numeric one and the schedule against the direct formula."""
    U, lam_ex = uniform_kernel(64), power_decay(0.5, 2.0, 100)
    ex = th.diagonal_bound(U.diagonal().reshape(1, -1).repeat(100, 0), lam_ex, exact="rational")
    direct = [0.5 / (t + 1) ** 2 for t in range(100)]
    return float(ex.min_diagonal), float(np.exp(diagonal(U, lam_ex, log=True).min())), \
        (lam_ex, direct)


def _pb3_controls(mid_pairs, ks_rng):
    """Negative controls: one row below the bound, the best row's bound ∏(1 − λ_t min_i(1 −
    A_ii)), an entry off by a relative 1e-9."""
    logd, log_mid = max(mid_pairs, key=lambda pr: pr[0].size)
    one = np.array(logd, copy=True)
    one[-1] = log_mid - 1e-6 * max(1.0, abs(log_mid))
    n, T = 30, 40
    ks, lam = random_layers(ks_rng, n, T)
    best = float(np.log1p(-lam * np.array([np.min(1 - k.diagonal()) for k in ks])).sum())
    g, r, s = total_mixing(ks, lam), _direct_mixing(ks, lam), float(lam.sum())
    return [
        rejects("chain_judge_control_one_row_below",
                _chain_judge("c", [(one, log_mid)], "c"),
                "only the last row's log P_ii below log ∏(1 − λδ) by a relative 1e-6"),
        rejects("chain_judge_control_best_row_bound",
                _chain_judge("c", [(diagonal(ks, lam, log=True), best)], "c"),
                "the bound ∏(1 − λ_t min_i(1 − A_t[i,i])) of the best row, above min_i P_ii"),
        rejects("mix_judge_control_one_case_wrong",
                _mix_judge("c", [(r, r, s), (g * (1 + 1e-9), r, s)], "c"),
                "one of two Σλ_tδ_t off by a relative 1e-9 (the worst case must be seen)"),
        rejects("rel_judge_control_tiny_entry_doubled",
                _rel_judge("c", [(np.array([2e-200, 0.5]), np.array([1e-200, 0.5]))], _PROD_FP,
                           "c"),
                "an entry 1e-200 doubled: absolute error 1e-200, relative error 1"),
    ]  # fmt: skip


_MIX_FP = fp_tol(1e-13, "each term λ_t·δ_t within λ_t·4ε (A[i,i] by two routes within 2ε, "
                        "1 − a and the product 2ε), summed over T < 200 terms: ≤ Σλ_t·(4 + 200)·ε"
                        " = Σλ_t·4.5e-14")  # fmt: skip
_CITES = (
    cite("posflow.simulate.rollout:diagonal",
         "the diagonal of a dense NumPy product R_{T−1}⋯R_0 (relative), and exact rationals",
         "diagonal_vs_dense_product", "exact_vs_numeric_min_formula"),
    cite("posflow.simulate.rollout:rollout_matrix",
         "a dense NumPy product R_{T−1}⋯R_0 (every entry)", "rollout_matrix_vs_dense_product"),
    cite("posflow.theory.rollout:diagonal_bound",
         "a direct Fraction computation of min_i P_ii, ∏(1 − λδ), ∏(1 − λ) from the dense "
         "diagonals, and float products", "exact_sides_vs_fractions_mismatched",
         "exact_vs_numeric_middle", "exact_vs_numeric_lower"),
    cite("posflow.theory.rollout:diagonal_bound_certificate",
         "sympy's expansion of the telescoping sums (term signs)", "symbolic_certificate_T4"),
    cite("posflow.simulate.rollout:total_mixing",
         "Σ_t λ_t max_i(1 − A_t[i,i]) by a plain loop over the dense matrices' diagonals",
         "total_mixing_vs_direct_loop"),
    cite("posflow.simulate.rollout:power_decay", "the direct formula 0.5/(t+1)²",
         "power_decay_vs_direct_formula"),
)  # fmt: skip


@register(
    "PB3",
    "[D]",
    "min_i P_ii ≥ ∏(1 − λ_t δ_t) ≥ ∏(1 − λ_t), δ_t = max_i(1 − A_t[i,i]); "
    "equality at row n−1 for stationary ALiBi",
    assumptions=("causal kernels", "λ_t ∈ [0, 1]"),
    compares=_CITES,
)
def pb3(ctx: Context) -> Evidence:
    """Claim PB3: the chain in log space on random rollouts (worst row); ``th.diagonal_bound``
    against direct Fractions; ``rollout_matrix`` and ``diagonal`` against a dense product;
    ``total_mixing`` against a plain loop; ``th.diagonal_bound_certificate``; equality for
    stationary ALiBi; the digest's example (``power_decay`` against its formula). Negative
    controls: one row below the bound, the best row's bound, a wrong Σλδ."""
    rng = np.random.default_rng(ctx.seed + 3)
    cert = th.diagonal_bound_certificate(4)
    cases = 120 if ctx.full else 16
    exact_cases = 24 if ctx.full else 8
    mid, low, mixing = _chain_pairs(rng, cases)
    err, mismatched, chain_exact, dense, diag = _exact_errors(rng, exact_cases)
    eq_err, last_gap, mixing_alibi = _alibi_equality(rng)
    ex_exact, ex_num, sched = _digest_example()
    eq_fp = fp_tol(1e-13, _EQ_REASON)
    mix_slack = max(lm[0][0] + m[0] for lm, m in zip(low, mixing, strict=True))  # ≤ 0
    ms = [
        holds("symbolic_certificate_T4", cert.holds, label="sympy telescoping certificate, T = 4"),
        _chain_judge("min_log_slack_middle", mid, "min (log min_i P_ii − log ∏(1 − λδ)) / scale"),
        _chain_judge("min_log_slack_lower", low, "min (log ∏(1 − λδ) − log ∏(1 − λ)) / scale"),
        holds("exact_chain_ordered", chain_exact,
              label="diagonal_bound: min P_ii ≥ middle ≥ lower (exact)"),
        at_most("exact_sides_vs_fractions_mismatched", mismatched, 0, exact_tol("Fractions"),
                label="exact sides of diagonal_bound ≠ a direct Fraction computation"),
        *[at_most(f"exact_vs_numeric_{k}", err[k], 0.0, _PROD_FP, label=lab)
          for k, lab in _EXACT_LABELS.items()],
        at_most("rollout_matrix_vs_dense_product",
                max(float(np.abs(P - R).max()) for P, R in dense), 0.0,
                fp_tol(1e-12, "T ≤ 20 steps of n ≤ 12 terms: 20·12·2.2e-16 = 5e-14"),
                label="max |rollout_matrix − dense R_{T−1}⋯R_0|"),
        _rel_judge("diagonal_vs_dense_product", diag, _PROD_FP,
                   "max |diagonal/diag(dense product) − 1|"),
        _mix_judge("total_mixing_vs_direct_loop", mixing + mixing_alibi,
                   "max |total_mixing − Σλ_t max_i(1 − A_t[i,i]) (loop)| / Σλ_t"),
        info("max_log_middle_plus_total_mixing", float(mix_slack),
             label="max log ∏(1 − λδ) + Σλδ (≤ 0: log(1 − x) ≤ −x)"),
        at_most("alibi_equality_log_error", eq_err, 0.0, eq_fp,
                label="max |log min_i P_ii − log ∏(1 − λδ)| / scale, stationary ALiBi"),
        at_most("alibi_last_row_gap", last_gap, 0.0, eq_fp,
                label="max (log P_{n−1,n−1} − log min_i P_ii) / scale, stationary ALiBi"),
        _rel_judge("power_decay_vs_direct_formula", [sched], fp_tol(1e-15, "one division "
                   "and one power: 2ε = 4.4e-16"), "max |power_decay/(0.5/(t+1)²) − 1|"),
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
        ms + _pb3_controls(mid, rng),
        setup=f"{cases} seeded random rollouts (n ≤ 40, T ≤ 100, ALiBi+content or Dirichlet "
        f"layers, λ ~ U[0, 1]); {exact_cases} of n ≤ 12, T ≤ 20 through theory.diagonal_bound in "
        "exact rationals and a dense product; 20 stationary ALiBi rollouts (n < 300, T < 200, "
        "≤ 8 heads); sympy certificate for T = 4.",
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


def _best_row_chain(original):
    @functools.wraps(original)
    def chain_judge(key, pairs, label):  # the best row taken for the worst
        return original(key, [([float(np.max(up))], low) for up, low in pairs], label)

    return chain_judge


def _self_chain(original):
    @functools.wraps(original)
    def chain_judge(key, pairs, label):  # the bound replaced by the value it bounds
        return original(key, [(up, float(np.min(up))) for up, _ in pairs], label)

    return chain_judge


def _mixing_delta_min(original):
    @functools.wraps(original)
    def total_mixing(kernels, lambdas):  # δ_t = min_i (1 − A_t[i,i]): the max misread
        ks = [kernels] * len(lambdas) if not isinstance(kernels, list | tuple) else kernels
        return float(sum(lt * np.min(1 - k.diagonal()) for k, lt in zip(ks, lambdas, strict=True)))

    return total_mixing


_ME = "posflow.proofs_checks.claims.pb03_diagonal_bound"
# fmt: off
add_mutant("PB3", "judge-best-row", f"{_ME}:_chain_judge", _best_row_chain,
           "the chain's judge takes the best row max_i P_ii instead of the worst")
add_mutant("PB3", "judge-self-comparison", f"{_ME}:_chain_judge", _self_chain,
           "the chain's judge compares min_i P_ii with itself instead of the bound")
add_mutant("PB3", "total-mixing-delta-min", "posflow.simulate.rollout:total_mixing",
           _mixing_delta_min, "total_mixing takes δ_t = min_i (1 − A_t[i,i]) instead of the max")
# fmt: on
