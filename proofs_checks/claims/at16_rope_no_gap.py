"""Claim AT16 of [B]: RoPE's deterministic angles have no spectral gap and leave the trained arc.

AT16 compares :mod:`posflow.theory.transport`'s characteristic functions and 40-digit trained-arc
test with float64 and with the route means of :func:`posflow.simulate.transport.
empirical_route_mean`. Claim AT17 (positive-mean angles drift) lives in
:mod:`posflow.proofs_checks.claims.at17_zero_mean_drift`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
    FAMILY_Z,
    Context,
    Evidence,
    Table,
    add_mutant,
    at_least,
    at_most,
    claim_rng,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    register,
    stat_tol,
)
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import empirical_route_mean
from posflow.theory import transport as th


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


def _training_arc_at16(f, L_train: int, probe) -> tuple[list, list, bool]:
    """Blocks outside the trained arc at each probe distance (40 digits vs float64)."""
    rows, ms, agree = [], [], True
    for D in probe:
        flags = th.rope_blocks_outside_training(f, L_train, D)
        numeric = (L_train * f < 2 * np.pi) & (np.mod(D * f, 2 * np.pi) > L_train * f)
        agree &= bool(np.array_equal(flags, numeric))
        count = int(flags.sum())
        rows.append([D, count, int(numeric.sum())])
        if D < L_train:
            ms.append(
                at_most(
                    f"outside_training_D{D}",
                    count,
                    0,
                    exact_tol("integer count; D·f_b < L_train·f_b, so no phase can leave the arc"),
                    role="control",
                    label=f"blocks outside the trained arc at D = {D} < 512",
                )
            )
        else:
            ms.append(
                at_least(
                    f"outside_training_D{D}",
                    count,
                    1,
                    exact_tol("integer count of blocks (40-digit arithmetic)"),
                    label=f"blocks outside the trained arc at D = {D} > 512",
                )
            )
    return rows, ms, agree


def _decay_at16(ch, mod_err, dists, gamma, route_min, ctl_last, n_max, n_ctl) -> list:
    """Unit modulus (sympy, float), no gap, no route-mean decay; the zero-mean control."""
    rayleigh = math.sqrt(math.log(1 / FAMILY_LEVEL) / n_ctl)
    return [
        holds("sympy_unit_modulus", ch.unit_modulus, label="sympy: |E e^{iΣθ}| = |e^{iLf}|^L = 1"),
        at_most(
            "max_modulus_error",
            mod_err,
            0.0,
            fp_tol(1e-14, "cos, sin and hypot of one float phase, each ≤ 1 ulp: ≤ 3·ε = 6.7e-16"),
            label=f"max_(b, L ∈ {dists}) ||phase_moments| − 1|",
        ),
        close(
            "spectral_gap_rope",
            1.0 - gamma,
            0.0,
            fp_tol(1e-14, "|e^{is}| = hypot(cos s, sin s): ≤ 3·ε = 6.7e-16"),
            label="spectral gap 1 − γ, γ = max_b |E e^{iθ_b}| of the RoPE law",
        ),
        at_most(
            "route_mean_decay",
            1.0 - route_min,
            0.0,
            fp_tol(
                1e-12,
                "the mean of 64 equal unit phasors e^{iψ} (ψ a running sum of angles), |·| by "
                "√(cos² + sin²): ≤ (64 + 3)·ε = 1.5e-14; 1e-12 with margin",
            ),
            label=f"decay 1 − min_(b, n ≤ {n_max}) |Ê e^{{iψ_b(n)}}|, 64 RoPE routes (simulate)",
        ),
        at_most(
            "control_uniform_route_mean",
            ctl_last,
            0.0,
            stat_tol(
                rayleigh,
                f"{n_ctl} routes of uniform phases: P(|mean| > t) ≈ e^{{−N t²}} (Rayleigh); t = "
                f"√(ln(1/{FAMILY_LEVEL:.1e})/{n_ctl}) = {rayleigh:.3f} at level 2Φ(−{FAMILY_Z:g})",
            ),
            role="control",
            label=f"zero-mean Unif[−f_0, f_0], f_0 = 1: |Ê e^{{iψ(n)}}| at "
            f"n = {n_max} (decays; exact (sin 1)^n ≈ 0)",
        ),
    ]


@register(
    "AT16",
    "[B]",
    "RoPE (deterministic angles) has no spectral gap: no decay, and phases at distances beyond "
    "the training length leave the trained range",
    assumptions=("θ_b ≡ f_b (deterministic)",),
)
def at16(ctx: Context) -> Evidence:
    """Claim AT16: deterministic (RoPE) angles have no spectral gap and leave the trained phases.

    |E e^{iLf_b}| = 1 (sympy and ``phase_moments``), γ = 1 and undecayed route means from
    simulate; blocks whose phase at distance D was never seen in 512 training tokens
    (``rope_blocks_outside_training``, against a float64 evaluation): none for D < 512 (control),
    some for D > 512. Control: zero-mean random angles of the fastest frequency do decay in the
    same route-mean routine.
    """
    rng = claim_rng(ctx, 16)
    ch = th.angle_characteristic("deterministic")
    f = th.rope_frequencies(96)
    dists = [1, 512, 8192, 65536]
    mod_err = max(
        float(np.max(np.abs(np.hypot(*th.phase_moments("deterministic", f, n)) - 1))) for n in dists
    )
    gamma = SO2BlockLaw(96, "rope").gamma
    n_max, n_ctl, L_train = (4096 if ctx.full else 1024), 256, 512
    route_min, ctl_last = _route_means_at16(f, n_max, rng)
    rows, arc, agree = _training_arc_at16(f, L_train, [256, 511, 1024, 8192, 65536])
    ms = [
        *_decay_at16(ch, mod_err, dists, gamma, route_min, ctl_last, n_max, n_ctl),
        *arc,
        holds(
            "outside_training_float64_agrees",
            agree,
            label="40-digit flags equal a float64 evaluation at every D",
        ),
        info(
            "unwrapped_blocks",
            int(th.rope_unwrapped_blocks(f, L_train).sum()),
            label="blocks that never wrap in 512 training tokens",
        ),
    ]
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
        f"n = {n_max}; control: {n_ctl} seeded routes of Unif[−1, 1] angles.",
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
