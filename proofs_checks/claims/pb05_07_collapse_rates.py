"""Claims PB5 and PB7 of [A, W]: collapse onto token 0 and its rates, and attention-only collapse
(no collapse for summable schedules, PB4, and the dichotomy, PB6, are in
:mod:`posflow.proofs_checks.claims.pb04_no_collapse` and
:mod:`posflow.proofs_checks.claims.pb06_dichotomy`).

Mass off token 0 is always measured both ways, ``1 − P[i,0]`` and ``Σ_{j≥1} P[i,j]``, with the
row sum checked too, so a rollout that leaks mass cannot pass for one that collapses.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from posflow.proofs_checks.claims import pb05_07_collapse_rates_refs as refs
from posflow.proofs_checks.kit import (
    CHAIN,
    DENSE_APPLY,
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
    leaky_residual_step,
    nan_max,
    negated_result,
    quiet,
    quiet_log,
    random_causal,
    register,
    rejects,
    reversed_layer_order,
    swapped_residual_weights,
    transposed_dense_apply,
)
from posflow.simulate.kernels import dense_kernel, uniform_kernel
from posflow.simulate.rollout import influence, power_decay, rollout_matrix
from posflow.theory import rollout as th

_EPS = float(np.finfo(np.float64).eps)  # 2.2e-16


def _off_token0(P):
    """For the rows i ≥ 1 of a rollout matrix (or a profile): 1 − P[i,0], Σ_{j≥1} P[i,j] and the
    worst |row sum − 1|."""
    P = np.atleast_2d(P)
    rows = P[1:] if P.shape[0] > 1 else P
    return 1.0 - rows[:, 0], rows[:, 1:].sum(axis=1), float(np.abs(P.sum(axis=1) - 1).max())


# the designed 3-token kernel of the polynomial-rate test: A[1,1] = a, A[2,2] = 0, so with
# λ_0 = 1 the row-2 mode dies at t = 0 and 1 − P[2,0] = (v/a)·Γ(T+a)/(Γ(a)Γ(T+1)) for T ≥ 1
_POLY_A, _POLY_V = 0.6, 0.3
_POLY_KERNEL = [[1.0, 0.0, 0.0], [1 - _POLY_A, _POLY_A, 0.0], [1 - _POLY_V, _POLY_V, 0.0]]


def _polynomial_exponent(T_lo, T_hi, points=8):
    """Fit d log(1 − P[2,0]) / d log T for λ_t = 1/(t+1) on the designed kernel; the bracket for
    the fitted slope from Wendel's inequality (T/(T+a))^{1−a} ≤ Γ(T+a)/(T^a Γ(T)) ≤ 1."""
    K = dense_kernel(np.array(_POLY_KERNEL))
    a = _POLY_A
    Ts = np.unique(np.geomspace(T_lo, T_hi, points).astype(int))
    lam = power_decay(1.0, 1.0, int(Ts[-1]))
    P, prev, ys = np.eye(3), 0, []
    for T in Ts:
        P = rollout_matrix(K, lam[prev:T]) @ P  # R_{T−1}⋯R_prev · P(prev) = P(T)
        prev = int(T)
        _, off, _ = _off_token0(P)
        ys.append(quiet_log(off[-1]))
    w = refs.ls_weights(np.log(Ts))
    L = -(1 - a) * np.log1p(a / Ts)  # log of Wendel's lower factor, ≤ 0
    lo = (a - 1) + float(np.minimum(w * L, 0).sum())
    hi = (a - 1) + float(np.maximum(w * L, 0).sum())
    rel = 8 * int(Ts[-1]) * _EPS + refs.finite_max_abs(ys) * _EPS
    return float(w @ np.array(ys)), lo, hi, float(np.abs(w).sum() * rel), Ts


# ---------------------------------------------------------------------------------------------
# PB5

