"""Claim AT16 of [B]: RoPE's deterministic angles have no spectral gap and leave the trained arc.

AT16 compares :mod:`posflow.theory.transport`'s characteristic functions and 40-digit trained-arc
test with float64 and with the route means of :func:`posflow.simulate.transport.
empirical_route_mean`. Claim AT17 (positive-mean angles drift) lives in
:mod:`posflow.proofs_checks.claims.at17_zero_mean_drift`.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
    FAMILY_Z,
    Context,
    Evidence,
    Table,
    add_mutant,
    at_least,
    at_most,
    cite,
    claim_rng,
    exact_tol,
    fp_tol,
    holds,
    info,
    register,
    rejects,
    stat_tol,
)
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import empirical_route_mean
from posflow.theory import transport as th

# π to 61 digits as an exact rational: the reduction error k·1e-60 is far below float64
_PI = Fraction("3.141592653589793238462643383279502884197169399375105820974944592")
_DISTS16 = (1, 511, 512, 8192, 65536, 10**6)
_FP_PHASE = "both sides reduce the exact product D·f_b; one rounding of a result < 2π: ≤ 4.4e-16"
_FP_MOMENTS = ("cos/sin of n·arg e^{if} in float64: n·f rounds by ≤ n·f·ε ≤ 65536·1.1e-16 "
               "≈ 7e-12, twice with arg's own rounding; 3e-11")
_FP_CHAR = "e^{if} by numpy vs cos f + i sin f by math: ≤ 2 ulp per part, 1e-15"
_FP_FREQ = "10⁴ ** (−2b/96) by numpy vs math.pow: ≤ 4 ulp relative, 1e-15"


def _exact_phase(D: int, f: float) -> float:
    """D·f mod 2π from the exact rational D·f (no mpmath, no float product)."""
    x = Fraction(f) * D
    return float(x - 2 * _PI * math.floor(x / (2 * _PI)))


def _circ_judge(key, got, ref, tol: float, reason: str, label: str):
    """The judge of phases: max circular distance min(|Δ|, 2π − |Δ|) ≤ a rounding bound."""
    d = np.abs(np.asarray(got, float) - np.asarray(ref, float)) % (2 * np.pi)
    return at_most(key, float(np.max(np.minimum(d, 2 * np.pi - d))), 0.0, fp_tol(tol, reason),
                   label=label)  # fmt: skip


def _fp_judge(key, got, ref, tol: float, reason: str, label: str, *, rel=False):
    """The judge of values: max |got − ref| (``rel``: max |got/ref − 1|) ≤ a rounding bound."""
    got, ref = np.asarray(got), np.asarray(ref)
    err = np.abs(got / ref - 1) if rel else np.abs(got - ref)
    return at_most(key, float(np.max(err)), 0.0, fp_tol(tol, reason), label=label)


def _routines_at16(f) -> list:
    """rope_phase, phase_moments, the RoPE law's characteristic, the frequencies and the unwrapped
    count against explicit computations; sympy's unit modulus recomputed; negative controls."""
    b = np.arange(48)
    explicit_f = np.array([math.pow(10_000.0, -2 * k / 96) for k in b])
    ph = np.array([th.rope_phase(D, f) for D in _DISTS16])
    exact = np.array([[_exact_phase(D, fb) for fb in f] for D in _DISTS16])
    n_mom = _DISTS16[:5]
    mom = np.array([np.stack(th.phase_moments("deterministic", f, n)) for n in n_mom])
    cs = np.array([[[math.cos(exact[i, k]) for k in b], [math.sin(exact[i, k]) for k in b]]
                   for i in range(5)])  # fmt: skip
    char = SO2BlockLaw(96, "rope").characteristic()
    char_ref = np.array([complex(math.cos(x), math.sin(x)) for x in f])
    one_off = exact.copy()
    one_off[-1, 0] = _exact_phase(_DISTS16[-1] + 1, f[0])  # one block, one step too far
    unwrapped = int(th.rope_unwrapped_blocks(f, 512).sum())
    Ls, fs = sp.symbols("L f", positive=True)
    own = sp.simplify(sp.Abs(sp.exp(sp.I * Ls * fs))) == 1
    return [
        holds("sympy_unit_modulus", bool(th.angle_characteristic("deterministic").unit_modulus)
              and own, label="sympy: |E e^{iΣθ}| = |e^{iLf}| = 1 (routine and recomputed)"),
        _fp_judge("rope_frequencies_vs_explicit", f, explicit_f, 1e-15, _FP_FREQ,
                  "max |rope_frequencies/10⁴^(−2b/96) − 1|", rel=True),
        _circ_judge("rope_phase_vs_exact_rational", ph, exact, 1e-15, _FP_PHASE,
                    "max circular |rope_phase − (D·f_b mod 2π, exact rational)|, D ≤ 10⁶"),
        _fp_judge("phase_moments_vs_cos_sin", mom, cs, 3e-11, _FP_MOMENTS,
                  "max |phase_moments(deterministic, f, n) − (cos, sin)(n f_b mod 2π)|"),
        _fp_judge("rope_characteristic_vs_e_if", char, char_ref, 1e-15, _FP_CHAR,
                  "max_b |SO2BlockLaw(rope).characteristic − (cos f_b + i sin f_b)|"),
        at_most("rope_unwrapped_blocks_vs_count", abs(unwrapped - int(np.sum(512 * explicit_f
                < 2 * np.pi))), 0, exact_tol("integer counts"),
                label="|rope_unwrapped_blocks − #{b: 512 f_b < 2π}|"),
        info("unwrapped_blocks", unwrapped, label="blocks that never wrap in 512 training tokens"),
        info("spectral_gap_rope", 1.0 - SO2BlockLaw(96, "rope").gamma,
             label="spectral gap 1 − γ, γ = max_b |E e^{iθ_b}| (follows from the characteristic)"),
        rejects("circ_judge_control_not_reduced",
                _circ_judge("c", np.outer(_DISTS16, f), exact, 1e-15, _FP_PHASE, "c"),
                "D·f_b as a float64 product (rounding ≈ 1e-10 at D = 10⁶), not exactly reduced"),
        rejects("circ_judge_control_one_block_one_step",
                _circ_judge("c", one_off, exact, 1e-15, _FP_PHASE, "c"),
                "only block 0 at D = 10⁶ + 1 (the worst entry alone is wrong)"),
        rejects("fp_judge_control_one_step_fewer",
                _fp_judge("c", np.array([np.stack(th.phase_moments("deterministic", f, n - 1))
                                         for n in n_mom]), cs, 3e-11, _FP_MOMENTS, "c"),
                "phase_moments at n − 1 steps"),
        rejects("fp_judge_control_sinc_law", _fp_judge("c", char_ref * np.sinc(f / np.pi),
                                                       char_ref, 1e-15, _FP_CHAR, "c"),
                "a spread law's e^{if} sin f/f for the RoPE characteristic"),
    ]  # fmt: skip


