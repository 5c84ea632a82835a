"""Claim AT19 of [B]: the stylized single-layer comparison of RoPE, random Q/K, random Q/K/V and
ALiBi, with a planted near target.

The check reads the planted sweep :func:`posflow.simulate.transport.planted_sweep` (d = 96,
base 10⁴, λ = 8, planted key at distance 4, near window W = 64, ALiBi slope 2⁻⁴, identical far
values; shared with AT12 and AT13, one seed per L shared by every scheme) and judges each
simulated mean against the logit-level references of :mod:`posflow.simulate.transport`: the near
mass through its L-free odds M(1 − ρ_D)/ρ_D pooled over every length against
:func:`~posflow.simulate.transport.near_mass_reference`, ALiBi's far mass against
:func:`~posflow.simulate.transport.alibi_far_mass_reference`, the far-residual ratio
Q/K/V : Q/K against the exact ``value_side_expectation`` prediction, and [B]'s "extends the
extrapolation range" as "the length at which the output error exceeds τ is larger with value
rotation" (τ a named parameter with a sensitivity table). The independent references, judges and
negative controls are in :mod:`posflow.proofs_checks.claims.at19_stylized_refs`; the figure and
the tables in :mod:`posflow.proofs_checks.claims.at19_stylized_figures`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.claims import at19_stylized_refs as R
from posflow.proofs_checks.claims.at19_stylized_figures import (
    figure_at19,
    tables_at19,
    value_blocks,
)
from posflow.proofs_checks.kit import (
    SCHEME_LABELS,
    STYLIZED_INPUTS,
    Context,
    Evidence,
    add_mutant,
    cite,
    info,
    mean_se,
    register,
    undecided,
    z_limit,
)
from posflow.simulate.transport import (
    PLANTED,
    alibi_far_mass_reference,
    crossing_length,
    far_logit_cv2,
    near_mass_reference,
    planted_lengths,
    planted_sweep,
)
from posflow.theory import transport as th

__all__ = ["TAU", "TAU_GRID"]

D, BASE, W = PLANTED.d, PLANTED.base, PLANTED.window
TAU = 0.5
"""AT19: output-error level ‖o − t‖/‖t‖ at which a scheme counts as degraded (half the target)."""
TAU_GRID = (0.25, 0.5, 0.75, 1.0, 1.25)
_N_REF = PLANTED.reference_draws
_EPS = R.EPS
_ODDS = ("rope_pooled_near_mass_odds", "random_qk_pooled_near_mass_odds")

_CITES = (
    cite("posflow.simulate.transport:planted_sweep",
         "near_mass_reference's and alibi_far_mass_reference's logit-level draws; the exact "
         "identities ρ_D(Q/K/V) = ρ_D(Q/K) and ‖o − t‖ = √2(1 − a_{j*}) (Q/K)",
         *_ODDS, "alibi_far_mass_at_Lmax", "qkv_far_mass_equals_qk", "qk_output_error_identity"),
    cite("posflow.simulate.transport:stylized_attention",
         "the same logit-level draws and identities (planted_sweep runs it)",
         *_ODDS, "alibi_far_mass_at_Lmax", "qkv_far_mass_equals_qk", "qk_output_error_identity"),
    cite("posflow.simulate.transport:near_mass_reference",
         "the stylized simulator's trials, L-free odds pooled over every length", *_ODDS),
    cite("posflow.simulate.transport:alibi_far_mass_reference",
         "the stylized simulator's ALiBi trials at L_max", "alibi_far_mass_at_Lmax"),
    cite("posflow.theory.transport:value_side_expectation",
         "(2/d) Σ_b S_b(M)/M² by the geometric closed form at 40 digits (mpmath)",
         "value_side_expectation_max_rel_error"),
    cite("posflow.simulate.transport:coherence_per_block",
         "the geometric closed form [M(1+c)/(1−c) − 2c(1−c^M)/(1−c)²]/M² at 40 digits",
         "coherence_per_block_vs_closed_form"),
    cite("posflow.simulate.transport:value_ratio_reference",
         "Σ_b w_b S_b/M² (closed form) + CV²/M (quadrature)",
         "value_ratio_reference_vs_closed_form"),
    cite("posflow.simulate.transport:far_logit_cv2",
         "quadrature of E e^{2λu} and E e^{λu} over the density (1 − u²)^{(d−3)/2}",
         "far_logit_cv2_vs_quadrature"),
    cite("posflow.simulate.transport:crossing_length",
         "a dense ln-L grid and brentq on numpy.interp", "crossing_length_vs_grid"),
    cite("posflow.theory.transport:blocks_mixed", "#{b : n ln(sin f_b/f_b) < ln ε} in float64",
         "blocks_mixed_vs_float64_count"),
)  # fmt: skip


def _bonferroni(zlim: float, comps: int) -> str:
    return f"z = {zlim:.2f} (Bonferroni over {comps} comparisons, family-wise level 6e-5)"


def _tau_decision(Ls, qk, qkv, tau, zlim):
    """Is L_τ(Q/K/V) > L_τ(Q/K)? Both curves are interpolated linearly in log L, so it holds when
    Q/K/V's error is below Q/K's at the two grid lengths that bracket Q/K's crossing (paired
    z-scores over trials). Returns (L_qk, L_qkv, z, decision) with decision in
    holds / fails / undecided / "not reached"."""
    m_qk = [float(np.mean(x)) for x in qk]
    m_qkv = [float(np.mean(x)) for x in qkv]
    L_qk, br = crossing_length(Ls, m_qk, tau)
    L_qkv, _ = crossing_length(Ls, m_qkv, tau)
    if br is None:
        return L_qk, L_qkv, math.nan, "not reached"
    if br == (0, 0):
        return L_qk, L_qkv, math.nan, "above τ at the first L"
    zs = []
    for k in sorted(set(br)):
        d = np.asarray(qk[k]) - np.asarray(qkv[k])
        m, se = mean_se(d)
        zs.append(m / se if se > 0 else math.copysign(math.inf, m) if m else 0.0)
    z = float(min(zs))
    decision = "holds" if z >= zlim else "fails" if z <= -zlim else "undecided"
    return L_qk, L_qkv, z, decision


@register(
    "AT19",
    "[B]",
    "stylized single-layer comparison at L from 512 to 65536: far mass → 1 for RoPE, random Q/K "
    "and Q/K/V rotations; bounded for ALiBi; value rotation shrinks the far residual by the exact "
    "value-side factor and the output error reaches τ at a larger L with Q/K/V than with Q/K",
    assumptions=(
        "the stylized model's default parameters (d = 96, λ = 8, W = 64, m = 2⁻⁴)",
        "τ = 0.5 (a named parameter; sensitivity table)",
    ),
    compares=_CITES,
)
def at19(ctx: Context) -> Evidence:
    """Claim AT19: the stylized comparison, with [B]'s "output error Q/K/V ≪ Q/K" restated.

    Far mass (``planted_sweep``): RoPE's and random Q/K's L-free odds M(1 − ρ_D)/ρ_D of every
    trial at every length, pooled, against AT12's prediction (``near_mass_reference``), the
    fall of 1 − ρ_D from the first to the last length (z-score) and its mean at L_max (judged
    where the tolerance is under half the quantity); random Q/K/V's weights equal Q/K's; ALiBi's
    far mass against ``alibi_far_mass_reference``. Value side: ``value_side_expectation``,
    ``coherence_per_block`` and ``value_ratio_reference`` against the geometric closed form,
    ``far_logit_cv2`` against quadrature; the mean squared far-residual ratio (Q/K/V ÷ Q/K)²
    against Σ_b w_b S_b/M² + CV²/M; Q/K's output error equals √2(1 − a_{j*}). [B]'s
    qualitative statement as L_τ(Q/K/V) > L_τ(Q/K) (``crossing_length`` against a dense grid),
    τ = :data:`TAU` with a sensitivity table. "≪" is reported, not judged: once ρ_D → 1 the
    output-error ratio tends to a floor ≥ 1/√2. Negative controls: every judge rejects
    known-wrong data.
    """
    Ls = list(planted_lengths(ctx.full))
    Lmax, seed = Ls[-1], int(ctx.seed)
    sw = {s: planted_sweep(s, seed, ctx.full) for s in ("rope", "random_qk", "random_qkv")}
    sw["alibi"] = planted_sweep("alibi", seed, ctx.full, (Lmax,))
    comps = 9 + len(Ls)  # 2 pooled odds, 2 at L_max, 2 falls, ALiBi, the ratios, τ, the floor
    zlim = z_limit(comps)
    why = _bonferroni(zlim, comps)
    ms = _at19_far_mass(sw, Ls, seed, zlim, why)
    value_ms, r_pred, r_meas = _at19_value_side(sw, Ls, zlim, why)
    qk = [sw["random_qk"][L].output_error for L in Ls]
    qkv = [sw["random_qkv"][L].output_error for L in Ls]
    tau_ms, sens = _at19_tau(Ls, qk, qkv, zlim, why)
    curves = {"qk": [float(np.mean(x)) for x in qk], "qkv": [float(np.mean(x)) for x in qkv]}
    ms += value_ms + tau_ms + _at19_floor(sw, qk, qkv, r_meas, Ls, zlim, why)
    ms += R.routine_rows(Ls, curves, TAU_GRID)
    blk = value_blocks(Ls)
    rows = [
        [L, math.sqrt(r_meas[L][0]), r_meas[L][1] / (2 * math.sqrt(r_meas[L][0])),
         math.sqrt(r_pred[L]), float(np.mean(qk[k])), float(np.mean(qkv[k])),
         float(np.mean(sw["random_qk"][L].far_mass))]
        for k, L in enumerate(Ls)
    ]  # fmt: skip
    return Evidence(
        ms,
        figures=[figure_at19(sw, Ls, rows, blk, seed, TAU)],
        tables=tables_at19(rows, sens, blk, zlim, Lmax),
        setup="stylized_attention defaults; trials per L: "
        + ", ".join(f"{L}: {k}" for L, k in planted_lengths(ctx.full).items())
        + " (quick stops at 8192; --full runs to 65536); one seed per L shared by the schemes, so "
        f"Q/K and Q/K/V see the same keys, weights and value directions; ALiBi at L = {Lmax} "
        f"only; L-free odds reference at L = 2^40 ({_N_REF} logit-level draws).",
    )


def _at19_far_mass(sw, Ls, seed, zlim, why) -> list:
    """RoPE's and random Q/K's pooled odds, fall and L_max near mass vs AT12's prediction;
    Q/K/V's far mass equals Q/K's; ALiBi's vs its L-free reference; Q/K's output error equals
    √2(1 − a_{j*}); the controls of these judges."""
    Lmax, ms, near, pooled = Ls[-1], [], {}, {}
    for s in ("rope", "random_qk"):
        sample = np.concatenate([R.odds(sw[s][L], L) for L in Ls])
        ref, ref_se = R.odds_reference(s, seed)
        bias = near_mass_reference(s, Ls[0], seed)["bias"]  # CV²/M at the smallest M
        pooled[s] = (sample, ref, ref_se, bias)
        ms.append(R.stat_judge(f"{s}_pooled_near_mass_odds", sample, ref, ref_se, bias, zlim,
                               why, f"{SCHEME_LABELS[s]}: mean of M(1 − ρ_D)/ρ_D over every trial "
                               "and length vs the prediction's L-free limit E[K e^Δ]/E e^s"))
        near[s] = [1 - sw[s][L].far_mass for L in Ls]
        ms.append(R.fall_judge(f"{s}_near_mass_fall_z", near[s][0], near[s][-1], zlim,
                               f"{SCHEME_LABELS[s]}: z-score of the fall of 1 − ρ_D from L = "
                               f"{Ls[0]} to {Lmax} (needs ≥ z_n: {why})"))
        r = near_mass_reference(s, Lmax, seed)
        label = (f"{SCHEME_LABELS[s]} L = {Lmax}: mean 1 − ρ_D vs K e^Δ/(K e^Δ + M E e^s) "
                 "(→ 0, far mass → 1)")
        m = R.stat_judge(f"{s}_near_mass_at_Lmax", near[s][-1], r["near_mass"],
                         r["near_mass_se"], r["bias"], zlim, why, label)
        ms.append(m if m.tol.value < 0.5 * r["near_mass"] else info(
            m.key, m.value, label=f"{label} (not judged: {near[s][-1].size} trials give a "
            f"tolerance {m.tol.value:.2g} ≥ half the prediction {r['near_mass']:.2g}; the pooled "
            "odds judge it)"))  # fmt: skip
    far_qk = np.concatenate([sw["random_qk"][L].far_mass for L in Ls])
    far_qkv = np.concatenate([sw["random_qkv"][L].far_mass for L in Ls])
    ms.append(R.same_judge("qkv_far_mass_equals_qk", far_qkv, far_qk, "the same keys, angles and "
                           "softmax: bit-identical weights",
                           "max |ρ_D(Q/K/V) − ρ_D(Q/K)| (common random numbers)"))
    ms += _at19_alibi_and_identity(sw, Ls, seed, zlim, why, far_qk, far_qkv)
    return ms + R.stat_controls(pooled["rope"], near["rope"], zlim)


def _at19_alibi_and_identity(sw, Ls, seed, zlim, why, far_qk, far_qkv) -> list:
    Lmax, qk = Ls[-1], sw["random_qk"]
    ref, ref_se, _ = alibi_far_mass_reference(seed)
    alibi = R.stat_judge("alibi_far_mass_at_Lmax", sw["alibi"][Lmax].far_mass, ref, ref_se, 0.0,
                         zlim, why, f"stylized ALiBi L = {Lmax}: far mass vs its L-free value "
                         "(AT13's reference)")  # fmt: skip
    err = np.concatenate([qk[L].output_error for L in Ls])
    ident = np.concatenate([math.sqrt(2) * (1 - qk[L].near_weight) for L in Ls])
    tol = Lmax * 4 * _EPS
    identity = R.fp_judge("qk_output_error_identity", err, ident, tol,
                          f"a softmax of L ≤ {Lmax} terms: 4·L·ε",
                          "Q/K: max |‖o − t‖ − √2(1 − a_{j*})| (identical far values ⊥ target)")
    return [alibi, identity, *R.fp_controls(far_qk, far_qkv, err, ident, tol, *_vse_control())]


def _vse_control():
    """value_side_expectation without its cross terms (χ = 0), and the closed form, at L = 512."""
    M = 512 - W
    u = np.full((M, D // 2, 2), 1 / math.sqrt(D))
    bad = th.value_side_expectation(np.full(M, 1 / M), u, W + np.arange(M), np.zeros(D // 2))
    return [float(bad)], [float(np.mean(R.coherence_closed(M)))]


def _at19_value_side(sw, Ls, zlim, why):
    """The theory routine against the closed form, then the simulator against both:
    (measurements, {L: predicted ratio²}, {L: (mean, SE) of the simulated ratio²})."""
    f = BASE ** (-2.0 * np.arange(D // 2) / D)  # f_b = base^(−2b/d), restated
    chi = np.sin(f) / f
    ms, r_pred, r_meas, got, closed = [], {}, {}, [], []
    for L in Ls:
        M = L - W
        u = np.full((M, D // 2, 2), 1 / math.sqrt(D))
        vse = float(th.value_side_expectation(np.full(M, 1 / M), u, W + np.arange(M), chi))
        got.append(vse)
        closed.append(float(np.mean(R.coherence_closed(M))))  # (2/d) Σ_b S_b/M²
        ratio2 = (sw["random_qkv"][L].far_residual / sw["random_qk"][L].far_residual) ** 2
        pred = vse + far_logit_cv2() / M
        bias = 4 * far_logit_cv2() / M  # relative: the delta-method error 4·CV²/M
        ms.append(R.stat_judge(f"far_residual_ratio2_L{L}", ratio2, pred, 0.0, bias, zlim, why,
                               f"L = {L}: mean (far residual Q/K/V ÷ Q/K)² vs "
                               "value_side_expectation + CV²/M"))  # fmt: skip
        r_pred[L], r_meas[L] = pred, mean_se(ratio2)
    ms.insert(0, R.fp_judge(
        "value_side_expectation_max_rel_error", got, closed, 1e-9,
        f"recursions of M ≤ {Ls[-1] - W} steps of positive-weight terms: ≤ 2·M·ε = "
        f"{2 * (Ls[-1] - W) * _EPS:.1e} relative, against the 40-digit closed form",
        "max over L of |value_side_expectation (uniform weights)/(2/d) Σ_b S_b/M² − 1|",
        rel=True))  # fmt: skip
    return ms, r_pred, r_meas


def _at19_tau(Ls, qk, qkv, zlim, why):
    """[B]'s qualitative statement L_τ(Q/K/V) > L_τ(Q/K): (measurements, sensitivity rows)."""
    sens = []
    for tau in TAU_GRID:
        L1, L2, z, dec = _tau_decision(Ls, qk, qkv, tau, zlim)
        sens.append([tau, L1, L2, L2 / L1 if L1 == L1 and L2 == L2 else math.nan, z, dec])
    L1, L2, z, dec = _tau_decision(Ls, qk, qkv, TAU, zlim)
    label = (f"τ = {TAU}: paired z-score of Q/K error − Q/K/V error at the lengths bracketing "
             f"L_τ(Q/K) (needs ≥ z_n: {why})")  # fmt: skip
    if dec in ("holds", "fails"):
        ms = [R.tau_judge("output_error_reaches_tau_later_z", z, zlim, TAU, label)]
        k = crossing_length(Ls, [float(np.mean(x)) for x in qk], TAU)[1][1]
        swapped = _tau_decision(Ls, qkv, qk, TAU, zlim)[2]
        ms += R.tau_controls(qk[k], qkv[k], swapped, zlim, TAU, qkv[-1] / qk[-1])
    else:
        why_not = {
            "not reached": f"Q/K's error stays below τ up to L = {Ls[-1]}",
            "undecided": f"|z| < {zlim:.2f} at the bracketing lengths",
        }.get(dec, f"Q/K's error exceeds τ already at L = {Ls[0]}")
        ms = [undecided("output_error_reaches_tau_later_z", z, why_not, label=label)]
    ms += [
        info("L_tau_qk", L1, label=f"L_τ(Q/K), τ = {TAU} (log-L interpolation)"),
        info("L_tau_qkv", L2, label=f"L_τ(Q/K/V), τ = {TAU}"),
    ]
    return ms, sens