# name: (schedule λ(T), its exact (λ0, β) for theory.power_decay_collapses, tag)
_SCHEDULES = {
    "λ ≡ 1": (lambda T: np.full(T, 1.0), ("1", None), "lambda1"),
    "λ ≡ 0.2": (lambda T: np.full(T, 0.2), ("1/5", None), "lambda0.2"),
    "λ = 0.5/(t+1)": (lambda T: power_decay(0.5, 1.0, T), ("1/2", "1"), "harmonic0.5"),
}


def _pb5_rollouts(kernels, Ts, n):
    """Full rollout matrices at depths ``Ts`` for every kernel and schedule: the worst
    (1 − P[i,0]) − ∏(1 − ελ_t), log Σ_{j≥1} P[i,j] − log ∏(1 − ελ_t) and |row sum − 1|, and
    the table rows at the last depth."""
    T_top = Ts[-1]
    worst_abs = worst_rel = worst_sum = -np.inf
    rows = []
    for kname, K in kernels.items():
        eps = float(K.dense()[:, 0].min())
        for sname, (sched, _, _) in _SCHEDULES.items():
            lam_all = sched(T_top)
            P, prev = np.eye(n), 0
            for T in Ts:
                P = rollout_matrix(K, lam_all[prev:T]) @ P  # = R_{T−1}⋯R_0
                prev = T
                one_minus, off, rowsum = _off_token0(P)
                log_bound = float(np.log1p(-eps * lam_all[:T]).sum())  # log ∏(1 − ε λ_t)
                worst_abs = nan_max(worst_abs, float(one_minus.max()) - math.exp(log_bound))
                worst_rel = nan_max(worst_rel, float(np.log(off).max()) - log_bound)
                worst_sum = nan_max(worst_sum, rowsum)
            rows.append([kname, sname, eps, float(off[-1]), float(one_minus[-1]),
                         math.exp(log_bound), math.exp(-eps * float(lam_all.sum()))])  # fmt: skip
    return (worst_abs, worst_rel, worst_sum), rows


def _pb5_dense(kernels, n):
    """rollout_matrix against a dense NumPy product R_29⋯R_0 for every kernel and schedule,
    with the negative control of the dense judge."""
    pairs = [(rollout_matrix(K, sched(30)), refs.dense_power(K, sched(30)))
             for K in kernels.values() for sched, _, _ in _SCHEDULES.values()]  # fmt: skip
    tol30 = fp_tol(2 * 30 * (n + 4) * _EPS, "ℓ1 rounding after T = 30 steps of n = 64: "
                                            "2·T·(n + 4)·ε = 9e-13")  # fmt: skip
    return [
        refs.dense_judge("rollout_matrix_vs_dense_product", pairs, tol30,
                         "max |rollout_matrix − R_29⋯R_0 (dense NumPy)|, T = 30, every kernel "
                         "and schedule"),
        rejects("dense_judge_control_one_entry_wrong",
                refs.dense_judge("c", [(pairs[-1][0] + refs.one_hot(pairs[-1][0], 1e-9),
                                        pairs[-1][1])], tol30, "c"),
                "P[n−1,n−1] of one rollout moved by 1e-9"),
    ]  # fmt: skip


