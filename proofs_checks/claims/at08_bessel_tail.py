"""Claim AT8 of [B]: the I₀ sub-Gaussian tail of a score of fully mixed SO(2) blocks.

E e^{λs} = ∏_b I₀(λc_b) ≤ e^{λ²Σc_b²/4} (I₀(x) ≤ e^{x²/4} by the termwise series comparison and
on a grid), hence Pr(|s| ≥ t) ≤ 2exp(−t²/Σ_b c_b²) — twice the exponent of Hoeffding's bound;
for balanced blocks the Haar exponent dε²/2. Tail counts are judged by exact binomial p-values
as normal quantiles, the MGF and the variance by standard errors, against
:func:`~posflow.proofs_checks.kit.z_limit`. The mutant ``angle-scale-halved`` also breaks AT9
(:mod:`posflow.proofs_checks.claims.at09_score_gap`), which draws from the same law.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.special import i0e

from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_most,
    binomial_reason,
    binomial_z_above,
    claim_rng,
    close,
    fp_tol,
    holds,
    info,
    register,
    stat_tol,
    z_limit,
)
from posflow.simulate.concentration import block_norms, i0_series_dominated
from posflow.simulate.orthogonal import SO2BlockLaw, rotate_blocks
from posflow.theory import transport as th


def _sharp_tail(t, q_norms, k_norms):
    """2 exp(−t²/Σ_b c_b²), c_b = ‖q_b‖‖k_b‖: Hoeffding's formula 2 exp(−t'²/(2Σ c_b²)) of
    :func:`posflow.theory.transport.hoeffding_tail` at t' = √2 t."""
    return th.hoeffding_tail(np.sqrt(2.0) * np.asarray(t, dtype=float), q_norms, k_norms)


_FP_I0 = (
    "ln i0e(x) + x − x²/4 for x ≤ 50: i0e relative error ≲ 1e-15 "
    "(Cephes), rounding of x²/4 ≤ 625 is ≤ 625·1.1e-16 = 7e-14"
)
_FP_LEVY = (
    "two exponentials of the same argument −dε²/2 (Σc_b² = 2/d "
    "summed over 48 blocks): ≤ 48·2.2e-16·|dε²/2 ≤ 8| ≈ 1e-13"
)


def _z_mean(x, exact):
    """|mean(x) − exact| in standard errors (sample s.d./√N)."""
    return abs(x.mean() - exact) / (x.std(ddof=1) / np.sqrt(len(x)))


def _mgf_vs_bessel(s, c):
    """For λ with λ²Σc_b²/4 = κ ∈ {¼, 1}: (z of MC E e^{λs} vs ∏I₀(λc_b), ln∏I₀(λc_b) − κ)."""
    S2 = float(np.sum(c * c))
    z, excess = [], []
    for kappa in (0.25, 1.0):  # E e^{λs} ≤ e^κ
        lam = 2 * np.sqrt(kappa / S2)
        exact = float(np.exp(np.sum(np.log(i0e(lam * c)) + lam * c)))
        z.append(_z_mean(np.exp(lam * s), exact))
        excess.append(np.log(exact) - kappa)
    return z, excess


def _figure_at8(d, N, eps, curves):
    panels = [
        Panel(
            f"{name} q, k",
            "t/(‖q‖‖k‖)",
            "Pr(|s| ≥ t)",
            [
                Series("Monte Carlo", eps, np.maximum(mc, 1 / N), "markers"),
                Series("2exp(−t²/Σc²)", eps, np.minimum(bound, 2.0)),
                Series("Hoeffding 2exp(−t²/(2Σc²))", eps, np.minimum(hoef, 2.0), style="--"),
            ],
            logy=True,
        )
        for name, (mc, bound, hoef) in curves.items()
    ]
    return Figure("AT8_tails", f"AT8: fully mixed SO(2) blocks, d = {d}, N = {N:,}", panels)


