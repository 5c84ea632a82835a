"""Claim AT12 of [B] on the stylized single-layer model: the near mass of rotation-only
attention falls as K e^Δ/(K e^Δ + M E e^s).

The check reads the planted sweep :func:`posflow.simulate.transport.planted_sweep` (shared with
AT13 and AT19) and judges it against the logit-level reference
:func:`posflow.simulate.transport.near_mass_reference`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.kit import (
    SCHEME_COLORS,
    SCHEME_LABELS,
    STYLIZED,
    STYLIZED_INPUTS,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    close,
    fp_tol,
    holds,
    info,
    mean_se,
    register,
    scaled_keyword,
    stat_tol,
    z_limit,
)
from posflow.simulate.transport import (
    PLANTED,
    far_sum_mgf,
    near_mass_reference,
    planted_lengths,
    planted_sweep,
)
from posflow.theory import transport as th

__all__: list[str] = []

D, LAM, W, NEAR = PLANTED.d, PLANTED.logit_scale, PLANTED.window, PLANTED.near_distance
_N_REF = PLANTED.reference_draws
_ROTATION = ("rope", "random_qk", "learned")


@register(
    "AT12",
    "[B]",
    "rotation-only attention degrades: the near-signal coefficient 1 − ρ_D ≈ K e^Δ/(K e^Δ + "
    "M E e^{s}) → 0 as the context grows, for every rotation law",
    assumptions=("logits bounded by λ = ‖q‖‖k‖ scale", "no far-mass control (no bias)"),
)
def at12(ctx: Context) -> Evidence:
    """Claim AT12: the near mass and the planted weight match K e^Δ/(K e^Δ + M E e^s), → 0.

    For RoPE, random Q/K and learned Q/K rotations at every sweep length: the simulated mean near
    mass 1 − ρ_D and planted weight a_{j*} against :func:`near_mass_reference` (statistical:
    z_n · √(SE_sim² + SE_ref²) plus the delta-method error CV²/M); every trial under the
    worst-case bound K e^{2λ}/(M + K e^{2λ}) of AT10; the fall from the first to the last length
    (a z-score); the sympy limit of the bound.
    """
    Ls = planted_lengths(ctx.full)
    comps = 2 * len(_ROTATION) * len(Ls) + len(_ROTATION)
    zlim = z_limit(comps)
    der = th.far_mass_derivation()
    ms = [
        holds("sympy_limit_is_one", der.limit_is_one, label="sympy: M/(M + K e^{2λ}) → 1 as M → ∞")
    ]
    rows, series, worst_cap = [], [], -np.inf
    for s in _ROTATION:
        s_ms, s_rows, s_series, s_worst = _at12_scheme(ctx, s, zlim, comps)
        ms, rows, series = ms + s_ms, rows + s_rows, series + s_series
        worst_cap = max(worst_cap, s_worst)
    ms.append(
        at_most(
            "max_near_mass_over_worst_case_bound",
            worst_cap,
            0.0,
            fp_tol(1e-12, "a softmax of L ≤ 65536 terms: L·ε ≈ 1.5e-11 relative on sums ≤ 1"),
            label="max over trials of 1 − ρ_D − K e^{2λ}/(M + K e^{2λ}) (AT10, K = W)",
        )
    )
    ms += [
        info("E_e^s", far_sum_mgf(LAM), label="E e^{s} of a far logit (closed form)"),
        info(
            "worst_case_degradation_length",
            float(W * np.exp(2 * LAM)),
            label="worst-case length K e^{2λ} (AT10 bound = 1/2 there)",
        ),
    ]
    table = Table(
        "near_signal",
        "simulated means against the prediction",
        ["scheme", "L", "quantity", "mean", "SE", "predicted", "SE (ref)", "relative deviation"],
        rows,
    )
    n = ", ".join(f"{L}: {k}" for L, k in Ls.items())
    return Evidence(
        ms,
        figures=[_figure_at12(series, Ls)],
        tables=[table],
        setup=f"stylized_attention defaults (d = {D}, λ = {LAM:g}, W = {W}, planted key at "
        f"distance {NEAR}, isotropic far keys); trials per L: {n}; {_N_REF} logit-level reference "
        "draws per (scheme, L); one seed per L shared by the schemes.",
    )


def _at12_scheme(ctx: Context, s: str, zlim: float, comps: int):
    """One rotation scheme of AT12 over the sweep: (measurements, table rows, figure series,
    max over trials of 1 − ρ_D minus the worst-case bound)."""
    sweep = planted_sweep(s, int(ctx.seed), ctx.full)
    ms, rows, worst = [], [], -np.inf
    for L, r in sweep.items():
        ref = near_mass_reference(s, L, int(ctx.seed))
        cap = float(th.near_signal_upper_bound(L - W, W, LAM))
        worst = max(worst, float(np.max(1 - r.far_mass)) - cap)
        for q, sim in (("near_mass", 1 - r.far_mass), ("planted", r.near_weight)):
            ms.append(_at12_compare(s, L, q, sim, ref, zlim, comps))
            m, se = mean_se(sim)
            rows.append([SCHEME_LABELS[s], L, q, m, se, ref[q], ref[q + "_se"], m / ref[q] - 1])
    first, last = sweep[min(sweep)], sweep[max(sweep)]
    (m0, s0), (m1, s1) = mean_se(1 - first.far_mass), mean_se(1 - last.far_mass)
    ms.append(
        at_least(
            f"{s}_near_mass_fall_z",
            (m0 - m1) / math.hypot(s0, s1),
            zlim,
            label=f"{SCHEME_LABELS[s]}: z-score of the fall of 1 − ρ_D from L = {min(sweep)} "
            f"to {max(sweep)} (needs ≥ z_n = {zlim:.2f}, Bonferroni, family-wise 6e-5)",
        )
    )
    return ms, rows, _series_at12(s, [row for row in rows if row[2] == "near_mass"]), worst


def _at12_compare(s: str, L: int, q: str, sim, ref: dict, zlim: float, comps: int):
    """The simulated mean of ``q`` (near_mass or planted) against the reference, statistical."""
    m, se = mean_se(sim)
    ref_m, ref_se = ref[q], ref[q + "_se"]
    sd = math.hypot(se, ref_se)
    what = "1 − ρ_D" if q == "near_mass" else "a_{j*}"
    return close(
        f"{s}_L{L}_{q}",
        m,
        ref_m,
        stat_tol(
            zlim * sd + ref["bias"] * ref_m,
            f"{sim.size} trials (SE {se:.2g}) and {ref['n']} reference "
            f"draws (SE {ref_se:.2g}): z = {zlim:.2f} (Bonferroni over {comps} "
            f"comparisons, family-wise 6e-5) × {sd:.2g} + the delta-method error "
            f"CV²/M = {ref['bias']:.2g} of the prediction",
        ),
        label=f"{SCHEME_LABELS[s]} L = {L}: mean {what} vs K e^Δ/(K e^Δ + M E e^s)",
    )


def _series_at12(s: str, near_rows: list) -> list[Series]:
    xs, ys = [r[1] for r in near_rows], [r[3] for r in near_rows]
    es, ps = [2 * r[4] for r in near_rows], [r[5] for r in near_rows]
    return [
        Series(SCHEME_LABELS[s], xs, ys, kind="errorbar", yerr=es, color=SCHEME_COLORS[s]),
        Series(
            f"{SCHEME_LABELS[s]}: K e^Δ/(K e^Δ + M E e^s)",
            xs,
            ps,
            color=SCHEME_COLORS[s],
            style="--",
        ),
    ]


def _figure_at12(series: list[Series], Ls) -> Figure:
    Lg = np.geomspace(min(Ls), 1e7, 40)
    return Figure(
        "AT12_near_signal",
        f"AT12: near mass of rotation-only attention (d = {D}, λ = {LAM:g}, W = {W}), ± 2 SE",
        [
            Panel(
                "simulated vs K e^Δ/(K e^Δ + M E e^s)",
                "context length L",
                "near mass 1 − ρ_D",
                [
                    *series,
                    Series(
                        "worst case (AT10)",
                        Lg,
                        th.near_signal_upper_bound(Lg - W, W, LAM),
                        color="#CC79A7",
                        style=":",
                    ),
                ],
                logx=True,
                logy=True,
            )
        ],
    )


# -- mutants --------------------------------------------------------------------------------------


def _keys_leak(kappa: float):
    def make(original):
        @functools.wraps(original)
        def draw(src, length, d, near_distance, k, *rest):
            return original(src, length, d, near_distance, max(k, kappa), *rest)

        return draw

    return make


def _half_frequency_exponent(original):
    @functools.wraps(original)
    def freqs(d, base=10_000.0):
        return float(base) ** (-np.arange(d // 2) / d)

    return freqs


add_mutant(
    "AT12",
    "far-keys-leak-toward-query",
    STYLIZED_INPUTS,
    _keys_leak(0.1),
    "every key drawn with a 0.1 component along the query (key_coherence 0 → 0.1)",
)
add_mutant(
    "AT12",
    "rope-frequency-exponent",
    "posflow.conventions:rope_frequencies",
    _half_frequency_exponent,
    "RoPE frequencies base^(−b/d) instead of base^(−2b/d)",
)
add_mutant(
    "AT12",
    "logit-scale-10%",
    STYLIZED,
    scaled_keyword("logit_scale", 1.1, LAM),
    "scores scaled by 1.1·λ (a slip in the ‖q‖‖k‖ normalisation)",
)
