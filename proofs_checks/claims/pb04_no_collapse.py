"""Claim PB4 of [A, D]: no collapse for summable schedules, inf_T min_i P_ii > 0 when
Σλ_t δ_t < ∞ (the dichotomy PB6 is in :mod:`posflow.proofs_checks.claims.pb06_dichotomy`,
collapse and its rates PB5, PB7 in :mod:`posflow.proofs_checks.claims.pb05_07_collapse_rates`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import (
    RESIDUAL_STEP,
    SUMMABILITY_TEST,
    Context,
    Evidence,
    Table,
    add_mutant,
    at_least,
    at_most,
    cite,
    close,
    fp_tol,
    holds,
    info,
    negated_result,
    quiet,
    register,
    rejects,
    swapped_residual_weights,
)
from posflow.simulate.kernels import alibi_kernel, uniform_kernel
from posflow.simulate.rollout import diagonal, influence, power_decay, total_mixing
from posflow.theory import rollout as th

_EPS = float(np.finfo(np.float64).eps)  # 2.2e-16


def _log_product_bound(lam0, beta, delta, head=10**5):
    """A lower bound on log ∏_{t≥0}(1 − λ_t δ), λ_t = λ0/(t+1)^β, β > 1: the exact sum over
    t < ``head`` plus a bound on the rest. For x = λ_t δ ≤ 1/2, log(1 − x) ≥ −x − x², and
    Σ_{s>head} s^{−q} ≤ ∫_head^∞ s^{−q} ds = head^{1−q}/(q − 1)."""
    lam = power_decay(lam0, beta, head)
    a = lam0 * delta
    rest = a * head ** (1 - beta) / (beta - 1) + a * a * head ** (1 - 2 * beta) / (2 * beta - 1)
    return float(np.log1p(-lam * delta).sum() - rest), float(rest)


def _floor_judge(key, logds, log_bound, tol, label):
    """The judge of no collapse: over every depth's log diagonal, the WORST row
    min_T min_i log P_ii(T) must stay ≥ the log of the infinite product (− tol)."""
    worst = min(float(np.min(d)) for d in logds)
    return at_least(key, worst, log_bound, tol, label=label)


def _rel_judge(key, got, ref, tol, label):
    """The judge of a routine against its reference: max |got/ref − 1| over every entry."""
    err = float(np.max(np.abs(np.asarray(got, float) / np.asarray(ref, float) - 1)))
    return at_most(key, err, 0.0, tol, label=label)


def _dense_rollout(K, lam):
    """e_{n−1} R_{T−1}⋯R_0 and diag(R_{T−1}⋯R_0) by dense NumPy products of K's matrix."""
    A, n = K.dense(), K.n
    P = np.eye(n)
    for lt in lam:
        P = ((1 - lt) * np.eye(n) + lt * A) @ P
    return P[-1], np.diag(P)


_T_DENSE = 300  # depth of the dense-product references (n³·T flops)
_FP_DENSE = fp_tol(1e-12, "a lower-triangular product's diagonal is the product of the factors'"
                          f" diagonals (one term per entry): relative ≤ 2·{_T_DENSE}·2·2.2e-16 ="
                          " 2.7e-13 for both routes")  # fmt: skip

def _pb4_routines(tag, setting, K, beta, lam, delta):
    """total_mixing, power_decay, influence and diagonal against direct formulas and a dense
    product (the first 300 layers)."""
    direct = [0.5 / (t + 1) ** beta for t in range(lam.size)]
    tm, tm_ref = total_mixing(K, lam), delta * math.fsum(direct)
    p_ref, d_ref = _dense_rollout(K, lam[:_T_DENSE])
    p_d = influence(K, lam[:_T_DENSE])
    return tm, [
        close(f"{tag}_total_mixing_vs_direct_sum", tm, tm_ref, fp_tol(
            4.5e-12 * tm_ref, "relative (T + 2)·ε ≤ 4.5e-12 (sums of nonnegative terms)"),
            rel=False, label=f"{setting}: total_mixing vs δ·Σ 0.5/(t+1)^β (fsum)"),
        _rel_judge(f"{tag}_power_decay_vs_direct_formula", lam, direct,
                   fp_tol(1e-15, "one power and one division: 2ε"),
                   f"{setting}: max |power_decay/(0.5/(t+1)^β) − 1|"),
        at_most(f"{tag}_influence_vs_dense_product", float(np.abs(p_d - p_ref).max()), 0.0,
                fp_tol(5e-12, f"{_T_DENSE} convex steps of ≤ n + 4 = 68 terms on entries ≤ 1: "
                              "300·68·2.2e-16 = 4.5e-12"),
                label=f"{setting}: max |influence − e_(n−1) R_299⋯R_0 (dense)|"),
        _rel_judge(f"{tag}_diagonal_vs_dense_product", diagonal(K, lam[:_T_DENSE]), d_ref,
                   _FP_DENSE, f"{setting}: max |diagonal/diag(dense R_299⋯R_0) − 1|"),
    ]  # fmt: skip