def _at19_floor(sw, qk, qkv, r_meas, Ls, zlim, why) -> list:
    """The "≪": the output-error ratio against its floor 1/√2, and its parts at L_max."""
    Lmax = Ls[-1]
    e_qk, e_qkv = float(np.mean(qk[-1])), float(np.mean(qkv[-1]))
    far_max = float(np.mean(sw["random_qk"][Lmax].far_mass))
    return [
        R.floor_judge("output_error_ratio_floor", qkv[-1] / qk[-1], zlim, why,
                      f"mean output-error ratio Q/K/V : Q/K at L = {Lmax} (far mass "
                      f"{far_max:.2f}) vs its floor 1/√2 as ρ_D → 1 (Q/K: √2(1 − a_{{j*}}) → √2, "
                      "Q/K/V: ≥ 1 − a_{j*} → 1), so '≪' cannot hold at long L"),
        info("output_error_ratio_of_means_at_Lmax", e_qkv / e_qk,
             label=f"ratio of mean output errors Q/K/V : Q/K at L = {Lmax}"),
        info("far_mass_qk_at_Lmax", far_max, label=f"random Q/K far mass at L = {Lmax}"),
        info("far_residual_ratio_at_Lmax", math.sqrt(r_meas[Lmax][0]),
             label=f"far-residual ratio Q/K/V : Q/K at L = {Lmax} (√ of the mean square)"),
    ]  # fmt: skip


