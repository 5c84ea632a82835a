"""Claim AT8 of [B]: the I₀ sub-Gaussian tail of a score of fully mixed SO(2) blocks.

E e^{λs} = ∏_b I₀(λc_b) ≤ e^{λ²Σc_b²/4} (I₀(x) ≤ e^{x²/4} by the termwise series comparison and
on a grid), hence Pr(|s| ≥ t) ≤ 2exp(−t²/Σ_b c_b²) — twice the exponent of Hoeffding's bound;
for balanced blocks the Haar exponent dε²/2. Tail counts are judged by exact binomial p-values
as normal quantiles, the MGF and the variance by standard errors, against
:func:`~posflow.proofs_checks.kit.z_limit`. The mutant ``angle-scale-halved`` also breaks AT9
(:mod:`posflow.proofs_checks.claims.at09_score_gap`), which draws from the same law.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import i0e

from posflow.proofs_checks.claims.at08_bessel_tail_refs import PTS_T, hoeffding_direct, rel_err
from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
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
    cite,
    claim_rng,
    close,
    fp_tol,
    holds,
    info,
    register,
    rejects,
    stat_tol,
    z_limit,
)
from posflow.simulate.concentration import block_norms, i0_series_dominated
from posflow.simulate.orthogonal import SO2BlockLaw, rotate_blocks
from posflow.theory import transport as th


def _sharp_tail(t, q_norms, k_norms):
    """2 exp(−t²/Σ_b c_b²), c_b = ‖q_b‖‖k_b‖: Hoeffding's formula 2 exp(−t'²/(2Σ c_b²)) of
    :func:`posflow.theory.transport.hoeffding_tail` at t' = √2 t."""
    return th.hoeffding_tail(np.sqrt(2.0) * np.asarray(t, dtype=float), q_norms, k_norms)


_FP_I0 = (
    "ln i0e(x) + x − x²/4 for x ≤ 50: i0e relative error ≲ 1e-15 "
    "(Cephes), rounding of x²/4 ≤ 625 is ≤ 625·1.1e-16 = 7e-14"
)
_FP_LEVY = (
    "two exponentials of the same argument −dε²/2 (Σc_b² = 2/d "
    "summed over 48 blocks): ≤ 48·2.2e-16·|dε²/2 ≤ 8| ≈ 1e-13"
)


def _z_mean(x, exact):
    """|mean(x) − exact| in standard errors (sample s.d./√N)."""
    return abs(x.mean() - exact) / (x.std(ddof=1) / np.sqrt(len(x)))


def _mgf_vs_bessel(s, c):
    """For λ with λ²Σc_b²/4 = κ ∈ {¼, 1}: (z of MC E e^{λs} vs ∏I₀(λc_b), ln∏I₀(λc_b) − κ)."""
    S2 = float(np.sum(c * c))
    z, excess = [], []
    for kappa in (0.25, 1.0):  # E e^{λs} ≤ e^κ
        lam = 2 * np.sqrt(kappa / S2)
        exact = float(np.exp(np.sum(np.log(i0e(lam * c)) + lam * c)))
        z.append(_z_mean(np.exp(lam * s), exact))
        excess.append(np.log(exact) - kappa)
    return z, excess


def _figure_at8(d, N, eps, curves):
    panels = [
        Panel(
            f"{name} q, k",
            "t/(‖q‖‖k‖)",
            "Pr(|s| ≥ t)",
            [
                Series("Monte Carlo", eps, np.maximum(mc, 1 / N), "markers"),
                Series("2exp(−t²/Σc²)", eps, np.minimum(bound, 2.0)),
                Series("Hoeffding 2exp(−t²/(2Σc²))", eps, np.minimum(hoef, 2.0), style="--"),
            ],
            logy=True,
        )
        for name, (mc, bound, hoef) in curves.items()
    ]
    return Figure("AT8_tails", f"AT8: fully mixed SO(2) blocks, d = {d}, N = {N:,}", panels)


def _z_judge(key, z, zm, reason, label):
    """The judge of Monte Carlo estimates: the largest z score over the family ≤ z_limit."""
    return at_most(key, float(max(z)), 0.0, stat_tol(zm, reason), label=label, unit="SE")