def _pb4_case(kname, K, beta, T_max, n, checkpoints, fp_log):
    """The comparisons and the table row of one kernel and one β."""
    fp_chain = 4 * T_max * _EPS  # T_max convex steps, ≤ 4 roundings of each entry per step
    fp_sum = (n + 4) * T_max * _EPS  # … and ≤ n terms per row sum
    delta = float(np.max(1 - K.diagonal()))
    tag, setting = f"{kname.split()[0]}_beta{beta:g}", f"{kname}, β = {beta:g}"
    sym = th.power_decay_collapses("1/2", str(sp.nsimplify(beta)))
    log_inf, rest = _log_product_bound(0.5, beta, delta)
    lam = power_decay(0.5, beta, T_max)
    logds = [diagonal(K, lam[:T], log=True) for T in checkpoints]
    logmins = [float(d.min()) for d in logds]
    # for a stationary kernel row n−1 attains min_i P_ii (PB3's equality), so
    # log min P_ii(T) − log ∏_{t≥0} = −Σ_{t≥T} log(1 − λ_tδ) ≤ Σ_{t≥T}(x + x²), bounded
    # as in _log_product_bound with head = T (plus the bound's own slack `rest`)
    _, tail = _log_product_bound(0.5, beta, delta, head=T_max)
    p = influence(K, lam)
    p_last_formula = float(np.exp(diagonal(K, lam, log=True)[-1]))
    tm, routine_ms = _pb4_routines(tag, setting, K, beta, lam, delta)
    sq = float(np.sum((lam * delta) ** 2))
    ms = [
        holds(f"{tag}_symbolic_no_collapse", sym is False,
              label=f"{setting}: theory.collapses says Σλ_t < ∞"),
        holds(f"{tag}_bound_positive", math.isfinite(log_inf),
              label=f"{setting}: ∏_t≥0 (1 − λ_t δ) > 0"),
        _floor_judge(f"{tag}_min_log_diag_vs_bound", logds, log_inf, fp_log,
                     f"{setting}: min over T and rows of log P_ii vs log ∏_t≥0(1 − λδ)"),
        _floor_judge(f"{tag}_min_log_diag_vs_total_mixing", logds[-1:], -tm - sq, fp_log,
                     f"{setting}: min_i log P_ii(T_max) vs −Σλδ − Σ(λδ)² (total_mixing)"),
        info(f"{tag}_total_mixing_slack", logmins[-1] + tm + sq,
             label=f"{setting}: log min P_ii + Σλδ + Σ(λδ)² (≥ 0)"),
        at_most(f"{tag}_bound_attained", logmins[-1] - log_inf, tail + rest,
                fp_log,
                label=f"{setting}: log min_i P_ii(T_max) − log ∏_t≥0 vs the tail "
                      "Σ_t≥T_max (x + x²)"),
        close(f"{tag}_p_last_is_P_last_last", float(p[-1]), p_last_formula,
              fp_tol(fp_chain * p_last_formula,
                     f"relative 4·T·ε = 4·{T_max}·2.2e-16 (chain) on "
                     f"≈ {p_last_formula:.3g}"),
              label=f"{setting}: influence p(n−1) vs P_{{n−1,n−1}} (product formula)"),
        at_most(f"{tag}_p_first_vs_no_collapse_bound", float(p[0]),
                1 - math.exp(log_inf),
                fp_tol(fp_sum, f"(n + 4)·T·ε = {n + 4}·{T_max}·2.2e-16 on a row sum"),
                label=f"{setting}: p(0) vs 1 − ∏_t≥0(1 − λδ) (p(0) ≤ 1 − P_{{n−1,n−1}})"),
        at_most(f"{tag}_row_sum_error", abs(float(p.sum()) - 1), 0.0,
                fp_tol(fp_sum, f"(n + 4)·T·ε = {n + 4}·{T_max}·2.2e-16"),
                label=f"{setting}: |Σ_j p(j) − 1|"),
        *routine_ms,
    ]  # fmt: skip
    row = [kname, beta, delta, log_inf, min(logmins), logmins[-1], float(p[0]),
           1 - math.exp(log_inf)]  # fmt: skip
    return ms, row, (logds, log_inf)


