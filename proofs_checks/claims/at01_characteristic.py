"""Claim AT1 of [B]: characteristic decay of SO(2) phases, E cos Σθ = (sin a/a)^L.

The check pairs the exact statement of :mod:`posflow.theory.transport` (sympy integration and
its polar evaluation) with a Monte Carlo experiment on :class:`~posflow.simulate.orthogonal.
SO2BlockLaw` route sums and returns the measured :class:`~posflow.proofs_checks.kit.Evidence`.
A Monte Carlo estimate agrees with its exact value when it lies within ``z_limit(n)`` standard
errors, n the number of Monte Carlo comparisons the claim makes (Bonferroni: family-wise
false-alarm level 2Φ(−4) ≈ 6.3e-5 per claim).
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    claim_rng,
    fp_tol,
    holds,
    info,
    register,
    scaled_result,
    z_at_most,
    z_limit,
)
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import phase_path_moments
from posflow.theory import transport as th

_SCALE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")

# ------------------------------------------------------------------------------------------
# AT1


def _exact_side(ch, scales, Ls):
    """sympy identities of AT1 and theory's polar evaluation against sympy and a float power."""
    a, L = ch.parameter, ch.steps
    sym_cos = sp.simplify(ch.sum_cos - (sp.sin(a) / a) ** L) == 0
    sym_sin = sp.simplify(ch.sum_sin) == 0
    eval_err = plain_err = 0.0
    for step in (1, 8, Ls[-1]):
        c, s = th.phase_moments("uniform", scales, step)
        sym_val = np.array([float(ch.sum_cos.subs({a: float(x), L: step})) for x in scales])
        eval_err = max(eval_err, float(np.abs(c - sym_val).max()), float(np.abs(s).max()))
        plain_err = max(plain_err, float(np.abs(c - (np.sin(scales) / scales) ** step).max()))
    return sym_cos, sym_sin, eval_err, plain_err


def _figure_at1(scales, Ls, mc, yerr_scale, N):
    grid = np.arange(0, Ls[-1] + 1)
    series = [
        s
        for b, (sc, col) in enumerate(zip(scales, _SCALE_COLORS, strict=True))
        for s in (
            Series(
                f"(sin a/a)^L, a = {sc:g}",
                grid,
                [th.phase_moments("uniform", float(sc), int(g))[0] for g in grid],
                color=col,
            ),
            Series(
                f"Monte Carlo, a = {sc:g}",
                Ls,
                mc.cos[:, b],
                kind="errorbar",
                yerr=yerr_scale * mc.cos_se[:, b],
                color=col,
            ),
        )
    ]
    title = "E cos Σθ: lines exact (sin a/a)^L, dots Monte Carlo ± z SE"
    panel = Panel(title, "number of steps L", "E cos Σθ", series=series)
    return Figure("AT1_decay", f"AT1: θ ~ Unif[-a, a], N = {N:,}", [panel])


def _table_at1(scales, Ls, exact_cos, mc):
    cols = [f"exact a={x:g}" for x in scales] + [f"MC a={x:g}" for x in scales]
    return Table(
        "decay",
        "E cos Σθ: exact (sin a/a)^L and Monte Carlo mean (standard error)",
        ["L", *cols, *[f"SE a={x:g}" for x in scales]],
        [[s, *exact_cos[i], *mc.cos[i], *mc.cos_se[i]] for i, s in enumerate(Ls)],
    )