def _pb5_exact(U, n):
    """The uniform kernel against the exact Hausdorff profile (theory.influence_exact) and the
    digest's regression value; power_decay against its formula; influence_exact and
    hausdorff_moments against the Fraction dense product."""
    ms = []
    for tag, sname, lam_exact, T in (
        ("lambda1", "λ ≡ 1", [1] * 10, 10),
        ("lambda0.2", "λ ≡ 0.2", ["1/5"] * 60, 60),
        ("harmonic0.5", "λ = 0.5/(t+1)", [f"1/{2 * (t + 1)}" for t in range(60)], 60),
    ):
        exact = th.influence_exact(n, lam_exact)
        ref_off = float(sum(exact[1:]))
        p = influence(U, [float(sp.Rational(x)) for x in lam_exact])
        tol = fp_tol(
            8 * T * n * _EPS * ref_off + 2 * _EPS * ref_off,
            f"relative 8·T·n·ε = 8·{T}·{n}·2.2e-16, λ read to the nearest double",
        )
        ms += [
            close(f"uniform_{tag}_offmass_vs_exact", float(p[1:].sum()), ref_off, tol,
                  label=f"uniform, {sname}, T = {T}: Σ_{{j≥1}} p(j) vs exact"),
            close(f"uniform_{tag}_one_minus_p0_vs_exact", 1 - float(p[0]), ref_off,
                  fp_tol(8 * T * n * _EPS, f"absolute 8·T·n·ε = 8·{T}·{n}·2.2e-16"),
                  label=f"uniform, {sname}, T = {T}: 1 − p(0) vs exact"),
        ]  # fmt: skip
    # the digest's regression values (papers/A §6.3 item 5), to their printed rounding
    p10 = influence(U, np.full(10, 1.0))
    ms.append(close("uniform_lambda1_T10_offmass_vs_digest", float(p10[1:].sum()), 4.4e-2,
                    fp_tol(5e-4, "the digest prints 2 significant digits: 4.4e-2 ± 5e-4"),
                    label="uniform, λ ≡ 1, T = 10: 1 − P_{63,0} vs the digest's 4.4e-2"),
              )  # fmt: skip
    ms.append(refs.dense_judge("power_decay_vs_direct_formula", refs.power_decay_pairs(),
                               refs.POWER_TOL, "max_t |power_decay(λ0, 1, T) − λ0/(t+1)|, "
                               "λ0 = 0.5 (T = 60) and 1 (T = 3000)"))  # fmt: skip
    return ms + refs.exact_measurements()


def _pb5_rates(U, n, full):
    """Exponential rate for constant λ (uniform kernel: ρ = 1 − λ(1 − A_11), A_11 = 1/2
    exactly) and the polynomial exponent on the designed kernel; the comparisons, the
    exponential window and the polynomial depths."""
    rate, rate_tol, window, reason, _ = refs.exponential_rate(U, n, 0.2)
    rho = float(th.hausdorff_moments(["1/5"], 1)[1])  # 1 − λ + λ/2, the leading mode's factor
    T_lo, T_hi = (1000, 20000) if full else (300, 3000)
    slope, lo, hi, sfp, pTs = _polynomial_exponent(T_lo, T_hi)
    eps_poly = min(1 - _POLY_A, 1 - _POLY_V)  # = 0.4: the stated exponent ελ0 is attained
    ms = [
        close("exponential_rate_lambda0.2", rate, math.log(rho), fp_tol(rate_tol, reason),
              label=f"uniform, λ ≡ 0.2: fitted log-rate per layer on T ∈ {list(window)} vs "
                    "log(1 − λ/2)"),
        at_most("exponential_rate_vs_stated_bound", rate, math.log1p(-0.2 / n),
                fp_tol(rate_tol, reason),
                label="uniform, λ ≡ 0.2: fitted log-rate vs the bound's log(1 − ελ), ε = 1/64"),
        at_least("polynomial_exponent_vs_wendel_lower", slope, lo,
                 fp_tol(sfp, "Σ|w_k|·8·T·ε on the logs"),
                 label="designed kernel, λ_t = 1/(t+1): fitted d log(1 − P[2,0])/d log T vs "
                       "the lower end of −ελ0 + Wendel bracket"),
        at_most("polynomial_exponent_vs_wendel_upper", slope, hi,
                fp_tol(sfp, "Σ|w_k|·8·T·ε on the logs"),
                label="designed kernel, λ_t = 1/(t+1): fitted exponent vs the upper end of "
                      "−ελ0 + Wendel bracket"),
        info("stated_exponent", -eps_poly * 1.0, label="−ελ0 (ε = min_i A[i,0] = 0.4, λ0 = 1)"),
    ]  # fmt: skip
    return ms, window, pTs


