"""Claims AT1–AT4 of [B]: characteristic decay, product means, Haar and Householder steps.

Each check pairs an exact statement from :mod:`posflow.theory.transport` with a Monte Carlo
experiment on the step laws of :mod:`posflow.simulate.orthogonal` and returns the measured
:class:`~posflow.proofs_checks.kit.Evidence`. A Monte Carlo estimate agrees with its exact
value when it lies within ``z_limit(n)`` standard errors, n the number of Monte Carlo comparisons
the claim makes (Bonferroni: family-wise false-alarm level 2Φ(−4) ≈ 6.3e-5 per claim). The window
claims AT5 and AT6 live in :mod:`posflow.proofs_checks.claims.at05_06_windows`.
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp
from scipy import stats

from posflow.proofs_checks.kit import (
    FAMILY_Z,
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
    mean_se,
    register,
    scaled_argument,
    scaled_result,
    stat_tol,
    z_limit,
)
from posflow.simulate.orthogonal import HaarLaw, HouseholderLaw, SO2BlockLaw, haar, phase_paths
from posflow.theory import transport as th

__all__ = ["FAMILY_LEVEL", "family_reason"]

_SCALE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")

FAMILY_LEVEL = float(2 * stats.norm.sf(FAMILY_Z))
"""Family-wise false-alarm level of one claim's Monte Carlo comparisons: 2Φ(−4) ≈ 6.3e-5."""


def family_reason(n_cmp: int, samples: str) -> str:
    """The reason text of a Bonferroni z limit: sample count, comparisons, level."""
    return (
        f"{samples}; {n_cmp} Monte Carlo comparisons, Bonferroni limit z_{n_cmp} = "
        f"{z_limit(n_cmp):.2f} standard errors (family-wise level 2Φ(−{FAMILY_Z:g}) = "
        f"{FAMILY_LEVEL:.1e})"
    )


def _z_measure(key, z, n_cmp, samples, label, **kw):
    """max |estimate − exact|/SE over a family of ``n_cmp`` comparisons, ≤ z_limit(n_cmp)."""
    tol = stat_tol(z_limit(n_cmp), family_reason(n_cmp, samples))
    return at_most(key, z, 0.0, tol, label=label, unit="SE", **kw)