def _formula_judge(key, err, label):
    """The judge of a routine against its direct formula: max relative error ≤ 1e-13."""
    return at_most(key, err, 0.0, fp_tol(1e-13, _FP_DIRECT), label=label)


def _i0_judge(key, gap):
    """The judge of I₀(x) ≤ e^{x²/4}: max ln I₀(x) − x²/4 ≤ 0 on the grid."""
    return at_most(key, gap, 0.0, fp_tol(2e-13, _FP_I0), label="max_x∈[0,50] ln I₀(x) − x²/4")


_FP_DIRECT = (
    "one exp, a sum of ≤ 48 squares and a hypot/cos/sin per entry against math.exp/sqrt/cos/sin "
    "written out: ≤ 48·2.2e-16·|exponent ≤ 8| ≈ 1e-13 relative"
)


def _direct_comparisons(q, k, angles):
    """hoeffding_tail, the sharp tail, levy_tail, block_norms and rotate_blocks against direct
    formulas at a few points (3 angle rows for the rotation)."""
    h = len(q) // 2
    qn = [math.hypot(q[b], q[b + h]) for b in range(h)]
    kn = [math.hypot(k[b], k[b + h]) for b in range(h)]
    rot = [[k[b] * math.cos(a[b]) - k[b + h] * math.sin(a[b]) for b in range(h)]
           + [k[b] * math.sin(a[b]) + k[b + h] * math.cos(a[b]) for b in range(h)]
           for a in angles]  # fmt: skip
    c2 = sum((a * b) ** 2 for a, b in zip(qn, kn, strict=True))
    sharp = [2.0 * math.exp(-x * x / c2) for x in PTS_T]
    hoef = rel_err(th.hoeffding_tail(PTS_T, qn, kn), hoeffding_direct(PTS_T, qn, kn))
    return [
        _formula_judge("hoeffding_tail_vs_closed_form",
                       hoef,
                       "max |hoeffding_tail/2exp(−t²/(2Σc_b²)) − 1| at 4 t, Gaussian q, k"),
        _formula_judge("sharp_tail_vs_closed_form",
                       rel_err(_sharp_tail(PTS_T, qn, kn), sharp),
                       "max |2exp(−t²/Σc_b²) used by the check / the formula − 1| at 4 t"),
        _formula_judge("levy_tail_vs_closed_form",
                       rel_err(th.levy_tail(96, [0.0, 0.1, 0.3]),
                                [2 * math.exp(-48 * e * e) for e in (0.0, 0.1, 0.3)]),
                       "max |levy_tail(96, ε)/2exp(−48ε²) − 1|"),
        _formula_judge("block_norms_vs_direct", rel_err(block_norms(q), qn),
                       "max |block_norms(q)/√(q_b² + q_{b+d/2}²) − 1|"),
        _formula_judge("rotate_blocks_vs_direct",
                       float(np.max(np.abs(rotate_blocks(k, angles) - np.array(rot))))
                       / float(np.linalg.norm(k)),
                       "max |rotate_blocks − (k_b cos ψ − k_b' sin ψ, k_b sin ψ + k_b' cos ψ)|"
                       "/‖k‖"),
    ]  # fmt: skip