def _pb4_controls(case, fp_log):
    """Negative controls of PB4's judges: one row at one depth below the bound, the bound
    replaced by the infinite product of a larger δ (δ + 0.1), one wrong entry."""
    logds, log_inf = case
    one = [np.array(d, copy=True) for d in logds]
    one[-1][0] = log_inf - 1e-6  # only row 0 (not the minimising row n−1) at the last depth
    x = np.array([1.0, 0.5, 0.25])
    return [
        rejects("floor_judge_control_one_row_below",
                _floor_judge("c", one, log_inf, fp_log, "c"),
                "row 0 at the last depth 1e-6 below log ∏(1 − λδ), every other row above"),
        rejects("floor_judge_control_bound_above",
                _floor_judge("c", logds, max(float(np.max(d)) for d in logds) + 1e-6, fp_log,
                             "c"),
                "a floor 1e-6 above every row's log P_ii (the best row's value)"),
        rejects("rel_judge_control_one_entry_wrong",
                _rel_judge("c", x * [1, 1, 1 + 1e-9], x, fp_tol(1e-12, "as the checks"), "c"),
                "the last of three entries off by a relative 1e-9"),
    ]  # fmt: skip


_CITES = (
    cite("posflow.simulate.rollout:total_mixing",
         "δ·Σ_t 0.5/(t+1)^β summed by math.fsum, δ from the kernel's diagonal",
         "uniform_beta1.5_total_mixing_vs_direct_sum", "alibi_beta2_total_mixing_vs_direct_sum"),
    cite("posflow.simulate.rollout:diagonal",
         "the diagonal of a dense NumPy product of the first 300 layers (relative)",
         "uniform_beta2_diagonal_vs_dense_product", "alibi_beta1.5_diagonal_vs_dense_product"),
    cite("posflow.simulate.rollout:influence",
         "e_(n−1) times a dense NumPy product of the first 300 layers",
         "uniform_beta2_influence_vs_dense_product", "alibi_beta1.5_influence_vs_dense_product"),
    cite("posflow.simulate.rollout:power_decay", "the direct formula 0.5/(t+1)^β",
         "uniform_beta1.5_power_decay_vs_direct_formula"),
    cite("posflow.theory.rollout:power_decay_collapses",
         "the p-series rule: Σ(t+1)^(−β) converges ⇔ β > 1",
         "uniform_beta1.5_symbolic_no_collapse", "alibi_beta2_symbolic_no_collapse"),
)  # fmt: skip


