"""Claims AT3–AT4 of [B]: Haar steps have mean zero; Householder steps have mean (1 − β/d) I.

Each check pairs an exact statement (:mod:`posflow.theory.transport`: the Householder sympy
derivation and mean factor; E M = 0 for Haar) with Monte Carlo draws of the step laws of
:mod:`posflow.simulate.orthogonal` and returns the measured
:class:`~posflow.proofs_checks.kit.Evidence`. A Monte Carlo estimate agrees with its exact value
within ``z_limit(n)`` standard errors, n the claim's number of comparisons (Bonferroni,
family-wise false-alarm level 2Φ(−4) ≈ 6.3e-5 per claim).
"""

from __future__ import annotations

import functools

import numpy as np
import sympy as sp
from scipy import stats

from posflow.proofs_checks.claims.at03_04_haar_householder_refs import (
    chi2_value,
    chi2_without_n,
    fp_self,
    gamma_frobenius,
    haar_extra,
    householder_extra,
    householder_var,
    jackknife_without_factor,
    z_value,
    z_without_sqrt_n,
)
from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    cite,
    claim_rng,
    family_reason,
    fp_tol,
    holds,
    info,
    register,
    scaled_result,
    stat_tol,
    z_at_most,
    z_limit,
)
from posflow.simulate.orthogonal import HaarLaw, HouseholderLaw, haar
from posflow.theory import transport as th

# ------------------------------------------------------------------------------------------
# AT3


def _haar_case(d, special, N, rng, n_cmp, samples):
    """Draw N Haar matrices of one case; its table row and measurements."""
    level = FAMILY_LEVEL / n_cmp  # per-test level of the Bonferroni family
    name = f"{'SO' if special else 'O'}({d})"
    exact_zero = bool(np.all(HaarLaw(d, special=special).mean() == 0))
    M = haar(d, N, seed=rng, special=special)
    m = M.mean(axis=0)
    z = z_value(m, 0.0, np.full((d, d), 1 / d), N)  # E M_ij² = 1/d exactly
    T = chi2_value(m, d, N)
    t_lim = float(stats.chi2.isf(level, d * d))
    orth = float(np.abs(M @ M.transpose(0, 2, 1) - np.eye(d)).max())
    op = float(np.linalg.norm(m, 2))
    row = [name, z, T, t_lim, op, op * np.sqrt(N) / 2]
    chi2_reason = (
        f"χ²_{{{d * d}}} upper quantile at the per-test level {level:.1e} of the family "
        f"({samples}, {n_cmp} tests, family-wise {FAMILY_LEVEL:.1e})"
    )
    orth_reason = (
        f"Householder QR of a {d}×{d} matrix: ‖QᵀQ − I‖ ≲ d²·1.1e-16 = {d * d * 1.1e-16:.1e}"
    )
    ms = [
        holds(f"{name}_exact_mean_zero", exact_zero, label=f"{name}: HaarLaw.mean() = 0"),
        at_most(
            f"{name}_max_z",
            z,
            0.0,
            stat_tol(z_limit(n_cmp), family_reason(n_cmp, samples) + "; exact SE 1/√(dN)"),
            label=f"{name}: max |Ê M_ij| √(dN)",
            unit="SE",
        ),
        at_most(
            f"{name}_chi2",
            T,
            0.0,
            stat_tol(t_lim, chi2_reason),
            label=f"{name}: N d ‖Ê M‖_F² (χ² with d² = {d * d} df under E M = 0)",
        ),
        at_most(
            f"{name}_orthogonality",
            orth,
            0.0,
            fp_tol(1e-13, orth_reason),
            label=f"{name}: max |M Mᵀ − I|",
        ),
    ]
    if special:
        det_err = float(np.abs(np.linalg.det(M) - 1.0).max())
        det_reason = (
            f"LU determinant of an orthogonal {d}×{d} matrix: ≲ d²·1.1e-16 = {d * d * 1.1e-16:.1e}"
        )
        ms.append(
            at_most(
                f"{name}_det_one",
                det_err,
                0.0,
                fp_tol(1e-12, det_reason),
                label=f"{name}: max |det M − 1|",
            )
        )
    return row, ms, m


_CITES_AT3 = (
    cite("posflow.simulate.orthogonal:haar",
         "E M = 0 (entries within z_n exact SE 1/√(dN), the χ² statistic), MᵀM = I, det = 1",
         "O(2)_max_z", "O(8)_max_z", "O(32)_max_z", "SO(8)_max_z", "O(8)_chi2",
         "O(8)_orthogonality", "SO(8)_det_one"),
    cite("posflow.simulate.orthogonal:mean_operator_norm",
         "the closed form γ = 0; Monte Carlo path: a plain loop over the same draws and the χ² "
         "bound √(χ² limit/(N d))",
         "gamma_exact_vs_closed_form", "gamma_monte_carlo_vs_explicit", "gamma_monte_carlo_bound"),
)  # fmt: skip


