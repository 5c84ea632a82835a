"""PB17's figure panels, tables and setup text, and the helpers of its cross-fitted profile
(claim PB17; split from pb17_retrieval for size).

The cross-fitted profile (issue 41):

- :func:`family` — a model's Bonferroni family: its own comparisons only (dip and ρ at each fill
  K), never the installed models, so installing another model moves no level;
- :func:`windows_of` — the per-prompt measurement as :class:`~posflow.simulate.models.crossfit.
  Windows` rows (one prompt per context);
- :func:`fit_measurements` — α with its interval, ρ at α = 1 and the measured influence's own ρ
  (the ceiling) beside the judged cross-fitted ρ;
- :func:`direct_crossfit` — the cross-fit of one split and two bootstrap replicates recomputed
  without :mod:`~posflow.simulate.models.retrieval_fit` or :mod:`~posflow.simulate.models.crossfit`:
  pooled by plain sums, the sink-aware kernel by a loop, the rollout by
  :func:`posflow.simulate.rollout.influence` (dense kernels), α by bisection on a 129-point grid,
  ranks counted; with negative controls (α fitted on the scored half; the bootstrap with the fit
  held fixed) that the judge must reject.
"""

from __future__ import annotations

import math

import numpy as np

from posflow.proofs_checks.kit import (
    Panel,
    Series,
    Table,
    at_most,
    family_level,
    fp_tol,
    info,
    rejects,
    undecided,
)

__all__ = ["direct_crossfit", "family", "family_measurement", "fit_measurements",
           "fit_on_scored_half", "k_panels", "scope_pb17", "setup_pb17", "tables_pb17",
           "windows_of"]  # fmt: skip


def k_panels(K, r, best, profiles):
    """The three panels of one K: measured log-prob, exact match, predicted profiles (the judged
    one at its cross-fitted α, the others at α = 1)."""
    from posflow.simulate.models.profiles import color

    lp, acc = r["logprob"], r["accuracy"]
    C = r["task"].num_contexts
    x = list(range(K))
    prof = r["profile"] / r["profile"].sum()
    return [
        Panel(f"measured, K = {K} ({C} prompts per position)", "key position k",
              "log p(value) [nats]",
              [Series(f"{r['confidence']:.1%} bootstrap band", x, lp.mean, kind="band",
                      lo=lp.lo, hi=lp.hi, color="measured"),
               Series("mean log-prob", x, lp.mean, kind="line", color="measured")]),
        Panel(f"exact match, K = {K}", "key position k", "accuracy",
              [Series(f"{r['confidence']:.1%} bootstrap band", x, acc.mean, kind="band",
                      lo=acc.lo, hi=acc.hi, color="measured"),
               Series("accuracy", x, acc.mean, kind="markers", color="measured")],
              ylim=(0, 1)),
        Panel(f"predicted ({best}, cross-fitted α = {r['fit'].estimate('alpha'):.2f}), K = {K}, "
              f"ρ = {r['rho']:.2f}", "key position k",
              r"$\sum_{j \in \mathrm{line}\ k}\, p(j)$, normalised",
              [Series(f"{profiles[best]}, fitted α", x, prof, color=color(best))]
              + [Series(profiles[k], x, v[0] / v[0].sum(), style="--", color=color(k))
                 for k, v in r["rhos"].items() if k != best]),
    ]  # fmt: skip


def tables_pb17(sens, rho_rows, curve_rows, fit_rows):
    from posflow.proofs_checks.claims.pb17_refs import CONFIDENCE

    return [
        Table("dip_depth_sensitivity", "dip verdict at other depth thresholds δ",
              ["model", "delta_nats", "K", "depth_nats", "depth_passes", "dip_passes"], sens,
              note="dip_passes: interior minimum, depth ≥ δ and the bootstrap separation ≥ 0"),
        Table("crossfit", "the judged profile's cross-fit: α, and ρ with the curve at the "
              "fitted α (judged), at α = 1 and of the measured influence itself (the ceiling)",
              ["model", "K", "statistic", "estimate", "lo", "hi"], fit_rows,
              note="estimate: mean over 10 random half-splits × 2 directions; interval: "
              "percentile bootstrap at the model's Bonferroni level, each half's contexts "
              "resampled and α refitted in every replicate"),
        Table("spearman_by_profile",
              f"Spearman ρ of the mean log-prob curve with each predicted per-line profile at "
              f"α = 1, pooled over all contexts ({CONFIDENCE:.0%} bootstrap over contexts, the "
              "profile held fixed; reported, not judged)",
              ["model", "K", "profile", "what", "rho", "lo", "hi", "judged"], rho_rows),
        Table("position_curves", "per-position curves",
              ["model", "K", "k", "logprob_mean", "logprob_lo", "logprob_hi", "accuracy",
               "accuracy_lo", "accuracy_hi", "predicted_line_mass"], curve_rows),
    ]  # fmt: skip


