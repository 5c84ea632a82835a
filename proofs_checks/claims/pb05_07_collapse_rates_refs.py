"""Dense references, the dense-product and exact judges and their loosened versions (for the
mutants) of claims PB5 and PB7 (:mod:`posflow.proofs_checks.claims.pb05_07_collapse_rates`):
the exact profile and moments of the uniform kernel against a Fraction dense product, and the
fitted exponential rate."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np

from posflow.proofs_checks.kit import at_most, close, exact_tol, fp_tol, quiet_log, rejects
from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import influence, power_decay, rollout_matrix
from posflow.theory import rollout as th

_EPS = float(np.finfo(np.float64).eps)  # 2.2e-16


def dense_judge(key, pairs, tol, label):
    """The judge of a rollout against its dense reference: the worst entry of the worst
    (got, reference) pair, max |got − ref| ≤ 0 + tol."""
    err = max(float(np.max(np.abs(np.asarray(g) - r))) for g, r in pairs)
    return at_most(key, err, 0.0, tol, label=label)


def one_hot(p, by):
    out = np.zeros_like(np.asarray(p, dtype=float))
    out.flat[-1] = by
    return out


def dense_power(K, lam):
    """R_{T−1}⋯R_0 by dense NumPy products of K's matrix."""
    A, n = K.dense(), K.n
    P = np.eye(n)
    for lt in lam:
        P = ((1 - lt) * np.eye(n) + lt * A) @ P
    return P


def dense_last_row(As):
    """e_{n−1} A_{T−1} ⋯ A_0 by dense NumPy vector–matrix products, shape (n,)."""
    n = As[0].shape[0]
    ref = np.eye(1, n, n - 1)[0]
    for A in As[::-1]:
        ref = ref @ A
    return ref


def self_dense_judge(original):
    def dense_judge(key, pairs, tol, label):  # each value compared with itself
        return original(key, [(g, g) for g, _ in pairs], tol, label)

    return dense_judge


def first_pair_judge(original):
    def dense_judge(key, pairs, tol, label):  # only the first rollout judged
        return original(key, pairs[:1], tol, label)

    return dense_judge


def finite_max_abs(ys) -> float:
    return max((abs(y) for y in ys if math.isfinite(y)), default=0.0)


def ls_weights(x):
    """Least-squares slope weights w (slope = Σ w_k y_k) for abscissae x."""
    x = np.asarray(x, dtype=float)
    d = x - x.mean()
    return d / (d @ d)


def pb5_bounds(worst_abs, worst_rel, worst_sum, T_top, n):
    """PB5's worst excesses over ∏(1 − ελ_t), both ways, and the row-sum error, judged."""
    fp_abs = 2 * T_top * (n + 4) * _EPS  # ℓ1 rounding of a row after T_top stochastic steps
    fp_rel = 2 * T_top * (n + 4) * _EPS  # relative, nonnegative arithmetic
    return [
        at_most("max_one_minus_P0_over_bound", worst_abs, 0.0,
                fp_tol(fp_abs, f"ℓ1 rounding of a row after T ≤ {T_top} stochastic steps: "
                               f"2·T·(n + 4)·ε = {fp_abs:.2g}"),
                label="max_{i,T} (1 − P[i,0]) − ∏(1 − ελ_t)"),
        at_most("max_log_offmass_over_bound", worst_rel, 0.0,
                fp_tol(fp_rel, f"relative rounding in nonnegative arithmetic after T ≤ {T_top} "
                               f"steps: 2·T·(n + 4)·ε = {fp_rel:.2g}"),
                label="max_{i,T} log Σ_{j≥1} P[i,j] − log ∏(1 − ελ_t)"),
        at_most("max_row_sum_error", worst_sum, 0.0,
                fp_tol(fp_abs, f"2·T·(n + 4)·ε = {fp_abs:.2g}"), label="max_{i,T} |row sum − 1|"),
    ]  # fmt: skip


# -- the exponential rate on the uniform kernel ----------------------------------------------


def _uniform_truncation(n, lam, T):
    """For the uniform kernel with constant λ: 1 − p(0) = Σ_{k≥1} (−1)^{k+1} C(n−1,k) ρ_k^T,
    ρ_k = 1 − λk/(k+1) (Hausdorff moments). Returns the bound Σ_{k≥2} C(n−1,k)/(n−1)
    (ρ_k/ρ_1)^T on the relative size of everything but the leading mode."""
    r1 = 1 - lam / 2
    return sum(
        math.comb(n - 1, k) / (n - 1) * ((1 - lam * k / (k + 1)) / r1) ** T for k in range(2, n)
    )


