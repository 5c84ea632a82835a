"""Claims AT5–AT6 of [B]: the mixing window is free of the context length and is per block.

Both use [B]'s own angle law: d_h = 96 (48 SO(2) blocks), θ_b ~ Unif[−f_b, f_b] with the RoPE
frequencies f_b = 10⁴^(−2b/96). Its spectral-gap constant is γ = max_b sin f_b/f_b = 1 − 2.4e-9,
so the global window W(ε) ≈ 2e9 exceeds every context length, and the statement that a far
score has one law at L = 512 and L = 65536 is only true per distance: AT5 tests the per-block
windows, the score law at a fixed distance (the same at both lengths) and the law at a random far
distance (which differs, as the fraction of mixed blocks differs), each against its exact value.
AT6 counts the blocks mixed below 0.1 at n = 512 / 8192 / 65536 in exact and float64
arithmetic and checks per-block route means by Monte Carlo.
"""

from __future__ import annotations

import functools
import math

import mpmath
import numpy as np
from scipy import stats

from posflow.proofs_checks.claims.at01_04_mixing import FAMILY_LEVEL, family_reason
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
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    register,
    scaled_result,
    stat_tol,
    z_limit,
)
from posflow.simulate.orthogonal import SO2BlockLaw, rotate_blocks
from posflow.simulate.transport import absolute_angles, empirical_route_mean, so2_scores
from posflow.simulate.transport import mixing_window as sim_window
from posflow.theory import transport as th

_D_HEAD, _BASE = 96, 10_000.0
_EPS_UNIT = 1.1102230246251565e-16  # unit roundoff of float64


def _score_moments(log_c, log_c2, weights, distances):
    """Exact mean and variance of s = Σ_b w_b cos ψ_b(D) for each distance D (key = query).

    ψ_b(D) is a sum of D i.i.d. Unif[−f_b, f_b] angles, independent over blocks:
    E cos ψ_b = c_b^D, E cos² ψ_b = (1 + c_b(2f)^D)/2, c_b(x) = sin x/x.
    """
    D = np.asarray(distances, dtype=float)[:, None]
    m1 = np.exp(D * log_c)  # (n_D, B)
    m2 = np.exp(D * log_c2)
    mean = m1 @ weights
    var = (weights**2 * ((1 + m2) / 2 - m1**2)).sum(axis=1)
    return mean, var


def _far_law(log_c, log_c2, weights, lo, hi):
    """Exact mean and variance of s at a distance D ~ Unif{lo, …, hi} (a mixture over D)."""
    mean, var = _score_moments(log_c, log_c2, weights, np.arange(lo, hi + 1))
    mu = float(mean.mean())
    return mu, float(var.mean() + ((mean - mu) ** 2).mean())