@register(
    "AT1",
    "[D]",
    "SO(2) characteristic decay: for θ ~ Unif[-a, a] i.i.d., E cos Σθ = (sin a / a)^L, "
    "E sin Σθ = 0",
    assumptions=("θ_l i.i.d. Unif[-a, a]",),
)
def at1(ctx: Context) -> Evidence:
    """Claim AT1: E cos Σ_{l≤L} θ_l = (sin a/a)^L and E sin Σθ_l = 0 for θ_l ~ Unif[-a, a].

    exact: ``posflow.theory.transport.angle_characteristic("uniform")`` (sympy integration; the sum
    moments simplify to (sin a/a)^L and 0) and its polar evaluation ``phase_moments``, compared
    with the sympy expression evaluated and with a plain float (sin a/a)^L; numeric: N route-angle
    sums of SO2BlockLaw draws (a ∈ {0.25, 0.5, 1, 2}, L ≤ 64; full: N = 4e5, L ≤ 256), every
    mean of cos and sin within ``z_limit`` standard errors of ``phase_moments``.
    """
    rng = claim_rng(ctx, 1)
    scales = np.array([0.25, 0.5, 1.0, 2.0])
    Ls = [1, 2, 4, 8, 16, 32, 64] + ([128, 256] if ctx.full else [])
    sym_cos, sym_sin, eval_err, plain_err = _exact_side(
        th.angle_characteristic("uniform"), scales, Ls
    )
    N = 400_000 if ctx.full else 20_000
    law = SO2BlockLaw(2 * scales.size, "uniform", scale=scales)
    mc = phase_path_moments(law, N, Ls, rng)
    exact = [th.phase_moments("uniform", scales, step) for step in Ls]
    exact_cos, exact_sin = np.array([e[0] for e in exact]), np.array([e[1] for e in exact])
    z_cos = float(np.max(np.abs(mc.cos - exact_cos) / mc.cos_se))
    z_sin = float(np.max(np.abs(mc.sin - exact_sin) / mc.sin_se))
    n_cmp = 2 * len(Ls) * scales.size
    samples = f"N = {N:,} route sums per (a, L)"
    fp = fp_tol(
        1e-14,
        f"(sin a/a)^L for L ≤ {Ls[-1]}: each evaluation rounds ≲ L+2 times at relative 1.1e-16, "
        f"≤ {Ls[-1] + 2}·1.1e-16 = {(Ls[-1] + 2) * 1.1e-16:.1e} on values ≤ 1",
    )
    return Evidence(
        [
            holds("sympy_sum_cos", sym_cos, label="sympy: E cos Σθ − (sin a/a)^L = 0"),
            holds("sympy_sum_sin", sym_sin, label="sympy: E sin Σθ = 0"),
            at_most(
                "polar_vs_sympy_error",
                eval_err,
                0.0,
                fp,
                label="max |phase_moments − sympy expression evaluated|",
            ),
            at_most(
                "polar_vs_float_power_error",
                plain_err,
                0.0,
                fp,
                label="max |phase_moments − (sin a/a)^L in float64|",
            ),
            z_at_most(
                "max_z_cos", z_cos, n_cmp, samples, "max |Monte Carlo E cos Σθ − (sin a/a)^L| / SE"
            ),
            z_at_most("max_z_sin", z_sin, n_cmp, samples, "max |Monte Carlo E sin Σθ − 0| / SE"),
            info("samples_N", N),
            info("max_steps_L", Ls[-1]),
        ],
        figures=[_figure_at1(scales, Ls, mc, z_limit(n_cmp), N)],
        tables=[_table_at1(scales, Ls, exact_cos, mc)],
        setup=f"a ∈ {scales.tolist()}, L ∈ {Ls}; {N:,} sums of L i.i.d. SO2BlockLaw angles per a "
        "(one path per route, checkpoints at each L); sympy by integration.",
    )


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks of the routines AT1 checks


def _steps_off_by_one(original):
    @functools.wraps(original)
    def phase_moments(law, param, L):
        return original(law, param, int(L) + 1)

    return phase_moments


def _sin_cos_swapped(original):
    @functools.wraps(original)
    def phase_moments(law, param, L):
        c, s = original(law, param, L)
        return s, c

    return phase_moments


_PHASE = "posflow.theory.transport:phase_moments"
_ANGLES = "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles"
add_mutant(
    "AT1",
    "angle-scale-5%",
    _ANGLES,
    scaled_result(1.05),
    "SO2BlockLaw draws θ ~ Unif[−1.05a, 1.05a] instead of Unif[−a, a]",
)
add_mutant(
    "AT1",
    "steps-off-by-one",
    _PHASE,
    _steps_off_by_one,
    "theory's phase moments accumulate L + 1 steps instead of L",
)
add_mutant(
    "AT1",
    "sin-cos-swapped",
    _PHASE,
    _sin_cos_swapped,
    "theory's phase moments return (E sin, E cos) for (E cos, E sin)",
)