# ------------------------------------------------------------------------------------------
# AT1


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
    ch = th.angle_characteristic("uniform")
    a, L = ch.parameter, ch.steps
    sym_cos = sp.simplify(ch.sum_cos - (sp.sin(a) / a) ** L) == 0
    sym_sin = sp.simplify(ch.sum_sin) == 0
    scales = np.array([0.25, 0.5, 1.0, 2.0])
    Ls = [1, 2, 4, 8, 16, 32, 64] + ([128, 256] if ctx.full else [])
    # theory's polar evaluation against the sympy expression and a plain float power
    eval_err = plain_err = 0.0
    for step in (1, 8, Ls[-1]):
        c, s = th.phase_moments("uniform", scales, step)
        sym_val = np.array([float(ch.sum_cos.subs({a: float(x), L: step})) for x in scales])
        eval_err = max(eval_err, float(np.abs(c - sym_val).max()), float(np.abs(s).max()))
        plain_err = max(plain_err, float(np.abs(c - (np.sin(scales) / scales) ** step).max()))
    N = 400_000 if ctx.full else 20_000
    law = SO2BlockLaw(2 * scales.size, "uniform", scale=scales)
    paths = phase_paths(law, N, Ls, rng)
    n_cmp = 2 * len(Ls) * scales.size
    exact_cos, mc_cos, mc_se, z_cos, z_sin = [], [], [], 0.0, 0.0
    for step in Ls:
        ec, es = th.phase_moments("uniform", scales, step)
        mc, sc = mean_se(np.cos(paths[step]))
        ms, ss = mean_se(np.sin(paths[step]))
        z_cos = max(z_cos, float(np.max(np.abs(mc - ec) / sc)))
        z_sin = max(z_sin, float(np.max(np.abs(ms - es) / ss)))
        exact_cos.append(ec)
        mc_cos.append(mc)
        mc_se.append(sc)
    exact_cos, mc_cos, mc_se = map(np.array, (exact_cos, mc_cos, mc_se))
    samples = f"N = {N:,} route sums per (a, L)"
    fp = fp_tol(
        1e-14,
        f"(sin a/a)^L for L ≤ {Ls[-1]}: each evaluation rounds ≲ L+2 times at relative 1.1e-16, "
        f"≤ {Ls[-1] + 2}·1.1e-16 = {(Ls[-1] + 2) * 1.1e-16:.1e} on values ≤ 1",
    )
    grid = np.arange(0, Ls[-1] + 1)
    panel = Panel(
        "E cos Σθ: lines exact (sin a/a)^L, dots Monte Carlo ± z SE",
        "number of steps L",
        "E cos Σθ",
        series=[
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
                    mc_cos[:, b],
                    kind="errorbar",
                    yerr=z_limit(n_cmp) * mc_se[:, b],
                    color=col,
                ),
            )
        ],
    )
    table = Table(
        "decay",
        "E cos Σθ: exact (sin a/a)^L and Monte Carlo mean (standard error)",
        [
            "L",
            *[f"exact a={x:g}" for x in scales],
            *[f"MC a={x:g}" for x in scales],
            *[f"SE a={x:g}" for x in scales],
        ],
        [[s, *exact_cos[i], *mc_cos[i], *mc_se[i]] for i, s in enumerate(Ls)],
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
            _z_measure(
                "max_z_cos", z_cos, n_cmp, samples, "max |Monte Carlo E cos Σθ − (sin a/a)^L| / SE"
            ),
            _z_measure("max_z_sin", z_sin, n_cmp, samples, "max |Monte Carlo E sin Σθ − 0| / SE"),
            info("samples_N", N),
            info("max_steps_L", Ls[-1]),
        ],
        figures=[Figure("AT1_decay", f"AT1: θ ~ Unif[-a, a], N = {N:,}", [panel])],
        tables=[table],
        setup=f"a ∈ {scales.tolist()}, L ∈ {Ls}; {N:,} sums of L i.i.d. SO2BlockLaw angles per a "
        "(one path per route, checkpoints at each L); sympy by integration.",
    )


# ------------------------------------------------------------------------------------------
# AT2


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
        "so2": ("SO(2) blocks a = 0.5, 1, 2", so2, so2_mean),
        "haar": ("Haar O(4)", HaarLaw(4), np.zeros((4, 4))),
        "householder": (
            "Householder d = 4, β = 1",
            hh,
            th.householder_mean_factor(1.0, 4) * np.eye(4),
        ),
    }


