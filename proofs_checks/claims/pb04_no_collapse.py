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
    close,
    fp_tol,
    holds,
    info,
    negated_result,
    quiet,
    register,
    swapped_residual_weights,
)
from posflow.simulate.kernels import alibi_kernel, uniform_kernel
from posflow.simulate.rollout import diagonal, influence, power_decay
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


def _pb4_case(kname, K, beta, T_max, n, checkpoints, fp_log):
    """The comparisons and the table row of one kernel and one β."""
    fp_chain = 4 * T_max * _EPS  # T_max convex steps, ≤ 4 roundings of each entry per step
    fp_sum = (n + 4) * T_max * _EPS  # … and ≤ n terms per row sum
    delta = float(np.max(1 - K.diagonal()))
    tag, setting = f"{kname.split()[0]}_beta{beta:g}", f"{kname}, β = {beta:g}"
    sym = th.power_decay_collapses("1/2", str(sp.nsimplify(beta)))
    log_inf, rest = _log_product_bound(0.5, beta, delta)
    lam = power_decay(0.5, beta, T_max)
    logmins = [float(diagonal(K, lam[:T], log=True).min()) for T in checkpoints]
    # for a stationary kernel row n−1 attains min_i P_ii (PB3's equality), so
    # log min P_ii(T) − log ∏_{t≥0} = −Σ_{t≥T} log(1 − λ_tδ) ≤ Σ_{t≥T}(x + x²), bounded
    # as in _log_product_bound with head = T (plus the bound's own slack `rest`)
    _, tail = _log_product_bound(0.5, beta, delta, head=T_max)
    p = influence(K, lam)
    p_last_formula = float(np.exp(diagonal(K, lam, log=True)[-1]))
    ms = [
        holds(f"{tag}_symbolic_no_collapse", sym is False,
              label=f"{setting}: theory.collapses says Σλ_t < ∞"),
        holds(f"{tag}_bound_positive", math.isfinite(log_inf),
              label=f"{setting}: ∏_t≥0 (1 − λ_t δ) > 0"),
        at_least(f"{tag}_min_log_diag_vs_bound", min(logmins), log_inf,
                 fp_log,
                 label=f"{setting}: min over T of log min_i P_ii vs log ∏_t≥0(1 − λδ)"),
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
    ]  # fmt: skip
    row = [kname, beta, delta, log_inf, min(logmins), logmins[-1], float(p[0]),
           1 - math.exp(log_inf)]  # fmt: skip
    return ms, row


@register(
    "PB4",
    "[A, D]",
    "no collapse when Σλ_t δ_t < ∞ (e.g. λ_t = λ0/(t+1)^β, β > 1): inf_T min_i P_ii > 0",
    assumptions=("Σ λ_t δ_t < ∞", "λ_t δ_t < 1"),
)
@quiet
def pb4(ctx: Context) -> Evidence:
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
            case_ms, row = _pb4_case(kname, K, beta, T_max, n, checkpoints, fp_log)
            ms += case_ms
            rows.append(row)
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