def exponential_rate(K, n, lam, points=8):
    """Fit the per-layer log-rate of Σ_{j≥1} p_T(j) for constant λ on the uniform kernel, on a
    window where the sub-leading modes are below 1e-17 relative. Returns (slope, tolerance,
    window, reason, (step matrix from rollout_matrix, its dense power))."""
    T_a = 1
    while _uniform_truncation(n, lam, T_a) > 1e-17:
        T_a = int(T_a * 1.1) + 1
    step = max(1, T_a // (4 * points))
    Ts = T_a + step * np.arange(points)
    p0 = influence(K, np.full(T_a, lam))
    M = rollout_matrix(K, np.full(step, lam))  # R^step
    ys, p = [], p0
    for _ in Ts:
        ys.append(quiet_log(p[1:].sum()))
        p = p @ M
    w = ls_weights(Ts)
    trunc = _uniform_truncation(n, lam, T_a)
    rel = (n + 4) * (int(Ts[-1]) + 1) * _EPS  # nonnegative arithmetic: relative error per entry
    rel += finite_max_abs(ys) * _EPS  # the log's own rounding
    tol = float(np.abs(w).sum() * (rel + 2 * trunc))
    reason = (
        f"Σ|w_k|·(rounding + truncation) = {np.abs(w).sum():.3g}·({rel:.2g} + 2·{trunc:.1g}): "
        f"rounding (n + 4)·T·ε for T ≤ {int(Ts[-1])} in nonnegative arithmetic plus |log|·ε, "
        "truncation Σ_k≥2 C(n−1,k)/(n−1)(ρ_k/ρ_1)^T of the Hausdorff expansion"
    )
    pair = (M, dense_power(K, np.full(step, lam)))
    return float(w @ np.array(ys)), tol, (int(Ts[0]), int(Ts[-1])), reason, pair


def pb7_uniform_rate(n=64):
    """The fitted log-rate on the uniform kernel (λ ≡ 1) against log A_11 and the stated bound,
    and the fit's step matrix (rollout_matrix) against a dense power; (measurements, n, window)."""
    rate, rate_tol, window, reason, step_pair = exponential_rate(uniform_kernel(n), n, 1.0)
    step = (window[1] - window[0]) // 7  # the fit's 8 depths are `step` apart
    fp_step = 2 * step * (n + 4) * _EPS
    return [
        close("uniform_rate_vs_subdominant_eigenvalue", rate, math.log(0.5),
              fp_tol(rate_tol, reason),
              label=f"uniform n = {n}, λ ≡ 1: fitted log-rate on T ∈ {list(window)} vs "
                    "log A_11 = log(1/2)"),
        at_most("uniform_rate_vs_stated_bound", rate, math.log1p(-1 / n), fp_tol(rate_tol, reason),
                label=f"uniform n = {n}, λ ≡ 1: fitted log-rate vs log(1 − ε), ε = 1/{n}"),
        dense_judge("step_matrix_vs_dense_power", [step_pair], fp_tol(
            fp_step, f"ℓ1 rounding after {step} steps of n = {n}: 2·step·(n + 4)·ε"),
            f"max |rollout_matrix(uniform, λ ≡ 1, {step} steps) − R^{step} (dense NumPy)|"),
    ], n, window  # fmt: skip


# -- the exact uniform-kernel profile and moments against a Fraction dense product -----------

# (n, λ_0…λ_{T−1}): mixed λ with the edges 0 and 1, PB5's λ ≡ 1/5 and harmonic 1/(2(t+1)),
# and the digest's λ ≡ 1 at n = 64
EXACT_CASES = (
    (9, ("1/2", "1", "1/3", "0", "3/4", "1/5", "2/7")),
    (6, ("1/5",) * 60),
    (24, tuple(f"1/{2 * (t + 1)}" for t in range(20))),
    (64, ("1",) * 10),
)


def frac(x) -> Fraction:
    """An exact number (int, string, Fraction or sympy Rational) as a Fraction."""
    if hasattr(x, "p") and hasattr(x, "q"):
        return Fraction(int(x.p), int(x.q))
    return Fraction(x)


def fraction_last_row(n, lams):
    """e_{n−1} R_{T−1}⋯R_0 in exact Fractions by dense matrix products, R_t = (1 − λ_t) I +
    λ_t C with the uniform kernel C[i, j] = 1/(i+1) (j ≤ i) written here; every entry."""
    C = [[Fraction(1, i + 1) if j <= i else Fraction(0) for j in range(n)] for i in range(n)]
    p = [Fraction(0)] * (n - 1) + [Fraction(1)]
    for lam in reversed([frac(x) for x in lams]):
        R = [[(1 - lam) * (i == j) + lam * C[i][j] for j in range(n)] for i in range(n)]
        p = [sum((p[i] * R[i][j] for i in range(n)), Fraction(0)) for j in range(n)]
    return p


def binomial_moments(p):
    """m_k = Σ_j p_j C(j,k)/C(n−1,k), k = 0…n−1: E[X^k] of a Hausdorff row p_j = C(n−1,j)
    E[X^j (1−X)^{n−1−j}] (since Σ_j C(j,k) C(n−1,j) x^j (1−x)^{n−1−j} = C(n−1,k) x^k)."""
    n = len(p)
    return [sum(p[j] * math.comb(j, k) for j in range(k, n)) / math.comb(n - 1, k)
            for k in range(n)]  # fmt: skip


_EXACT = exact_tol("exact rationals on both sides (sympy Rationals vs Fractions)")


def exact_judge(key, got, ref, label):
    """The judge of an exact routine: every entry, max_j |got_j − ref_j| ≤ 0 in rationals (a
    length mismatch is an infinite error)."""
    g, r = [frac(x) for x in got], [frac(x) for x in ref]
    same = bool(g) and len(g) == len(r)
    err = float(max(abs(a - b) for a, b in zip(g, r, strict=True))) if same else math.inf
    return at_most(key, err, 0.0, _EXACT, label=label)


def exact_measurements():
    """``th.influence_exact`` (every entry of the last row) and ``th.hausdorff_moments``
    (k = 0…n−1) against the Fraction dense product and its binomial moments on EXACT_CASES,
    with the negative controls of the exact judge."""
    got_p, ref_p, got_m, ref_m = [], [], [], []
    for n, lams in EXACT_CASES:
        p = fraction_last_row(n, lams)
        got_p += th.influence_exact(n, list(lams))
        ref_p += p
        got_m += th.hausdorff_moments(list(lams), n - 1)
        ref_m += binomial_moments(p)
    swapped = list(ref_p)
    swapped[7], swapped[8] = swapped[8], swapped[7]  # n = 9: the last two entries swapped
    tiny = [*ref_p[:-1], ref_p[-1] + Fraction(1, 10**30)]
    cases = "n = 9 (7 mixed λ), n = 6 (λ ≡ 1/5, T = 60), n = 24 (λ_t = 1/(2(t+1)), T = 20), " \
            "n = 64 (λ ≡ 1, T = 10)"  # fmt: skip
    return [
        exact_judge("influence_exact_vs_fraction_product", got_p, ref_p,
                    f"max_j |influence_exact − e_(n−1) R_(T−1)⋯R_0 (Fractions, dense)|, {cases}"),
        exact_judge("hausdorff_moments_vs_binomial_moments", got_m, ref_m,
                    "max_k |hausdorff_moments − Σ_j p_j C(j,k)/C(n−1,k) of the Fraction product|"
                    f", k = 0…n−1, {cases}"),
        rejects("exact_judge_control_two_entries_swapped",
                exact_judge("c", got_p, swapped, "c"),
                "p(7) and p(8) of the n = 9 reference swapped (same sum, same set of values)"),
        rejects("exact_judge_control_last_entry_off_1e-30",
                exact_judge("c", got_p, tiny, "c"),
                "the last reference entry moved by 1e-30 (invisible to a float comparison)"),
    ]  # fmt: skip


def power_decay_pairs():
    """(power_decay(λ0, 1, T), λ0/(t+1) written directly) for PB5's two harmonic schedules."""
    t1 = np.arange(1, 3001, dtype=float)
    return [(power_decay(0.5, 1.0, 60), 0.5 / t1[:60]), (power_decay(1.0, 1.0, 3000), 1.0 / t1)]


POWER_TOL = fp_tol(_EPS, "x**1.0 is exact and λ0/x correctly rounded on both sides: ≤ 1 ulp "
                   "of λ0 ≤ 1, 2.2e-16")  # fmt: skip


# -- mutant makers (registered in the claim module) ------------------------------------------


def influence_exact_drops_a_layer(original):
    @functools.wraps(original)
    def influence_exact(n, lambdas, *, exact=None):
        return original(n, list(lambdas)[:-1], exact=exact)  # the last layer lost

    return influence_exact


def hausdorff_moments_shifted(original):
    @functools.wraps(original)
    def hausdorff_moments(lambdas, kmax, *, exact=None):
        return original(lambdas, kmax + 1, exact=exact)[1:]  # m_(k+1) returned as m_k

    return hausdorff_moments


def sums_only_judge(original):
    @functools.wraps(original)
    def exact_judge(key, got, ref, label):  # only the sums compared (order-invariant)
        return original(key, [sum(frac(x) for x in got)], [sum(frac(x) for x in ref)], label)

    return exact_judge