# -- mutants --------------------------------------------------------------------------------------


def _v_angles_narrow(original):
    @functools.wraps(original)
    def draw(*args, **kwargs):
        x = original(*args, **kwargs)
        x["theta_v"] = x["theta_v"] / 2
        return x

    return draw


def _cross_term_halved(original):
    @functools.wraps(original)
    def vse(weights, values, distances, chi):
        diag = original(weights, values, distances, np.zeros_like(np.asarray(chi)))
        return 0.5 * (original(weights, values, distances, chi) + diag)

    return vse


add_mutant(
    "AT19",
    "value-rotation-dropped",
    "posflow.simulate._stylized:_ROTATE_V",
    lambda orig: frozenset({"learned_qkv"}),
    "random Q/K/V leaves the values unrotated",
)
add_mutant(
    "AT19",
    "value-angles-half-width",
    STYLIZED_INPUTS,
    _v_angles_narrow,
    "value angles drawn from Unif[−f_b/2, f_b/2] instead of Unif[−f_b, f_b]",
)
add_mutant(
    "AT19",
    "value-side-cross-term-halved",
    "posflow.theory._transport_values:value_side_expectation",
    _cross_term_halved,
    "value_side_expectation with half the cross terms 2 Re Σ a_j a_k χ^{n_j−n_k} z_j z̄_k",
)