@register(
    "AT2",
    "[B]",
    "product mean: for i.i.d. steps E[M_1⋯M_L] = (E M)^L, so ‖E P_{j→i}‖ ≤ γ^{i-j}, "
    "γ = ‖E M‖_op < 1 (spectral gap)",
    assumptions=("steps i.i.d.", "spectral gap γ = ‖E M‖_op < 1"),
)
def at2(ctx: Context) -> Evidence:
    """Claim AT2: E[M_L ⋯ M_1] = (E M)^L and ‖(E M)^L‖ ≤ γ^L < 1 for i.i.d. steps.

    Laws: SO(2) blocks (a = 0.5, 1, 2), Haar O(4), Householder (d = 4, β = 1); exact E M from
    :mod:`posflow.theory.transport` (characteristic values, Householder factor; 0 for Haar)
    against simulate's closed-form ``law.mean()``; numeric: N route products per L ≤ 6 (full 8),
    every entry of Ê[M_L⋯M_1] within ``z_limit`` SE of (E M)^L; γ < 1 and the norm inequality.
    """
    rng = claim_rng(ctx, 2)
    N = 200_000 if ctx.full else 20_000
    L_max = 8 if ctx.full else 6
    laws = _exact_means()
    n_cmp = sum(m.size for _, _, m in laws.values()) * L_max
    samples = f"N = {N:,} route products per (law, L)"
    ms, rows, curves = [], [], []
    for key, (name, law, mean) in laws.items():
        mean_match = float(np.abs(law.mean() - mean).max())
        gamma = float(np.linalg.norm(mean, 2))
        P = np.broadcast_to(np.eye(law.d), (N, law.d, law.d)).copy()
        z_max, norm_excess, mc_norms = 0.0, -np.inf, []
        for step in range(1, L_max + 1):
            P = law.sample(N, seed=rng) @ P  # the new step on the left: M_L ⋯ M_1
            exact = np.linalg.matrix_power(mean, step)
            m, se = mean_se(P)
            live = se > 0
            z_max = max(z_max, float(np.max(np.abs(m - exact)[live] / se[live])))
            norm_excess = max(norm_excess, float(np.linalg.norm(exact, 2) - gamma**step))
            mc_norms.append(float(np.linalg.norm(m, 2)))
        rows.append([name, gamma, z_max, norm_excess, mean_match])
        curves.append((name, mc_norms, [gamma**s for s in range(1, L_max + 1)]))
        ms += [
            at_most(
                f"{key}_mean_theory_vs_simulate",
                mean_match,
                0.0,
                fp_tol(
                    1e-15,
                    "theory's E M (40-digit sin a/a, 1 − β/d) against simulate's "
                    "closed form (np.sinc, 1 − β/d): each rounded once, ≤ 2·1.1e-16 on "
                    "entries ≤ 1",
                ),
                label=f"{name}: max |E M (theory) − E M (simulate)|",
            ),
            holds(
                f"{key}_spectral_gap", gamma < 1, label=f"{name}: γ = ‖E M‖_op = {gamma:.4g} < 1"
            ),
            _z_measure(
                f"{key}_max_z", z_max, n_cmp, samples, f"{name}: max |Ê[M_L⋯M_1] − (E M)^L| / SE"
            ),
            at_most(
                f"{key}_norm_excess",
                norm_excess,
                0.0,
                fp_tol(
                    1e-13,
                    f"(E M)^L, L ≤ {L_max}, d ≤ 6: ≲ L·d roundings of 1.1e-16 on a "
                    f"norm ≤ 1, {L_max}·6·1.1e-16 = {L_max * 6 * 1.1e-16:.1e}",
                ),
                label=f"{name}: max_L ‖(E M)^L‖ − γ^L",
            ),
        ]
    ms.append(info("samples_N", N))
    panel = Panel(
        "‖Ê P_L‖ against γ^L (Monte Carlo floor ≈ √(d/N))",
        "L",
        "operator norm",
        series=[
            s
            for (name, mc, g), col in zip(curves, _SCALE_COLORS, strict=False)
            for s in (
                Series(f"{name}: ‖Ê P_L‖", list(range(1, L_max + 1)), mc, "markers", color=col),
                Series(f"{name}: γ^L", list(range(1, L_max + 1)), g, color=col),
            )
        ],
        logy=True,
    )
    return Evidence(
        ms,
        tables=[
            Table(
                "laws",
                "per law: γ, worst entry z, max ‖(E M)^L‖ − γ^L, theory vs simulate mean",
                ["law", "gamma", "max z", "norm excess", "mean mismatch"],
                rows,
            )
        ],
        figures=[Figure("AT2_product_mean", f"AT2: mean route products, N = {N:,}", [panel])],
        setup=f"{N:,} i.i.d. route products M_L⋯M_1 per law for L = 1…{L_max}; laws: "
        + ", ".join(n for n, _, _ in laws.values())
        + ".",
    )


