"""Claim AT2 of [B]: the mean of i.i.d. route products, E[M_L⋯M_1] = (E M)^L, ‖·‖ ≤ γ^L.

The check compares the exact E M of :mod:`posflow.theory.transport` with simulate's closed form
and with Monte Carlo route products of three step laws (SO(2) blocks, Haar, Householder) and
returns the measured :class:`~posflow.proofs_checks.kit.Evidence`; a Monte Carlo estimate agrees
with its exact value within ``z_limit(n)`` standard errors (Bonferroni over the claim's n
comparisons, family-wise level 2Φ(−4) ≈ 6.3e-5). The relaxation ``spectral_gap`` drops the
spectral gap γ < 1: without it the mean transport never decays.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import strategies as st

from posflow.proofs_checks.claims.at02_product_mean_refs import (
    gamma_frobenius,
    jackknife_without_factor,
    routine_comparisons,
    z_judge,
    z_value,
)
from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Relaxation,
    Series,
    Table,
    add_mutant,
    add_relaxation,
    at_most,
    cite,
    claim_rng,
    fp_tol,
    holds,
    info,
    register,
    scaled_argument,
    scaled_result,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.orthogonal import HaarLaw, HouseholderLaw, SO2BlockLaw
from posflow.simulate.transport import route_product_moments
from posflow.theory import transport as th

__all__ = ["AT2_TOL", "deterministic_angle_examples", "spectral_gap_violation"]

_SCALE_COLORS = ("#0072B2", "#D55E00", "#009E73", "#CC79A7")

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


def _product_stats(mean, gamma, mc, se):
    """Worst entry z of Ê[M_L⋯M_1] against (E M)^L, max ‖(E M)^L‖ − γ^L, and ‖Ê P_L‖ per L."""
    z_max, norm_excess, mc_norms = 0.0, -np.inf, []
    for step in range(1, mc.shape[0] + 1):
        exact = np.linalg.matrix_power(mean, step)
        z_max = max(z_max, z_value(mc[step - 1], exact, se[step - 1]))
        norm_excess = max(norm_excess, float(np.linalg.norm(exact, 2) - gamma**step))
        mc_norms.append(float(np.linalg.norm(mc[step - 1], 2)))
    return z_max, norm_excess, mc_norms


def _law_measurements(key, name, stats, n_cmp, samples, L_max):
    mean_match, gamma, z_max, norm_excess = stats
    return [
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
        holds(f"{key}_spectral_gap", gamma < 1, label=f"{name}: γ = ‖E M‖_op = {gamma:.4g} < 1"),
        z_judge(
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


def _figure_at2(curves, L_max, N):
    steps = list(range(1, L_max + 1))
    series = [
        s
        for (name, mc, g), col in zip(curves, _SCALE_COLORS, strict=False)
        for s in (
            Series(f"{name}: ‖Ê P_L‖", steps, mc, "markers", color=col),
            Series(f"{name}: γ^L", steps, g, color=col),
        )
    ]
    title = "‖Ê P_L‖ against γ^L (Monte Carlo floor ≈ √(d/N))"
    panel = Panel(title, "L", "operator norm", series=series, logy=True)
    return Figure("AT2_product_mean", f"AT2: mean route products, N = {N:,}", [panel])


_CITES = (
    cite("posflow.theory.transport:characteristic_value", "the closed form sin a/a",
         "characteristic_value_vs_sinc"),
    cite("posflow.theory.transport:householder_mean_factor", "the closed form 1 − β/d",
         "householder_factor_vs_closed_form"),
    cite("posflow.simulate.orthogonal:mean_operator_norm",
         "closed forms max_b sin a_b/a_b, 0, 1 − β/d and numpy.linalg.norm(E M, 2); Monte Carlo "
         "path: sin(0.5)/0.5 within z_n SE and a plain loop over the same draws",
         "gamma_exact_vs_closed_form", "gamma_exact_vs_dense_norm", "gamma_monte_carlo_z",
         "gamma_monte_carlo_vs_explicit"),
    cite("posflow.simulate.transport:route_product_moments",
         "(E M)^L of the closed-form mean within z_n SE; a plain product loop over the same draws",
         "so2_max_z", "haar_max_z", "householder_max_z", "route_products_vs_explicit"),
)  # fmt: skip


@register(
    "AT2",
    "[B]",
    "product mean: for i.i.d. steps E[M_1⋯M_L] = (E M)^L, so ‖E P_{j→i}‖ ≤ γ^{i-j}, "
    "γ = ‖E M‖_op < 1 (spectral gap)",
    assumptions=("steps i.i.d.", "spectral gap γ = ‖E M‖_op < 1"),
    compares=_CITES,
)
def at2(ctx: Context) -> Evidence:
    """Claim AT2: E[M_L ⋯ M_1] = (E M)^L and ‖(E M)^L‖ ≤ γ^L < 1 for i.i.d. steps.

    Laws: SO(2) blocks (a = 0.5, 1, 2), Haar O(4), Householder (d = 4, β = 1); exact E M from
    :mod:`posflow.theory.transport` (characteristic values, Householder factor; 0 for Haar)
    against simulate's closed-form ``law.mean()`` and ``characteristic_value`` against sin a/a;
    numeric: N route products per L ≤ 6 (full 8) by ``route_product_moments``, every entry of
    Ê[M_L⋯M_1] within ``z_limit`` SE of (E M)^L; γ < 1 and the norm inequality.
    ``mean_operator_norm`` against the closed forms, numpy.linalg.norm(E M, 2) and (Monte Carlo
    path) sin(0.5)/0.5 within z_n SE; the Monte Carlo routines against plain loops over the same
    draws. Negative controls: each judge rejects a known-wrong input.
    """
    rng = claim_rng(ctx, 2)
    N = 200_000 if ctx.full else 20_000
    L_max = 8 if ctx.full else 6
    laws = _exact_means()
    n_cmp = sum(m.size for _, _, m in laws.values()) * L_max + 1  # and γ̂
    samples = f"N = {N:,} route products per (law, L)"
    ms, rows, curves = [], [], []
    for key, (name, law, mean) in laws.items():
        mean_match = float(np.abs(law.mean() - mean).max())
        gamma = float(np.linalg.norm(mean, 2))
        mc, se = route_product_moments(law, N, L_max, rng)
        z_max, norm_excess, mc_norms = _product_stats(mean, gamma, mc, se)
        rows.append([name, gamma, z_max, norm_excess, mean_match])
        curves.append((name, mc_norms, [gamma**s for s in range(1, L_max + 1)]))
        stats = (mean_match, gamma, z_max, norm_excess)
        ms += _law_measurements(key, name, stats, n_cmp, samples, L_max)
    ms += routine_comparisons(laws, N, rng, n_cmp, samples)
    ms.append(info("samples_N", N))
    table = Table(
        "laws",
        "per law: γ, worst entry z, max ‖(E M)^L‖ − γ^L, theory vs simulate mean",
        ["law", "gamma", "max z", "norm excess", "mean mismatch"],
        rows,
    )
    return Evidence(
        ms,
        tables=[table],
        figures=[_figure_at2(curves, L_max, N)],
        setup=f"{N:,} i.i.d. route products M_L⋯M_1 per law for L = 1…{L_max}; laws: "
        + ", ".join(n for n, _, _ in laws.values())
        + ".",
    )


# ------------------------------------------------------------------------------------------
# AT2 relaxation: one assumption dropped, with a Hypothesis search
#
# The examples are plain data (dicts of ints, floats, strings and lists) that satisfy every
# assumption of AT2 except the spectral gap; the violation is > 0 exactly when an example breaks
# the claim beyond a stated rounding tolerance. Decided with exact characteristic functions.

AT2_TOL = 1e-12  # ‖E P_W‖ above ε by at most this is rounding

_floats, _get, _int, _real = ex.floats, ex.get, ex.integer, ex.real


def _law(example) -> str:
    law = _get(example, "law")
    if law not in th.ANGLE_LAWS:
        raise ValueError(f"example['law'] must be one of {th.ANGLE_LAWS}; got {law!r}")
    return law


def deterministic_angle_examples():
    """Examples for AT2 with the spectral gap dropped: ``{"law", "params", "L", "eps"}`` (AT2).

    ``law`` is "deterministic" (θ_b ≡ f_b, RoPE-like, |E e^{iθ}| = 1), "uniform" (Unif[-a_b, a_b])
    or "normal" (N(0, σ_b²)) with 1–4 block parameters (f_b in [-π, π]; a_b, σ_b in [0, π], so
    a_b = 0 is a degenerate law without a gap too); a route length L in [1, 65536]; a level ε in
    [1e-6, 0.5]. γ is not drawn: it is the law's own ‖E M‖_op = max_b |φ_b|
    (:func:`spectral_gap_violation`).
    """

    @st.composite
    def draw(draw):
        law = draw(st.sampled_from(("deterministic", "uniform", "normal")))
        lo = -math.pi if law == "deterministic" else 0.0
        params = draw(st.lists(_floats(lo, math.pi), min_size=1, max_size=4))
        return {
            "law": law,
            "params": params,
            "L": draw(st.integers(1, 65536)),
            "eps": draw(_floats(1e-6, 0.5)),
        }

    return draw()


def _gap_quantities(example) -> tuple[float, float, int, float]:
    """(γ, ε, L_eval, ‖E P_{L_eval}‖) of an AT2 example; L_eval = W(ε) when γ < 1, else L."""
    law = _law(example)
    params = _get(example, "params")
    if not isinstance(params, list) or not params:
        raise ValueError(f"example['params'] must be a nonempty list; got {params!r}")
    L = _int(example, "L", 1)
    eps = _real(example, "eps", 0.0, 1.0)
    if not 0.0 < eps < 1.0:
        raise ValueError(f"example['eps'] must lie in (0, 1); got {eps!r}")
    log_mod = np.asarray(th.log_characteristic_modulus(law, params), dtype=float)
    top = float(log_mod.max())
    gamma = math.exp(top)  # γ = ‖E M‖_op = max_b |φ_b|, the law's own
    if gamma < 1.0:
        steps = int(th.mixing_window(gamma, eps))
    elif top < 0.0:  # γ within rounding of 1 but a gap: the window from ln γ itself
        steps = max(1, math.ceil(math.log(1.0 / eps) / -top))
    else:
        steps = L
    # ‖E P_n‖_op = max_b |φ_b|^n = exp(n · max_b ln|φ_b|) for SO(2) blocks, exactly
    return gamma, eps, steps, math.exp(steps * top)


def spectral_gap_violation(example) -> float:
    """Amount by which the mean route product is still above ε after the mixing window (AT2).

    γ is the law's own ‖E M‖_op = max_b |φ_b| (φ_b the characteristic value of block b), never an
    independent number. With the gap (γ < 1) the claim gives ‖E P_L‖ ≤ γ^L, so the mean
    transport is below ε after W(ε) = ⌈ln(1/ε)/ln(1/γ)⌉ steps (the window of claim AT5); for
    SO(2) blocks E P_L = blockdiag_b E R(Σθ) and ‖E P_L‖ = max_b |φ_b|^L exactly, so

    .. math:: v = \\|\\mathbb E P_{L^*}\\|_{op} - \\varepsilon - 10^{-12},\\qquad
              L^* = W(\\varepsilon) \\text{ if } \\gamma < 1, \\text{ else } L,

    from the exact :func:`posflow.theory.transport.log_characteristic_modulus` (no cancellation
    when γ ≈ 1) and :func:`posflow.theory.transport.mixing_window`. Every law with a gap gives
    v ≤ 0; without it (γ = 1: deterministic angles, or a = σ = 0) there is no finite window and
    ‖E P_L‖ = 1 > ε at every L. Cost O(B).
    """
    _, eps, _, norm = _gap_quantities(example)
    return norm - eps - AT2_TOL


def _describe_gap(example) -> str:
    gamma, eps, steps, norm = _gap_quantities(example)
    if norm <= eps + AT2_TOL:
        return (
            f"{example['law']} angles {example['params']}: γ = {gamma:.15g} < 1 (a gap), "
            f"‖E P_W‖ = {norm:.6g} ≤ ε = {eps:g} after the window W = {steps}"
        )
    return (
        f"{example['law']} angles {example['params']}: the law's own γ = ‖E M‖_op = "
        f"{gamma:.15g}, so there is no finite mixing window; ‖E P_L‖ = {norm:.15g} at L = "
        f"{steps}, not below ε = {eps:g}: without a spectral gap the mean transport never decays"
    )


add_relaxation(
    "AT2",
    Relaxation(
        "spectral_gap",
        "the spectral gap γ = ‖E M‖_op < 1, γ the law's own (e.g. RoPE-like angles)",
        deterministic_angle_examples,
        spectral_gap_violation,
        _describe_gap,
    ),
)


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks of the routines AT2 checks


def _householder_factor_d_minus_1(original):
    @functools.wraps(original)
    def factor(beta, d):
        return original(beta, max(int(d) - 1, 1))

    return factor


_ANGLES = "posflow.simulate.orthogonal:SO2BlockLaw.sample_angles"
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
    "AT2",
    "householder-factor-1/(d-1)",
    "posflow.theory.transport:householder_mean_factor",
    _householder_factor_d_minus_1,
    "theory's Householder mean uses E w wᵀ = I/(d − 1)",
)


def _best_entry(original):
    @functools.wraps(original)
    def z_value(mc, exact, se):
        live = se > 0
        return float(np.min(np.abs(mc - exact)[live] / se[live]))  # the best entry, not the worst

    return z_value


def _fp_self(original):
    @functools.wraps(original)
    def fp_judge(key, value, ref, tol, label):
        return original(key, value, value, tol, label)  # the value compared with itself

    return fp_judge


_MOD = "posflow.proofs_checks.claims.at02_product_mean_refs"
_MON = "posflow.simulate.orthogonal:mean_operator_norm"
# fmt: off
add_mutant("AT2", "z-judge-best-entry", f"{_MOD}:z_value", _best_entry,
           "the z judge takes the best entry instead of the worst")
add_mutant("AT2", "fp-judge-self", f"{_MOD}:fp_judge", _fp_self,
           "the rounding judge compares each value with itself")
add_mutant("AT2", "gamma-frobenius", _MON, gamma_frobenius,
           "mean_operator_norm returns the Frobenius norm of the closed-form mean")
add_mutant("AT2", "jackknife-without-(B-1)/B", _MON, jackknife_without_factor,
           "mean_operator_norm's jackknife SE without the factor (B − 1)/B")
# fmt: on
