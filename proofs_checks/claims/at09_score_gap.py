"""Claim AT9 of [B]: the score gap — the largest of M fully mixed far scores stays small.

The largest of M far scores of a balanced unit query against its exact law (a Fourier series in
J₀, :func:`posflow.simulate.concentration.balanced_score_tail`), the union bound 2M e^{−dt²/2}
and the level √(2 ln(2M/δ)/d) it guarantees. Monte Carlo exceedance counts are judged by exact
binomial p-values as normal quantiles against :func:`~posflow.proofs_checks.kit.z_limit`. The
mutant ``angle-scale-halved`` of AT9 is registered with AT8's, in
:mod:`posflow.proofs_checks.claims.at08_bessel_tail`.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.integrate import quad
from scipy.special import j0

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    biased,
    binomial_reason,
    binomial_z_above,
    binomial_z_two_sided,
    cite,
    claim_rng,
    fp_tol,
    info,
    register,
    rejects,
    stat_tol,
    z_limit,
)
from posflow.simulate.concentration import balanced_score_tail, max_score_quantile, max_score_tail
from posflow.simulate.orthogonal import SO2BlockLaw, rotate_blocks
from posflow.theory import transport as th

_FP_SERIES = (
    "4096-term J₀ series: remainder < 1e-20, rounding ≤ 4096 terms × 2.2e-16 ≈ 1e-12 "
    "absolute (each term ≤ 1/(πn))"
)


def _largest_far_scores(q, law, M, R, rng):
    """R trials of max_j |qᵀR(ψ_j)q| over M independent far phases ψ_j ~ ``law``."""
    return np.array(
        [np.abs(rotate_blocks(q, law.sample_angles(M, seed=rng)) @ q).max() for _ in range(R)]
    )


def _figure_at9(d, med):
    Ms = list(med)
    panel = Panel(
        f"median of the largest of M far scores, d = {d}",
        "M",
        "max_j |s_j|",
        [
            Series("Monte Carlo median", Ms, [med[M][0] for M in Ms], "markers"),
            Series("exact median (J₀ series)", Ms, [med[M][1] for M in Ms]),
            Series("union level √(2 ln(4M)/d)", Ms, [med[M][2] for M in Ms], style="--"),
        ],
        logx=True,
        hlines=[(1.0, "near score")],
    )
    return Figure("AT9_score_gap", f"AT9: largest far score, d = {d}", [panel])


def _table_at9(rows):
    return Table(
        "by_M",
        "the largest of M far scores",
        [
            "M",
            "trials",
            "MC median",
            "exact median",
            "union median level",
            "MC median/√(ln M/d)",
            "exact median/√(ln M/d)",
        ],
        rows,
        note="the ratio to √(ln M/d) is reported, not judged: |s| ≤ 1, so it "
        "cannot stay constant as M → ∞ at fixed d; the judged statement is the "
        "union bound and its level",
    )


def _exact_judge(key, value, label):
    """The judge of an exact inequality: value ≤ 0 up to the series' rounding."""
    return at_most(key, value, 0.0, fp_tol(1e-12, _FP_SERIES), label=label)


def _z_judge(key, z, st, label):
    """The judge of Monte Carlo counts: the largest z score over the family ≤ z_limit."""
    return at_most(key, float(max(z)), 0.0, st, label=label, unit="SE")


def _formula_judge(key, err, label, tol=1e-13, reason=""):
    """The judge of a routine against its closed form: max relative error ≤ ``tol``."""
    return at_most(key, err, 0.0, fp_tol(tol, reason or _FP_CLOSED), label=label)


_FP_CLOSED = (
    "one exp/log/sqrt or power per entry against the same formula in math: ≤ 20 roundings "
    "of arguments ≤ 60 in size: ≤ 60·20·2.2e-16 ≈ 3e-13 absolute in the exponent; 1e-13 "
    "relative for the exponential-free forms, and 1e-12 for the others"
)
_FP_GP = (
    "Gil-Pelaez integral 1 − (2/π)∫₀^400 J₀(2ω/d)^{d/2} sin(ωt)/ω dω by adaptive quadrature "
    "(epsabs 1e-13), the tail beyond ω = 400 below (d/(800π))^{d/4} = 1e-19, and the 4096-term "
    "series' rounding 1e-12: 1e-11 absolute"
)