# ------------------------------------------------------------------------------------------
# AT3


@register(
    "AT3",
    "[D]",
    "Haar O(d) steps have E M = 0 (one step mixes fully)",
    assumptions=("M ~ Haar on O(d) (or SO(d), d ≥ 2)",),
)
def at3(ctx: Context) -> Evidence:
    """Claim AT3: Haar steps have E M = 0.

    Entries of Ê M over N Haar matrices (d = 2, 8, 32 and SO(8); full adds d = 64) against 0 with
    the exact standard error 1/√(dN) (E M_ij² = 1/d); the whole mean through
    T = N d ‖Ê M‖_F², which for a zero mean is asymptotically χ² with d² degrees of freedom
    (Σ_t M_t/√N is asymptotically Gaussian with i.i.d. N(0, 1/d) entries); SO(d) draws have
    det = +1 and every draw is orthogonal.
    """
    rng = claim_rng(ctx, 3)
    N = 20_000 if ctx.full else 4_000
    cases = [(2, False), (8, False), (32, False), (8, True)] + ([(64, False)] if ctx.full else [])
    n_entries = sum(d * d for d, _ in cases)
    n_cmp = n_entries + len(cases)  # entry z-tests and one χ² test per case
    zlim = z_limit(n_cmp)
    level = FAMILY_LEVEL / n_cmp  # per-test level of the Bonferroni family
    samples = f"N = {N:,} Haar draws per case"
    ms, rows = [], []
    for d, special in cases:
        name = f"{'SO' if special else 'O'}({d})"
        exact_zero = bool(np.all(HaarLaw(d, special=special).mean() == 0))
        M = haar(d, N, seed=rng, special=special)
        m = M.mean(axis=0)
        z = float(np.abs(m).max() * np.sqrt(d * N))
        T = float(N * d * np.sum(m * m))
        t_lim = float(stats.chi2.isf(level, d * d))
        orth = float(np.abs(M @ M.transpose(0, 2, 1) - np.eye(d)).max())
        op = float(np.linalg.norm(m, 2))
        rows.append([name, z, T, t_lim, op, op * np.sqrt(N) / 2])
        ms += [
            holds(f"{name}_exact_mean_zero", exact_zero, label=f"{name}: HaarLaw.mean() = 0"),
            at_most(
                f"{name}_max_z",
                z,
                0.0,
                stat_tol(zlim, family_reason(n_cmp, samples) + "; exact SE 1/√(dN)"),
                label=f"{name}: max |Ê M_ij| √(dN)",
                unit="SE",
            ),
            at_most(
                f"{name}_chi2",
                T,
                0.0,
                stat_tol(
                    t_lim,
                    f"χ²_{{{d * d}}} upper quantile at the per-test level "
                    f"{level:.1e} of the family ({samples}, {n_cmp} tests, "
                    f"family-wise {FAMILY_LEVEL:.1e})",
                ),
                label=f"{name}: N d ‖Ê M‖_F² (χ² with d² = {d * d} df under E M = 0)",
            ),
            at_most(
                f"{name}_orthogonality",
                orth,
                0.0,
                fp_tol(
                    1e-13,
                    f"Householder QR of a {d}×{d} matrix: ‖QᵀQ − I‖ ≲ "
                    f"d²·1.1e-16 = {d * d * 1.1e-16:.1e}",
                ),
                label=f"{name}: max |M Mᵀ − I|",
            ),
        ]
        if special:
            det_err = float(np.abs(np.linalg.det(M) - 1.0).max())
            ms.append(
                at_most(
                    f"{name}_det_one",
                    det_err,
                    0.0,
                    fp_tol(
                        1e-12,
                        f"LU determinant of an orthogonal {d}×{d} matrix: ≲ "
                        f"d²·1.1e-16 = {d * d * 1.1e-16:.1e}",
                    ),
                    label=f"{name}: max |det M − 1|",
                )
            )
    ms.append(info("samples_N", N))
    return Evidence(
        ms,
        tables=[
            Table(
                "cases",
                "Haar means: worst entry z, χ² statistic and its limit, ‖Ê M‖_op (≈ 2/√N)",
                ["case", "max z", "N d |mean|_F^2", "chi2 limit", "op norm", "op·√N/2"],
                rows,
            )
        ],
        setup=f"{N:,} Haar draws (QR with Mezzadri's sign fix) per case: "
        + ", ".join(f"{'SO' if s else 'O'}({d})" for d, s in cases)
        + ".",
    )