def _judge_at8(z_tail, z_mgf, z_var, mgf_excess, i0_gap, balanced_vs_levy, N):
    n = len(z_tail) + len(z_mgf) + len(z_var)
    zm = z_limit(n)
    clt = (
        f"|mean − exact|/SE, SE = sample s.d./√N, N = {N:,} scores per case (CLT; the variance "
        f"of e^(λs) is finite, ≤ e^(λ²Σc²/2)); {n} comparisons with the tails, "
        f"Bonferroni z_limit = {zm:.2f}, family-wise level ≤ {FAMILY_LEVEL:.1e}"
    )
    tails = binomial_reason("MC tails vs 2exp(−t²/Σc²)", f"N = {N:,} scores per case", n)

    def z_max(key, z, reason, label):
        return at_most(key, float(max(z)), 0.0, stat_tol(zm, reason), label=label, unit="SE")

    return [
        holds(
            "i0_series_dominated",
            i0_series_dominated(),
            label="sympy: I₀ series Σ(x²/4)^k/(k!)² termwise ≤ e^(x²/4) (k! ≥ 1)",
        ),
        at_most(
            "max_log_i0_minus_quarter_x2",
            i0_gap,
            0.0,
            fp_tol(2e-13, _FP_I0),
            label="max_x∈[0,50] ln I₀(x) − x²/4",
        ),
        at_most(
            "max_mgf_log_excess",
            float(max(mgf_excess)),
            0.0,
            fp_tol(1e-12, "sum of 48 logs of i0e, each relative error ≲ 1e-15"),
            label="max ln ∏I₀(λc_b) − λ²Σc_b²/4",
        ),
        z_max(
            "max_z_mgf_vs_bessel_product",
            z_mgf,
            "MC E e^(λs) vs ∏ I₀(λc_b): " + clt,
            "max |z| of MC E e^(λs) vs ∏ I₀(λc_b)",
        ),
        z_max(
            "max_z_variance", z_var, "MC E s² vs Σc_b²/2: " + clt, "max |z| of MC E s² vs Σc_b²/2"
        ),
        z_max("max_z_above_sharp_tail", z_tail, tails, "max z of MC tail above 2exp(−t²/Σc_b²)"),
        close(
            "balanced_sharp_vs_levy",
            balanced_vs_levy,
            0.0,
            fp_tol(1e-13, _FP_LEVY),
            label="max |2exp(−t²/Σc²)/2e^(−dε²/2) − 1| (balanced unit q, k)",
        ),
        info("samples_per_case", N),
    ]


