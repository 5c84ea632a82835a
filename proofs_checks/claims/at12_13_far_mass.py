"""Claims AT12 and AT13 of [B] on the stylized single-layer model: the near mass of
rotation-only attention falls as K e^Δ/(K e^Δ + M E e^s) (AT12), and ALiBi's far mass is bounded
independently of L (AT13).

Both read the shared sweep and the logit-level references of
:mod:`posflow.proofs_checks.claims.at19_stylized`, which imports this module (so AT12 and AT13
register with AT19).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from posflow.proofs_checks.claims.at19_stylized import (
    _DRAW,
    _N_REF,
    _STYLIZED,
    LAM,
    NEAR,
    SLOPE,
    D,
    W,
    _alibi_reference,
    _keys_leak,
    _lengths,
    _mean_se,
    _sweep,
    _with_default,
    far_sum_mgf,
    near_mass_reference,
)
from posflow.proofs_checks.kit import (
    SCHEME_COLORS,
    SCHEME_LABELS,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    claim_rng,
    close,
    fp_tol,
    holds,
    info,
    register,
    stat_tol,
    z_limit,
)
from posflow.theory import transport as th

__all__: list[str] = []

# ---------------------------------------------------------------------------------------------
# AT12
# ---------------------------------------------------------------------------------------------

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
    Ls = _lengths(ctx)
    comps = 2 * len(_ROTATION) * len(Ls) + len(_ROTATION)
    zlim = z_limit(comps)
    der = th.far_mass_derivation()
    ms = [
        holds("sympy_limit_is_one", der.limit_is_one, label="sympy: M/(M + K e^{2λ}) → 1 as M → ∞")
    ]
    rows, series, worst_cap = [], [], -np.inf
    for s in _ROTATION:
        sweep = _sweep(ctx, s)
        xs, ys, es, ps = [], [], [], []
        for L, r in sweep.items():
            ref = near_mass_reference(s, L, int(ctx.seed))
            cap = float(th.near_signal_upper_bound(L - W, W, LAM))
            worst_cap = max(worst_cap, float(np.max(1 - r.far_mass)) - cap)
            for q, sim in (("near_mass", 1 - r.far_mass), ("planted", r.near_weight)):
                m, se = _mean_se(sim)
                ref_m, ref_se = ref[q], ref[q + "_se"]
                sd = math.hypot(se, ref_se)
                tol = zlim * sd + ref["bias"] * ref_m
                what = "1 − ρ_D" if q == "near_mass" else "a_{j*}"
                ms.append(
                    close(
                        f"{s}_L{L}_{q}",
                        m,
                        ref_m,
                        stat_tol(
                            tol,
                            f"{r.far_mass.size} trials (SE {se:.2g}) and {ref['n']} reference "
                            f"draws (SE {ref_se:.2g}): z = {zlim:.2f} (Bonferroni over {comps} "
                            f"comparisons, family-wise 6e-5) × {sd:.2g} + the delta-method error "
                            f"CV²/M = {ref['bias']:.2g} of the prediction",
                        ),
                        label=f"{SCHEME_LABELS[s]} L = {L}: mean {what} vs K e^Δ/(K e^Δ + M E e^s)",
                    )
                )
                rows.append([SCHEME_LABELS[s], L, q, m, se, ref_m, ref_se, m / ref_m - 1])
                if q == "near_mass":
                    xs.append(L), ys.append(m), es.append(2 * se), ps.append(ref_m)
        first, last = sweep[min(sweep)], sweep[max(sweep)]
        (m0, s0), (m1, s1) = _mean_se(1 - first.far_mass), _mean_se(1 - last.far_mass)
        ms.append(
            at_least(
                f"{s}_near_mass_fall_z",
                (m0 - m1) / math.hypot(s0, s1),
                zlim,
                label=f"{SCHEME_LABELS[s]}: z-score of the fall of 1 − ρ_D from L = {min(sweep)} "
                f"to {max(sweep)} (needs ≥ z_n = {zlim:.2f}, Bonferroni, family-wise 6e-5)",
            )
        )
        series += [
            Series(SCHEME_LABELS[s], xs, ys, kind="errorbar", yerr=es, color=SCHEME_COLORS[s]),
            Series(
                f"{SCHEME_LABELS[s]}: K e^Δ/(K e^Δ + M E e^s)",
                xs,
                ps,
                color=SCHEME_COLORS[s],
                style="--",
            ),
        ]
    ms.append(
        at_most(
            "max_near_mass_over_worst_case_bound",
            worst_cap,
            0.0,
            fp_tol(1e-12, "a softmax of L ≤ 65536 terms: L·ε ≈ 1.5e-11 relative on sums ≤ 1"),
            label="max over trials of 1 − ρ_D − K e^{2λ}/(M + K e^{2λ}) (AT10, K = W)",
        )
    )
    Lg = np.geomspace(min(Ls), 1e7, 40)
    ms += [
        info("E_e^s", far_sum_mgf(LAM), label="E e^{s} of a far logit (closed form)"),
        info(
            "worst_case_degradation_length",
            float(W * np.exp(2 * LAM)),
            label="worst-case length K e^{2λ} (AT10 bound = 1/2 there)",
        ),
    ]
    fig = Figure(
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
    table = Table(
        "near_signal",
        "simulated means against the prediction",
        ["scheme", "L", "quantity", "mean", "SE", "predicted", "SE (ref)", "relative deviation"],
        rows,
    )
    n = ", ".join(f"{L}: {k}" for L, k in Ls.items())
    return Evidence(
        ms,
        figures=[fig],
        tables=[table],
        setup=f"stylized_attention defaults (d = {D}, λ = {LAM:g}, W = {W}, planted key at "
        f"distance {NEAR}, isotropic far keys); trials per L: {n}; {_N_REF} logit-level reference "
        "draws per (scheme, L); one seed per L shared by the schemes.",
    )


# ---------------------------------------------------------------------------------------------
# AT13
# ---------------------------------------------------------------------------------------------


def _alibi_sup_closed(m: float, w: int, lam: float, L: float) -> float:
    """a s/(a s + E), a = e^{2λ}, E = e^{mW} − 1, s = 1 − e^{−m(L−W)} (s = 1 at L = ∞)."""
    a, e = math.exp(2 * lam), math.expm1(m * w)
    s = 1.0 if math.isinf(L) else -math.expm1(-m * (L - w))
    return a * s / (a * s + e)


def _alibi_direct(s: np.ndarray, m: float, w: int) -> float:
    z = s - m * np.arange(s.size)
    e = np.exp(z - z.max())
    return float(e[w:].sum() / e.sum())


@register(
    "AT13",
    "[B]",
    "ALiBi keeps far mass bounded independently of context length",
    assumptions=("ALiBi slope m > 0", "content logits in [-λ, λ]"),
)
def at13(ctx: Context) -> Evidence:
    """Claim AT13: ALiBi keeps far mass bounded independently of L.

    Exact side (m = 0.25, W = 16, λ = 1): sympy's derivation; ``alibi_far_mass_bound`` against the
    closed form a s/(a s + E) at L = 512, 4096, 65536 and ∞; the corner that attains it; random
    content rows of random length under the bound and equal to a direct softmax; one content row
    seen at three lengths moves by at most its geometric tail. Simulated side: the stylized ALiBi
    far mass at every sweep length against an L-free logit-level reference (statistical) and
    under the supremum for its own m, W, λ.
    """
    rng = claim_rng(ctx, 13)
    der = th.alibi_far_mass_derivation()
    m, w, lam = 0.25, 16, 1.0
    Ls = [512, 4096, 65536]
    fp_sup = fp_tol(1e-14, "a few expm1/expit roundings of O(1) terms: ≤ 10·ε·e^{2λ} = 1.6e-14")
    ms = [
        holds(
            "sympy_bounded_in_L",
            der.bounded_in_l,
            label="sympy: sup ρ_far increases in L to an L-free limit",
        )
    ]
    sup = np.asarray(th.alibi_far_mass_bound(m, w, lam, Ls))
    for L, v in zip(Ls, sup, strict=True):
        ms.append(
            close(
                f"sup_L{L}_vs_closed_form",
                float(v),
                _alibi_sup_closed(m, w, lam, L),
                fp_sup,
                label=f"alibi_far_mass_bound at L = {L} vs a s/(a s + E)",
            )
        )
    sup_inf = th.alibi_far_mass_bound(m, w, lam)
    ms.append(
        close(
            "sup_L_infinity_vs_closed_form",
            float(sup_inf),
            _alibi_sup_closed(m, w, lam, math.inf),
            fp_sup,
            label="alibi_far_mass_bound at L = ∞ vs e^{2λ}/(e^{2λ} + e^{mW} − 1)",
        )
    )
    fp_row = fp_tol(2e-11, "a log-space softmax of L ≤ 65536 terms: L·ε·(a few) ≈ 2e-11")
    corner = [th.alibi_far_mass(np.where(np.arange(L) >= w, lam, -lam), m, w) for L in Ls]
    ms.append(
        at_most(
            "corner_attains_sup_error",
            float(np.max(np.abs(np.array(corner) - sup))),
            0.0,
            fp_row,
            label="max |ρ_far(corner: far +λ, near −λ) − sup|",
        )
    )
    worst_excess = worst_direct = 0.0
    for _ in range(60 if ctx.full else 25):
        L = int(rng.integers(w + 1, 4096))
        s = rng.uniform(-lam, lam, L) if rng.random() < 0.5 else rng.choice([-lam, lam], L)
        got = float(th.alibi_far_mass(s, m, w))
        worst_excess = max(worst_excess, got - float(th.alibi_far_mass_bound(m, w, lam, L)))
        worst_direct = max(worst_direct, abs(got - _alibi_direct(s, m, w)))
    ms += [
        at_most(
            "random_rows_excess_over_sup",
            worst_excess,
            0.0,
            fp_row,
            label="max over random content rows of ρ_far − sup_L",
        ),
        at_most(
            "random_rows_vs_direct_softmax",
            worst_direct,
            0.0,
            fp_row,
            label="max |alibi_far_mass − a direct softmax| over random rows",
        ),
    ]
    s = rng.uniform(-lam, lam, Ls[-1])  # one content row; the shorter contexts see its prefix
    prefix = np.array([th.alibi_far_mass(s[:L], m, w) for L in Ls])
    tail = math.exp(2 * lam - m * Ls[0]) / -math.expm1(-m * w)
    ms.append(
        at_most(
            "shared_prefix_spread",
            float(np.ptp(prefix)),
            tail,
            fp_row,
            label=f"spread of ρ_far of one row over L = {Ls[0]}…{Ls[-1]} vs its tail "
            "e^{2λ}e^{−mL}/(1 − e^{−mW})",
        )
    )
    # the simulator: stylized ALiBi (m = 2^-4, W = 64, λ = 8) against an L-free reference
    ref, ref_se, n_cut = _alibi_reference(int(ctx.seed))
    sweep = _sweep(ctx, "alibi")
    zlim = z_limit(len(sweep))
    sty_sup = np.asarray(th.alibi_far_mass_bound(SLOPE, W, LAM, list(sweep)))
    xs, ys, es, rows = [], [], [], []
    for (L, r), cap in zip(sweep.items(), sty_sup, strict=True):
        mu, se = _mean_se(r.far_mass)
        sd = math.hypot(se, ref_se)
        ms.append(
            close(
                f"stylized_alibi_L{L}_far_mass",
                mu,
                ref,
                stat_tol(
                    zlim * sd,
                    f"{r.far_mass.size} trials (SE {se:.2g}) and {_N_REF} reference draws (SE "
                    f"{ref_se:.2g}): z = {zlim:.2f} (Bonferroni over {len(sweep)}, family-wise "
                    "6e-5)",
                ),
                label=f"stylized ALiBi L = {L}: mean far mass vs the L-free reference",
            )
        )
        ms.append(
            at_most(
                f"stylized_alibi_L{L}_over_sup",
                float(r.far_mass.max() - cap),
                0.0,
                fp_row,
                label=f"stylized ALiBi L = {L}: max far mass − sup",
            )
        )
        xs.append(L), ys.append(mu), es.append(2 * se)
        rows.append([L, r.far_mass.size, mu, se, ref, ref_se, float(cap)])
    ms += [
        info(
            "sup_far_mass_L_infinity", float(sup_inf), label="sup ρ_far (m = 0.25, W = 16, λ = 1)"
        ),
        info(
            "ratio_bound",
            th.alibi_far_mass_ratio_bound(m, w, lam),
            label="the digest's looser bound e^{2λ}/(e^{mW} − 1)",
        ),
        info("reference_cut_distance", n_cut, label="reference truncation distance n_cut"),
    ]
    grid = np.unique(np.geomspace(w + 1, Ls[-1], 60).astype(int))
    fig = Figure(
        "AT13_far_mass",
        "AT13: ALiBi far mass does not grow with L",
        [
            Panel(
                f"stylized ALiBi (d = {D}, λ = {LAM:g}, W = {W}, m = 2⁻⁴), ± 2 SE",
                "context length L",
                "far mass ρ_D",
                [
                    Series(
                        "simulated", xs, ys, kind="errorbar", yerr=es, color=SCHEME_COLORS["alibi"]
                    ),
                    Series("L-free reference", xs, [ref] * len(xs), color="#000000", style="--"),
                ],
                logx=True,
            ),
            Panel(
                f"sup over content logits, m = {m}, W = {w}, λ = {lam}",
                "context length L",
                "far mass ρ_D",
                [
                    Series(
                        "closed-form sup",
                        grid,
                        th.alibi_far_mass_bound(m, w, lam, grid),
                        color="#CC79A7",
                    ),
                    Series(
                        "one random content row",
                        Ls,
                        prefix,
                        kind="markers",
                        color=SCHEME_COLORS["alibi"],
                    ),
                ],
                logx=True,
                ylim=(0, 1.2 * sup_inf),
            ),
        ],
    )
    table = Table(
        "stylized_alibi",
        "stylized ALiBi far mass by L",
        ["L", "trials", "mean", "SE", "reference", "SE (ref)", "sup"],
        rows,
    )
    return Evidence(
        ms,
        figures=[fig],
        tables=[table],
        setup=f"exact side m = {m}, W = {w}, λ = {lam}; {len(Ls)} lengths, 25 (full 60) random "
        "content rows; stylized ALiBi at its defaults, trials per L "
        + ", ".join(f"{L}: {k}" for L, k in _lengths(ctx).items())
        + f"; {_N_REF} logit-level reference draws.",
    )


# -- mutants --------------------------------------------------------------------------------------


def _half_frequency_exponent(original):
    @functools.wraps(original)
    def freqs(d, base=10_000.0):
        return float(base) ** (-np.arange(d // 2) / d)

    return freqs


add_mutant(
    "AT12",
    "far-keys-leak-toward-query",
    _DRAW,
    _keys_leak(0.1),
    "every key drawn with a 0.1 component along the query (key_coherence 0 → 0.1)",
)
add_mutant(
    "AT12",
    "rope-frequency-exponent",
    "posflow._conventions:rope_frequencies",
    _half_frequency_exponent,
    "RoPE frequencies base^(−b/d) instead of base^(−2b/d)",
)
add_mutant(
    "AT12",
    "logit-scale-10%",
    _STYLIZED,
    _with_default("logit_scale", 1.1, LAM),
    "scores scaled by 1.1·λ (a slip in the ‖q‖‖k‖ normalisation)",
)
add_mutant(
    "AT13",
    "alibi-bound-lambda-not-doubled",
    "posflow.theory._transport_mass:alibi_far_mass_bound",
    lambda orig: functools.wraps(orig)(lambda m, W, lam, L=None: orig(m, W, lam / 2, L)),
    "the supremum with e^{λ} instead of e^{2λ}",
)
add_mutant(
    "AT13",
    "alibi-window-off-by-one",
    "posflow.theory._transport_mass:alibi_far_mass",
    lambda orig: functools.wraps(orig)(lambda s, m, W: orig(s, m, W - 1)),
    "the far set starts at distance W − 1",
)
add_mutant(
    "AT13",
    "stylized-alibi-slope-halved",
    _STYLIZED,
    _with_default("alibi_slope", 0.5, SLOPE),
    "the simulator's ALiBi slope halved",
)