def _controls_at8(q, k, s, N, zm, i0_max, grid):
    """Each judge on a known-wrong input."""
    h = len(q) // 2
    qn, kn = block_norms(q), block_norms(k)
    c2 = float(np.sum((qn * kn) ** 2))
    kz = zm + 2.0  # a bias of kz SE, above the Bonferroni quantile (2 SE margin for skew)
    t = 0.3 * np.linalg.norm(q) * np.linalg.norm(k)
    p = float(_sharp_tail(t, qn, kn))
    hits = round(biased(N * p, math.sqrt(N * p * (1 - p)), kz))
    se = float(np.std(s * s, ddof=1) / np.sqrt(N))
    no_two = 2.0 * np.exp(-np.square(PTS_T) / c2)  # 2exp(−t²/Σc²): the 2 of 2Σc² dropped
    return [
        rejects("formula_judge_control_hoeffding_without_2",
                _formula_judge("c", rel_err(no_two, hoeffding_direct(PTS_T, qn, kn)), "c"),
                "2exp(−t²/Σc_b²) for Hoeffding's 2exp(−t²/(2Σc_b²)): a factor 2 dropped"),
        rejects("formula_judge_control_adjacent_pairs",
                _formula_judge("c", rel_err(np.hypot(q[0::2], q[1::2]),
                                             [math.hypot(q[b], q[b + h]) for b in range(h)]), "c"),
                "block norms of adjacent pairs (x_{2b}, x_{2b+1}) instead of (x_b, x_{b+d/2})"),
        rejects("z_judge_control_biased_count",
                _z_judge("c", [0.0] * 20 + list(np.atleast_1d(binomial_z_above(hits, N, p))), zm,
                         "c", "c"),
                f"one tail count {kz:.1f} SE above N·2exp(−t²/Σc²) (Gaussian q, k, ε = 0.3)"),
        rejects("z_judge_control_biased_variance",
                _z_judge("c", [0.0, abs(biased(float(np.mean(s * s)), se, kz) - c2 / 2) / se],
                         zm, "c", "c"),
                f"the mean of s² moved by {kz:.1f} SE from Σc_b²/2"),
        rejects("i0_judge_control_eighth",
                _i0_judge("c", float(np.max(i0_max - grid * grid / 8))),
                "ln I₀(x) − x²/8: the constant 1/4 halved"),
    ]  # fmt: skip


def _judge_at8(z_tail, z_mgf, z_var, mgf_excess, i0_gap, balanced_vs_levy, N):
    n = len(z_tail) + len(z_mgf) + len(z_var)
    zm = z_limit(n)
    clt = (
        f"|mean − exact|/SE, SE = sample s.d./√N, N = {N:,} scores per case (CLT; the variance "
        f"of e^(λs) is finite, ≤ e^(λ²Σc²/2)); {n} comparisons with the tails, "
        f"Bonferroni z_limit = {zm:.2f}, family-wise level ≤ {FAMILY_LEVEL:.1e}"
    )
    tails = binomial_reason("MC tails vs 2exp(−t²/Σc²)", f"N = {N:,} scores per case", n)
    return [
        holds(
            "i0_series_dominated",
            i0_series_dominated(),
            label="sympy: I₀ series Σ(x²/4)^k/(k!)² termwise ≤ e^(x²/4) (k! ≥ 1)",
        ),
        _i0_judge("max_log_i0_minus_quarter_x2", i0_gap),
        at_most(
            "max_mgf_log_excess",
            float(max(mgf_excess)),
            0.0,
            fp_tol(1e-12, "sum of 48 logs of i0e, each relative error ≲ 1e-15"),
            label="max ln ∏I₀(λc_b) − λ²Σc_b²/4",
        ),
        info("mgf_log_slack", -float(max(mgf_excess)),
             label="slack: min λ²Σc_b²/4 − ln ∏I₀(λc_b)"),
        _z_judge("max_z_mgf_vs_bessel_product", z_mgf, zm, "MC E e^(λs) vs ∏ I₀(λc_b): " + clt,
                 "max |z| of MC E e^(λs) vs ∏ I₀(λc_b)"),
        _z_judge("max_z_variance", z_var, zm, "MC E s² vs Σc_b²/2: " + clt,
                 "max |z| of MC E s² vs Σc_b²/2"),
        _z_judge("max_z_above_sharp_tail", z_tail, zm, tails,
                 "max z of MC tail above 2exp(−t²/Σc_b²)"),
        close(
            "balanced_sharp_vs_levy",
            balanced_vs_levy,
            0.0,
            fp_tol(1e-13, _FP_LEVY),
            label="max |2exp(−t²/Σc²)/2e^(−dε²/2) − 1| (balanced unit q, k)",
        ),
        info("samples_per_case", N),
    ]  # fmt: skip