def _route_means_at16(f, n_max: int, rng) -> tuple[float, float]:
    """min |Ê e^{iψ}| over 64 RoPE routes, then |Ê e^{iψ(n_max)}| of 256 zero-mean routes with
    the fastest frequency (draws in this order)."""
    route = np.asarray(
        empirical_route_mean(
            SO2BlockLaw(96, "rope"), n_max, n_routes=64, seed=rng, statistic="norm", per_block=True
        )
    )
    ctl = np.asarray(
        empirical_route_mean(
            SO2BlockLaw(2, "uniform", scale=float(f[0])),
            n_max,
            n_routes=256,
            seed=rng,
            per_block=True,
        )
    )
    return float(route.min()), float(ctl[-1, 0])


def _arc_judge(D: int, count: int):
    """The judge of one distance: no block outside the arc for D < 512, some for D > 512."""
    if D < 512:
        return at_most(f"outside_training_D{D}", count, 0, exact_tol(
            "integer count; D·f_b < L_train·f_b, so no phase can leave the arc"), role="control",
            label=f"blocks outside the trained arc at D = {D} < 512")  # fmt: skip
    return at_least(f"outside_training_D{D}", count, 1, exact_tol(
        "integer count of blocks (40-digit arithmetic)"),
        label=f"blocks outside the trained arc at D = {D} > 512")  # fmt: skip


def _training_arc_at16(f, L_train: int, probe):
    """Blocks outside the trained arc at each probe distance (40 digits vs float64): (table
    rows, measurements, the flags, the float64 flags)."""
    rows, ms, flags, numeric = [], [], [], []
    for D in probe:
        flags.append(np.asarray(th.rope_blocks_outside_training(f, L_train, D), bool))
        numeric.append((L_train * f < 2 * np.pi) & (np.mod(D * f, 2 * np.pi) > L_train * f))
        rows.append([D, int(flags[-1].sum()), int(numeric[-1].sum())])
        ms.append(_arc_judge(D, int(flags[-1].sum())))
    return rows, ms, flags, numeric