@register(
    "AT5",
    "[B]",
    "the mixing window W(ε) = ⌈ln(1/ε)/ln(1/γ)⌉ does not depend on context length: with [B]'s "
    "law (d_h = 96) per block, W_b(ε) from the step law alone, and the far-score law at a fixed "
    "distance is the same at L = 512 and 65536 (at a random far distance it differs: more "
    "blocks have mixed at 65536, and the global W ≈ 2e9 exceeds every L)",
    assumptions=("steps i.i.d. with spectral gap γ < 1", "θ_b ~ Unif[-f_b, f_b], d_h = 96"),
)
def at5(ctx: Context) -> Evidence:
    """Claim AT5 with [B]'s own law (d_h = 96, θ_b ~ Unif[−f_b, f_b]).

    What is true and tested: (1) the per-block windows W_b(ε) come from the step law alone —
    theory (40-digit ln sin f/f) against simulate (float64 |c_b| powers), and the count of blocks
    whose window is ≤ L against theory's ``blocks_mixed``; (2) the score of the query at the end
    of a whole context (key = query, s = Σ_b ‖q_b‖² cos ψ_b) at a fixed distance D = 64 has the
    same law at L = 512 and 65536: Monte Carlo means against the exact Σ_b ‖q_b‖² c_b^D with the
    exact standard error, and a two-sample KS test between the lengths; (3) at a random far
    distance D ~ Unif{W_0, …, L−1} the law differs between the lengths (more blocks have mixed
    at 65536): both means against their exact values and the measured difference against the
    exact one. Scores come from :func:`posflow.simulate.transport.so2_scores` on whole contexts.
    """
    rng = claim_rng(ctx, 5)
    eps, d, B = 0.01, _D_HEAD, _D_HEAD // 2
    law = SO2BlockLaw(d)  # θ_b ~ Unif[−f_b, f_b], f_b = 10⁴^(−2b/96)
    f = law.scale
    bw = th.block_mixing_windows(d, eps, _BASE)
    log_c = np.asarray(th.log_characteristic_modulus("uniform", f), dtype=float)
    log_c2 = np.asarray(th.log_characteristic_modulus("uniform", 2 * f), dtype=float)
    # (1) windows from the law alone: theory against simulate, per block and global
    w_sim = np.asarray(sim_window(np.abs(law.characteristic()), eps), dtype=float)
    w_th = bw.window.astype(float)
    # simulate's |c_b| = np.sinc(f/π) carries a rounding ≤ 4u (argument, sin, division), so
    # ln|c_b| ≈ −f²/6 is off by a relative 4u/(f²/6); the window W = ⌈ln(1/ε)/ln(1/c)⌉ moves by
    # that relative amount plus one step
    w_bound = 4 * _EPS_UNIT * 6 / f**2 + 1 / w_th
    w_excess = float(np.max(np.abs(w_sim / w_th - 1) / w_bound))
    gamma = float(math.exp(log_c.max()))
    W_global = int(th.mixing_window(gamma, eps))
    lengths = (512, 65536)
    mixed_th = [int(c) for c in th.blocks_mixed(d, _BASE, eps, list(lengths))]
    mixed_sim = [int(np.sum(w_sim <= n)) for n in lengths]  # γ_b^n ≤ ε iff n ≥ W_b
    # (2) whole contexts; queries at the end spaced by D, so their routes are disjoint
    q1 = np.full(d, 1 / math.sqrt(d))  # ‖q_b‖² = 1/48 per block; key = query
    weights = np.full(B, 2 / d)
    D, W0 = 64, int(bw.window[0])
    plan = {512: (300, 7), 65536: (2, 64)} if not ctx.full else {512: (3000, 7), 65536: (20, 64)}
    fixed = {}
    for L, (T, n_q) in plan.items():
        pos = L - 1 - D * np.arange(n_q)
        q = np.broadcast_to(q1, (n_q, d))
        k = np.broadcast_to(q1, (L, d))
        fx = []
        for _ in range(T):
            row = so2_scores(q, k, law.sample_angles(L, seed=rng), q_pos=pos)
            fx.extend(row[np.arange(n_q), pos - D])
        fixed[L] = np.array(fx)
    (m_fixed,), (v_fixed,) = _score_moments(log_c, log_c2, weights, [D])
    far_exact = {L: _far_law(log_c, log_c2, weights, W0, L - 1)[0] for L in lengths}
    n_cmp = len(lengths) + 1  # the fixed-distance means at both lengths and the KS test
    zlim = z_limit(n_cmp)
    samples = ", ".join(
        f"L = {L}: {T} contexts × {n_q} queries (the last one and every {D}th before it)"
        for L, (T, n_q) in plan.items()
    )
    reason = family_reason(n_cmp, samples) + "; exact standard errors from the exact variance"
    ms = [
        at_most(
            "window_theory_vs_simulate",
            w_excess,
            1.0,
            fp_tol(
                0.0,
                "per block |W_sim/W_theory − 1| over its bound 4u·6/f_b² + 1/W_b "
                "(u = 1.1e-16: np.sinc rounds c_b by ≤ 4u; one step for the ceiling); ≤ 1",
            ),
            label="max_b |W_b(simulate)/W_b(theory) − 1| / rounding bound",
        ),
        info("global_window", W_global, label="W(0.01) of γ = max_b sin f_b/f_b (steps)"),
        info("gamma", gamma, label="γ = ‖E M‖_op"),
    ]
    for L, a, b in zip(lengths, mixed_th, mixed_sim, strict=True):
        ms.append(
            close(
                f"blocks_mixed_L{L}",
                b,
                a,
                exact_tol("integer counts"),
                label=f"blocks with W_b ≤ {L}: simulate vs theory (of {B})",
            )
        )
    z_fixed = {}
    for L in lengths:
        m = float(fixed[L].mean())
        se = math.sqrt(v_fixed / fixed[L].size)
        z_fixed[L] = (m - m_fixed) / se
        ms.append(
            close(
                f"fixed_mean_L{L}",
                m,
                float(m_fixed),
                stat_tol(zlim * se, reason),
                label=f"mean score at distance {D}, L = {L}, vs exact Σ_b ‖q_b‖² c_b^{D}",
            )
        )
    ks = stats.ks_2samp(fixed[512], fixed[65536])
    n1, n2 = fixed[512].size, fixed[65536].size
    level = FAMILY_LEVEL / n_cmp
    ks_crit = float(stats.kstwo.isf(level, round(n1 * n2 / (n1 + n2))))
    ms += [
        at_most(
            "ks_fixed_distance",
            float(ks.statistic),
            0.0,
            stat_tol(
                ks_crit,
                f"two-sample KS critical value at the per-test level "
                f"{level:.1e} (n = {n1}, {n2}; effective n = n1 n2/(n1 + n2)); "
                f"{n_cmp} tests, family-wise {FAMILY_LEVEL:.1e}",
            ),
            label=f"KS distance of the score laws at D = {D}, L = 512 vs 65536",
        ),
        info("fixed_exact_mean", float(m_fixed), label=f"exact E s at D = {D}"),
        info("far_exact_mean_L512", far_exact[512], label=f"exact E s at D ~ Unif[{W0}, 512)"),
        info(
            "far_exact_mean_L65536",
            far_exact[65536],
            label=f"exact E s at D ~ Unif[{W0}, 65536) (differs: more blocks mixed)",
        ),
    ]
    blocks = [
        [
            b,
            float(f[b]),
            float(bw.ratio[b]),
            float(w_sim[b]),
            bool(bw.window[b] <= 512),
            bool(bw.window[b] <= 65536),
        ]
        for b in range(B)
    ]
    grid = np.unique(np.geomspace(1, 65535, 200).astype(int))
    g_mean, _ = _score_moments(log_c, log_c2, weights, grid)
    panel = Panel(
        "exact mean score E s(D) = Σ_b ‖q_b‖² c_b^D (key = query), Monte Carlo at D = 64",
        "distance D",
        "E s",
        series=[
            Series("exact E s(D)", grid, g_mean, color="exact"),
            *[
                Series(
                    f"Monte Carlo, L = {L}",
                    [D],
                    [fixed[L].mean()],
                    "errorbar",
                    yerr=[zlim * math.sqrt(v_fixed / fixed[L].size)],
                )
                for L in lengths
            ],
        ],
        logx=True,
        vlines=[(W0, "W_0(0.01)"), (512, "L = 512")],
    )
    return Evidence(
        ms,
        tables=[
            Table(
                "blocks",
                f"per-block windows W_b({eps}) and whether the block has mixed within L",
                ["b", "f_b", "W_b theory (real)", "W_b simulate", "mixed by 512", "mixed by 65536"],
                blocks,
            ),
            Table(
                "laws",
                "score means: Monte Carlo at D = 64 against exact, and the exact far-score mean",
                ["L", "Monte Carlo at D", "exact at D", "z", "exact at random far D"],
                [
                    [L, float(fixed[L].mean()), float(m_fixed), float(z_fixed[L]), far_exact[L]]
                    for L in lengths
                ],
            ),
        ],
        figures=[Figure("AT5_window", "AT5: d_h = 96, θ_b ~ Unif[−f_b, f_b]", [panel])],
        setup=f"[B]'s law (d_h = {d}, base 10⁴); {samples}; ε = {eps}.",
    )