@register(
    "AT3",
    "[D]",
    "Haar O(d) steps have E M = 0 (one step mixes fully)",
    assumptions=("M ~ Haar on O(d) (or SO(d), d ≥ 2)",),
    compares=_CITES_AT3,
)
def at3(ctx: Context) -> Evidence:
    """Claim AT3: Haar steps have E M = 0.

    Entries of Ê M over N ``haar`` matrices (d = 2, 8, 32 and SO(8); full adds d = 64) against 0
    with the exact standard error 1/√(dN) (E M_ij² = 1/d); the whole mean through
    T = N d ‖Ê M‖_F², which for a zero mean is asymptotically χ² with d² degrees of freedom
    (Σ_t M_t/√N is asymptotically Gaussian with i.i.d. N(0, 1/d) entries); SO(d) draws have
    det = +1 and every draw is orthogonal. ``mean_operator_norm`` against γ = 0 and (Monte Carlo
    path) a plain loop and the χ² bound. Negative controls: the z and χ² judges reject a mean
    biased by 1.5 z_n SE in one entry and one shifted to 9× the χ² limit.
    """
    rng = claim_rng(ctx, 3)
    N = 20_000 if ctx.full else 4_000
    cases = [(2, False), (8, False), (32, False), (8, True)] + ([(64, False)] if ctx.full else [])
    n_entries = sum(d * d for d, _ in cases)
    n_cmp = n_entries + len(cases) + 1  # entry z-tests, one χ² test per case, the γ̂ bound
    samples = f"N = {N:,} Haar draws per case"
    ms, rows, means = [], [], {}
    for d, special in cases:
        row, case_ms, means[(d, special)] = _haar_case(d, special, N, rng, n_cmp, samples)
        rows.append(row)
        ms += case_ms
    ms += haar_extra(means[(8, False)], N, rng, n_cmp, samples, rows[1][3])
    ms.append(info("samples_N", N))
    table = Table(
        "cases",
        "Haar means: worst entry z, χ² statistic and its limit, ‖Ê M‖_op (≈ 2/√N)",
        ["case", "max z", "N d |mean|_F^2", "chi2 limit", "op norm", "op·√N/2"],
        rows,
    )
    return Evidence(
        ms,
        tables=[table],
        setup=f"{N:,} Haar draws (QR with Mezzadri's sign fix) per case: "
        + ", ".join(f"{'SO' if s else 'O'}({d})" for d, s in cases)
        + f"; mean_operator_norm on {N:,} O(8) draws in 16 batches.",
    )


# ------------------------------------------------------------------------------------------
# AT4