_PB5_CITES = (
    cite("posflow.simulate.rollout:rollout_matrix",
         "a dense NumPy product R_29⋯R_0 (every entry)", "rollout_matrix_vs_dense_product"),
    cite("posflow.simulate.rollout:influence",
         "the exact Hausdorff profile of the uniform kernel in rationals",
         "uniform_lambda0.2_offmass_vs_exact", "uniform_harmonic0.5_offmass_vs_exact"),
    cite("posflow.theory.rollout:influence_exact",
         "e_(n−1) R_(T−1)⋯R_0 by dense Fraction products, every entry (n = 6, 9, 24, 64)",
         "influence_exact_vs_fraction_product"),
    cite("posflow.theory.rollout:hausdorff_moments",
         "the binomial moments Σ_j p_j C(j,k)/C(n−1,k) of the Fraction product's last row",
         "hausdorff_moments_vs_binomial_moments"),
    cite("posflow.simulate.rollout:power_decay", "λ0/(t+1) written directly (λ0 = 0.5, 1)",
         "power_decay_vs_direct_formula"),
    cite("posflow.theory.rollout:power_decay_collapses",
         "the p-series rule (constant and harmonic schedules diverge)",
         "symbolic_collapse_lambda1", "symbolic_collapse_harmonic0.5"),
)  # fmt: skip


@register(
    "PB5",
    "[A]",
    "collapse onto token 0 when Σλ_t = ∞ and A_t[i,0] ≥ ε: 1 − P[i,0] ≤ exp(−ε Σλ_t); "
    "exponential rate for constant λ, polynomial T^{−ελ0} for λ_t = λ0/(t+1)",
    assumptions=("A_t[i,0] ≥ ε > 0 for every i, t",),
    compares=_PB5_CITES,
    basis="[A]'s dichotomy, the collapse direction with residuals; Wu et al. [W] prove the "
    "attention-only case λ ≡ 1 (PB7); the bound and its rates are reconstructed from [A]'s "
    "definitions ([D]): the theorem's text was not available",
)
@quiet
def pb5(ctx: Context) -> Evidence:
    """Claim PB5 of [A, W, D]: collapse onto token 0 and its rates.

    Full rollouts ``rollout_matrix`` (n = 64, the uniform and a random causal kernel; λ ≡ 1,
    λ ≡ 0.2 and λ_t = 0.5/(t+1) from ``power_decay``) against ∏_t(1 − ελ_t) at every depth, both
    as 1 − P[i,0] and as Σ_{j≥1} P[i,j], with the row sums; ``rollout_matrix`` against a dense
    NumPy product (every entry). The uniform kernel's ``influence`` against the exact profile
    ``th.influence_exact``, itself compared entry by entry with a Fraction dense product, and
    ``th.hausdorff_moments`` with that product's binomial moments. The exponential rate at
    λ = 0.2 against log(1 − λ/2) (a Hausdorff moment) and the stated log(1 − ελ); the
    polynomial exponent on a designed 3-token kernel against −ελ0 within Wendel's bracket;
    ``th.power_decay_collapses`` against the p-series rule; ``power_decay`` against λ0/(t+1).
    Negative controls: the dense judge rejects one wrong entry, the exact judge two swapped
    entries and an entry off by 1e-30.
    """
    n = 64
    rng = np.random.default_rng(ctx.seed + 5)
    kernels = {
        "uniform": uniform_kernel(n),
        "random causal": dense_kernel(random_causal(rng, n, floor=0.01)),
    }
    Ts = [1, 3, 10, 30, 100, 300, 1000] if ctx.full else [1, 3, 10, 30, 100, 300]
    T_top = Ts[-1]
    worst, rows = _pb5_rollouts(kernels, Ts, n)
    ms = [
        holds(f"symbolic_collapse_{tag}", th.power_decay_collapses(*key) is True,
              label=f"theory.collapses says Σλ_t = ∞ for {sname}")
        for sname, (_, key, tag) in _SCHEDULES.items()
    ]  # fmt: skip
    ms += refs.pb5_bounds(*worst, T_top, n)
    ms += _pb5_dense(kernels, n) + _pb5_exact(kernels["uniform"], n)
    rate_ms, window, pTs = _pb5_rates(kernels["uniform"], n, ctx.full)
    ms += rate_ms
    table = Table("cases", f"1 − P[n−1,0] at T = {T_top} against the bounds (n = {n})",
                  ["kernel", "schedule", "ε", "Σ_{j≥1} P[n−1,j]", "1 − P[n−1,0]", "∏(1 − ελ_t)",
                   "exp(−εΣλ_t)"], rows)  # fmt: skip
    return Evidence(
        ms,
        tables=[table],
        setup=f"n = {n}: uniform and a seeded random causal kernel (A[i,0] ≥ 0.01), λ ≡ 1, 0.2 "
        f"and 0.5/(t+1), full rollout matrices at T = {Ts}; exact Hausdorff profiles (T ≤ 60); "
        f"exponential rate on the uniform kernel at λ = 0.2 (window {window}); polynomial "
        f"exponent on a 3-token kernel A = {_POLY_KERNEL}, λ_t = 1/(t+1), T ∈ "
        f"[{int(pTs[0])}, {int(pTs[-1])}].",
    )


