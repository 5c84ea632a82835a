"""Claims PB11 and PB12 of [A] (legacy form, being moved to Evidence)."""

from __future__ import annotations

import math

import numpy as np
import sympy as sp

from posflow.proofs_checks._common import save_figure, verdict
from posflow.proofs_checks.figures import COLORS, save
from posflow.proofs_checks.registry import Context, LegacyEvidence, register
from posflow.simulate.compare import profile_shape
from posflow.simulate.kernels import (
    alibi_kernel,
    alibi_slopes,
    uniform_kernel,
)
from posflow.simulate.rollout import influence
from posflow.theory import rollout as th


def _regime_grid(ctx):
    n = 256
    lams = np.array([0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0])
    Ts = np.array([2, 4, 8, 16, 32, 64, 128, 256] + ([512, 1024] if ctx.full else []))
    settings = {
        "bloom-7b1 slopes (32 heads), c = 0": alibi_kernel(n, alibi_slopes(32)),
        "bloom-7b1 slopes, c = 2": alibi_kernel(n, alibi_slopes(32), 2.0),
        "single head m = 0.05, c = 0": alibi_kernel(n, 0.05),
    }
    grids = {}
    for name, K in settings.items():
        g = np.empty((lams.size, Ts.size), dtype=object)
        for a, lam in enumerate(lams):
            row = np.zeros((1, n))
            row[0, -1] = 1.0
            done = 0
            for b, T in enumerate(Ts):  # extend the same chain: P^{(T)} for growing T
                for _ in range(T - done):
                    row = K._residual_step(row, float(lam))
                done = T
                g[a, b] = profile_shape(row[0])
        grids[name] = g
    return n, lams, Ts, grids


@register(
    "PB11",
    "[A]",
    "finite depth gives broad, often U-shaped profiles: for intermediate Σλ "
    "an interior minimum below both ends; strict U in part of the (λ, T, m, c) plane",
    assumptions=("residual connections (λ < 1)", "finite depth"),
)
def pb11(ctx: Context) -> LegacyEvidence:
    n, lams, Ts, grids = _regime_grid(ctx)
    table = {}
    ok = True
    for name, g in grids.items():
        counts = {
            s: int((g == s).sum())
            for s in ("strict_u", "weak_u", "increasing", "decreasing", "other")
        }
        u_mass = [
            float(l * T)
            for (a, l) in enumerate(lams)
            for (b, T) in enumerate(Ts)
            if g[a, b] in ("strict_u", "weak_u")
        ]
        table[name] = {
            "counts": counts,
            "sum_lambda_range_of_U": [min(u_mass), max(u_mass)] if u_mass else None,
        }
    # strict U somewhere in every setting; at depth every λ ≥ 0.2 row ends collapsed onto token
    # 0 (minimum at the last token); and small Σλ gives pure recency (no valley) in some
    # setting: the U is an intermediate-Σλ regime
    strict_everywhere = all(t["counts"]["strict_u"] > 0 for t in table.values())
    collapse_at_depth = all(
        g[a, -1] == "decreasing" for g in grids.values() for a in np.flatnonzero(lams >= 0.2)
    )
    recency_small = any(g[0, 0] == "increasing" for g in grids.values())
    ok = strict_everywhere and collapse_at_depth and recency_small
    table["criteria"] = {
        "strict_U_in_every_setting": strict_everywhere,
        "collapse_at_max_depth_for_lambda>=0.2": collapse_at_depth,
        "recency_at_smallest_sum_lambda_somewhere": recency_small,
    }

    def draw(path):
        import matplotlib.pyplot as plt
        from matplotlib.colors import ListedColormap

        cats = ["strict_u", "weak_u", "increasing", "decreasing", "other"]
        cmap = ListedColormap(["#009E73", "#56B4E9", "#E69F00", "#D55E00", "#BBBBBB"])
        fig, axes = plt.subplots(1, len(grids), figsize=(4.2 * len(grids), 3.8), sharey=True)
        for ax, (name, g) in zip(axes, grids.items(), strict=True):
            idx = np.vectorize(cats.index)(g).astype(float)
            ax.imshow(idx, cmap=cmap, vmin=-0.5, vmax=4.5, origin="lower", aspect="auto")
            ax.set_xticks(range(Ts.size), [str(t) for t in Ts], fontsize=7)
            ax.set_yticks(range(lams.size), [f"{x:g}" for x in lams], fontsize=7)
            ax.set_xlabel("depth T")
            ax.set_title(name, fontsize=8)
        axes[0].set_ylabel("λ (constant)")
        handles = [plt.Rectangle((0, 0), 1, 1, color=cmap(k)) for k in range(5)]
        fig.legend(
            handles,
            [c.replace("_", " ") for c in cats],
            loc="lower center",
            ncol=5,
            frameon=False,
            fontsize=8,
        )
        fig.suptitle(f"profile shape regimes, n = {n}", fontsize=10)
        fig.subplots_adjust(bottom=0.22)
        save(fig, path)

    return LegacyEvidence(
        verdict(ok),
        {
            "n": n,
            "lambdas": lams,
            "depths": Ts,
            "regimes": table,
            "grids": {k: v.tolist() for k, v in grids.items()},
        },
        save_figure(ctx, "PB11_regime_map.png", draw),
        summary="strict U found; small Σλ gives recency, large Σλ collapse"
        if ok
        else "regime structure not as stated",
    )