_CITES = (
    cite("posflow.theory.transport:hoeffding_tail",
         "the closed form 2exp(−t²/(2Σ_b q_b²k_b²)) by a Python loop at 4 thresholds",
         "hoeffding_tail_vs_closed_form", "sharp_tail_vs_closed_form"),
    cite("posflow.theory.transport:levy_tail", "the closed form 2exp(−dε²/2) at d = 96",
         "levy_tail_vs_closed_form"),
    cite("posflow.simulate.concentration:block_norms", "√(q_b² + q_{b+d/2}²) by math.hypot",
         "block_norms_vs_direct"),
    cite("posflow.simulate.concentration:i0_series_dominated",
         "sympy's series of besseli(0, x) (and scipy's i0e on a grid)", "i0_series_dominated"),
    cite("posflow.simulate.orthogonal:rotate_blocks",
         "each block rotated by math.cos/math.sin written out", "rotate_blocks_vs_direct"),
)  # fmt: skip


def _table_at8(rows):
    return Table(
        "tails",
        "Monte Carlo tail, the I₀ bound and Hoeffding's bound",
        ["case", "t/(‖q‖‖k‖)", "MC tail", "2exp(−t²/Σc²)", "Hoeffding 2exp(−t²/(2Σc²))"],
        rows,
        note="Hoeffding's bound is the weaker, implied one; for balanced "
        "blocks its exponent dε²/4 is half the true (Haar) exponent dε²/2",
    )


@register(
    "AT8",
    "[B]",
    "fully mixed SO(2) blocks: E e^{λs} = ∏_b I₀(λc_b) ≤ e^{λ²Σc_b²/4}, hence "
    "Pr(|s| ≥ t) ≤ 2 exp(-t²/Σ_b c_b²), c_b = ‖q_b‖‖k_b‖ (twice Hoeffding's exponent; balanced "
    "blocks: 2e^{-dε²/2}, the Haar exponent)",
    assumptions=("block phases independent and uniform (fully mixed)",),
    compares=_CITES,
)
def at8(ctx: Context) -> Evidence:
    """Claim AT8: the I₀ sub-Gaussian tail of a score of fully mixed SO(2) blocks (d = 96).

    I₀(x) ≤ e^{x²/4} by sympy (termwise series) and scipy (x ∈ [0, 50]); Monte Carlo scores
    qᵀR(ψ)k for Gaussian and balanced q, k: the MGF against ∏ I₀(λc_b), the variance against
    Σc_b²/2, tails under 2exp(−t²/Σc_b²); for balanced blocks that bound is Lévy's.
    ``th.hoeffding_tail``, ``th.levy_tail``, ``block_norms`` and ``rotate_blocks`` against
    direct formulas (``i0_series_dominated``: sympy); negative controls of every judge.
    """
    rng = claim_rng(ctx, 8)
    d = 96
    law = SO2BlockLaw(d, "uniform", scale=np.pi)  # one step mixes every block
    N = 200_000 if ctx.full else 20_000
    eps = np.array([0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4])
    cases = {"gaussian": (rng.standard_normal(d), rng.standard_normal(d)),
             "balanced": (np.full(d, 1 / np.sqrt(d)), np.full(d, 1 / np.sqrt(d)))}  # fmt: skip
    z_tail, z_mgf, z_var, mgf_excess, rows, curves, scores = [], [], [], [], [], {}, {}
    for name, (q, k) in cases.items():
        qn, kn = block_norms(q), block_norms(k)
        s = scores[name] = rotate_blocks(k, law.sample_angles(N, seed=rng)) @ q
        t = eps * np.linalg.norm(q) * np.linalg.norm(k)
        hits = (np.abs(s)[:, None] >= t).sum(0)
        bound, hoef = _sharp_tail(t, qn, kn), th.hoeffding_tail(t, qn, kn)
        z_tail += list(binomial_z_above(hits, N, bound))
        c = qn * kn
        z, excess = _mgf_vs_bessel(s, c)
        z_mgf, mgf_excess = z_mgf + z, mgf_excess + excess
        z_var.append(_z_mean(s * s, float(np.sum(c * c)) / 2))
        rows += [[name, float(e), h / N, float(b), float(hf)]
                 for e, h, b, hf in zip(eps, hits, bound, hoef, strict=True)]  # fmt: skip
        curves[name] = (hits / N, bound, hoef)
    qb = block_norms(cases["balanced"][0])
    balanced_vs_levy = float(np.max(np.abs(_sharp_tail(eps, qb, qb) / th.levy_tail(d, eps) - 1)))
    q, k = cases["gaussian"]
    grid = np.linspace(0.0, 50.0, 50_001)
    log_i0 = np.log(i0e(grid)) + grid  # ln I₀(x)
    i0_gap = float(np.max(log_i0 - grid * grid / 4))
    zm = z_limit(len(z_tail) + len(z_mgf) + len(z_var))
    return Evidence(
        _judge_at8(z_tail, z_mgf, z_var, mgf_excess, i0_gap, balanced_vs_levy, N)
        + _direct_comparisons(q, k, law.sample_angles(3, seed=rng))
        + _controls_at8(q, k, scores["gaussian"], N, zm, log_i0, grid)
        + [info("sharp_tail_min_slack", min(float(np.min(b - m)) for m, b, _ in curves.values()))],
        figures=[_figure_at8(d, N, eps, curves)],
        tables=[_table_at8(rows)],
        setup=f"d = {d}, half-split SO(2) blocks, phases Unif[−π, π] (SO2BlockLaw, scale π); "
        f"{N:,} scores per case; q, k standard Gaussian or balanced (all entries 1/√d); "
        "λ with λ²Σc_b²/4 ∈ {0.25, 1}.",
    )