def setup_pb17(cfg, task0, best, best_label, why_best, name, bos=False):
    from posflow.proofs_checks.claims.pb17_refs import RESAMPLES

    m, _, conf = family(cfg["Ks"])
    bos = "<bos> first (its tokenizer's convention), then " if bos else ""
    return (
        f"{name} (float32, eager attention); K ∈ {cfg['Ks']}, {cfg['contexts']} random contexts "
        f"(seeded), each queried at every position, so {cfg['contexts']} prompts per position; "
        f"keys one-token words, values 3-digit numbers (3 tokens); a line is "
        f"{task0.line_length} tokens after a {task0.preamble_length}-token preamble ({bos}the "
        "preamble's text). Log-prob "
        "summed over the value's 3 tokens under teacher forcing; exact match = every value "
        "token the teacher-forced argmax (≡ greedy decoding). Intervals: percentile bootstrap "
        f"over contexts at {conf:.2%} (Bonferroni: {m} comparisons of this model, dip and ρ "
        f"at each K), {RESAMPLES} resamples for the curves. Prediction: λ_t, mean attention "
        "and gradient influence measured on one prompt of every context (queries spread over "
        f"the positions); profile {best} ({best_label}; chosen beforehand: {why_best}) from "
        "the query's last token with λ_t → clip(αλ_t), summed over each key line (newline "
        "included). α is fitted to the measured influence's mean position on one half of the "
        "contexts and ρ scored on the other half's curve, both directions averaged over "
        f"{cfg['splits']} random splits; {cfg['fit_resamples']} bootstrap replicates resample "
        "each half's contexts and refit α. Table crossfit gives α, ρ at α = 1 and the measured "
        "influence's own ρ (the ceiling) on the same footing; table spearman_by_profile the "
        "five profiles at α = 1, not judged."
    )


def scope_pb17(key, cfg, res, seed):
    """The scope of one model's sub-verdict (kit.Scope from subjects.scope_of; the text is the
    task's)."""
    from posflow.proofs_checks.claims.pb17_refs import MODELS
    from posflow.proofs_checks.kit import Scope
    from posflow.simulate.models.subjects import scope_of

    C = cfg["contexts"]
    fields = scope_of(MODELS[key][3], ", ".join(f"{r['task'].prompt_length} (K = {K})"
                                               for K, r in res.items()),
                      f"{C} contexts per K, each queried at all K positions; λ_t, attention "
                      "and gradient influence of one prompt per context",
                      seeds=f"{seed} (tasks seed + K)", K=cfg["Ks"], contexts=C,
                      splits=cfg["splits"], fit_resamples=cfg["fit_resamples"])  # fmt: skip
    fields["text"] = ("synthetic key–value retrieval prompts from the model's tokenizer "
                      "(one-token English words as keys, 3-digit values)")
    return Scope(**fields)


# -- the cross-fitted profile ----------------------------------------------------------------
FAMILY_ALPHA = 0.05  # family-wise error of one model's comparisons
STATEMENTS = ("dip", "ρ > 0")  # the comparisons judged at each fill K
DIRECT_REPLICATES = 2  # bootstrap replicates recomputed directly (besides the first split)
DIRECT_TOL = 1e-8
DIRECT_REASON = (
    "α: brentq to 1e-13 α_max against bisection to 2⁻⁵⁰ α_max of the same mean position, "
    "computed along two float64 paths (≲ 1e-13 relative); ρ: ranks of line masses that agree "
    "to ≲ 1e-12 (exact unless two lines tie within that): 1e-8"
)


def family(Ks) -> tuple[int, float, float]:
    """(m, level, confidence) of one model: m = |STATEMENTS| × |Ks| comparisons, the Bonferroni
    level α_F/m (α_F = :data:`FAMILY_ALPHA`) and the confidence 1 − α_F/m of each interval.
    Depends on this model's fills only (issue 41, item 3)."""
    Ks = tuple(Ks)
    if not Ks or any(isinstance(K, bool) or not isinstance(K, int) or K < 2 for K in Ks):
        raise ValueError(f"Ks must be a non-empty sequence of integers >= 2; got {Ks!r}")
    m = len(STATEMENTS) * len(Ks)
    level = family_level(FAMILY_ALPHA, m)
    return m, level, 1.0 - level


def family_measurement(name: str, Ks) -> object:
    m, level, conf = family(Ks)
    return info("family", f"{m} comparisons ({' and '.join(STATEMENTS)} at K ∈ {tuple(Ks)}): "
                f"level {level:.4g} each, intervals at {conf:.2%}",
                label=f"{name}'s Bonferroni family (its own comparisons only; family-wise "
                f"{FAMILY_ALPHA})")  # fmt: skip