# ------------------------------------------------------------------------------------------
# AT4


@register(
    "AT4",
    "[D]",
    "random Householder steps H = I - β w wᵀ, w uniform on the sphere: E H = (1 - β/d) I; "
    "H is orthogonal iff β ∈ {0, 2}; eigenvalues {1,…,1, 1-β}",
    assumptions=("w uniform on S^{d-1}", "β fixed"),
)
def at4(ctx: Context) -> Evidence:
    """Claim AT4: Householder steps H = I - β w wᵀ: E H = (1 - β/d) I, spectrum {1, …, 1, 1 - β},
    orthogonal iff β ∈ {0, 2}.

    exact: ``householder_derivation(3)`` (sympy) and ``householder_mean_factor``; numeric: N
    samples at d = 6 for β ∈ {0, 0.5, 1, 1.5, 2}: means within ``z_limit`` SE (zero-variance
    entries exactly), eigenvalues and ‖HᵀH − I‖ = β|2 − β| to a rounding bound, and
    ``HouseholderLaw.is_orthogonal`` as well as the numeric orthogonality equal to β ∈ {0, 2}.
    """
    rng = claim_rng(ctx, 4)
    der = th.householder_derivation(3)
    (beta,) = der.mean_matrix.free_symbols
    ms = [
        holds("sympy_isotropic", der.isotropic, label="sympy: E w wᵀ = I/3"),
        holds(
            "sympy_mean",
            sp.simplify(der.mean_matrix - (1 - beta / 3) * sp.eye(3)) == sp.zeros(3, 3),
            label="sympy: E H − (1 − β/3) I = 0",
        ),
        holds(
            "sympy_orthogonal_betas",
            der.orthogonal_betas == sp.FiniteSet(0, 2),
            label="sympy: H orthogonal iff β ∈ {0, 2}",
        ),
        holds(
            "sympy_eigenvalues",
            der.eigenvalues == {1: 2, 1 - beta: 1},
            label="sympy: eigenvalues {1, 1, 1 − β}",
        ),
    ]
    d, N = 6, (200_000 if ctx.full else 20_000)
    betas = [0.0, 0.5, 1.0, 1.5, 2.0]
    n_cmp = d * d * (len(betas) - 1)  # β = 0 has no random entry
    samples = f"N = {N:,} Householder draws per β"
    fp_spec = fp_tol(
        1e-12,
        f"eigenvalues and 2-norms of a {d}×{d} symmetric matrix (LAPACK, backward stable): "
        f"≲ d·‖H‖·1.1e-16 ≤ {d}·2·1.1e-16 = {d * 2 * 1.1e-16:.1e}, with margin for the "
        "unit-vector rounding of w",
    )
    z_all, flat_all, eig_all, defect_all, orth_ok, rows = 0.0, 0.0, 0.0, 0.0, True, []
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
        expected = b in (0.0, 2.0)
        orth_ok &= orth == expected == law.is_orthogonal
        z_all, flat_all = max(z_all, z), max(flat_all, flat)
        eig_all, defect_all = max(eig_all, eig_err), max(defect_all, defect_err)
        rows.append([b, 1 - b / d, z, eig_err, float(defect.max()), orth, law.is_orthogonal])
    ms += [
        _z_measure("max_z_mean", z_all, n_cmp, samples, "max |Ê H − (1 − β/d) I| / SE"),
        at_most(
            "zero_variance_entries",
            flat_all,
            0.0,
            fp_tol(
                1e-15,
                "entries with zero sample variance (β = 0, H = I exactly) average "
                "one repeated value: ≤ 1.1e-16 relative",
            ),
            label="max |Ê H − (1 − β/d) I| on zero-variance entries",
        ),
        at_most(
            "eigenvalue_error", eig_all, 0.0, fp_spec, label="max |eigenvalue − {1, …, 1, 1 − β}|"
        ),
        at_most("gram_defect_error", defect_all, 0.0, fp_spec, label="max |‖HᵀH − I‖ − β|2 − β||"),
        holds(
            "orthogonal_iff_0_or_2",
            orth_ok,
            label="numerically orthogonal = is_orthogonal = (β ∈ {0, 2})",
        ),
        info("samples_N", N),
    ]
    return Evidence(
        ms,
        tables=[
            Table(
                "betas",
                f"Householder steps, d = {d}",
                [
                    "beta",
                    "1 - beta/d",
                    "max z",
                    "eig err",
                    "max |HᵀH − I|",
                    "orthogonal",
                    "is_orthogonal",
                ],
                rows,
            )
        ],
        setup=f"d = {d}, β ∈ {betas}, {N:,} draws per β (w uniform on the sphere); eigenvalues "
        "and Gram defects on the first 200 draws; sympy at d = 3.",
    )


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks of the routines AT1–AT4 check


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