@register(
    "PB4",
    "[A]",
    "no collapse when Σλ_t δ_t < ∞ (e.g. λ_t = λ0/(t+1)^β, β > 1): inf_T min_i P_ii > 0",
    assumptions=("Σ λ_t δ_t < ∞", "λ_t δ_t < 1"),
    compares=_CITES,
    basis="[A]'s dichotomy, one direction; the theorem's text was not available, so the statement "
    "is reconstructed from [A]'s definitions and abstract ([D])",
)
@quiet
def pb4(ctx: Context) -> Evidence:
    """Claim PB4: for λ_t = 0.5/(t+1)^β, β ∈ {1.5, 2}, min_i log P_ii (``diagonal``, every row,
    every depth) stays above the log of the infinite product and above −Σλδ − Σ(λδ)²
    (``total_mixing``, against a direct sum); ``influence`` and ``diagonal`` against a dense
    product; ``power_decay`` against its formula; ``th.power_decay_collapses`` against the
    p-series rule. Negative controls: one row below the floor, a floor above the best row."""
    T_max = 20000 if ctx.full else 2000
    n = 256 if ctx.full else 64
    checkpoints = sorted({*(10**k for k in range(1, int(np.log10(T_max)) + 1)), T_max})
    fp_log = fp_tol(
        2 * (T_max + 2) * _EPS * 2,
        f"≤ T = {T_max} log1p terms within 2ε each plus the summation, on |log| ≤ 2: "
        f"2·(T + 2)·ε·2 = {2 * (T_max + 2) * _EPS * 2:.2g}",
    )
    ms, rows = [], []
    for kname, K in (("uniform", uniform_kernel(n)), ("alibi m=0.05", alibi_kernel(n, 0.05))):
        for beta in (1.5, 2.0):
            case_ms, row, case = _pb4_case(kname, K, beta, T_max, n, checkpoints, fp_log)
            ms += case_ms
            rows.append(row)
    ms += _pb4_controls(case, fp_log)
    table = Table(
        "cases",
        "Summable schedules λ_t = 0.5/(t+1)^β: the diagonal and p(0) against the bound",
        ["kernel", "β", "δ", "log ∏_t≥0(1−λδ)", "min_T log min P_ii", "log min P_ii(T_max)",
         "p(0) at T_max", "1 − ∏_t≥0(1−λδ)"],
        rows,
        note=f"checkpoints T = {checkpoints}; the infinite product is bounded below by its sum to "
        "10^5 plus an integral bound on the rest.",
    )  # fmt: skip
    return Evidence(
        [*ms, info("n", n), info("T_max", T_max)],
        tables=[table],
        setup=f"uniform and ALiBi (m = 0.05) kernels, n = {n}, λ_t = 0.5/(t+1)^β for β ∈ "
        f"{{1.5, 2}}, depth up to {T_max}; influence profile at T_max and log-space diagonal at "
        f"T = {checkpoints}.",
    )


# -- mutants: small realistic breaks the claim above must catch -----------------------------------


def _all_mass_to_token0(original):
    @functools.wraps(original)
    def apply_all_to_first(self, p):
        xp = self.xp
        out = xp.zeros_like(p)
        out[:, 0] = xp.sum(p, axis=1)
        return out

    return apply_all_to_first


add_mutant("PB4", "uniform-all-mass-to-token-0", "posflow.simulate.kernels:UniformKernel._apply",
           _all_mass_to_token0,
           "the uniform kernel sends every token's attention to token 0")  # fmt: skip
add_mutant("PB4", "residual-weights-swapped", RESIDUAL_STEP, swapped_residual_weights,
           "the residual step computes λ p + (1 − λ) p A "
           "(λ read as the residual weight)")  # fmt: skip
add_mutant("PB4", "summability-test-inverted", SUMMABILITY_TEST, negated_result,
           "theory.collapses' comparison tests conclude the opposite way")  # fmt: skip


def _best_row_floor(original):
    @functools.wraps(original)
    def floor_judge(key, logds, log_bound, tol, label):  # the best row taken for the worst
        return original(key, [[float(np.max(d))] for d in logds], log_bound, tol, label)

    return floor_judge


def _self_floor(original):
    @functools.wraps(original)
    def floor_judge(key, logds, log_bound, tol, label):  # the floor set to the value itself
        return original(key, logds, min(float(np.min(d)) for d in logds), tol, label)

    return floor_judge


def _mixing_last_layer_dropped(original):
    @functools.wraps(original)
    def total_mixing(kernels, lambdas):  # an off-by-one: λ_{T−1} left out of the sum
        lam = np.asarray(lambdas, dtype=float)
        return original(kernels, lam[:-1]) if not isinstance(kernels, list | tuple) else \
            original(kernels[:-1], lam[:-1])

    return total_mixing


_ME = "posflow.proofs_checks.claims.pb04_no_collapse"
# fmt: off
add_mutant("PB4", "judge-best-row", f"{_ME}:_floor_judge", _best_row_floor,
           "the no-collapse judge takes the best row max_i P_ii instead of the worst")
add_mutant("PB4", "judge-self-comparison", f"{_ME}:_floor_judge", _self_floor,
           "the no-collapse judge compares min_i P_ii with itself instead of the bound")
add_mutant("PB4", "total-mixing-last-layer-dropped", "posflow.simulate.rollout:total_mixing",
           _mixing_last_layer_dropped, "total_mixing stops before the last layer (off-by-one)")
# fmt: on
