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

from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    claim_rng,
    family_reason,
    fp_tol,
    holds,
    info,
    mean_se,
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
    z = float(np.abs(m).max() * np.sqrt(d * N))
    T = float(N * d * np.sum(m * m))
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
    return row, ms


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
    samples = f"N = {N:,} Haar draws per case"
    ms, rows = [], []
    for d, special in cases:
        row, case_ms = _haar_case(d, special, N, rng, n_cmp, samples)
        rows.append(row)
        ms += case_ms
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
        + ".",
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
    error, whether the orthogonality verdicts agree, the table row)."""
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
    agree = orth == (b in (0.0, 2.0)) == law.is_orthogonal
    row = [b, 1 - b / d, z, eig_err, float(defect.max()), orth, law.is_orthogonal]
    return z, flat, eig_err, defect_err, agree, row


def _table_at4(d, rows):
    cols = ["beta", "1 - beta/d", "max z", "eig err", "max |HᵀH − I|", "orthogonal"]
    return Table("betas", f"Householder steps, d = {d}", [*cols, "is_orthogonal"], rows)


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
    ms = _sympy_householder()
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
    per_beta = [_householder_beta(d, b, N, rng) for b in betas]
    z_all, flat_all, eig_all, defect_all = (max([0.0, *(r[i] for r in per_beta)]) for i in range(4))
    orth_ok = all(r[4] for r in per_beta)
    zero_var = fp_tol(
        1e-15,
        "entries with zero sample variance (β = 0, H = I exactly) average "
        "one repeated value: ≤ 1.1e-16 relative",
    )
    ms += [
        z_at_most("max_z_mean", z_all, n_cmp, samples, "max |Ê H − (1 − β/d) I| / SE"),
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