def _decay_judge(key, route_min, n_max, n_routes):
    """The judge of no decay: 1 − min |Ê e^{iψ}| over blocks and n ≤ n_max at most rounding."""
    return at_most(
        key, 1.0 - route_min, 0.0,
        fp_tol(1e-12, f"the mean of {n_routes} equal unit phasors e^{{iψ}} (ψ a running sum of "
               "angles), |·| by √(cos² + sin²): ≤ (64 + 3)·ε = 1.5e-14; 1e-12 with margin"),
        label=f"decay 1 − min_(b, n ≤ {n_max}) |Ê e^{{iψ_b(n)}}|, {n_routes} RoPE routes "
        "(simulate)")  # fmt: skip


def _rayleigh_judge(key, value, n_max, n_ctl, **kw):
    """The judge of decay: |Ê e^{iψ(n)}| of n_ctl routes under the Rayleigh quantile."""
    rayleigh = math.sqrt(math.log(1 / FAMILY_LEVEL) / n_ctl)
    return at_most(
        key, value, 0.0,
        stat_tol(rayleigh, f"{n_ctl} routes of uniform phases: P(|mean| > t) ≈ e^{{−N t²}} "
                 f"(Rayleigh); t = √(ln(1/{FAMILY_LEVEL:.1e})/{n_ctl}) = {rayleigh:.3f}, one "
                 f"of 1 comparisons at level 2Φ(−{FAMILY_Z:g})"),
        label=f"zero-mean Unif[−f_0, f_0], f_0 = 1: |Ê e^{{iψ(n)}}| at n = {n_max} (decays; "
        "exact (sin 1)^n ≈ 0)", **kw)  # fmt: skip


def _agree_judge(key, flags, numeric):
    """The judge of the 40-digit flags: equal to a float64 evaluation at every distance."""
    ok = all(np.array_equal(a, b) for a, b in zip(flags, numeric, strict=True))
    return holds(key, ok, label="40-digit flags equal a float64 evaluation at every D")


_CITES = (
    cite("posflow.theory.transport:rope_phase",
         "D·f_b mod 2π from the exact rational D·f_b and π to 61 digits (fractions)",
         "rope_phase_vs_exact_rational"),
    cite("posflow.theory.transport:phase_moments", "cos and sin of the exactly reduced phase",
         "phase_moments_vs_cos_sin"),
    cite("posflow.theory.transport:rope_blocks_outside_training",
         "a float64 evaluation (L f < 2π) & (D f mod 2π > L f)", "outside_training_float64_agrees"),
    cite("posflow.theory.transport:rope_frequencies", "10⁴^(−2b/96) by math.pow",
         "rope_frequencies_vs_explicit"),
    cite("posflow.theory.transport:rope_unwrapped_blocks", "the count of b with 512 f_b < 2π",
         "rope_unwrapped_blocks_vs_count"),
    cite("posflow.theory.transport:angle_characteristic",
         "sympy's simplification of |e^{iLf}| recomputed in the check", "sympy_unit_modulus"),
    cite("posflow.simulate.orthogonal:SO2BlockLaw.characteristic",
         "cos f_b + i sin f_b by math", "rope_characteristic_vs_e_if"),
    cite("posflow.simulate.transport:empirical_route_mean",
         "the exact route means: |e^{inf}| = 1 for RoPE, (sin 1)^n ≈ 0 for Unif[−1, 1]",
         "route_mean_decay", "control_uniform_route_mean"),
)  # fmt: skip