def windows_of(m):
    """One :class:`Windows` row per measured prompt of ``m`` (a ``measure(...,
    per_sequence=True, value_norms=True)`` result)."""
    from posflow.simulate.models.crossfit import Windows

    slopes = np.zeros(m.num_heads) if m.slopes is None else np.asarray(m.slopes, float)
    return Windows(m.attention_per_sequence, m.lambda_per_sequence, m.influence_per_sequence,
                   m.value_weights_per_sequence, m.content_per_sequence("sqrt_d")[1], slopes,
                   windows=m.windows)  # fmt: skip


def fit_measurements(K: int, fit, conf: float) -> list:
    """α (with its interval) and the unjudged ρ at α = 1 and of the measured influence."""
    a, alo, ahi, _ = fit.interval("alpha", conf)
    u, ulo, uhi, ud = fit.interval("unit", conf)
    c, clo, chi, cd = fit.interval("ceiling", conf)
    pc = f"{conf:.2%}"
    return [
        info(f"alpha_K{K}", a, label=f"K = {K}: fitted α of λ_t → clip(αλ_t) (mean over "
             f"{fit.alpha.shape[0]} splits × 2 directions)"),
        info(f"alpha_lo_K{K}", alo, label=f"K = {K}: lower {pc} bootstrap bound of α (refit)"),
        info(f"alpha_hi_K{K}", ahi, label=f"K = {K}: upper {pc} bootstrap bound of α (refit)"),
        info(f"alpha_matched_K{K}", float(fit.matched.mean()),
             label=f"K = {K}: share of fits that reach the measured mean position"),
        info(f"rho_unit_K{K}", u, label=f"K = {K}: ρ at α = 1 (the rollout as defined), "
             "cross-fitted footing"),
        info(f"rho_unit_lo_K{K}", ulo, label=f"K = {K}: lower {pc} bound of ρ at α = 1"),
        info(f"rho_unit_hi_K{K}", uhi, label=f"K = {K}: upper {pc} bound of ρ at α = 1"),
        info(f"rho_ceiling_K{K}", c, label=f"K = {K}: ρ of the measured gradient influence "
             "itself (per line) with the curve: the ceiling of a rollout that reproduced it"),
        info(f"rho_ceiling_lo_K{K}", clo, label=f"K = {K}: lower {pc} bound of the ceiling ρ"),
        info(f"rho_ceiling_hi_K{K}", chi, label=f"K = {K}: upper {pc} bound of the ceiling ρ"),
        info(f"dropped_K{K}", ud + cd + int((~np.isfinite(fit.boot['fitted'])).sum()),
             label=f"K = {K}: bootstrap replicates with an undefined ρ (dropped)"),
    ]


# -- the independent recomputation ----------------------------------------------------------------
def _direct_side(w, rows, rollout):
    """Pooled kernels (L, n, n), λ (L,) and p̂ (n,) of the contexts ``rows`` by plain sums."""
    L, n = w.lambdas.shape[1], w.attention.shape[-1]
    A, lam, g = np.zeros((L, n, n)), np.zeros(L), np.zeros(n)
    V = np.zeros((L, n, n))
    for r in rows:
        A += w.attention[r]
        lam += w.lambdas[r]
        g += w.influence[r]
        if rollout == "d":
            V += np.tril(w.values[r])
    src = V if rollout == "d" else A
    ker = src / src.sum(axis=-1, keepdims=True)
    if rollout == "e":  # token 0's share returned to each row's own diagonal
        for i in range(1, n):
            ker[:, i, i] += ker[:, i, 0]
            ker[:, i, 0] = 0.0
    base = np.ones(L) if rollout == "a" else np.clip(lam / len(rows), 0.0, 1.0)
    from posflow.simulate.kernels import DenseKernel

    return [DenseKernel(k) for k in ker], base, g / g.sum()


def _direct_profile(kers, base, alpha):
    from posflow.simulate.rollout import influence

    return influence(kers, np.minimum(alpha * base, 1.0))


def _direct_alpha(ker, base, mu):
    """The smallest α with mean position μ: first sign change on a 129-point grid of
    [0, 1/min λ], then 50 bisections."""
    j = np.arange(ker[0].n)

    def gap(a):
        return float(_direct_profile(ker, base, a) @ j) - mu

    top = 1.0 / base[base > 0].min()
    grid = np.linspace(0.0, top, 129)
    f = np.array([gap(a) for a in grid])
    hit = np.flatnonzero(f <= 0)
    if not hit.size or hit[0] == 0:
        return float(grid[np.argmin(np.abs(f))])
    lo, hi = grid[hit[0] - 1], grid[hit[0]]
    for _ in range(50):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gap(mid) > 0 else (lo, mid)
    return 0.5 * (lo + hi)