_AT6_COUNTS = {512: 10, 8192: 17, 65536: 23}  # papers/B_transport.md §2.4 [CHK]
_AT6_WINDOWS = (26.7, 39.6, 58.6)


@functools.cache
def _ratio_40_digits(d: int, base: float) -> np.ndarray:
    """W_b/W_b^approx = (f²/6)/ln(f/sin f) per block, in 40-digit arithmetic (independent)."""
    out = []
    with mpmath.workdps(40):
        for k in range(d // 2):
            x = mpmath.power(mpmath.mpf(base), -mpmath.mpf(2 * k) / d)
            out.append(float((x * x / 6) / mpmath.log(x / mpmath.sin(x))))
    return np.array(out)


@register(
    "AT6",
    "[D]",
    "with RoPE frequencies (d_h = 96, base 10^4, angles ~ Unif[-f_b, f_b]) the window is per "
    "block: W_b ≈ 6 ln(1/ε)/f_b²; blocks mixed below 0.1 at n = 512 / 8192 / 65536: 10 / 17 / 23",
    assumptions=("θ_b ~ Unif[-f_b, f_b] i.i.d.", "f_b = 10^{-4·2b/96}"),
)
def at6(ctx: Context) -> Evidence:
    """Claim AT6: per-block windows W_b ≈ 6 ln(1/ε)/f_b² at d_h = 96, and 10 / 17 / 23 blocks
    mixed below 0.1 at n = 512 / 8192 / 65536.

    exact: ``blocks_mixed`` (40 digits) against the digest's counts, ``block_mixing_windows``
    against the digest's W_0..2 and an independent 40-digit evaluation of W_b/W_b^approx, the
    sympy series (the approximation over-estimates, ratio 1 − f²/30 + O(f⁴)); numeric: the same
    counts in float64 from simulate's characteristic values, and Monte Carlo route means
    |Ê cos ψ_b(512)| per block against c_b^512 (``empirical_route_mean``).
    """
    rng = claim_rng(ctx, 6)
    d, base = _D_HEAD, _BASE
    bw = th.block_mixing_windows(d, 0.01, base)
    f = bw.frequencies
    series = th.window_approximation_derivation()
    ratio = bw.ratio / bw.approx
    ratio_ref = _ratio_40_digits(d, base)
    ns = list(_AT6_COUNTS)
    exact_counts = [int(c) for c in th.blocks_mixed(d, base, 0.1, ns)]
    law = SO2BlockLaw(d)  # simulate's float64 characteristic, an independent evaluation
    log_c = np.log(np.abs(law.characteristic()))
    float_counts = [int(np.sum(n * log_c < np.log(0.1))) for n in ns]
    n_mc, N = 512, (10_000 if ctx.full else 1_000)
    mc = empirical_route_mean(law, n_mc, n_routes=N, seed=rng, statistic="cos", per_block=True)
    c_n = th.phase_moments("uniform", f, n_mc)[0]
    var = (1 + th.phase_moments("uniform", 2 * f, n_mc)[0]) / 2 - c_n**2
    se = np.sqrt(np.maximum(var, 0) / N)
    live = se > 0
    n_cmp = int(live.sum())
    # |Ê cos| against c ≥ 0: |(|m| − c)| ≤ |m − c|, so the fold never inflates z
    z = float(np.max(np.abs(mc[n_mc][live] - c_n[live]) / se[live]))
    ms = []
    for n, e, fl in zip(ns, exact_counts, float_counts, strict=True):
        ms += [
            close(
                f"blocks_mixed_{n}",
                e,
                _AT6_COUNTS[n],
                exact_tol("integer count, 40 digits"),
                label=f"blocks with c_b^{n} < 0.1 (40 digits) vs the digest's {_AT6_COUNTS[n]}",
            ),
            close(
                f"blocks_mixed_float64_{n}",
                fl,
                e,
                exact_tol("integer counts"),
                label=f"blocks with c_b^{n} < 0.1: float64 (simulate) vs 40 digits",
            ),
        ]
    for b, ref in enumerate(_AT6_WINDOWS):
        ms.append(
            close(
                f"W_{b}",
                float(bw.ratio[b]),
                ref,
                fp_tol(0.05, "the digest quotes W_b to one decimal: half a unit"),
                label=f"W_{b}(0.01) vs the digest's {ref}",
            )
        )
    ms += [
        at_most(
            "ratio_vs_40_digits",
            float(np.max(np.abs(ratio / ratio_ref - 1))),
            0.0,
            fp_tol(
                1e-14,
                "W_b/W_b^approx from float64 ln(1/ε), a 40-digit ln γ_b and 6/f²: "
                "≲ 6 roundings of 1.1e-16 = 6.7e-16, with margin for ln(100)",
            ),
            label="max_b |W_b/W_b^approx − 40-digit (f²/6)/ln(f/sin f)| relative",
        ),
        at_most(
            "approx_overestimates",
            float(np.max(ratio)),
            1.0,
            fp_tol(1e-15, "a ratio of float64 values ≤ 1 by f²/30 ≥ 4.9e-10: rounding ≤ 4·1.1e-16"),
            label="max_b W_b/(6 ln(1/ε)/f_b²) (the approximation over-estimates)",
        ),
        holds(
            "sympy_gamma_by_integration",
            series.gamma_from_integration,
            label="sympy: E cos θ = sin f/f by integration",
        ),
        holds(
            "sympy_approx_overestimates",
            series.approx_overestimates,
            label="sympy: W_exact/W_approx = 1 − f²/30 + O(f⁴) < 1",
        ),
        at_most(
            "mc_route_mean_z",
            z,
            0.0,
            stat_tol(
                z_limit(n_cmp),
                family_reason(n_cmp, f"N = {N:,} routes of {n_mc} steps")
                + "; exact SE √(Var cos ψ_b/N)",
            ),
            label=f"max_b |Ê cos ψ_b({n_mc}) − c_b^{n_mc}| / SE",
            unit="SE",
        ),
        info("W_max", float(bw.ratio.max()), label="largest window W_47(0.01)"),
        info("max_relative_error_of_approx", float(np.max(1 - ratio))),
    ]
    exact_blockwise = np.exp(np.outer(ns, bw.log_gamma))
    table = Table(
        "per_block",
        "per-block windows (ε = 0.01) and c_b^n",
        ["b", "f_b", "W_b", "6 ln(1/ε)/f_b²", *[f"c_b^{n}" for n in ns]],
        [[b, f[b], bw.ratio[b], bw.approx[b], *exact_blockwise[:, b]] for b in range(d // 2)],
    )
    panel = Panel(
        "per-block windows, d_h = 96, base 10⁴, θ_b ~ Unif[-f_b, f_b]",
        "block b",
        "mixing window W_b (steps), ε = 0.01",
        series=[
            Series(
                "exact W_b = ln(1/ε)/ln(f_b/sin f_b)",
                np.arange(d // 2),
                bw.ratio,
                "markers",
                color="exact",
            ),
            Series("6 ln(1/ε)/f_b²", np.arange(d // 2), bw.approx, color="bound"),
        ],
        logy=True,
        hlines=[(n, f"n = {n}: {_AT6_COUNTS[n]} blocks mixed below 0.1") for n in ns],
    )
    return Evidence(
        ms,
        tables=[table],
        figures=[Figure("AT6_windows", "AT6: per-block windows", [panel])],
        setup=f"d_h = {d}, base 10⁴, ε = 0.01 for windows and 0.1 for counts; Monte Carlo "
        f"{N:,} routes of {n_mc} steps per block.",
    )


# ------------------------------------------------------------------------------------------
# mutants


def _query_unrotated(original):
    @functools.wraps(original)
    def so2_scores_q_unrotated(q, k, theta, route="from_source", q_pos=None, pairing="half"):
        q, k, theta = (np.asarray(x, dtype=float) for x in (q, k, theta))
        phi = absolute_angles(theta, route)
        return q @ rotate_blocks(k, -phi, pairing).T

    return so2_scores_q_unrotated


def _sinc_without_pi(original):
    @functools.wraps(original)
    def characteristic(self):
        if self.law == "uniform":
            return np.sinc(self.scale).astype(complex)  # sin(πx)/(πx) at x = f: a missing /π
        return original(self)

    return characteristic


def _rope_exponent_b_over_d(original):
    @functools.wraps(original)
    def rope_frequencies(d, base=10000.0):
        return original(d, base) ** 0.5  # base^(−b/d) instead of base^(−2b/d)

    return rope_frequencies


add_mutant(
    "AT5",
    "query-unrotated",
    "posflow.simulate.transport:so2_scores",
    _query_unrotated,
    "so2_scores rotates the keys but leaves the query unrotated",
)
add_mutant(
    ("AT5", "AT6"),
    "log-sinc-2%",
    "posflow.theory.transport:log_sinc",
    scaled_result(1.02),
    "theory's ln(sin f/f) is 2% too large",
)
add_mutant(
    "AT5",
    "angle-scale-5%",
    "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles",
    scaled_result(1.05),
    "SO2BlockLaw draws θ_b ~ Unif[−1.05 f_b, 1.05 f_b]",
)
add_mutant(
    "AT6",
    "sinc-without-pi",
    "posflow.simulate.orthogonal:SO2BlockLaw.characteristic",
    _sinc_without_pi,
    "simulate's c_b = np.sinc(f_b) (sin πf/πf) instead of np.sinc(f_b/π)",
)
add_mutant(
    "AT6",
    "rope-exponent-b/d",
    "posflow._conventions:rope_frequencies",
    _rope_exponent_b_over_d,
    "RoPE frequencies base^(−b/d) instead of base^(−2b/d)",
)