# ---------------------------------------------------------------------------------------------
# PB7


def _pb7_random(rng, cases, T_top, n_top):
    """Seeded attention-only rollouts with non-commuting layers: the (influence, dense
    reference) pairs and the worst excess over ∏_t(1 − ε_t), both ways, and row-sum error."""
    worst_abs = worst_rel = worst_sum = -np.inf
    pairs = []
    for _ in range(cases):
        n, T = int(rng.integers(2, n_top + 1)), int(rng.integers(1, T_top + 1))
        floors = rng.uniform(0.01, 0.2, T)
        As = [random_causal(rng, n, floor=float(f)) for f in floors]  # non-commuting layers
        p = influence([dense_kernel(A) for A in As], np.ones(T))
        pairs.append((p, refs.dense_last_row(As)))
        eps = np.array([A[1:, 0].min() if n > 1 else 1.0 for A in As])
        log_bound = float(np.log1p(-eps).sum())
        one_minus, off, rowsum = _off_token0(p)
        worst_abs = nan_max(worst_abs, float(one_minus[0]) - math.exp(log_bound))
        worst_rel = nan_max(worst_rel, quiet_log(off[0]) - log_bound)
        worst_sum = nan_max(worst_sum, rowsum)
    return pairs, worst_abs, worst_rel, worst_sum


_PB7_CITES = (
    cite("posflow.simulate.rollout:influence",
         "e_(n−1) A_(T−1)⋯A_0 by dense NumPy vector–matrix products", "max_error_vs_dense_product"),
    cite("posflow.simulate.rollout:rollout_matrix",
         "the dense NumPy power R^step of the uniform kernel (every entry)",
         "step_matrix_vs_dense_power"),
)  # fmt: skip