_REFS = "posflow.proofs_checks.claims.at19_stylized_refs"
# fmt: off
add_mutant("AT19", "coherence-lag-off-by-one", "posflow.simulate._planted:coherence_per_block",
           R.mutant_coherence_lag_off_by_one,
           "coherence_per_block sums c^{|j−k|+1} (every lag one longer)")
add_mutant("AT19", "crossing-linear-in-L", "posflow.simulate._planted:crossing_length",
           R.mutant_crossing_linear_in_L,
           "crossing_length interpolates linearly in L instead of ln L")
add_mutant("AT19", "far-logit-cv2-d-94", "posflow.simulate._planted:far_logit_cv2",
           lambda orig: functools.wraps(orig)(lambda lam=8.0: orig(lam * 96 / 94)),
           "the CV² of a far weight at λ·96/94 (a slip in the sphere's dimension)")
add_mutant("AT19", "loosened-stat-judge", f"{_REFS}:stat_judge",
           R.mutant_loosened(lambda o, k, x, r, rs, b, z, *a: o(k, x, r, rs, b, 2 * z + 2,
                                                                *a)),
           "the statistical judge at 2 z_n + 2 standard errors")
add_mutant("AT19", "loosened-fp-judge-best-entry", f"{_REFS}:fp_judge",
           R.mutant_loosened(lambda o, k, g, r, *a, **kw: o(k, np.sort(np.ravel(g))[:1],
                                                          np.sort(np.ravel(r))[:1],
                                                          *a, **kw)),
           "the rounding judge compares the smallest entries only (best row for worst row)")
add_mutant("AT19", "loosened-same-judge", f"{_REFS}:same_judge",
           R.mutant_loosened(lambda o, k, g, r, *a: o(k, np.round(g, 12), np.round(r, 12),
                                                      *a)),
           "the exact judge compares values rounded to 12 digits")
add_mutant("AT19", "loosened-tau-judge", f"{_REFS}:tau_judge",
           R.mutant_loosened(lambda o, k, z, zl, *a: o(k, z, 2.0, *a)),
           "the τ judge needs z ≥ 2 instead of z_n")
# fmt: on