def _householder_factor_d_minus_1(original):
    @functools.wraps(original)
    def factor(beta, d):
        return original(beta, max(int(d) - 1, 1))

    return factor


def _haar_without_sign_fix(original):
    @functools.wraps(original)
    def plain_qr(d, size, seed=None, special=False):
        from posflow.simulate.orthogonal import _rng

        q, _ = np.linalg.qr(_rng(seed).standard_normal((size, d, d)))
        if special:
            q[np.linalg.det(q) < 0, :, 0] *= -1.0
        return q

    return plain_qr


def _special_flip_inverted(original):
    @functools.wraps(original)
    def haar_flip(d, size, seed=None, special=False):
        q = original(d, size, seed=seed, special=False)
        if special:
            q[np.linalg.det(q) > 0, :, 0] *= -1.0  # the wrong coset: det = −1 throughout
        return q

    return haar_flip


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
add_mutant(
    "AT2",
    "characteristic-scale-5%",
    "posflow.theory.transport:characteristic_value",
    scaled_argument(1, 1.05, "param"),
    "theory's characteristic value evaluated at 1.05·a",
)
add_mutant(
    "AT2",
    "angle-scale-5%",
    _ANGLES,
    scaled_result(1.05),
    "SO2BlockLaw draws θ ~ Unif[−1.05a, 1.05a] instead of Unif[−a, a]",
)
add_mutant(
    ("AT2", "AT4"),
    "householder-factor-1/(d-1)",
    "posflow.theory.transport:householder_mean_factor",
    _householder_factor_d_minus_1,
    "theory's Householder mean uses E w wᵀ = I/(d − 1)",
)
add_mutant(
    "AT3",
    "haar-without-sign-fix",
    "posflow.simulate.orthogonal:haar",
    _haar_without_sign_fix,
    "Haar draws as the plain Q of a Gaussian QR (no Mezzadri sign fix: not Haar)",
)
add_mutant(
    "AT3",
    "special-flip-inverted",
    "posflow.simulate.orthogonal:haar",
    _special_flip_inverted,
    "SO(d) draws negate the first column when det = +1 instead of −1",
)
add_mutant(
    "AT4",
    "w-not-unit",
    "posflow.simulate.orthogonal:HouseholderLaw.sample_vectors",
    scaled_result(1.001),
    "the reflection directions w have norm 1.001",
)
