"""Claims AT5–AT6 of [B]: the mixing window is free of the context length and is per block.

AT5 compares far-score laws of whole simulated contexts at L = 512 and 65536 (KS tests); AT6
counts, in exact (40-digit) and float64 arithmetic, the RoPE-frequency blocks (d_h = 96) that
mix below 0.1 at n = 512 / 8192 / 65536, and checks per-block route means by Monte Carlo.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from posflow.proofs_checks._common import save_figure, verdict
from posflow.proofs_checks.extrapolation_common import claim_rng, plain, z_limit
from posflow.proofs_checks.registry import Context, LegacyEvidence, register
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import empirical_route_mean, so2_scores
from posflow.simulate.transport import mixing_window as sim_window
from posflow.theory import transport as th


@register(
    "AT5",
    "[B]",
    "the mixing window W(ε) = ⌈ln(1/ε)/ln(1/γ)⌉ does not depend on context length: the law of "
    "a far score at distance ≥ W is the same at L = 512 and L = 65536",
    assumptions=("steps i.i.d. with spectral gap γ < 1",),
)
def at5(ctx: Context) -> LegacyEvidence:
    """Claim AT5: the mixing window depends on the step law only, not on the context length.

    Law Unif[-1, 1] on two SO(2) blocks: W(0.01) from ``theory`` and ``simulate`` agree; far
    scores of the last query (key = query) in whole contexts of L = 512 and 65536
    (:func:`posflow.simulate.transport.so2_scores`), at distance W and at one uniform far distance
    per trial; verdict: two-sample KS tests do not reject equal laws at 1 %.
    """
    rng = claim_rng(ctx, 5)
    eps, a = 0.01, 1.0
    law = SO2BlockLaw(4, "uniform", scale=a)  # two blocks, θ ~ Unif[-1, 1]
    gamma = float(abs(th.characteristic_value("uniform", a)))
    W = int(th.mixing_window(gamma, eps))
    W_sim = sim_window(law.gamma, eps)
    q = np.full((1, 4), 0.5)  # unit query; the key equals it, so the score is Σ_b ‖q_b‖² cos ψ_b
    trials = 2000 if ctx.full else 200
    lengths = (512, 65536)
    fixed, pooled = {}, {}
    for length in lengths:
        k = np.broadcast_to(q, (length, 4))
        at_w, far = np.empty(trials), np.empty(trials)
        for t in range(trials):
            s = so2_scores(q, k, law.sample_angles(length, seed=rng))[0]
            far_dist = int(rng.integers(W, length))  # one far distance per trial, uniform
            at_w[t], far[t] = s[length - 1 - W], s[length - 1 - far_dist]
        fixed[length], pooled[length] = at_w, far
    ks_fixed = stats.ks_2samp(fixed[512], fixed[65536])
    ks_far = stats.ks_2samp(pooled[512], pooled[65536])
    alpha = 0.01
    ok = (
        W == W_sim
        and gamma**W <= eps < gamma ** (W - 1)
        and min(ks_fixed.pvalue, ks_far.pvalue) > alpha
    )
    return LegacyEvidence(
        verdict(ok),
        plain(
            {
                "angle_law": "Unif[-1, 1] on 2 SO(2) blocks",
                "gamma": gamma,
                "eps": eps,
                "window_theory": W,
                "window_simulate": W_sim,
                "trials_per_length": trials,
                "ks_at_distance_W": {"D": ks_fixed.statistic, "p": ks_fixed.pvalue},
                "ks_random_far_distance": {"D": ks_far.statistic, "p": ks_far.pvalue},
                "significance": alpha,
                "mean_far_score": {str(k): float(v.mean()) for k, v in pooled.items()},
            }
        ),
        summary=f"W(0.01) = {W} from γ = {gamma:.4f} alone; far scores at L = 512 vs 65536: "
        f"KS p = {ks_fixed.pvalue:.2f} (distance W), {ks_far.pvalue:.2f} (random far distance); "
        f"equal laws not rejected at {alpha}",
    )


_AT6_COUNTS = {512: 10, 8192: 17, 65536: 23}  # papers/B_transport.md §2.4 [CHK]
_AT6_WINDOWS = (26.7, 39.6, 58.6)


@register(
    "AT6",
    "[D]",
    "with RoPE frequencies (d_h = 96, base 10^4, angles ~ Unif[-f_b, f_b]) the window is per "
    "block: W_b ≈ 6 ln(1/ε)/f_b²; blocks mixed below 0.1 at n = 512 / 8192 / 65536: 10 / 17 / 23",
    assumptions=("θ_b ~ Unif[-f_b, f_b] i.i.d.", "f_b = 10^{-4·2b/96}"),
)
def at6(ctx: Context) -> LegacyEvidence:
    """Claim AT6: per-block windows W_b ≈ 6 ln(1/ε)/f_b² at d_h = 96, and 10 / 17 / 23 blocks
    mixed below 0.1 at n = 512 / 8192 / 65536.

    exact: ``block_mixing_windows``, ``blocks_mixed`` (40 digits), the sympy series of the
    approximation; numeric: the same counts in float64 from simulate's characteristic values,
    and Monte Carlo route means at n = 512 per block (``empirical_route_mean``). Table per block
    in ``measured["per_block"]``; figure ``AT6_windows.png``.
    """
    rng = claim_rng(ctx, 6)
    d, base = 96, 10_000.0
    bw = th.block_mixing_windows(d, 0.01, base)
    f = bw.frequencies
    # W_exact/W_approx = 1 - f²/30 + O(f⁴) (sympy); numerically within 10% of f²/30 per block
    series = th.window_approximation_derivation()
    ratio = bw.ratio / bw.approx
    approx_ok = bool(
        series.approx_overestimates
        and np.all(ratio <= 1.0)
        and np.all(np.abs(1.0 - ratio - f**2 / 30) <= 0.1 * f**2 / 30 + 1e-12)
    )
    ns = list(_AT6_COUNTS)
    exact_counts = [int(c) for c in th.blocks_mixed(d, base, 0.1, ns)]
    law = SO2BlockLaw(d)  # simulate's float64 characteristic, an independent evaluation
    log_c = np.log(np.abs(law.characteristic()))
    float_counts = [int(np.sum(n * log_c < np.log(0.1))) for n in ns]
    windows_ok = bool(np.all(np.abs(bw.ratio[:3] - _AT6_WINDOWS) <= 0.05))
    # Monte Carlo: per-block route means at n = 512 against c_b^512
    n_mc, N = 512, (10_000 if ctx.full else 1_000)
    mc = empirical_route_mean(law, n_mc, n_routes=N, seed=rng, statistic="cos", per_block=True)
    c_n = th.phase_moments("uniform", f, n_mc)[0]
    var = (1 + th.phase_moments("uniform", 2 * f, n_mc)[0]) / 2 - c_n**2
    se = np.sqrt(np.maximum(var, 0) / N)
    live = se > 0
    z = float(np.max(np.abs(mc[n_mc][live] - c_n[live]) / se[live]))
    zlim = z_limit(int(live.sum()))
    exact_blockwise = np.exp(np.outer(ns, bw.log_gamma))  # c_b^n, shape (3, 48)
    ok = (
        approx_ok
        and windows_ok
        and exact_counts == float_counts == [_AT6_COUNTS[n] for n in ns]
        and z <= zlim
    )
    table = [
        {
            "b": b,
            "f_b": f[b],
            "W_b(eps=0.01)": bw.ratio[b],
            "approx_6ln(1/eps)/f^2": bw.approx[b],
            **{f"c_b^{n}": exact_blockwise[i, b] for i, n in enumerate(ns)},
        }
        for b in range(d // 2)
    ]

    def draw(path):
        import matplotlib.pyplot as plt

        from posflow.proofs_checks.figures import COLORS, save

        fig, ax = plt.subplots(figsize=(6.0, 3.8))
        ax.semilogy(
            np.arange(d // 2),
            bw.ratio,
            "o",
            ms=3.5,
            color=COLORS["exact"],
            label="exact W_b = ln(1/ε)/ln(f_b/sin f_b)",
        )
        ax.semilogy(
            np.arange(d // 2), bw.approx, "-", color=COLORS["bound"], lw=1.2, label="6 ln(1/ε)/f_b²"
        )
        for n, ls in zip(ns, (":", "--", "-."), strict=True):
            ax.axhline(
                n,
                color="#555555",
                ls=ls,
                lw=1,
                label=f"n = {n}: {_AT6_COUNTS[n]} blocks mixed below 0.1",
            )
        ax.set_xlabel("block b")
        ax.set_ylabel("mixing window W_b (steps), ε = 0.01")
        ax.set_title("AT6: per-block windows, d_h = 96, base 10⁴, θ_b ~ Unif[-f_b, f_b]")
        ax.legend(frameon=False, fontsize=7)
        ax.grid(alpha=0.3)
        save(fig, path)

    figs = save_figure(ctx, "AT6_windows.png", draw)
    return LegacyEvidence(
        verdict(ok),
        plain(
            {
                "blocks_mixed_below_0.1_exact": dict(zip(map(str, ns), exact_counts, strict=True)),
                "blocks_mixed_below_0.1_float64": dict(
                    zip(map(str, ns), float_counts, strict=True)
                ),
                "expected_counts": {str(k): v for k, v in _AT6_COUNTS.items()},
                "W_0_W_1_W_2": bw.ratio[:3],
                "W_max": float(bw.ratio.max()),
                "approx_ratio_is_1-f^2/30+O(f^4)": approx_ok,
                "mc_route_mean_n512_max_abs_z": z,
                "mc_samples_N": N,
                "z_limit": zlim,
                "per_block": table,
            }
        ),
        figs,
        f"blocks mixed below 0.1 at n = 512/8192/65536: {exact_counts} of 48 (40-digit and "
        f"float64 agree); W_0..2 = {', '.join(f'{x:.1f}' for x in bw.ratio[:3])}, "
        f"max W_b = {bw.ratio.max():.3g}; Monte Carlo c_b^512 within {z:.2f} SE",
    )