@register(
    "AT8",
    "[B]",
    "fully mixed SO(2) blocks: E e^{λs} = ∏_b I₀(λc_b) ≤ e^{λ²Σc_b²/4}, hence "
    "Pr(|s| ≥ t) ≤ 2 exp(-t²/Σ_b c_b²), c_b = ‖q_b‖‖k_b‖ (twice Hoeffding's exponent; balanced "
    "blocks: 2e^{-dε²/2}, the Haar exponent)",
    assumptions=("block phases independent and uniform (fully mixed)",),
)
def at8(ctx: Context) -> Evidence:
    """Claim AT8: the I₀ sub-Gaussian tail of a score of fully mixed SO(2) blocks (d = 96).

    I₀(x) ≤ e^{x²/4} by sympy (termwise series) and scipy (x ∈ [0, 50]); Monte Carlo scores
    qᵀR(ψ)k for Gaussian and balanced q, k: the MGF against ∏ I₀(λc_b), the variance against
    Σc_b²/2, tails under 2exp(−t²/Σc_b²); for balanced blocks that bound is Lévy's.
    """
    rng = claim_rng(ctx, 8)
    d = 96
    law = SO2BlockLaw(d, "uniform", scale=np.pi)  # one step mixes every block
    N = 200_000 if ctx.full else 20_000
    eps = np.array([0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4])
    cases = {
        "gaussian": (rng.standard_normal(d), rng.standard_normal(d)),
        "balanced": (np.full(d, 1 / np.sqrt(d)), np.full(d, 1 / np.sqrt(d))),
    }
    z_tail, z_mgf, z_var, mgf_excess, rows, curves = [], [], [], [], [], {}
    for name, (q, k) in cases.items():
        qn, kn = block_norms(q), block_norms(k)
        s = rotate_blocks(k, law.sample_angles(N, seed=rng)) @ q
        t = eps * np.linalg.norm(q) * np.linalg.norm(k)
        hits = (np.abs(s)[:, None] >= t).sum(0)
        bound, hoef = _sharp_tail(t, qn, kn), th.hoeffding_tail(t, qn, kn)
        z_tail += list(binomial_z_above(hits, N, bound))
        c = qn * kn
        z, excess = _mgf_vs_bessel(s, c)
        z_mgf, mgf_excess = z_mgf + z, mgf_excess + excess
        z_var.append(_z_mean(s * s, float(np.sum(c * c)) / 2))
        rows += [
            [name, float(e), h / N, float(b), float(hf)]
            for e, h, b, hf in zip(eps, hits, bound, hoef, strict=True)
        ]
        curves[name] = (hits / N, bound, hoef)
    qb = block_norms(cases["balanced"][0])
    balanced_vs_levy = float(np.max(np.abs(_sharp_tail(eps, qb, qb) / th.levy_tail(d, eps) - 1)))
    grid = np.linspace(0.0, 50.0, 50_001)
    i0_gap = float(np.max(np.log(i0e(grid)) + grid - grid * grid / 4))
    return Evidence(
        _judge_at8(z_tail, z_mgf, z_var, mgf_excess, i0_gap, balanced_vs_levy, N),
        figures=[_figure_at8(d, N, eps, curves)],
        tables=[
            Table(
                "tails",
                "Monte Carlo tail, the I₀ bound and Hoeffding's bound",
                ["case", "t/(‖q‖‖k‖)", "MC tail", "2exp(−t²/Σc²)", "Hoeffding 2exp(−t²/(2Σc²))"],
                rows,
                note="Hoeffding's bound is the weaker, implied one; for balanced "
                "blocks its exponent dε²/4 is half the true (Haar) exponent dε²/2",
            )
        ],
        setup=f"d = {d}, half-split SO(2) blocks, phases Unif[−π, π] (SO2BlockLaw, scale π); "
        f"{N:,} scores per case; q, k standard Gaussian or balanced (all entries 1/√d); "
        "λ with λ²Σc_b²/4 ∈ {0.25, 1}.",
    )


# ------------------------------------------------------------------------------------------
# mutants


def _hoeffding_sum_not_squares(original):
    @functools.wraps(original)
    def hoeffding_tail(t, q_norms, k_norms):
        t = np.asarray(t, dtype=float)
        proxy = float(np.sum(np.asarray(q_norms) * np.asarray(k_norms)))
        return 2.0 * np.exp(-(t * t) / (2.0 * proxy))

    return hoeffding_tail


def _angle_scale_halved(original):
    @functools.wraps(original)
    def sample_angles(self, size, seed=None):
        return 0.5 * original(self, size, seed)

    return sample_angles


_TAILS = "posflow.theory._transport_tails"
# fmt: off
add_mutant("AT8", "hoeffding-sum-not-squares", f"{_TAILS}:hoeffding_tail",
           _hoeffding_sum_not_squares,
           "the tail's variance proxy is Σ c_b instead of Σ c_b²")
# AT9 (posflow.proofs_checks.claims.at09_score_gap) draws its far scores from the same law
add_mutant(("AT8", "AT9"), "angle-scale-halved",
           "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles", _angle_scale_halved,
           "the step angles are drawn at half their scale (Unif[−π/2, π/2]: blocks not mixed)")
# fmt: on
