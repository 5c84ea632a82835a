"""Claims PB4–PB7 of [A] and [W]: no collapse for summable schedules, collapse and its rates,
the dichotomy, and attention-only collapse.

Mass off token 0 is always measured both ways, ``1 − P[i,0]`` and ``Σ_{j≥1} P[i,j]``, with the row sum
checked too, so a rollout that leaks mass cannot pass for one that collapses.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import (
    CHAIN,
    RESIDUAL_STEP,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    close,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    param_tol,
    random_causal,
    register,
    reversed_layer_order,
    scaled_argument,
    undecided,
)
from posflow.simulate.kernels import alibi_kernel, dense_kernel, uniform_kernel
from posflow.simulate.rollout import constant, diagonal, influence, power_decay, rollout_matrix
from posflow.theory import rollout as th

_t = sp.Symbol("t", integer=True, nonnegative=True)
_EPS = float(np.finfo(np.float64).eps)  # 2.2e-16


@functools.cache
def _collapses(lam0: str, beta: str | None = None):
    """theory.collapses for λ_t = lam0 (beta None) or lam0/(t+1)^beta (memoised per process;
    the mutant runner clears the memo)."""
    sched = sp.Rational(lam0) if beta is None else sp.Rational(lam0) / (_t + 1) ** sp.Rational(beta)
    return th.collapses(sched, _t)


def _quiet(check):
    """Run a check with NumPy's divide/invalid warnings off: a broken rollout (a mutant) that
    drives a mass to 0 or NaN must give a failing comparison, not a warning turned error."""

    @functools.wraps(check)
    def run(ctx):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return check(ctx)

    return run


def _log(x: float) -> float:
    """log x with log 0 = −inf and NaN for negative or NaN x (no exception)."""
    x = float(x)
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def _worst(a: float, b: float) -> float:
    """max(a, b) that keeps NaN (Python's max would drop it)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)


def _finite_max_abs(ys) -> float:
    return max((abs(y) for y in ys if math.isfinite(y)), default=0.0)


def _off_token0(P):
    """For the rows i ≥ 1 of a rollout matrix (or a profile): 1 − P[i,0], Σ_{j≥1} P[i,j] and the
    worst |row sum − 1|."""
    P = np.atleast_2d(P)
    rows = P[1:] if P.shape[0] > 1 else P
    return 1.0 - rows[:, 0], rows[:, 1:].sum(axis=1), float(np.abs(P.sum(axis=1) - 1).max())


def _ls_weights(x):
    """Least-squares slope weights w (slope = Σ w_k y_k) for abscissae x."""
    x = np.asarray(x, dtype=float)
    d = x - x.mean()
    return d / (d @ d)


# ---------------------------------------------------------------------------------------------
# PB4


def _log_product_bound(lam0, beta, delta, head=10**5):
    """A lower bound on log ∏_{t≥0}(1 − λ_t δ), λ_t = λ0/(t+1)^β, β > 1: the exact sum over
    t < ``head`` plus a bound on the rest. For x = λ_t δ ≤ 1/2, log(1 − x) ≥ −x − x², and
    Σ_{s>head} s^{−q} ≤ ∫_head^∞ s^{−q} ds = head^{1−q}/(q − 1)."""
    lam = power_decay(lam0, beta, head)
    a = lam0 * delta
    rest = a * head ** (1 - beta) / (beta - 1) + a * a * head ** (1 - 2 * beta) / (2 * beta - 1)
    return float(np.log1p(-lam * delta).sum() - rest), float(rest)


@register(
    "PB4",
    "[A, D]",
    "no collapse when Σλ_t δ_t < ∞ (e.g. λ_t = λ0/(t+1)^β, β > 1): inf_T min_i P_ii > 0",
    assumptions=("Σ λ_t δ_t < ∞", "λ_t δ_t < 1"),
)
@_quiet
def pb4(ctx: Context) -> Evidence:
    T_max = 20000 if ctx.full else 2000
    n = 256 if ctx.full else 64
    checkpoints = sorted({*(10**k for k in range(1, int(np.log10(T_max)) + 1)), T_max})
    ms, rows = [], []
    # rounding: T_max convex steps, ≤ 4 roundings of each entry per step (relative, nonnegative
    # arithmetic), and ≤ n terms per row sum
    fp_chain = 4 * T_max * _EPS
    fp_sum = (n + 4) * T_max * _EPS
    fp_log = fp_tol(
        2 * (T_max + 2) * _EPS * 2,
        f"≤ T = {T_max} log1p terms within 2ε each plus the summation, on |log| ≤ 2: "
        f"2·(T + 2)·ε·2 = {2 * (T_max + 2) * _EPS * 2:.2g}",
    )
    for kname, K in (("uniform", uniform_kernel(n)), ("alibi m=0.05", alibi_kernel(n, 0.05))):
        delta = float(np.max(1 - K.diagonal()))
        for beta in (1.5, 2.0):
            tag = f"{kname.split()[0]}_beta{beta:g}"
            setting = f"{kname}, β = {beta:g}"
            sym = _collapses("1/2", str(sp.nsimplify(beta)))
            log_inf, rest = _log_product_bound(0.5, beta, delta)
            lam = power_decay(0.5, beta, T_max)
            logmins = [float(diagonal(K, lam[:T], log=True).min()) for T in checkpoints]
            # for a stationary kernel row n−1 attains min_i P_ii (PB3's equality), so
            # log min P_ii(T) − log ∏_{t≥0} = −Σ_{t≥T} log(1 − λ_tδ) ≤ Σ_{t≥T}(x + x²), bounded
            # as in _log_product_bound with head = T (plus the bound's own slack `rest`)
            _, tail = _log_product_bound(0.5, beta, delta, head=T_max)
            p = influence(K, lam)
            p_last_formula = float(np.exp(diagonal(K, lam, log=True)[-1]))
            ms += [
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
            rows.append([kname, beta, delta, log_inf, min(logmins), logmins[-1], float(p[0]),
                         1 - math.exp(log_inf)])  # fmt: skip
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


# ---------------------------------------------------------------------------------------------
# PB5


def _uniform_truncation(n, lam, T):
    """For the uniform kernel with constant λ: 1 − p(0) = Σ_{k≥1} (−1)^{k+1} C(n−1,k) ρ_k^T,
    ρ_k = 1 − λk/(k+1) (Hausdorff moments). Returns the bound Σ_{k≥2} C(n−1,k)/(n−1)
    (ρ_k/ρ_1)^T on the relative size of everything but the leading mode."""
    r1 = 1 - lam / 2
    return sum(
        math.comb(n - 1, k) / (n - 1) * ((1 - lam * k / (k + 1)) / r1) ** T for k in range(2, n)
    )


def _exponential_rate(K, n, lam, points=8):
    """Fit the per-layer log-rate of Σ_{j≥1} p_T(j) for constant λ on the uniform kernel, on a
    window where the sub-leading modes are below 1e-17 relative. Returns (slope, tolerance, window,
    reason)."""
    T_a = 1
    while _uniform_truncation(n, lam, T_a) > 1e-17:
        T_a = int(T_a * 1.1) + 1
    step = max(1, T_a // (4 * points))
    Ts = T_a + step * np.arange(points)
    p0 = influence(K, constant(lam, T_a))
    M = rollout_matrix(K, constant(lam, step))  # R^step
    ys, p = [], p0
    for _ in Ts:
        ys.append(_log(p[1:].sum()))
        p = p @ M
    w = _ls_weights(Ts)
    trunc = _uniform_truncation(n, lam, T_a)
    rel = (n + 4) * (int(Ts[-1]) + 1) * _EPS  # nonnegative arithmetic: relative error per entry
    rel += _finite_max_abs(ys) * _EPS  # the log's own rounding
    tol = float(np.abs(w).sum() * (rel + 2 * trunc))
    reason = (
        f"Σ|w_k|·(rounding + truncation) = {np.abs(w).sum():.3g}·({rel:.2g} + 2·{trunc:.1g}): "
        f"rounding (n + 4)·T·ε for T ≤ {int(Ts[-1])} in nonnegative arithmetic plus |log|·ε, "
        "truncation Σ_k≥2 C(n−1,k)/(n−1)(ρ_k/ρ_1)^T of the Hausdorff expansion"
    )
    return float(w @ np.array(ys)), tol, (int(Ts[0]), int(Ts[-1])), reason


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
        ys.append(_log(off[-1]))
    w = _ls_weights(np.log(Ts))
    L = -(1 - a) * np.log1p(a / Ts)  # log of Wendel's lower factor, ≤ 0
    lo = (a - 1) + float(np.minimum(w * L, 0).sum())
    hi = (a - 1) + float(np.maximum(w * L, 0).sum())
    rel = 8 * int(Ts[-1]) * _EPS + _finite_max_abs(ys) * _EPS
    return float(w @ np.array(ys)), lo, hi, float(np.abs(w).sum() * rel), Ts


@register(
    "PB5",
    "[A, W, D]",
    "collapse onto token 0 when Σλ_t = ∞ and A_t[i,0] ≥ ε: 1 − P[i,0] ≤ exp(−ε Σλ_t); "
    "exponential rate for constant λ, polynomial T^{−ελ0} for λ_t = λ0/(t+1)",
    assumptions=("A_t[i,0] ≥ ε > 0 for every i, t",),
)
@_quiet
def pb5(ctx: Context) -> Evidence:
    n = 64
    rng = np.random.default_rng(ctx.seed + 5)
    kernels = {
        "uniform": uniform_kernel(n),
        "random causal": dense_kernel(random_causal(rng, n, floor=0.01)),
    }
    schedules = {
        "λ ≡ 1": (lambda T: constant(1.0, T), ("1", None), "lambda1"),
        "λ ≡ 0.2": (lambda T: constant(0.2, T), ("1/5", None), "lambda0.2"),
        "λ = 0.5/(t+1)": (lambda T: power_decay(0.5, 1.0, T), ("1/2", "1"), "harmonic0.5"),
    }
    Ts = [1, 3, 10, 30, 100, 300, 1000] if ctx.full else [1, 3, 10, 30, 100, 300]
    T_top = Ts[-1]
    fp_abs = 2 * T_top * (n + 4) * _EPS  # ℓ1 rounding of a row after T_top stochastic steps
    fp_rel = 2 * T_top * (n + 4) * _EPS  # relative, nonnegative arithmetic
    worst_abs = worst_rel = worst_sum = -np.inf
    rows = []
    for kname, K in kernels.items():
        eps = float(K.dense()[:, 0].min())
        for sname, (sched, _, _) in schedules.items():
            lam_all = sched(T_top)
            P, prev = np.eye(n), 0
            for T in Ts:
                P = rollout_matrix(K, lam_all[prev:T]) @ P  # = R_{T−1}⋯R_0
                prev = T
                one_minus, off, rowsum = _off_token0(P)
                log_bound = float(np.log1p(-eps * lam_all[:T]).sum())  # log ∏(1 − ε λ_t)
                worst_abs = _worst(worst_abs, float(one_minus.max()) - math.exp(log_bound))
                worst_rel = _worst(worst_rel, float(np.log(off).max()) - log_bound)
                worst_sum = _worst(worst_sum, rowsum)
            rows.append([kname, sname, eps, float(off[-1]), float(one_minus[-1]),
                         math.exp(log_bound), math.exp(-eps * float(lam_all.sum()))])  # fmt: skip
    ms = [
        holds(f"symbolic_collapse_{tag}", _collapses(*key) is True,
              label=f"theory.collapses says Σλ_t = ∞ for {sname}")
        for sname, (_, key, tag) in schedules.items()
    ]  # fmt: skip
    ms += [
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
    # the uniform kernel against the exact Hausdorff profile (theory.influence_exact)
    U = kernels["uniform"]
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
    p10 = influence(U, constant(1.0, 10))
    ms.append(close("uniform_lambda1_T10_offmass_vs_digest", float(p10[1:].sum()), 4.4e-2,
                    fp_tol(5e-4, "the digest prints 2 significant digits: 4.4e-2 ± 5e-4"),
                    label="uniform, λ ≡ 1, T = 10: 1 − P_{63,0} vs the digest's 4.4e-2"),
              )  # fmt: skip
    # rates: exponential for constant λ (uniform kernel: ρ = 1 − λ(1 − A_11), A_11 = 1/2 exactly)
    rate, rate_tol, window, reason = _exponential_rate(U, n, 0.2)
    rho = float(th.hausdorff_moments(["1/5"], 1)[1])  # 1 − λ + λ/2, the leading mode's factor
    ms += [
        close("exponential_rate_lambda0.2", rate, math.log(rho), fp_tol(rate_tol, reason),
              label=f"uniform, λ ≡ 0.2: fitted log-rate per layer on T ∈ {list(window)} vs "
                    "log(1 − λ/2)"),
        at_most("exponential_rate_vs_stated_bound", rate, math.log1p(-0.2 / n),
                fp_tol(rate_tol, reason),
                label="uniform, λ ≡ 0.2: fitted log-rate vs the bound's log(1 − ελ), ε = 1/64"),
    ]  # fmt: skip
    T_lo, T_hi = (1000, 20000) if ctx.full else (300, 3000)
    slope, lo, hi, sfp, pTs = _polynomial_exponent(T_lo, T_hi)
    eps_poly = min(1 - _POLY_A, 1 - _POLY_V)  # = 0.4: the stated exponent ελ0 is attained
    ms += [
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
    table = Table(
        "cases",
        f"1 − P[n−1,0] at T = {T_top} against the bounds (n = {n})",
        ["kernel", "schedule", "ε", "Σ_{j≥1} P[n−1,j]", "1 − P[n−1,0]", "∏(1 − ελ_t)",
         "exp(−εΣλ_t)"],
        rows,
    )  # fmt: skip
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
# PB6

_BETAS = (0.5, 1.0, 1.1, 1.2, 1.5, 2.0)
_HORIZON = 1  # decades over which the drift of the decade ratio is extrapolated (a parameter)
_HORIZON_REASON = (
    "the decade ratio r_K = Δy_K/Δy_{K−1} of y = −log(1 − P) tends to 10^{1−β} (ratio test: "
    "collapse ⇔ lim r ≥ 1) but drifts at finite depth; the classifier calls collapse when r and "
    "r − h·(r_{K−1} − r_K) are both ≥ 1, no collapse when both are < 1, else goes a decade deeper"
)


def _classify(ratios, h):
    """'collapse', 'no collapse' or None from decade ratios r_1..r_K (needs ≥ 2)."""
    if len(ratios) < 2:
        return None
    r, drift = ratios[-1], ratios[-2] - ratios[-1]
    ext = r - h * drift
    if min(r, ext) >= 1:
        return "collapse"
    if max(r, ext) < 1:
        return "no collapse"
    return None


def _dichotomy_curve(K, beta, K_max):
    """y(T) = −log Σ_{j≥1} p_T(j) at T = 1, √10, 10, …, 10^K_max (half decades) for
    λ_t = 0.5/(t+1)^β."""
    Ts = sorted({round(10 ** (k / 2)) for k in range(2 * K_max + 1)})
    lam = power_decay(0.5, beta, Ts[-1])
    ys = [-_log(influence(K, lam[:T])[1:].sum()) for T in Ts]
    return Ts, ys


@register(
    "PB6",
    "[A]",
    "dichotomy: collapse ⇔ Σλ_t = ∞ (given δ_t ≥ δ > 0 and ε-reachability)",
    assumptions=("δ_t ≥ δ > 0", "A_t[i,0] ≥ ε > 0 (ε-reachability)"),
)
@_quiet
def pb6(ctx: Context) -> Evidence:
    n = 64
    K = dense_kernel(uniform_kernel(n).dense())  # the uniform kernel as a matrix (fast steps)
    K_budget = 5 if ctx.full else 4
    ms, series, rows, curves = [], [], [], {}
    for beta in _BETAS:
        sym = _collapses("1/2", str(sp.nsimplify(beta)))
        want = None if sym is None else ("collapse" if sym else "no collapse")
        Ts, ys = _dichotomy_curve(K, beta, K_budget)
        curves[beta] = (Ts, ys)
        # depth adaptive to β: the first depth 10^3, 10^4, … at which the classifier decides
        got, depth, ratios = _first_decision(Ts, ys, _HORIZON, K_budget)
        key, lab = f"beta{beta:g}", f"β = {beta:g}"
        ms.append(holds(f"{key}_symbolic_decided", sym is not None,
                        label=f"{lab}: theory.collapses decides Σλ_t"))  # fmt: skip
        if got is None:
            ms.append(undecided(f"{key}_numeric", ratios[-1],
                                f"decade ratio still drifting at T = {depth} (the depth "
                                f"budget): r = {ratios[-1]:.3g}, previous {ratios[-2]:.3g}",
                                label=f"{lab}: numeric classification"))  # fmt: skip
        else:
            ms.append(holds(f"{key}_numeric_matches_symbolic", got == want,
                            param_tol("ratio_extrapolation_decades", _HORIZON, _HORIZON_REASON),
                            label=f"{lab}: numeric '{got}' = symbolic '{want}'"))  # fmt: skip
        rows.append([beta, want or "undecided", got or "undecided", depth, ratios[-1],
                     10 ** (1 - beta)])  # fmt: skip
        series.append(Series(f"β = {beta:g}", Ts, ys, kind="line"))
    sens = []
    for h in (0, 1, 2, 3):
        calls = []
        for beta in _BETAS:
            calls.append(_first_decision(*curves[beta], h, K_budget)[0] or "undecided")
        want = ["collapse" if b <= 1 else "no collapse" for b in _BETAS]
        verdict = (
            "FAILS"
            if any(c not in ("undecided", w) for c, w in zip(calls, want, strict=True))
            else ("INCONCLUSIVE" if "undecided" in calls else "HOLDS")
        )
        sens.append([h, *calls, verdict])
    tables = [
        Table("classification", "Numeric vs symbolic collapse, λ_t = 0.5/(t+1)^β",
              ["β", "symbolic", "numeric", "depth used", "last decade ratio",
               "asymptotic ratio 10^{1−β}"], rows),
        Table("sensitivity_ratio_extrapolation_decades",
              "Verdict against the classifier's extrapolation horizon h (decades)",
              ["h", *[f"β = {b:g}" for b in _BETAS], "verdict"], sens,
              note=f"each β at the first depth 10^3 … 10^{K_budget} where the classifier "
                   "decides; 'undecided' = still drifting at the depth budget."),
    ]  # fmt: skip
    fig = Figure(
        "PB6_dichotomy",
        f"Dichotomy: λ_t = 0.5/(t+1)^β, uniform kernel, n = {n}",
        [Panel("−log(1 − P[n−1,0]) against depth", "depth T", "−log Σ_{j≥1} P[n−1,j]",
               series, logx=True, logy=True)],
        caption="Bounded curves (β > 1) flatten; β ≤ 1 keep growing (β = 1 like log T).",
    )  # fmt: skip
    return Evidence(
        [*ms, info("n", n), info("depth_budget", 10**K_budget)],
        figures=[fig],
        tables=tables,
        setup=f"uniform kernel n = {n} (as a dense matrix), λ_t = 0.5/(t+1)^β for β ∈ {_BETAS}; "
        f"y = −log Σ_{{j≥1}} P[n−1,j] at half decades; decade ratios of y classify, starting at "
        f"T = 10^3 and adding decades up to 10^{K_budget} until decided (h = {_HORIZON}).",
    )


def _first_decision(Ts, ys, h, K_budget):
    """The classifier with horizon h at depths 10^3, …, 10^K_budget of a computed curve:
    (decision or None, depth used, decade ratios up to that depth)."""
    for K_max in range(3, K_budget + 1):
        dec = [ys[Ts.index(10**k)] for k in range(K_max + 1)]
        inc = np.diff(dec)
        ratios = [float(inc[k] / inc[k - 1]) if inc[k - 1] > 0 else math.inf
                  for k in range(1, len(inc))]  # fmt: skip
        got = _classify(ratios, h)
        if got is not None:
            return got, 10**K_max, ratios
    return None, 10**K_max, ratios


# ---------------------------------------------------------------------------------------------
# PB7


@register(
    "PB7",
    "[W]",
    "attention-only rollout (λ ≡ 1) collapses onto token 0 exponentially fast",
    assumptions=("A[i,0] ≥ ε > 0",),
)
@_quiet
def pb7(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 7)
    cases = 40 if ctx.full else 12
    worst_dense = worst_abs = worst_rel = worst_sum = -np.inf
    T_top, n_top = 60, 24
    for _ in range(cases):
        n, T = int(rng.integers(2, n_top + 1)), int(rng.integers(1, T_top + 1))
        floors = rng.uniform(0.01, 0.2, T)
        As = [random_causal(rng, n, floor=float(f)) for f in floors]  # non-commuting layers
        p = influence([dense_kernel(A) for A in As], np.ones(T))
        ref = np.eye(1, n, n - 1)[0]
        for A in As[::-1]:  # e_{n−1} A_{T−1} ⋯ A_0
            ref = ref @ A
        worst_dense = _worst(worst_dense, float(np.abs(p - ref).max()))
        eps = np.array([A[1:, 0].min() if n > 1 else 1.0 for A in As])
        log_bound = float(np.log1p(-eps).sum())
        one_minus, off, rowsum = _off_token0(p)
        worst_abs = _worst(worst_abs, float(one_minus[0]) - math.exp(log_bound))
        worst_rel = _worst(worst_rel, _log(off[0]) - log_bound)
        worst_sum = _worst(worst_sum, rowsum)
    fp = 2 * T_top * (n_top + 4) * _EPS
    n = 64
    rate, rate_tol, window, reason = _exponential_rate(uniform_kernel(n), n, 1.0)
    ms = [
        at_most("max_error_vs_dense_product", worst_dense, 0.0,
                fp_tol(fp, f"ℓ1 rounding after T ≤ {T_top} steps of n ≤ {n_top}: "
                           f"2·T·(n + 4)·ε = {fp:.2g}"),
                label="max |influence − e_{n−1}A_{T−1}⋯A_0 (dense NumPy)|"),
        at_most("max_one_minus_P0_over_bound", worst_abs, 0.0,
                fp_tol(fp, f"2·T·(n + 4)·ε = {fp:.2g}"),
                label="max (1 − p(0)) − ∏_t(1 − ε_t)"),
        at_most("max_log_offmass_over_bound", worst_rel, 0.0,
                fp_tol(fp, f"relative, nonnegative arithmetic: 2·T·(n + 4)·ε = {fp:.2g}"),
                label="max log Σ_{j≥1} p(j) − log ∏_t(1 − ε_t)"),
        at_most("max_row_sum_error", worst_sum, 0.0, fp_tol(fp, f"2·T·(n + 4)·ε = {fp:.2g}"),
                label="max |Σ_j p(j) − 1|"),
        close("uniform_rate_vs_subdominant_eigenvalue", rate, math.log(0.5),
              fp_tol(rate_tol, reason),
              label=f"uniform n = {n}, λ ≡ 1: fitted log-rate on T ∈ {list(window)} vs "
                    "log A_11 = log(1/2)"),
        at_most("uniform_rate_vs_stated_bound", rate, math.log1p(-1 / n), fp_tol(rate_tol, reason),
                label=f"uniform n = {n}, λ ≡ 1: fitted log-rate vs log(1 − ε), ε = 1/{n}"),
        info("random_rollouts", cases),
    ]  # fmt: skip
    return Evidence(
        ms,
        setup=f"{cases} seeded attention-only rollouts (λ ≡ 1), n ≤ {n_top}, T ≤ {T_top}, each "
        "layer its own Dirichlet kernel with A_t[i,0] ≥ ε_t ~ U[0.01, 0.2]; the rate on the "
        f"uniform kernel n = {n} (window {window}).",
    )


# -- mutants: small realistic breaks each claim above must catch ----------------------------------


def _all_mass_to_token0(original):
    @functools.wraps(original)
    def apply_all_to_first(self, p):
        xp = self.xp
        out = xp.zeros_like(p)
        out[:, 0] = xp.sum(p, axis=1)
        return out

    return apply_all_to_first


def _swapped_weights(original):
    @functools.wraps(original)
    def step(self, p, lam):
        return lam * p + (1.0 - lam) * self._apply(p)

    return step


def _transposed(original):
    @functools.wraps(original)
    def apply_transposed(self, p):
        return p @ self._A.T

    return apply_transposed


def _inverted_test(original):
    @functools.wraps(original)
    def decide(g, x):
        v = original(g, x)
        return None if v is None else not v

    return decide


add_mutant("PB4", "uniform-all-mass-to-token-0", "posflow.simulate.kernels:UniformKernel._apply",
           _all_mass_to_token0,
           "the uniform kernel sends every token's attention to token 0")  # fmt: skip
add_mutant(("PB4", "PB5", "PB6", "PB7"), "residual-weights-swapped", RESIDUAL_STEP,
           _swapped_weights,
           "the residual step computes λ p + (1 − λ) p A "
           "(λ read as the residual weight)")  # fmt: skip
add_mutant(("PB4", "PB5", "PB6"), "summability-test-inverted",
           "posflow.theory._summability:_decide_positive", _inverted_test,
           "theory.collapses' comparison tests conclude the opposite way")  # fmt: skip
add_mutant(("PB5", "PB7"), "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
add_mutant(("PB5", "PB7"), "transposed-dense-kernel", "posflow.simulate.kernels:DenseKernel._apply",
           _transposed, "a measured kernel is applied as p Aᵀ instead of p A")  # fmt: skip
add_mutant("PB6", "power-decay-beta-halved", "posflow.simulate.rollout:power_decay",
           scaled_argument(1, 0.5, "beta"),
           "the schedule uses (t+1)^{−β/2} (e.g. a square root taken twice)")  # fmt: skip
add_mutant("PB7", "reversed-layer-order", CHAIN, reversed_layer_order(),
           "the layer product taken as R_0 ⋯ R_{T−1} instead of R_{T−1} ⋯ R_0")  # fmt: skip