@register(
    "PB12",
    "[D, ours]",
    "closed form for the uniform kernel: p(j) = C(n−1,j) E[X^j "
    "(1−X)^{n−1−j}], X = ∏X_t; n → ∞ limit: atom ∏(1−λ_t) at 1 plus density "
    "Σ_k Pr(K=k)(−ln x)^{k−1}/(k−1)!",
    assumptions=("uniform causal kernel",),
)
def pb12(ctx: Context) -> LegacyEvidence:
    rng = np.random.default_rng(ctx.seed + 12)
    lam_exact = [sp.Rational(1, 3), sp.Rational(1, 2), sp.Rational(1, 5), sp.Rational(3, 4)]
    lam = np.array([float(x) for x in lam_exact])
    n = 128
    exact = np.array([float(x) for x in th.influence_exact(n, lam_exact)])
    numeric = influence(uniform_kernel(n), lam)
    err_exact = float(np.abs(exact - numeric).max())
    # Monte Carlo of X = ∏ X_t, X_t = 1 w.p. 1-λ_t else U(0,1)
    N = 400_000 if ctx.full else 100_000
    u = rng.random((N, lam.size))
    lazy = rng.random((N, lam.size)) >= lam
    X = np.where(lazy, 1.0, u).prod(axis=1)
    from scipy.stats import binom

    js = np.array([0, 5, 40, 100, n - 2])
    samples = binom.pmf(js[None, :], n - 1, X[:, None])
    mc, se = samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(N)
    z = np.abs(mc - exact[js]) / np.maximum(se, 1e-300)
    # limit law vs the discrete cdf of j/(n−1) at large n
    law = th.limit_law(lam_exact)
    N_big = 4000
    p_big = influence(uniform_kernel(N_big), lam)
    x_mid = (np.arange(N_big - 1) + 0.5) / (N_big - 1)
    cdf_gap = float(np.abs(np.cumsum(p_big)[:-1] - law.cdf(x_mid)).max())
    gap_budget = 0.2 * math.log(N_big) ** 2 / N_big
    atom_ok = abs(float(law.atom) - float(np.prod(1 - lam))) < 1e-15
    # dichotomy through the atom (Borel–Cantelli): ∏(1 − λ_t) → 0 iff Σλ_t = ∞
    atoms = {
        f"beta={b}": float(np.exp(np.log1p(-0.5 / np.arange(1, 10**5 + 1) ** b).sum()))
        for b in (1.0, 2.0)
    }
    ok = err_exact <= 1e-12 and z.max() <= 4 and cdf_gap <= gap_budget and atom_ok

    def draw(path):
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6.0, 3.6))
        ax.plot(
            np.arange(n),
            numeric,
            color=COLORS["profile"],
            lw=2.5,
            alpha=0.5,
            label="numeric rollout",
        )
        ax.plot(np.arange(n), exact, "--", color=COLORS["exact"], label="exact (Hausdorff)")
        ax.set_yscale("log")
        ax.set_xlabel("token position j")
        ax.set_ylabel("$p^{(T)}(j)$")
        ax.set_title(f"uniform kernel, n = {n}, λ = (1/3, 1/2, 1/5, 3/4)")
        ax.legend(frameon=False)
        ax.grid(alpha=0.3)
        save(fig, path)

    return LegacyEvidence(
        verdict(ok),
        {
            "n": n,
            "max_abs_error_exact_vs_numeric": err_exact,
            "monte_carlo_samples": N,
            "monte_carlo_max_z": float(z.max()),
            "limit_law_cdf_gap_at_n=4000": cdf_gap,
            "cdf_gap_budget_0.2ln^2(n)/n": gap_budget,
            "atom": float(law.atom),
            "atoms_after_1e5_layers_lambda0=0.5": atoms,
        },
        save_figure(ctx, "PB12_closed_form.png", draw),
        summary=f"rationals = numeric to {err_exact:.1e}; MC within {z.max():.1f} SE",
    )