# ------------------------------------------------------------------------------------------
# mutants


def _hoeffding_sum_not_squares(original):
    @functools.wraps(original)
    def hoeffding_tail(t, q_norms, k_norms):
        t = np.asarray(t, dtype=float)
        proxy = float(np.sum(np.asarray(q_norms) * np.asarray(k_norms)))
        return 2.0 * np.exp(-(t * t) / (2.0 * proxy))

    return hoeffding_tail


def _angle_scale_halved(original):
    @functools.wraps(original)
    def sample_angles(self, size, seed=None):
        return 0.5 * original(self, size, seed)

    return sample_angles


def _hoeffding_prefactor_dropped(original):
    @functools.wraps(original)
    def hoeffding_tail(t, q_norms, k_norms):
        return np.asarray(original(t, q_norms, k_norms)) / 2.0  # exp(−t²/(2Σc²)): the 2 lost

    return hoeffding_tail


def _block_norms_adjacent(original):
    @functools.wraps(original)
    def block_norms(x):
        return np.hypot(x[..., 0::2], x[..., 1::2])

    return block_norms


def _z_judge_best_entry(original):
    @functools.wraps(original)
    def _z_judge(key, z, zm, reason, label):
        return original(key, [min(z)], zm, reason, label)

    return _z_judge


def _formula_judge_loose(original):
    @functools.wraps(original)
    def _formula_judge(key, err, label):
        return at_most(key, err, 0.0, fp_tol(0.99, "a loosened judge"), label=label)

    return _formula_judge


_TAILS = "posflow.theory._transport_tails"
_SELF = "posflow.proofs_checks.claims.at08_bessel_tail"
# fmt: off
add_mutant("AT8", "hoeffding-prefactor-dropped", f"{_TAILS}:hoeffding_tail",
           _hoeffding_prefactor_dropped, "Hoeffding's tail without its factor 2 (exp(−t²/(2Σc²)))")
add_mutant("AT8", "block-norms-adjacent-pairs", "posflow.simulate.concentration:block_norms",
           _block_norms_adjacent, "block norms of adjacent pairs instead of the half split")
add_mutant("AT8", "z-judge-best-entry", f"{_SELF}:_z_judge", _z_judge_best_entry,
           "the Monte Carlo judge takes the smallest z score instead of the largest")
add_mutant("AT8", "formula-judge-loosened", f"{_SELF}:_formula_judge", _formula_judge_loose,
           "the direct-formula judge allows a relative error of 0.99 instead of 1e-13")
add_mutant("AT8", "hoeffding-sum-not-squares", f"{_TAILS}:hoeffding_tail",
           _hoeffding_sum_not_squares,
           "the tail's variance proxy is Σ c_b instead of Σ c_b²")
# AT9 (posflow.proofs_checks.claims.at09_score_gap) draws its far scores from the same law
add_mutant(("AT8", "AT9"), "angle-scale-halved",
           "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles", _angle_scale_halved,
           "the step angles are drawn at half their scale (Unif[−π/2, π/2]: blocks not mixed)")
# fmt: on