def _gil_pelaez(t, d):
    """Pr(|s| ≥ t) = 1 − (2/π)∫₀^∞ φ(ω) sin(ωt)/ω dω, φ(ω) = J₀(2ω/d)^{d/2} (s symmetric)."""
    f = lambda w: j0(2 * w / d) ** (d // 2) * math.sin(w * t) / w  # noqa: E731
    return 1 - 2 / math.pi * quad(f, 0, 400, limit=2000, epsabs=1e-13, epsrel=1e-13)[0]


def _rel(got, ref):
    got, ref = np.asarray(got, dtype=float).ravel(), np.asarray(ref, dtype=float).ravel()
    return float(np.max(np.abs(got / ref - 1)))


_T, _DL, _MS = (0.0, 0.1, 0.35, 0.7), (1.0, 0.5, 0.01), (1, 100, 10_000)


def _union_direct(M, d, c):
    return [2 * M * math.exp(-c * d * t * t) for t in _T]


def _quantile_direct(M, d, c):
    return [math.sqrt(math.log(2 * M / dl) / (c * d)) for dl in _DL]


def _closed_forms_at9(d):
    """The cited routines against closed forms at a few points."""
    pts = np.array([0.05, 0.2, 0.4, 0.6])
    gp = float(np.max(np.abs(balanced_score_tail(pts, d) - [_gil_pelaez(t, d) for t in pts])))
    p = balanced_score_tail(pts, d)
    mx = max(_rel(max_score_tail(pts, d, M), [1 - (1 - x) ** M for x in p]) for M in _MS)
    qs = [(pr, M, max_score_quantile(pr, d, M)) for pr in (0.9, 0.1) for M in (100, 10_000)]
    q_err = max(abs(float(balanced_score_tail(t, d)) / (1 - (1 - pr) ** (1 / M)) - 1)
                for pr, M, t in qs)  # fmt: skip
    return [
        _formula_judge("union_bound_vs_closed_form",
                       max(_rel(th.score_gap_union_bound(_T, M, d, c), _union_direct(M, d, c))
                           for M in _MS for c in (0.5, 0.25)),
                       "max |score_gap_union_bound/2M e^(−cdt²) − 1| (c = ½, ¼)", 1e-12),
        _formula_judge("quantile_vs_closed_form",
                       max(_rel(th.score_gap_quantile(_DL, M, d, c), _quantile_direct(M, d, c))
                           for M in _MS for c in (0.5, 0.25)),
                       "max |score_gap_quantile/√(ln(2M/δ)/(cd)) − 1| (c = ½: √(2 ln(2M/δ)/d))"),
        _formula_judge("balanced_tail_vs_gil_pelaez", gp,
                       "max |balanced_score_tail − Gil-Pelaez integral| at t = 0.05…0.6",
                       1e-11, _FP_GP),
        _formula_judge("max_tail_vs_closed_form", mx,
                       "max |max_score_tail/(1 − (1 − p)^M) − 1|, M = 1, 100, 10⁴", 1e-12),
        _formula_judge("quantile_root_vs_closed_form", q_err,
                       "max |p(t_q)/(1 − (1 − prob)^{1/M}) − 1| at max_score_quantile's roots",
                       1e-11, "Brent's root to 1e-14 in t with |d ln p/dt| ≤ d = 32: 3e-13; "
                       "inverting 1 − (1 − p)^M through log1p/expm1 amplifies ε by ≤ M = 10⁴: "
                       "2e-12; 1e-11"),
    ]  # fmt: skip


def _controls_at9(tg, d, st, zlim, R):
    """Each judge on a known-wrong input."""
    k = zlim + 2.0  # a bias of k SE, above the Bonferroni quantile (2 SE margin for skew)
    half = round(biased(R * 0.5, math.sqrt(R * 0.25), k))
    wrong_union = max(float(np.max(max_score_tail(tg, d, M) - 2 * M * np.exp(-d * tg * tg)))
                      for M in (100, 1000))  # fmt: skip
    return [
        rejects("formula_judge_control_union_factor_2",
                _formula_judge("c", _rel(th.score_gap_union_bound(_T, 100, d) / 2,
                                         _union_direct(100, d, 0.5)), "c"),
                "M e^(−dt²/2): the factor 2 of the union bound dropped"),
        rejects("formula_judge_control_quantile_ln_m",
                _formula_judge("c", _rel([math.sqrt(math.log(100 / x) / 16) for x in _DL],
                                         _quantile_direct(100, d, 0.5)), "c"),
                "√(ln(M/δ)/(cd)): the 2 inside the logarithm dropped"),
        rejects("exact_judge_control_rate_doubled",
                _exact_judge("c", wrong_union, "c"),
                "the exact max law against 2M e^(−dt²) (rate 1 instead of ½)"),
        rejects("z_judge_control_biased_count",
                _z_judge("c", [0.0] * 11 + [float(binomial_z_two_sided(half, R, 0.5))], st, "c"),
                f"one of 12 exceedance counts {k:.1f} SE above R/2 at the exact median (R = {R})"),
    ]  # fmt: skip


def _judge_at9(single_excess, union_excess, level_excess, z_exact, z_half, med, st, d):
    return [
        _exact_judge("max_exact_tail_minus_sharp", single_excess,
                     "max_t exact Pr(|s| ≥ t) − 2e^(−dt²/2)"),
        _exact_judge("max_exact_max_tail_minus_union_bound", union_excess,
                     "max_t,M exact Pr(max ≥ t) − 2M e^(−dt²/2)"),
        _exact_judge("max_exact_exceedance_at_level_minus_delta", level_excess,
                     "max_M,δ exact Pr(max ≥ √(2 ln(2M/δ)/d)) − δ"),
        info("union_slack_at_levels", -level_excess,
             label="slack: min_M,δ δ − exact Pr(max ≥ √(2 ln(2M/δ)/d))"),
        _z_judge("max_z_mc_vs_exact_max_law", z_exact, st,
                 "max |z| of MC exceedances at the exact 90/50/10 % points of the max"),
        _z_judge("max_z_mc_above_union_median", z_half, st,
                 "max z of MC Pr(max ≥ √(2 ln(4M)/d)) above 1/2"),
        at_most("max_union_median_level", max(m[2] for m in med.values()), 1.0,
                label="largest union median level √(2 ln(4M)/d) (near score 1)"),
        info("d", d),
    ]  # fmt: skip


_CITES = (
    cite("posflow.theory.transport:score_gap_union_bound",
         "the closed form 2M e^(−cdt²) by math.exp", "union_bound_vs_closed_form"),
    cite("posflow.theory.transport:score_gap_quantile",
         "the closed form √(ln(2M/δ)/(cd)) by math.sqrt/log", "quantile_vs_closed_form"),
    cite("posflow.simulate.concentration:balanced_score_tail",
         "the Gil-Pelaez inversion integral of φ(ω) = J₀(2ω/d)^{d/2} by adaptive quadrature",
         "balanced_tail_vs_gil_pelaez"),
    cite("posflow.simulate.concentration:max_score_tail", "1 − (1 − p)^M by Python powers",
         "max_tail_vs_closed_form"),
    cite("posflow.simulate.concentration:max_score_quantile",
         "the inverse in closed form: p(t_q) = 1 − (1 − prob)^{1/M}",
         "quantile_root_vs_closed_form"),
    cite("posflow.simulate.orthogonal:rotate_blocks",
         "the exact law of the max: exceedance counts by exact binomial p-values",
         "max_z_mc_vs_exact_max_law"),
)  # fmt: skip


@register(
    "AT9",
    "[B]",
    "score gap: for M fully mixed far scores of a balanced unit query, Pr(max_j |s_j| ≥ t) ≤ "
    "2M e^{-d t²/2} (AT8's tail), so the largest far score stays below √(2 ln(2M/δ)/d) with "
    "probability 1 - δ: it grows at most like √(ln M/d), and the near score 1 stands out "
    "while 2 ln(4M) < d",
    assumptions=("far keys fully mixed (independent uniform block phases)",),
    compares=_CITES,
)
def at9(ctx: Context) -> Evidence:
    """Claim AT9: the largest of M far scores against its exact law and the union bound.

    d = 32, balanced unit query q = k, M ∈ {10², 10³, 10⁴}: exact single-score tail
    (``balanced_score_tail``) under 2e^{−dt²/2}; the exact law of the max under
    ``score_gap_union_bound`` (rate ½) and at the levels of ``score_gap_quantile``; Monte Carlo
    exceedances at the exact 90/50/10 % points of the max and at the union median level.
    The bounds against their closed forms, ``balanced_score_tail`` against the Gil-Pelaez
    integral, ``max_score_tail`` and ``max_score_quantile`` against 1 − (1 − p)^M; negative
    controls of every judge.
    """
    rng = claim_rng(ctx, 9)
    d, rate = 32, 0.5  # balanced blocks: Σc_b² = 2/d, AT8's tail 2e^{-dt²/2}
    q = np.zeros(d)
    q[: d // 2] = np.sqrt(2 / d)  # unit query, every block of squared norm 2/d
    law = SO2BlockLaw(d, "uniform", scale=np.pi)
    reps = {100: 2000, 1000: 1000, 10_000: 300} if ctx.full else {100: 200, 1000: 100, 10_000: 30}
    tg = np.linspace(0.0, 1.0, 401)
    single_excess = float(np.max(balanced_score_tail(tg, d) - 2 * np.exp(-0.5 * d * tg * tg)))
    deltas, probs = np.array([0.5, 0.1, 0.01]), np.array([0.9, 0.5, 0.1])
    union_excess, level_excess, z_exact, z_half, rows, med = -np.inf, -np.inf, [], [], [], {}
    for M, R in reps.items():
        union = th.score_gap_union_bound(tg, M, d, rate)
        union_excess = max(union_excess, float(np.max(max_score_tail(tg, d, M) - union)))
        t_delta = np.asarray(th.score_gap_quantile(deltas, M, d, rate))
        level_excess = max(level_excess, float(np.max(max_score_tail(t_delta, d, M) - deltas)))
        mx = _largest_far_scores(q, law, M, R, rng)
        t_exact = np.array([max_score_quantile(p, d, M) for p in probs])
        z_exact += list(binomial_z_two_sided((mx[:, None] >= t_exact).sum(0), R, probs))
        z_half.append(float(binomial_z_above(int((mx >= t_delta[0]).sum()), R, 0.5)))
        med[M] = (float(np.median(mx)), float(t_exact[1]), float(t_delta[0]))
        scale = np.sqrt(np.log(M) / d)
        rows.append([M, R, med[M][0], med[M][1], med[M][2], med[M][0] / scale, med[M][1] / scale])
    n_cmp = len(z_exact) + len(z_half)
    samples = f"R = {list(reps.values())} trials per M"
    st = stat_tol(z_limit(n_cmp), binomial_reason("MC maxima", samples, n_cmp))
    return Evidence(
        _judge_at9(single_excess, union_excess, level_excess, z_exact, z_half, med, st, d)
        + _closed_forms_at9(d)
        + _controls_at9(tg, d, st, z_limit(n_cmp), reps[1000]),
        figures=[_figure_at9(d, med)],
        tables=[_table_at9(rows)],
        setup=f"d = {d}, q = k balanced unit (q_b = (√(2/d), 0)), far phases Unif[−π, π]; "
        f"M ∈ {list(reps)} with {list(reps.values())} trials; exact law by a 4096-term J₀ "
        "series.",
    )


# ------------------------------------------------------------------------------------------
# mutants (AT9's angle-scale-halved lives with AT8's)


def _union_bound_without_m(original):
    @functools.wraps(original)
    def score_gap_union_bound(t, M, d, rate=0.5):
        return original(t, 1, d, rate)

    return score_gap_union_bound


def _quantile_without_root(original):
    @functools.wraps(original)
    def score_gap_quantile(delta, M, d, rate=0.5):
        return np.asarray(original(delta, M, d, rate)) ** 2

    return score_gap_quantile


def _union_factor_2_dropped(original):
    @functools.wraps(original)
    def score_gap_union_bound(t, M, d, rate=0.5):
        return np.asarray(original(t, M, d, rate)) / 2.0

    return score_gap_union_bound


def _quantile_ln_m(original):
    @functools.wraps(original)
    def score_gap_quantile(delta, M, d, rate=0.5):
        q = np.asarray(original(delta, M, d, rate))
        return np.sqrt(np.maximum(q * q - np.log(2.0) / (rate * d), 0.0))  # ln(M/δ), 2 lost

    return score_gap_quantile


def _max_tail_m_minus_1(original):
    @functools.wraps(original)
    def max_score_tail(t, d, M):
        return original(t, d, max(M - 1, 1))

    return max_score_tail


def _z_judge_best_entry(original):
    @functools.wraps(original)
    def _z_judge(key, z, st, label):
        return original(key, [min(z)], st, label)

    return _z_judge


def _exact_judge_loose(original):
    @functools.wraps(original)
    def _exact_judge(key, value, label):
        return original(key, min(value, 0.0), label)  # a positive excess clipped away

    return _exact_judge


_TAILS = "posflow.theory._transport_tails"
_CONC = "posflow.simulate.concentration"
_SELF = "posflow.proofs_checks.claims.at09_score_gap"
# fmt: off
add_mutant("AT9", "union-bound-factor-2-dropped", f"{_TAILS}:score_gap_union_bound",
           _union_factor_2_dropped, "the union bound written M e^(−cdt²): the factor 2 dropped")
add_mutant("AT9", "quantile-ln-M", f"{_TAILS}:score_gap_quantile", _quantile_ln_m,
           "the level √(ln(M/δ)/(cd)): the 2 inside the logarithm dropped")
add_mutant("AT9", "max-tail-M-minus-1", f"{_CONC}:max_score_tail", _max_tail_m_minus_1,
           "the law of the max of M − 1 scores (off by one)")
add_mutant("AT9", "z-judge-best-entry", f"{_SELF}:_z_judge", _z_judge_best_entry,
           "the Monte Carlo judge takes the smallest z score instead of the largest")
add_mutant("AT9", "exact-judge-clips-excess", f"{_SELF}:_exact_judge", _exact_judge_loose,
           "the exact-inequality judge clips a positive excess to 0")
add_mutant("AT9", "union-bound-without-M", f"{_TAILS}:score_gap_union_bound",
           _union_bound_without_m, "the union bound forgets the factor M (2e^(−cdt²))")
add_mutant("AT9", "quantile-without-root", f"{_TAILS}:score_gap_quantile",
           _quantile_without_root, "the guaranteed level is ln(2M/δ)/(cd), the square root lost")
# fmt: on