def _direct_direction(w, x, task, rollout, fit_rows, scored_rows, alpha=None):
    """(α, ρ fitted, ρ at α = 1, ρ ceiling) of one direction, directly; ``alpha`` given: held."""
    from posflow.proofs_checks.claims.pb17_refs import spearman_direct

    ker, base, g = _direct_side(w, fit_rows, rollout)
    if alpha is None:
        alpha = _direct_alpha(ker, base, float(g @ np.arange(g.size)))
    ker_s, base_s, g_s = _direct_side(w, scored_rows, rollout)
    curve = sum(x[r] for r in scored_rows) / len(scored_rows)
    spans = task.line_spans()

    def lines(p):
        return [sum(p[a:b]) for a, b in spans]

    return (alpha, *(spearman_direct(curve, lines(p)) for p in (
        _direct_profile(ker_s, base_s, alpha), _direct_profile(ker_s, base_s, 1.0), g_s)))


def _direct_split(w, x, task, rollout, h1, h2, in_sample=False, alphas=None):
    """(2, 4): per direction (H₁ → H₂, H₂ → H₁) α, ρ fitted, ρ at α = 1 and the ceiling ρ."""
    out = []
    for d, (f, s) in enumerate(((h1, h2), (h2, h1))):
        out.append(_direct_direction(w, x, task, rollout, s if in_sample else f, s,
                                     None if alphas is None else alphas[d]))  # fmt: skip
    return np.array(out)


def _gap(a, b) -> float:
    """max |a − b|, with NaN against NaN equal and NaN against a number infinitely far."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    d = np.abs(a - b)
    d[np.isnan(a) & np.isnan(b)] = 0.0
    return float(np.where(np.isnan(d), np.inf, d).max())


def direct_crossfit(K: int, fit, w, x, task) -> list:
    """``crossfit_retrieval``'s first split (each direction) and first :data:`DIRECT_REPLICATES`
    bootstrap replicates (means of the two directions) recomputed directly, the largest
    deviation judged, with two negative controls."""
    key = f"crossfit_vs_direct_K{K}"
    if fit.rollout not in ("a", "b", "d", "e"):
        return [undecided(key, math.nan, f"no direct recomputation of rollout {fit.rollout!r}")]
    w = w.checked()
    stats = ("fitted", "unit", "ceiling")
    h1, h2 = fit.halves[0]
    split0 = np.stack([fit.alpha[0], *(fit.rho[s][0] for s in stats)], axis=1)  # (2, 4)
    C1 = h1.size
    reps = range(min(DIRECT_REPLICATES, fit.rows.shape[0]))
    got = np.array([[fit.boot[s][r] for s in ("alpha", *stats)] for r in reps])
    want = np.array([_direct_split(w, x, task, fit.rollout, fit.rows[r, :C1],
                                   fit.rows[r, C1:]).mean(axis=0) for r in reps])  # fmt: skip
    err = max(_gap(split0, _direct_split(w, x, task, fit.rollout, h1, h2)), _gap(got, want))
    # controls: α fitted on the scored half (in sample); replicate 0 with the fit held fixed
    ins = _direct_split(w, x, task, fit.rollout, h1, h2, in_sample=True)
    held = _direct_split(w, x, task, fit.rollout, fit.rows[0, :C1], fit.rows[0, C1:],
                         alphas=fit.alpha[0]).mean(axis=0)  # fmt: skip
    tol = fp_tol(DIRECT_TOL, DIRECT_REASON)
    lab = (f"K = {K}: max |crossfit_retrieval − direct loop| over split 0 (each direction) and "
           f"bootstrap replicates 0–{DIRECT_REPLICATES - 1} (α, ρ fitted, ρ at α = 1, ceiling ρ)")
    return [
        at_most(key, err, 0.0, tol, label=lab),
        rejects(f"crossfit_control_in_sample_K{K}",
                at_most("c", _gap(split0, ins), 0.0, tol),
                "split 0 recomputed with α fitted on the scored half (in sample)"),
        rejects(f"crossfit_control_fit_held_K{K}",
                at_most("c", _gap(got[0], held), 0.0, tol),
                "bootstrap replicate 0 recomputed with split 0's α held fixed (no refit)"),
    ]


# -- mutant wrapper (registered in pb17_retrieval) ------------------------------------------------
def fit_on_scored_half(original):
    def sides_in_sample(h1, h2):
        return ((h2, h2), (h1, h1))  # each direction fits α on the half it scores

    return sides_in_sample