@register(
    "PB7",
    "[W]",
    "attention-only rollout (λ ≡ 1) collapses onto token 0 exponentially fast",
    assumptions=("A[i,0] ≥ ε > 0",),
    compares=_PB7_CITES,
)
@quiet
def pb7(ctx: Context) -> Evidence:
    """Claim PB7 of [W]: attention-only (λ ≡ 1) collapse onto token 0, exponentially fast.

    Seeded rollouts with non-commuting layers (n ≤ 24, T ≤ 60, A_t[i,0] ≥ ε_t): ``influence``
    against e_(n−1) A_(T−1)⋯A_0 by dense NumPy products (the worst entry of the worst rollout),
    and 1 − p(0) and Σ_{j≥1} p(j) against ∏_t(1 − ε_t), with the row sums. On the uniform kernel
    (n = 64) the fitted per-layer log-rate against log A_11 = log(1/2) and the stated
    log(1 − 1/n); the step matrix of that fit (``rollout_matrix``) against a dense power.
    Negative control: the dense judge rejects a last rollout with one entry moved by 1e-9.
    """
    rng = np.random.default_rng(ctx.seed + 7)
    cases = 40 if ctx.full else 12
    T_top, n_top = 60, 24
    pairs, worst_abs, worst_rel, worst_sum = _pb7_random(rng, cases, T_top, n_top)
    fp = 2 * T_top * (n_top + 4) * _EPS
    rate_ms, n, window = refs.pb7_uniform_rate()
    dense_tol = fp_tol(fp, f"ℓ1 rounding after T ≤ {T_top} steps of n ≤ {n_top}: "
                           f"2·T·(n + 4)·ε = {fp:.2g}")  # fmt: skip
    ms = [
        refs.dense_judge("max_error_vs_dense_product", pairs, dense_tol,
                     "max |influence − e_{n−1}A_{T−1}⋯A_0 (dense NumPy)|"),
        rejects("dense_judge_control_one_entry_wrong",
                refs.dense_judge("c", [pairs[0], (pairs[-1][0] + refs.one_hot(pairs[-1][0], 1e-9),
                                              pairs[-1][1])], dense_tol, "c"),
                "the last rollout's last entry moved by 1e-9 (the worst rollout must be seen)"),
        at_most("max_one_minus_P0_over_bound", worst_abs, 0.0,
                fp_tol(fp, f"2·T·(n + 4)·ε = {fp:.2g}"),
                label="max (1 − p(0)) − ∏_t(1 − ε_t)"),
        at_most("max_log_offmass_over_bound", worst_rel, 0.0,
                fp_tol(fp, f"relative, nonnegative arithmetic: 2·T·(n + 4)·ε = {fp:.2g}"),
                label="max log Σ_{j≥1} p(j) − log ∏_t(1 − ε_t)"),
        at_most("max_row_sum_error", worst_sum, 0.0, fp_tol(fp, f"2·T·(n + 4)·ε = {fp:.2g}"),
                label="max |Σ_j p(j) − 1|"),
        info("random_rollouts", cases),
        *rate_ms,
    ]  # fmt: skip
    return Evidence(
        ms,
        setup=f"{cases} seeded attention-only rollouts (λ ≡ 1), n ≤ {n_top}, T ≤ {T_top}, each "
        "layer its own Dirichlet kernel with A_t[i,0] ≥ ε_t ~ U[0.01, 0.2]; the rate on the "
        f"uniform kernel n = {n} (window {window}).",
    )


# -- mutants: small realistic breaks each claim above must catch ----------------------------------
add_mutant(("PB5", "PB7"), "residual-weights-swapped", RESIDUAL_STEP, swapped_residual_weights,
           "the residual step computes λ p + (1 − λ) p A "
           "(λ read as the residual weight)")  # fmt: skip
add_mutant("PB5", "summability-test-inverted", SUMMABILITY_TEST, negated_result,
           "theory.collapses' comparison tests conclude the opposite way")  # fmt: skip
add_mutant(("PB5", "PB7"), "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
add_mutant(("PB5", "PB7"), "transposed-dense-kernel", DENSE_APPLY, transposed_dense_apply,
           "a measured kernel is applied as p Aᵀ instead of p A")  # fmt: skip
add_mutant("PB7", "reversed-layer-order", CHAIN, reversed_layer_order(),
           "the layer product taken as R_0 ⋯ R_{T−1} instead of R_{T−1} ⋯ R_0")  # fmt: skip


_ME = "posflow.proofs_checks.claims.pb05_07_collapse_rates_refs"
add_mutant(("PB5", "PB7"), "judge-self-comparison", f"{_ME}:dense_judge",
           refs.self_dense_judge,
           "the dense-product judge compares each rollout with itself")  # fmt: skip
add_mutant("PB7", "judge-first-rollout-only", f"{_ME}:dense_judge", refs.first_pair_judge,
           "the dense-product judge looks only at the first rollout, not the worst")  # fmt: skip
add_mutant("PB5", "influence-exact-drops-a-layer", "posflow.theory.rollout:influence_exact",
           refs.influence_exact_drops_a_layer,
           "theory's exact uniform profile leaves out the last layer")  # fmt: skip
add_mutant("PB5", "hausdorff-moments-shifted", "posflow.theory.rollout:hausdorff_moments",
           refs.hausdorff_moments_shifted, "hausdorff_moments returns m_(k+1) as m_k")  # fmt: skip
add_mutant("PB5", "exact-judge-sums-only", f"{_ME}:exact_judge", refs.sums_only_judge,
           "the exact judge compares only the sums of the entries")  # fmt: skip