def _sympy_householder() -> list:
    """The sympy side of AT4 at d = 3: isotropy, the mean, the orthogonal β, the spectrum."""
    der = th.householder_derivation(3)
    (beta,) = der.mean_matrix.free_symbols
    return [
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


def _householder_beta(d, b, N, rng):
    """N Householder draws at one β: (z, zero-variance error, eigenvalue error, Gram-defect
    error, whether the orthogonality verdicts agree, the table row, the mean)."""
    law = HouseholderLaw(d, b)
    H = law.sample(N, seed=rng)
    m, var = H.mean(axis=0), householder_var(b, d)
    exact = (1 - b / d) * np.eye(d)  # the closed form, written here
    z = z_value(m, exact, var, N)
    flat = float(np.abs(m - exact)[var == 0].max(initial=0.0))  # zero-variance entries
    eig = np.sort(np.linalg.eigvalsh(H[:200]), axis=1)
    eig_err = float(np.abs(eig - np.sort([1 - b] + [1.0] * (d - 1))).max())
    gram = H[:200].transpose(0, 2, 1) @ H[:200] - np.eye(d)
    defect = np.linalg.norm(gram, 2, axis=(1, 2))
    defect_err = float(np.abs(defect - b * abs(2 - b)).max())
    orth = bool(defect.max() <= 1e-12)
    agree = orth == (b in (0.0, 2.0)) == law.is_orthogonal
    row = [b, 1 - b / d, z, eig_err, float(defect.max()), orth, law.is_orthogonal]
    return z, flat, eig_err, defect_err, agree, row, m


def _fp_spectrum(d):
    return fp_tol(1e-12, f"eigenvalues and 2-norms of a {d}×{d} symmetric matrix (LAPACK, "
                  f"backward stable): ≲ d·‖H‖·1.1e-16 ≤ {d}·2·1.1e-16 = {d * 2 * 1.1e-16:.1e}, "
                  "with margin for the unit-vector rounding of w")  # fmt: skip


_ZERO_VAR = fp_tol(1e-15, "entries with zero variance (β = 0, H = I exactly) average one "
                   "repeated value: ≤ 1.1e-16 relative")  # fmt: skip


def _table_at4(d, rows):
    cols = ["beta", "1 - beta/d", "max z", "eig err", "max |HᵀH − I|", "orthogonal"]
    return Table("betas", f"Householder steps, d = {d}", [*cols, "is_orthogonal"], rows)


_CITES_AT4 = (
    cite("posflow.theory.transport:householder_derivation",
         "sympy: E w wᵀ − I/3, E H − (1 − β/3) I simplify to 0; spectrum and orthogonal β",
         "sympy_isotropic", "sympy_mean", "sympy_orthogonal_betas", "sympy_eigenvalues"),
    cite("posflow.theory.transport:householder_mean_factor", "the closed form 1 − β/d",
         "mean_factor_vs_closed_form"),
    cite("posflow.simulate.orthogonal:mean_operator_norm",
         "the closed form |1 − β/d|; Monte Carlo path: a plain loop over the same draws and "
         "1 − 1/6 within d·z_n·SE", "gamma_exact_vs_closed_form",
         "gamma_monte_carlo_vs_explicit", "gamma_monte_carlo_vs_closed_form"),
)  # fmt: skip


@register(
    "AT4",
    "[D]",
    "random Householder steps H = I - β w wᵀ, w uniform on the sphere: E H = (1 - β/d) I; "
    "H is orthogonal iff β ∈ {0, 2}; eigenvalues {1,…,1, 1-β}",
    assumptions=("w uniform on S^{d-1}", "β fixed"),
    compares=_CITES_AT4,
)
def at4(ctx: Context) -> Evidence:
    """Claim AT4: Householder steps H = I - β w wᵀ: E H = (1 - β/d) I, spectrum {1, …, 1, 1 - β},
    orthogonal iff β ∈ {0, 2}.

    exact: ``householder_derivation(3)`` (sympy) and ``householder_mean_factor`` against 1 − β/d;
    numeric: N samples at d = 6 for β ∈ {0, 0.5, 1, 1.5, 2}: means within ``z_limit`` exact SE
    √(Var H_ij/N) (Var from the sphere's fourth moments; zero-variance entries exactly);
    ``mean_operator_norm`` against |1 − β/d| (exact path) and, on the Monte Carlo path, a plain
    loop and 1 − 1/6 within d·z_n·SE; negative controls of the judges; eigenvalues and
    ‖HᵀH − I‖ = β|2 − β| to a rounding bound, and
    ``HouseholderLaw.is_orthogonal`` as well as the numeric orthogonality equal to β ∈ {0, 2}.
    """
    rng = claim_rng(ctx, 4)
    ms = _sympy_householder()
    d, N = 6, (200_000 if ctx.full else 20_000)
    betas = [0.0, 0.5, 1.0, 1.5, 2.0]
    n_cmp = d * d * len(betas)  # β = 0 has no random entry; d² for the γ̂ draws
    samples = f"N = {N:,} Householder draws per β"
    fp_spec = _fp_spectrum(d)
    per_beta = [_householder_beta(d, b, N, rng) for b in betas]
    ms += householder_extra(d, betas, N, rng, n_cmp, samples, per_beta[2][6])
    z_all, flat_all, eig_all, defect_all = (max([0.0, *(r[i] for r in per_beta)]) for i in range(4))
    orth_ok = all(r[4] for r in per_beta)
    zero_var = _ZERO_VAR
    ms += [
        z_at_most("max_z_mean", z_all, n_cmp, samples,
                  "max |Ê H − (1 − β/d) I| / exact SE √(Var H_ij/N)"),
        at_most(
            "zero_variance_entries",
            flat_all,
            0.0,
            zero_var,
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
        tables=[_table_at4(d, [r[5] for r in per_beta])],
        setup=f"d = {d}, β ∈ {betas}, {N:,} draws per β (w uniform on the sphere); eigenvalues "
        "and Gram defects on the first 200 draws; sympy at d = 3.",
    )


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks of the routines AT3–AT4 check


def _householder_factor_d_minus_1(original):
    @functools.wraps(original)
    def factor(beta, d):
        return original(beta, max(int(d) - 1, 1))

    return factor


def _haar_without_sign_fix(original):
    @functools.wraps(original)
    def plain_qr(d, size, seed=None, special=False):
        # seed is a numpy Generator here; default_rng returns it unaltered
        q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((size, d, d)))
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


add_mutant(
    "AT4",
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


_REFS = "posflow.proofs_checks.claims.at03_04_haar_householder_refs"
_MON = "posflow.simulate.orthogonal:mean_operator_norm"
# fmt: off
add_mutant(("AT3", "AT4"), "z-judge-drops-sqrt-N", f"{_REFS}:z_value", z_without_sqrt_n,
           "the z judge divides by √Var instead of √(Var/N) (a √N dropped)")
add_mutant("AT3", "chi2-judge-drops-N", f"{_REFS}:chi2_value", chi2_without_n,
           "the χ² statistic d ‖Ê M‖_F² without the factor N")
add_mutant(("AT3", "AT4"), "fp-judge-self", f"{_REFS}:_fp_judge", fp_self,
           "the rounding judge compares each value with itself")
add_mutant("AT4", "gamma-frobenius", _MON, gamma_frobenius,
           "mean_operator_norm returns the Frobenius norm of the closed-form mean")
add_mutant(("AT3", "AT4"), "jackknife-without-(B-1)/B", _MON, jackknife_without_factor,
           "mean_operator_norm's jackknife SE without the factor (B − 1)/B")
# fmt: on
