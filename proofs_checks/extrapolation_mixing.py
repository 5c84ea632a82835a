"""Claims AT1–AT4 of [B]: characteristic decay, product means, Haar and Householder steps.

Each check pairs an exact statement from :mod:`posflow.theory.transport` with a Monte Carlo
experiment on the step laws of :mod:`posflow.simulate.orthogonal` /
:mod:`posflow.simulate.transport`; a Monte Carlo estimate agrees with its exact value when it lies
within ``z_limit(n)`` standard errors (4 for a single comparison, Bonferroni-adjusted for n
comparisons made together). The window claims AT5 and AT6 live in
:mod:`posflow.proofs_checks.extrapolation_windows`.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from posflow.proofs_checks._common import save_figure, verdict
from posflow.proofs_checks.extrapolation_common import (
    claim_rng,
    mean_se,
    phase_paths,
    plain,
    z_limit,
)
from posflow.proofs_checks.registry import Context, LegacyEvidence, register
from posflow.simulate.orthogonal import HaarLaw, HouseholderLaw, SO2BlockLaw, haar
from posflow.theory import transport as th

_SCALE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")


@register(
    "AT1",
    "[D]",
    "SO(2) characteristic decay: for θ ~ Unif[-a, a] i.i.d., E cos Σθ = (sin a / a)^L, "
    "E sin Σθ = 0",
    assumptions=("θ_l i.i.d. Unif[-a, a]",),
)
def at1(ctx: Context) -> LegacyEvidence:
    """Claim AT1: E cos Σ_{l≤L} θ_l = (sin a/a)^L and E sin Σθ_l = 0 for θ_l ~ Unif[-a, a].

    exact: ``posflow.theory.transport.angle_characteristic("uniform")`` (sympy integration; the sum
    moments simplify to (sin a/a)^L and 0) and its polar evaluation ``phase_moments``;
    numeric: N route-angle sums (SO2BlockLaw, a ∈ {0.25, 0.5, 1, 2}, L ≤ 64; full: N = 4e5,
    L ≤ 256); verdict: sympy identities hold and every Monte Carlo mean lies within
    ``z_limit`` standard errors. Figure ``AT1_decay.png``.
    """
    rng = claim_rng(ctx, 1)
    ch = th.angle_characteristic("uniform")
    a, L = ch.parameter, ch.steps
    sym_cos = sp.simplify(ch.sum_cos - (sp.sin(a) / a) ** L) == 0
    sym_sin = ch.sum_sin == 0
    # the sympy expression, evaluated, against theory's polar-form evaluation
    eval_err = abs(float(ch.sum_cos.subs({a: 1.0, L: 8})) - th.phase_moments("uniform", 1.0, 8)[0])
    scales = np.array([0.25, 0.5, 1.0, 2.0])
    Ls = [1, 2, 4, 8, 16, 32, 64] + ([128, 256] if ctx.full else [])
    N = 400_000 if ctx.full else 20_000
    law = SO2BlockLaw(2 * scales.size, "uniform", scale=scales)
    paths = phase_paths(law, N, Ls, rng)
    zlim = z_limit(2 * len(Ls) * scales.size)
    exact_cos, mc_cos, mc_se, z_max = [], [], [], 0.0
    for step in Ls:
        ec, es = th.phase_moments("uniform", scales, step)
        mc, sc = mean_se(np.cos(paths[step]))
        ms, ss = mean_se(np.sin(paths[step]))
        z_max = max(z_max, float(np.max(np.abs(mc - ec) / sc)), float(np.max(np.abs(ms - es) / ss)))
        exact_cos.append(ec)
        mc_cos.append(mc)
        mc_se.append(sc)
    exact_cos, mc_cos, mc_se = map(np.array, (exact_cos, mc_cos, mc_se))
    ok = sym_cos and sym_sin and eval_err <= 1e-12 and z_max <= zlim

    def draw(path):
        import matplotlib.pyplot as plt

        from posflow.proofs_checks.figures import save

        fig, ax = plt.subplots(figsize=(6.0, 3.8))
        grid = np.arange(0, Ls[-1] + 1)
        for b, (sc, col) in enumerate(zip(scales, _SCALE_COLORS, strict=True)):
            curve = [th.phase_moments("uniform", sc, int(g))[0] for g in grid]
            ax.plot(grid, curve, color=col, lw=1.4, label=f"(sin a/a)^L, a = {sc:g}")
            ax.errorbar(Ls, mc_cos[:, b], yerr=4 * mc_se[:, b], fmt="o", ms=3.5, color=col)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_xlabel("number of steps L")
        ax.set_ylabel("E cos Σθ")
        ax.set_title(f"AT1: θ ~ Unif[-a, a]; lines exact, dots Monte Carlo ±4 SE (N = {N:,})")
        ax.legend(frameon=False, fontsize=8)
        ax.grid(alpha=0.3)
        save(fig, path)

    figs = save_figure(ctx, "AT1_decay.png", draw)
    return LegacyEvidence(
        verdict(ok),
        plain(
            {
                "sympy_sum_cos_is_sinc_power": sym_cos,
                "sympy_sum_sin_zero": sym_sin,
                "sympy_eval_vs_polar_error": eval_err,
                "scales_a": scales,
                "steps_L": Ls,
                "samples_N": N,
                "exact_cos_by_L": {str(s): r for s, r in zip(Ls, exact_cos, strict=True)},
                "mc_cos_by_L": {str(s): r for s, r in zip(Ls, mc_cos, strict=True)},
                "max_abs_z": z_max,
                "z_limit": zlim,
            }
        ),
        figs,
        f"sympy: E cos Σθ = (sin a/a)^L, E sin Σθ = 0; Monte Carlo (N = {N:,}) within "
        f"{z_max:.2f} SE of the closed form (limit {zlim:.2f}) over a ∈ {scales.tolist()}, "
        f"L ≤ {Ls[-1]}",
    )


def _exact_means() -> dict:
    """Step laws of AT2 with the exact E M from posflow.theory."""
    scales = np.array([0.5, 1.0, 2.0])
    so2 = SO2BlockLaw(6, "uniform", scale=scales)
    c = np.real(th.characteristic_value("uniform", scales))
    so2_mean = np.zeros((6, 6))
    for b, cb in enumerate(c):
        so2_mean[b, b] = so2_mean[b + 3, b + 3] = cb  # half-split blocks (b, b + 3)
    hh = HouseholderLaw(4, 1.0)
    return {
        "so2_uniform(a=0.5,1,2)": (so2, so2_mean),
        "haar_O(4)": (HaarLaw(4), np.zeros((4, 4))),
        "householder(d=4,beta=1)": (hh, th.householder_mean_factor(1.0, 4) * np.eye(4)),
    }


@register(
    "AT2",
    "[B]",
    "product mean: for i.i.d. steps E[M_1⋯M_L] = (E M)^L, so ‖E P_{j→i}‖ ≤ γ^{i-j}, "
    "γ = ‖E M‖_op < 1 (spectral gap)",
    assumptions=("steps i.i.d.", "spectral gap γ = ‖E M‖_op < 1"),
)
def at2(ctx: Context) -> LegacyEvidence:
    """Claim AT2: E[M_L ⋯ M_1] = (E M)^L and ‖(E M)^L‖ ≤ γ^L for i.i.d. steps.

    Laws: SO(2) blocks (a = 0.5, 1, 2), Haar O(4), Householder (d = 4, β = 1); exact E M from
    :mod:`posflow.theory.transport` (characteristic values, Householder factor; 0 for Haar);
    numeric: N route products per L ≤ 6 (full 8); verdict: every entry within ``z_limit`` SE and the
    norm inequality to 1e-12.
    """
    rng = claim_rng(ctx, 2)
    N = 200_000 if ctx.full else 20_000
    L_max = 8 if ctx.full else 6
    laws = _exact_means()
    n_cmp = sum(m.size for _, m in laws.values()) * L_max
    zlim = z_limit(n_cmp)
    rows, ok = {}, True
    for name, (law, mean) in laws.items():
        mean_match = float(np.abs(law.mean() - mean).max())
        gamma = float(np.linalg.norm(mean, 2))
        P = np.broadcast_to(np.eye(law.d), (N, law.d, law.d)).copy()
        z_max, norm_excess, mc_norms = 0.0, -np.inf, []
        for step in range(1, L_max + 1):
            P = law.sample(N, seed=rng) @ P
            exact = np.linalg.matrix_power(mean, step)
            m, se = mean_se(P)
            live = se > 0
            z_max = max(z_max, float(np.max(np.abs(m - exact)[live] / se[live])))
            norm_excess = max(norm_excess, float(np.linalg.norm(exact, 2) - gamma**step))
            mc_norms.append(float(np.linalg.norm(m, 2)))
        holds = mean_match <= 1e-15 and gamma < 1 and z_max <= zlim and norm_excess <= 1e-12
        ok &= holds
        rows[name] = {
            "gamma": gamma,
            "max_abs_z_entries": z_max,
            "max_norm_minus_gamma_power": norm_excess,
            "mc_norm_of_mean_by_L": mc_norms,
            "gamma_power_by_L": [gamma**s for s in range(1, L_max + 1)],
            "mc_floor_sqrt_d_over_N": float(np.sqrt(law.d / N)),
            "holds": holds,
        }
    return LegacyEvidence(
        verdict(ok),
        plain({"samples_N": N, "L_max": L_max, "z_limit": zlim, "laws": rows}),
        summary=f"Ê[M_L⋯M_1] matches (E M)^L entrywise (worst "
        f"{max(r['max_abs_z_entries'] for r in rows.values()):.2f} SE, limit {zlim:.2f}) for "
        f"SO(2) blocks, Haar O(4) and Householder steps (L ≤ {L_max}, N = {N:,}); "
        "‖(E M)^L‖ ≤ γ^L exactly",
    )


@register(
    "AT3",
    "[D]",
    "Haar O(d) steps have E M = 0 (one step mixes fully)",
    assumptions=("M ~ Haar on O(d) (or SO(d), d ≥ 2)",),
)
def at3(ctx: Context) -> LegacyEvidence:
    """Claim AT3: Haar steps have E M = 0.

    Entries of Ê M over N Haar matrices (d = 2, 8, 32 and SO(8); full adds d = 64) against 0 with
    the exact standard error 1/√(dN); ‖Ê M‖_op against 4√(d/N) (it is ≈ 2/√N).
    """
    rng = claim_rng(ctx, 3)
    N = 20_000 if ctx.full else 4_000
    cases = [(2, False), (8, False), (32, False), (8, True)] + ([(64, False)] if ctx.full else [])
    zlim = z_limit(sum(d * d for d, _ in cases))
    rows, ok = {}, True
    for d, special in cases:
        exact_zero = bool(np.all(HaarLaw(d, special=special).mean() == 0))
        m = haar(d, N, seed=rng, special=special).mean(axis=0)
        z = float(np.abs(m).max() * np.sqrt(d * N))  # E M_ij² = 1/d: SE of an entry 1/√(dN)
        op = float(np.linalg.norm(m, 2))
        holds = exact_zero and z <= zlim and op <= 4 * np.sqrt(d / N)
        ok &= holds
        rows[f"{'SO' if special else 'O'}({d})"] = {
            "exact_mean_zero": exact_zero,
            "max_abs_z_entries": z,
            "op_norm_of_mc_mean": op,
            "sqrt_d_over_N": float(np.sqrt(d / N)),
            "op_norm_over_2_over_sqrtN": op * np.sqrt(N) / 2,
            "holds": holds,
        }
    return LegacyEvidence(
        verdict(ok),
        plain({"samples_N": N, "z_limit": zlim, "cases": rows}),
        summary=f"‖Ê M‖_op ≈ 2/√N (random-matrix scale) ≤ 4√(d/N); worst entry "
        f"{max(r['max_abs_z_entries'] for r in rows.values()):.2f} SE from 0, limit "
        f"{zlim:.2f} (N = {N:,})",
    )


@register(
    "AT4",
    "[D]",
    "random Householder steps H = I - β w wᵀ, w uniform on the sphere: E H = (1 - β/d) I; "
    "H is orthogonal iff β ∈ {0, 2}; eigenvalues {1,…,1, 1-β}",
    assumptions=("w uniform on S^{d-1}", "β fixed"),
)
def at4(ctx: Context) -> LegacyEvidence:
    """Claim AT4: Householder steps H = I - β w wᵀ: E H = (1 - β/d) I, spectrum {1, …, 1, 1 - β},
    orthogonal iff β ∈ {0, 2}.

    exact: ``householder_derivation(3)`` (sympy) and ``householder_mean_factor``; numeric: N
    samples at d = 6 for β ∈ {0, 0.5, 1, 1.5, 2}: means within ``z_limit`` SE, eigenvalues and
    ‖HᵀH - I‖ = β|2 - β| to 1e-12.
    """
    rng = claim_rng(ctx, 4)
    der = th.householder_derivation(3)
    (beta,) = der.mean_matrix.free_symbols
    sym = {
        "isotropic_second_moment": der.isotropic,
        "mean_is_(1-beta/3)I": sp.simplify(der.mean_matrix - (1 - beta / 3) * sp.eye(3))
        == sp.zeros(3, 3),
        "orthogonal_iff_beta_in_{0,2}": der.orthogonal_betas == sp.FiniteSet(0, 2),
        "eigenvalues_1x2_and_1-beta": der.eigenvalues == {1: 2, 1 - beta: 1},
    }
    d, N = 6, (200_000 if ctx.full else 20_000)
    betas = [0.0, 0.5, 1.0, 1.5, 2.0]
    zlim = z_limit(d * d * (len(betas) - 1))
    rows, ok = {}, all(sym.values())
    for b in betas:
        law = HouseholderLaw(d, b)
        H = law.sample(N, seed=rng)
        m, se = mean_se(H)
        exact = th.householder_mean_factor(b, d) * np.eye(d)
        live = se > 0
        z = float(np.max(np.abs(m - exact)[live] / se[live])) if live.any() else 0.0
        flat = float(np.abs(m - exact)[~live].max(initial=0.0))  # zero-variance entries
        eig = np.sort(np.linalg.eigvalsh(H[:200]), axis=1)
        eig_err = float(np.abs(eig - np.sort([1 - b] + [1.0] * (d - 1))).max())
        gram = H[:200].transpose(0, 2, 1) @ H[:200] - np.eye(d)
        defect = np.linalg.norm(gram, 2, axis=(1, 2))
        defect_err = float(np.abs(defect - b * abs(2 - b)).max())
        orth = bool(defect.max() <= 1e-12)
        expected_orth = b in (0.0, 2.0)
        holds = (
            z <= zlim
            and flat <= 1e-15
            and eig_err <= 1e-12
            and defect_err <= 1e-12
            and orth == expected_orth == law.is_orthogonal
        )
        ok &= holds
        rows[f"beta={b:g}"] = {
            "exact_mean_factor": 1 - b / d,
            "max_abs_z_entries": z,
            "eigenvalue_error": eig_err,
            "max_gram_defect": float(defect.max()),
            "orthogonal_numeric": orth,
            "holds": holds,
        }
    return LegacyEvidence(
        verdict(ok),
        plain({"sympy_d3": sym, "d": d, "samples_N": N, "z_limit": zlim, "betas": rows}),
        summary=f"sympy (d = 3): E H = (1 - β/3) I, orthogonal iff β ∈ {{0, 2}}, spectrum "
        f"{{1, 1, 1-β}}; Monte Carlo d = {d}, N = {N:,}: worst mean "
        f"{max(r['max_abs_z_entries'] for r in rows.values()):.2f} SE off (limit {zlim:.2f}), "
        "‖HᵀH - I‖ = β|2-β| to 1e-12",
    )