@register(
    "AT16",
    "[B]",
    "RoPE (deterministic angles) has no spectral gap: no decay, and phases at distances beyond "
    "the training length leave the trained range",
    assumptions=("θ_b ≡ f_b (deterministic)",),
    compares=_CITES,
)
def at16(ctx: Context) -> Evidence:
    """Claim AT16: deterministic (RoPE) angles have no spectral gap and leave the trained phases.

    ``rope_phase`` against D·f_b mod 2π in exact rationals; ``phase_moments`` against cos/sin of
    that phase; the RoPE law's characteristic against e^{if_b}; ``rope_frequencies`` and
    ``rope_unwrapped_blocks`` against explicit formulas; sympy's |E e^{iLf}| = 1; undecayed route
    means from ``empirical_route_mean``; blocks whose phase at distance D was never seen in 512
    training tokens (``rope_blocks_outside_training``, against a float64 evaluation): none for
    D < 512 (control), some for D > 512. Control: zero-mean random angles of the fastest
    frequency do decay in the same route-mean routine. Negative controls of every judge.
    """
    rng = claim_rng(ctx, 16)
    f = th.rope_frequencies(96)
    n_max, n_ctl, L_train = (4096 if ctx.full else 1024), 256, 512
    route_min, ctl_last = _route_means_at16(f, n_max, rng)
    rows, arc, flags, numeric = _training_arc_at16(f, L_train, [256, 511, 1024, 8192, 65536])
    flipped = [x.copy() for x in numeric]
    flipped[-1][np.argmax(~flipped[-1])] ^= True  # one block's flag wrong at the largest D
    ms = [
        *_routines_at16(f),
        _decay_judge("route_mean_decay", route_min, n_max, 64),
        _rayleigh_judge("control_uniform_route_mean", ctl_last, n_max, n_ctl, role="control"),
        *arc,
        _agree_judge("outside_training_float64_agrees", flags, numeric),
        rejects("decay_judge_control_uniform_law", _decay_judge("c", ctl_last, n_max, n_ctl),
                "the decaying zero-mean law's route mean given as RoPE's"),
        rejects("rayleigh_judge_control_rope", _rayleigh_judge("c", route_min, n_max, n_ctl),
                "RoPE's undecayed route mean given as the zero-mean law's"),
        rejects("agree_judge_control_one_flag", _agree_judge("c", flags, flipped),
                "one block's float64 flag flipped at D = 65536"),
        rejects("arc_judge_control_one_block_inside", _arc_judge(511, 1),
                "one block outside the arc at D = 511"),
        rejects("arc_judge_control_none_outside", _arc_judge(8192, 0),
                "no block outside the arc at D = 8192"),
    ]  # fmt: skip
    table = Table(
        "AT16_outside_training",
        "RoPE blocks (d_h = 96) whose phase D·f_b mod 2π lies outside the trained arc [0, 512·f_b]",
        ["distance D", "blocks (40 digits)", "blocks (float64)"],
        rows,
    )
    return Evidence(
        ms,
        tables=[table],
        setup=f"d_h = 96, base 10⁴ frequencies, training length {L_train}; RoPE route means up to "
        f"n = {n_max}; control: {n_ctl} seeded routes of Unif[−1, 1] angles; phases at D = "
        f"{', '.join(map(str, _DISTS16))} against exact rationals.",
    )


# -- mutants: small realistic breaks of the routines AT16 uses ------------------------------------
def _rope_without_mod(original):
    @functools.wraps(original)
    def rope_blocks_outside_training(frequencies, L_train, distance):
        f = np.asarray(frequencies, dtype=float)
        return (L_train * f < 2 * np.pi) & (distance * f > L_train * f)  # phase not reduced mod 2π

    return rope_blocks_outside_training


def _rope_drawn_positive(original):
    @functools.wraps(original)
    def _law_angles(src, law, shape):
        if law.law == "rope":  # RoPE branch falls through to the positive-uniform draw
            return src.uniform(0.0, 2.0 * law.scale, shape)
        return original(src, law, shape)

    return _law_angles


def _rope_characteristic_sinc(original):
    @functools.wraps(original)
    def characteristic(self):
        if self.law == "rope":
            return np.exp(1j * self.scale) * np.sinc(self.scale / np.pi)
        return original(self)

    return characteristic


add_mutant(
    "AT16",
    "outside-training-without-mod-2pi",
    "posflow.theory.transport:rope_blocks_outside_training",
    _rope_without_mod,
    "the RoPE phase D·f_b compared with the trained arc without reduction mod 2π",
)
add_mutant(
    "AT16",
    "rope-route-angles-random",
    "posflow.simulate._mixing:_law_angles",
    _rope_drawn_positive,
    "route means draw RoPE angles as Unif[0, 2f_b] (the positive-uniform branch)",
)
add_mutant(
    "AT16",
    "rope-characteristic-sinc",
    "posflow.simulate.orthogonal:SO2BlockLaw.characteristic",
    _rope_characteristic_sinc,
    "the RoPE law's E e^{iθ} computed as e^{if} sin f/f (a spread law's)",
)


def _phase_float_product(original):
    @functools.wraps(original)
    def rope_phase(distance, f):
        return np.mod(np.float32(distance) * np.asarray(f, np.float32), 2 * np.pi)

    return rope_phase


def _circ_judge_self(original):
    @functools.wraps(original)
    def _circ_judge(key, got, ref, tol, reason, label):
        return original(key, got, got, tol, reason, label)

    return _circ_judge


add_mutant(
    "AT16",
    "rope-phase-float32",
    "posflow.theory._transport_angles:rope_phase",
    _phase_float_product,
    "rope_phase as D·f mod 2π in float32 (no extended-precision reduction)",
)
add_mutant(
    "AT16",
    "loosened-circ-judge",
    "posflow.proofs_checks.claims.at16_rope_no_gap:_circ_judge",
    _circ_judge_self,
    "the phase judge compares the routine's phases with themselves",
)
