"""Claim PB18 (ours): the continuous-depth limit of the uniform-kernel rollout.

When ``max_t λ_t → 0`` with ``Σ_t λ_t = Λ`` fixed, PB12's Hausdorff law ``X = ∏_t X_t`` tends to
the compound-Poisson law ``−ln X ~ Gamma(K, 1)``, ``K ~ Poisson(Λ)``, whose profile
:func:`posflow.theory.rollout.continuum_profile` gives in closed form. The check:

* exact (sympy): the limit of the discrete moments and the compound-Poisson Laplace transform;
* the closed form against an independent quadrature over the law of ``G = −ln X``;
* the float rollout ``influence(uniform_kernel(n), Λ/T …)`` approaching the limit at the
  first-order rate ``W1 ≈ c · max λ`` with ``c`` from the first-order correction
  (:func:`~posflow.theory.rollout.continuum_correction`), and the fitted exponent of W1 against
  ``max λ`` with its interval;
* as ``n → ∞``, the law of ``j/(n−1)`` under ``p∞`` approaching the law of X (CDF distance).
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import mpmath
import numpy as np
from scipy import integrate, stats

from posflow.proofs_checks.kit import (
    RESIDUAL_STEP,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    cite,
    close,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    param_tol,
    register,
    rejects,
    scaled_argument,
    scaled_result,
)
from posflow.simulate.compare import w1_normalised
from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import influence
from posflow.theory import rollout as th

__all__ = ["pb18"]

LAM = 2.0  # Λ = Σ_t λ_t
RATE_REL_TOL = 0.01  # named parameter: relative slack of the first-order rate (sensitivity table)
_GRID = np.linspace(0.05, 0.95, 19)  # x at which the CDF of j/(n−1) meets the law of X
_TOL_RATE = param_tol(
    "RATE_REL_TOL",
    RATE_REL_TOL,
    "relative slack for the first-order rate at the smallest max λ: the neglected terms are "
    "O(max λ) relative (second order of ln ∏(1 − λ u)); sensitivity table below",
)
_FP_LIMIT = fp_tol(
    1e-12,
    "mpmath closed form exact to float64 (n + 40 digits); quad requested to 1e-14 absolute "
    "per entry; binomial weights in float64 ≤ n·ε relative",
)


def _law_cdf(x: np.ndarray, Lam: float) -> np.ndarray:
    """P(X ≤ x) = P(G ≥ −ln x) for x in (0, 1) (quadrature of the density of G)."""
    out = []
    for xx in x:
        y0 = -math.log(xx)
        val, _ = integrate.quad(
            lambda y: float(th.continuum_law_density(y, Lam)), y0, np.inf, epsabs=1e-13
        )
        out.append(val)
    return np.array(out)


def _cdf_distance(p: np.ndarray, Lam: float, grid: np.ndarray) -> float:
    """sup over ``grid`` (x in (0,1)) of |P_{p}(j/(n−1) ≤ x) − P(X ≤ x)|."""
    n = p.size
    F = np.cumsum(p)
    idx = np.floor(grid * (n - 1)).astype(int)
    return float(np.max(np.abs(F[idx] - _law_cdf(grid, Lam))))


def _poisson_gamma_profile(n, Lam):
    """p∞ by brute force over the compound-Poisson law: Σ_K e^{−Λ}Λ^K/K! · C(n−1,j)
    Σ_r C(N,r)(−1)^r (j+r+1)^{−K} (N = n−1−j; the Gamma(K, 1) moments of x^j(1−x)^N in exact
    Fractions), K ≤ 60 (Poisson tail Λ^61/61! < 1e-65 at Λ = 2), at 60 digits (no
    e^{−Λk/(k+1)} used)."""
    with mpmath.workdps(60):
        L, out = mpmath.mpf(Lam), []
        for j in range(n):
            N = n - 1 - j
            tot = mpmath.mpf(0)
            for K in range(61):
                inner = sum(Fraction(math.comb(N, r) * (-1) ** r, (j + r + 1) ** K)
                            for r in range(N + 1))  # fmt: skip
                w = mpmath.exp(-L) * L**K / mpmath.factorial(K)
                tot += w * math.comb(n - 1, j) * mpmath.mpf(inner.numerator) / inner.denominator
            out.append(float(tot))
    return np.array(out)


def _correction_by_differences(n, Lam, T):
    """(p_T − p∞)/(Λ/T) from the exact discrete moments (1 − Λu/T)^T, Richardson-extrapolated
    over T and 2T (error O(1/T²)), at n + 60 digits."""
    with mpmath.workdps(n + 60):
        L = mpmath.mpf(Lam)

        def diff(TT):
            m = [(1 - L * kk / (kk + 1) / TT) ** TT - mpmath.exp(-L * kk / (kk + 1))
                 for kk in range(n)]  # fmt: skip
            return [math.comb(n - 1, j) * mpmath.fsum((-1) ** r * math.comb(n - 1 - j, r)
                                                      * m[j + r] for r in range(n - j))
                    * TT / L for j in range(n)]  # fmt: skip

        a, b = diff(T), diff(2 * T)
        return np.array([float(2 * y - x) for x, y in zip(a, b, strict=True)])


def _rate_judge(key, ratio, c, label=""):
    """The judge of the first-order rate: |ratio/c − 1| ≤ RATE_REL_TOL."""
    return close(key, float(ratio), c, _TOL_RATE, rel=True, label=label)


def _loose_rate_judge(original):
    @functools.wraps(original)
    def judge(key, ratio, c, label=""):
        return close(key, float(ratio), c, param_tol("RATE_REL_TOL", 10 * RATE_REL_TOL,
                                                     "10× slack"), rel=True, label=label)

    return judge


def _routine_comparisons(Ts, profiles, w1, p_inf, c, ratio, e_last):
    """continuum_profile, continuum_law_density, continuum_correction, influence with
    uniform_kernel and w1_normalised against brute-force references; negative controls."""
    n_s = 16
    brute = _poisson_gamma_profile(n_s, LAM)
    prof_err = float(np.abs(th.continuum_profile(n_s, LAM) - brute).max())
    y = np.array([0.1, 1.0, 5.0])
    dens = sum(math.exp(-LAM) * LAM**K * y ** (K - 1) * np.exp(-y) / (math.factorial(K)
               * math.factorial(K - 1)) for K in range(1, 60))  # fmt: skip
    dens_err = float(np.abs(th.continuum_law_density(y, LAM) / dens - 1).max())
    d_ref = _correction_by_differences(n_s, LAM, 10**8)
    corr_err = float(np.abs(th.continuum_correction(n_s, LAM) - d_ref).max())
    n = p_inf.size
    U = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    roll_err = w1_err = 0.0
    for T, pT, w in zip(Ts[:6], profiles, w1, strict=False):
        q = np.eye(n)[-1]
        for _ in range(T):
            q = (1 - LAM / T) * q + (LAM / T) * (q @ U)
        roll_err = max(roll_err, float(np.abs(pT - q).max()))
        w1_err = max(w1_err, abs(w - float(np.abs(np.cumsum(pT) - np.cumsum(p_inf)).sum())
                                 / (n - 1)))  # fmt: skip
    fp = fp_tol(1e-14, "float64 rounding of values ≤ 1 computed at ≥ 60 digits, and a few "
                "ε of float sums")  # fmt: skip
    return [
        at_most("continuum_profile_vs_poisson_gamma", prof_err, 0.0, fp,
                label=f"max_j |continuum_profile − Poisson–Gamma brute force|, n = {n_s}"),
        at_most("law_density_rel_error_vs_poisson_sum", dens_err, 0.0,
                fp_tol(1e-13, "ive(1, z) and a 60-term positive float sum: ≤ 100 roundings"),
                label="max |continuum_law_density / Σ_K e^{−Λ}Λ^K y^{K−1}e^{−y}/(K!(K−1)!) − 1|"),
        at_most("correction_vs_richardson_differences", corr_err, 0.0,
                fp_tol(1e-12, "Richardson over T = 1e8, 2e8 leaves O((Λ/T)²·T) = 4e-16 relative; "
                       "both sides at ≥ 60 digits, rounded to float64"),
                label=f"max_j |continuum_correction − T(p_T − p∞)/Λ (exact moments)|, n = {n_s}"),
        at_most("influence_vs_dense_uniform_rollout", roll_err, 0.0,
                fp_tol(1e-12, f"≤ {Ts[5]} convex steps on n = {n}, ≤ 2ε per entry each: "
                       f"2·{Ts[5]}·2.2e-16 = {2 * Ts[5] * 2.2e-16:.1e} ≤ 1e-12"),
                label="max |influence(uniform_kernel) − dense loop with U_ij = 1/(i+1)|"),
        at_most("w1_normalised_vs_cdf_sum", w1_err, 0.0,
                fp_tol(1e-14, f"Σ of {n} CDF differences ≤ 1: {n}·2·2.2e-16 ≤ 1e-14"),
                label="max |w1_normalised − Σ_k |F_T(k) − F_∞(k)|/(n−1)|"),
        rejects("rate_judge_control_5pct_off", _rate_judge("c", 1.05 * ratio, c),
                "the measured rate moved 5 % (5× RATE_REL_TOL)"),
        rejects("exponent_judge_control_sqrt_rate",
                close("c", 0.5 * e_last, 1.0, _TOL_RATE),
                "the local exponent of a √(max λ) rate"),
        rejects("zero_judge_control_wrong_identity",
                holds("c", _wrong_identity_is_zero(), label="c"),
                "the residual e^{−Λu} − e^{−Λu²} of a wrong identity"),
    ]  # fmt: skip


def _wrong_identity_is_zero():
    """A sympy residual that is not 0 (the judge of the derivation must see it)."""
    import sympy as sp

    lam_, u = sp.symbols("Lambda u", positive=True)
    return sp.simplify(sp.exp(-lam_ * u) - sp.exp(-lam_ * u**2)) == 0


_CITES = (
    cite("posflow.theory.rollout:continuum_profile",
         "the compound-Poisson (Poisson–Gamma) mixture summed by brute force in Fractions, and "
         "the quadrature over G", "continuum_profile_vs_poisson_gamma",
         "closed_form_vs_quadrature"),
    cite("posflow.theory.rollout:continuum_profile_quadrature", "the closed form",
         "closed_form_vs_quadrature"),
    cite("posflow.theory.rollout:continuum_law_density",
         "the Poisson mixture of Gamma(K, 1) densities summed directly",
         "law_density_rel_error_vs_poisson_sum"),
    cite("posflow.theory.rollout:continuum_correction",
         "Richardson-extrapolated differences of the exact discrete moments (1 − Λu/T)^T",
         "correction_vs_richardson_differences", "first_order_rate"),
    cite("posflow.theory.rollout:continuum_moment_derivation", "sympy residuals that must be 0",
         "sympy_discrete_limit", "sympy_compound_poisson"),
    cite("posflow.simulate.rollout:influence", "a dense loop with U_ij = 1/(i+1)",
         "influence_vs_dense_uniform_rollout"),
    cite("posflow.simulate.kernels:uniform_kernel", "U_ij = 1/(i+1) (via the dense loop)",
         "influence_vs_dense_uniform_rollout"),
    cite("posflow.simulate.compare:w1_normalised", "Σ_k |F_p(k) − F_q(k)|/(n−1)",
         "w1_normalised_vs_cdf_sum"),
)  # fmt: skip


@register(
    "PB18",
    "[ours]",
    "continuous-depth limit (uniform kernel): as max_t λ_t → 0 with Σλ_t = Λ fixed, the profile "
    "tends to p∞(j) = C(n−1,j) E[X^j(1−X)^{n−1−j}] with −ln X ~ Gamma(K,1), K ~ Poisson(Λ), "
    "i.e. E[X^k] = e^{−Λk/(k+1)}; W1(p_T, p∞) ≈ c·max λ (exponent 1); as n → ∞, j/(n−1) under "
    "p∞ tends to the law of X (atom e^{−Λ} at 1, density e^{−Λ}√(Λ/y)I₁(2√(Λy)), y = −ln x)",
    assumptions=("uniform kernel", "λ_t ∈ [0, 1]", "Σ_t λ_t = Λ fixed"),
    compares=_CITES,
)
def pb18(ctx: Context) -> Evidence:
    """Claim PB18: the continuous-depth limit of the uniform-kernel rollout and its rate.

    ``continuum_moment_derivation`` (sympy); ``continuum_profile`` against a Poisson–Gamma
    brute force and ``continuum_profile_quadrature``; ``continuum_law_density`` against its
    Poisson sum; ``continuum_correction`` against exact differences; ``influence`` of
    ``uniform_kernel`` against a dense loop and ``w1_normalised`` against a CDF sum. Negative
    controls: the rate, exponent and sympy judges reject a 5 % rate, a √ rate, a wrong identity.
    """
    n = 128 if ctx.full else 64
    ks = range(3, 15) if ctx.full else range(3, 12)
    Ts = [int(LAM * 2**k) for k in ks]
    der = th.continuum_moment_derivation()
    p_inf = th.continuum_profile(n, LAM)
    p_quad = th.continuum_profile_quadrature(n, LAM)
    d = th.continuum_correction(n, LAM)
    c = float(np.abs(np.cumsum(d)).sum() / (n - 1))  # first-order W1/(n−1) per unit max λ
    ml, profiles, w1, mass = _rollouts(n, Ts, p_inf)
    slope, half, e_last, ratio = _rate_fit(ml, w1)
    # n → ∞ of the limit: CDF distance of j/(n−1) to the law of X at two n
    n_big = 256 if ctx.full else 128
    dist_small = _cdf_distance(p_inf, LAM, _GRID)
    dist_big = _cdf_distance(th.continuum_profile(n_big, LAM), LAM, _GRID)
    ms = [
        holds("sympy_discrete_limit", der["discrete_limit"] == 0,
              label="sympy: lim_T (1 − Λu/T)^T − e^{−Λu} = 0"),
        holds("sympy_compound_poisson", der["compound_poisson"] == 0,
              label="sympy: Σ_K Poisson(K; Λ)(1+k)^{−K} − e^{−Λk/(k+1)} = 0"),
        at_most("closed_form_vs_quadrature", float(np.abs(p_inf - p_quad).max()), 0.0, _FP_LIMIT,
                label="max_j |p∞ (closed form) − p∞ (quadrature over G)|"),
        at_most("limit_mass_error", abs(float(p_inf.sum()) - 1), 0.0,
                fp_tol(1e-13, "n float64 entries each exact to ε: n·ε ≤ 3e-14"),
                label="|Σ_j p∞(j) − 1|"),
        at_most("rollout_mass_error", mass, 0.0,
                fp_tol(1e-11, f"T ≤ {Ts[-1]} convex steps, each ≤ 2ε per entry: ≤ 1e-11"),
                label="max_T |Σ_j p_T(j) − 1| (float rollout)"),
        holds("w1_decreasing", bool(np.all(np.diff(w1) < 0)),
              label="W1(p_T, p∞) decreases as max λ halves"),
        _rate_judge("first_order_rate", ratio, c,
                    label=f"W1/(n−1)/max λ at max λ = {ml[-1]:.3g} vs first-order c"),
        close("local_exponent", float(e_last), 1.0, _TOL_RATE,
              label="exponent of W1 in max λ between the two smallest max λ"),
        at_most("n_limit_cdf_distance_shrinks", dist_big, dist_small,
                label=f"sup CDF distance of j/(n−1) to the law of X: n = {n_big} ≤ n = {n}"),
        *_routine_comparisons(Ts, profiles, w1, p_inf, c, ratio, e_last),
        info("fitted_exponent", float(slope), label="OLS exponent of W1 in max λ (all T)"),
        info("fitted_exponent_ci95_halfwidth", float(half),
             label="its 95 % t-interval half-width (curvature of the O(max λ) bias)"),
        info("first_order_constant_c", c),
        info("cdf_distance_small_n", dist_small),
        info("cdf_distance_large_n", dist_big),
        info("Lambda", LAM),
    ]  # fmt: skip
    return Evidence(
        ms,
        figures=[_figure_pb18(n, n_big, Ts, profiles, p_inf, ml, w1, c)],
        tables=_tables_pb18(n, Ts, ml, w1, c, ratio, e_last),
        setup=f"uniform kernel n = {n}, λ_t = Λ/T constant, Λ = {LAM}, T = {Ts[0]}…{Ts[-1]} "
        f"(max λ halving); closed form by mpmath, quadrature by scipy; n → ∞ at n = {n_big}.",
    )


def _rollouts(n, Ts, p_inf):
    """The float rollouts p_T of the uniform kernel with λ_t = Λ/T: max λ, the profiles, their
    W1/(n−1) to the limit and the worst |Σ_j p_T(j) − 1|."""
    K = uniform_kernel(n)
    ml = np.array([LAM / T for T in Ts])
    profiles = [influence(K, np.full(T, LAM / T)) for T in Ts]
    w1 = np.array([w1_normalised(pT, p_inf) for pT in profiles])
    mass = max(abs(float(pT.sum()) - 1) for pT in profiles)
    return ml, profiles, w1, mass


def _rate_fit(ml, w1):
    """The OLS exponent of W1 in max λ with its 95 % t half-width, the local exponent between
    the two smallest max λ, and W1/max λ at the smallest."""
    slope, _, _, _, se = stats.linregress(np.log(ml), np.log(w1))
    q = stats.t.ppf(0.975, len(ml) - 2)
    e_last = math.log(w1[-2] / w1[-1]) / math.log(ml[-2] / ml[-1])
    return slope, q * se, e_last, w1[-1] / ml[-1]


def _tables_pb18(n, Ts, ml, w1, c, ratio, e_last):
    sens = [[t, bool(abs(ratio / c - 1) <= t), bool(abs(e_last - 1) <= t)]
            for t in (0.001, 0.003, 0.01, 0.03, 0.1)]  # fmt: skip
    table = Table(
        "rate",
        f"W1(p_T, p∞)/(n−1) against max λ = Λ/T (n = {n}, Λ = {LAM})",
        ["T", "max λ", "W1/(n−1)", "W1/(n−1)/max λ", "first-order c"],
        [[T, float(m), float(w), float(w / m), c] for T, m, w in zip(Ts, ml, w1, strict=True)],
    )
    sens_t = Table(
        "sensitivity",
        "RATE_REL_TOL: does each rate comparison pass at this slack?",
        ["RATE_REL_TOL", "first-order rate passes", "local exponent passes"],
        sens,
    )
    return [table, sens_t]


def _figure_pb18(n, n_big, Ts, profiles, p_inf, ml, w1, c):
    j = list(range(n))
    grid = _GRID
    return Figure(
        "continuum",
        f"PB18: continuous-depth limit, uniform kernel, n = {n}, Λ = {LAM}",
        [
            Panel("profiles", "token position j", "p(j)",
                  [Series(f"T = {T}", j, pT, color=None)
                   for T, pT in zip(Ts[:3], profiles[:3], strict=True)]
                  + [Series("limit p∞", j, p_inf, color="exact", style="--")], logy=True),
            Panel("rate", "max λ = Λ/T", "W1/(n−1)",
                  [Series("measured", ml, w1, kind="markers", color="measured"),
                   Series("first order c·max λ", ml, c * ml, color="bound")],
                  logx=True, logy=True),
            Panel(f"n → ∞: CDF of j/(n−1) (n = {n_big}) vs law of X", "x", "P(· ≤ x)",
                  [Series(f"p∞, n = {n_big}", np.arange(n_big) / (n_big - 1),
                          np.cumsum(th.continuum_profile(n_big, LAM)), kind="step",
                          color="profile"),
                   Series("law of X", grid, _law_cdf(grid, LAM), kind="markers",
                          color="exact")]),
        ],
    )  # fmt: skip


def _moment_shape_off_by_one(original):
    def profile(n, Lam):
        n, Lam = int(n), float(Lam)
        L = mpmath.mpf(Lam)
        return th.profile_from_moments(lambda kk: mpmath.exp(-L * kk / (kk + 2)), n, n + 40)

    return profile


add_mutant("PB18", "limit-Lambda-1%-low", "posflow.theory._continuum:continuum_profile",
           scaled_argument(1, 0.99, "Lam"), "the closed form uses 0.99·Λ")  # fmt: skip
add_mutant("PB18", "moment-k-over-k+2", "posflow.theory._continuum:continuum_profile",
           _moment_shape_off_by_one, "limit moments e^{−Λk/(k+2)}: an off-by-one in the "
           "Laplace transform")  # fmt: skip
add_mutant("PB18", "law-density-1%-high", "posflow.theory._continuum:continuum_law_density",
           scaled_result(1.01), "the density of G 1 % too high")  # fmt: skip
add_mutant("PB18", "rate-judge-10x-slack",
           "posflow.proofs_checks.claims.pb18_continuum:_rate_judge", _loose_rate_judge,
           "the first-order rate judged with 10× its slack")  # fmt: skip
add_mutant("PB18", "correction-1%-high", "posflow.theory._continuum:continuum_correction",
           scaled_result(1.01), "the first-order correction 1 % too large")  # fmt: skip
add_mutant("PB18", "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
