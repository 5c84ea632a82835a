"""Claim PB19 (ours, issue 24): where along depth does the rollout stop predicting the model?

[A]'s prediction is the last row of R_{L−1} ⋯ R_0 compared with the gradient influence at the
input. Started at layer t, the same rollout R_{L−1} ⋯ R_t predicts the influence at that layer's
input, ‖∂p*/∂x_t[j]‖ (rows normalised; ``measure(layer_influence=True)``). For each model and each
layer t, :func:`posflow.simulate.models.layerwise.layerwise_crossfit` compares, like for like, the
rollouts (b) (head-averaged measured kernels) and (e) (sink-aware kernels) from t — λ_s →
clip(α λ_s), α fitted — with the geometric-recency and linear-ramp nulls (one parameter each),
fitted on one half of the windows and scored on the other, both directions averaged.

Judge (PB15's, per layer): a candidate beats a rival when the delete-one-window jackknife t
interval of W1(candidate) − W1(rival) lies below −r (r: float64 rounding of a W1 difference),
family-wise 5 % per model (Bonferroni over that model's own layers × candidates × rivals: no
other model's comparisons, so installing a model moves no other model's level). Layer t HOLDS
when a candidate beats both nulls, FAILS when each candidate is beaten by a null, else
INCONCLUSIVE; a model HOLDS when every layer holds, FAILS when some layer fails.

Effect sizes (issue 41): per layer, the best rollout's difference from each null with its
interval at the judge's level, its minimum detectable difference (MDD) at the run's N and level
(:func:`~posflow.simulate.models.layerwise.detectable_difference`) and the power to see
:data:`PB19_EFFECT` (``detection_power``). The *break depth*, the lowest t from which every layer
holds, is reported only where that power is ≥ :data:`POWER` at the layer below it and above
(``kit.powered_depth``), else "undetermined below layer t"; a table gives it at other sizes.
Beside it: the rollout as defined (α = 1) and the in-sample geometric null per layer.
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims import pb19_refs as R
from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Context,
    Evidence,
    add_mutant,
    at_most,
    cite,
    combine,
    crossfit_decision,
    crossfit_library_reference,
    family_level,
    flatten,
    fp_tol,
    info,
    jackknife_controls,
    mdd_vs_judge,
    power_controls,
    powered_depth,
    register,
    regression_measurements,
    store_reference,
    undecided,
)
from posflow.simulate.models.subjects import (
    Subject,
    installed,
    live_subjects,
    measured,
    scope_of,
)

__all__ = ["EFFECTS", "PB19_EFFECT", "POWER", "model_family", "pb19"]

ALPHA = 0.05  # family-wise level of each model's verdict
POWER = 0.80  # the power the break depth needs (Cohen's conventional 80 %)
# The advantage W1(rollout) − W1(null) = −PB19_EFFECT (in W1/(n − 1)) the break depth must be able
# to see: mass displaced by 1 % of the window's span (0.63 tokens at n = 64), a stated size, not
# implied by the claim; EFFECTS, the sensitivity table's values of it.
PB19_EFFECT = 0.01
EFFECTS = (0.005, 0.01, 0.02, 0.05, 0.1, 0.2)
CANDIDATES = {"b": "rollout (b): measured head-averaged kernels",
              "e": "rollout (e): sink-aware kernels"}  # fmt: skip
RIVALS = {"geometric": "geometric recency", "linear": "linear ramp"}
LEVEL = 0.95  # the reported intervals of the per-layer W1
_RANK = {HOLDS: 0, INCONCLUSIVE: 1, FAILS: 2}
_EPS = float(np.finfo(np.float64).eps)


def _smollm2_installed() -> bool:
    return installed("smollm2-135m")


def _rounding(L: int, n: int) -> float:
    """Float64 rounding of a difference of two W1/(n − 1): 4 (L n² + n) ε (PB15's bound)."""
    return 4.0 * (L * n * n + n) * _EPS


# PB19 reads the first windows of the measurement it shares with PB15 and PB20 (the windows of
# ``live_subjects``, measured once per run): this many per model and size
WINDOWS = {"quick": {"toy": 32, "smollm2": 16}, "full": {"toy": 64, "smollm2": 32, "gemma3": 32}}


def subjects(ctx: Context) -> list[Subject]:
    """The models of PB15 and PB20 on their windows (``live_subjects``): the toy LM always,
    SmolLM2-135M when installed, Gemma 3 270M when installed at full size; PB19 judges the first
    :data:`WINDOWS` of each (quick: toy 32, SmolLM2 16 at n = 64; full: toy 64, SmolLM2 and
    Gemma 3 32 at n = 128)."""
    return live_subjects(ctx.full, ctx.seed, smollm2=_smollm2_installed(),
                         gemma3=installed("gemma3-270m"))  # fmt: skip


def layer_status(cf, level: float, bound: float):
    """(status, best candidate, its decisions against each rival) of one layer's CrossFit."""
    w1 = cf.metrics["w1"]
    dec = {x: [crossfit_decision(r, w1[x] - w1[r], level, bound) for r in RIVALS]
           for x in CANDIDATES}  # fmt: skip
    st = {x: combine(d)[0] for x, d in dec.items()}
    best = min(dec, key=lambda x: (_RANK[st[x]], float(w1[x][0])))
    return st[best], best, dec[best]  # FAILS only when every candidate is beaten


def model_family(L: int) -> int:
    """The Bonferroni family of one model with ``L`` layers: its own layers × candidates ×
    rivals, whatever other models are measured."""
    if isinstance(L, bool) or not isinstance(L, int | np.integer) or L < 1:
        raise ValueError(f"L must be an integer >= 1; got {L!r}")
    return int(L) * len(CANDIDATES) * len(RIVALS)


def model_status(statuses) -> tuple[str, int]:
    """(model verdict, held_from): FAILS if a layer fails, HOLDS if all hold; held_from is the
    lowest t from which every layer holds (L when the top layer does not)."""
    depth = len(statuses)
    while depth > 0 and statuses[depth - 1] == HOLDS:
        depth -= 1
    verdict = FAILS if FAILS in statuses else (HOLDS if depth == 0 else INCONCLUSIVE)
    return verdict, depth


def depth_text(depth: int | None, held: int):
    """The break depth as the record says it: the layer, or "undetermined below layer t"."""
    return depth if depth is not None else f"undetermined below layer {held}"


def layer_effects(cf, best: str, level: float, bound: float) -> dict:
    """Per rival: (difference, se, lo, hi, MDD) of W1(best) − W1(rival) at the judge's
    ``level``; the MDD is the advantage beyond the bound detected with :data:`POWER`."""
    from posflow.simulate.models.layerwise import detectable_difference

    out = {}
    for r in RIVALS:
        est, se, lo, hi = cf.difference("w1", best, r, level)
        df = len(cf.metrics["w1"][best]) - 2
        out[r] = (est, se, lo, hi, detectable_difference(se, df, 1.0 - level, POWER) - bound)
    return out


def layer_power(effects: dict, effect: float, df: int, level: float, bound: float) -> float:
    """The power to see an advantage ``effect`` against both nulls: the smaller of the two."""
    from posflow.simulate.models.layerwise import detection_power

    return min(detection_power(effect + bound, e[1], df, 1.0 - level) for e in effects.values())


# ----------------------------------------------------------------------------------------------
# the evidence of one model


def measure_model(sub: Subject, count: int | None = None):
    """(per-window data, the measured layer influence against plain torch, note) of one model:
    the first ``count`` windows (all when None) of the measurement shared with PB15 and PB20."""
    model, ids, note, data = measured(sub)
    if count is not None and count < data.lambdas.shape[0]:
        data = first_windows(data, count)
        note += f"; PB19 judges the first {count} of them"
    plain = R.layer_influence_vs_plain(sub.tag, sub.name, model, ids[0], data.layer_influence[0])
    return data, plain, note


def first_windows(data, count: int):
    """The per-window measurement ``data`` (``PerSequence``) restricted to its first ``count``
    windows (every per-window field; slopes and sliding windows as they are)."""
    from dataclasses import fields, replace

    per_window = {f.name: getattr(data, f.name)[:count] for f in fields(data)
                  if f.name not in ("slopes", "windows") and getattr(data, f.name) is not None}
    return replace(data, **per_window)  # fmt: skip


def model_scope(tag: str, n: int, N: int, seed: int) -> kit.Scope:
    """What one model's sub-verdict was run on."""
    return kit.Scope(**scope_of(tag, n, f"{N} windows", seeds=seed, split=f"two halves seeded "
                                f"[{seed}, 24], both directions, the same at every layer"))


def model_evidence(sub: Subject, ctx: Context, measured):
    """(measurements, tables, figure, control inputs, scope) of one measured model, judged at
    its own Bonferroni level (:func:`model_family`)."""
    from posflow.simulate.models.layerwise import (
        layerwise_crossfit,
        layerwise_profiles,
        layerwise_w1,
    )

    tag, name = sub.tag, sub.name
    data, plain, _ = measured
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    family, scope = model_family(L), model_scope(tag, n, N, ctx.seed)
    level, bound = 1.0 - family_level(ALPHA, family), -_rounding(L, n)
    cfs = layerwise_crossfit(data, rollouts=tuple(CANDIDATES), seed=ctx.seed)
    judged = [layer_status(cf, level, bound) for cf in cfs]
    statuses = [s for s, _, _ in judged]
    verdict = model_status(statuses)[0]
    eff = [layer_effects(cf, b, level, bound) for cf, (_, b, _) in zip(cfs, judged, strict=True)]
    df = N - 1

    def powers(effect):
        return [layer_power(e, effect, df, level, bound) for e in eff]

    depth, held, powered = powered_depth(statuses, powers(PB19_EFFECT), POWER)
    A, lam, G = R.pooled(data)
    P = layerwise_profiles(A, lam)
    as_defined = layerwise_w1(P, G)
    ms = [info(f"{tag}.verdict", verdict, label=f"{name} ({scope.line()}): every layer's "
               "rollout against the nulls"),
          info(f"{tag}.family", family, label=f"{name}: comparisons in its Bonferroni family "
               f"(its {L} layers × rollouts × nulls; level {100 * level:.4g}%)"),
          info(f"{tag}.held_from", held, label=f"{name}: the lowest layer t from which every "
               f"layer's rollout beats both nulls (L = {L}: not even the top layer)"),
          info(f"{tag}.powered_from", powered, label=f"{name}: the lowest layer from which "
               f"every layer has power ≥ {POWER:.0%} to see an advantage of {PB19_EFFECT:g} "
               f"in W1/(n−1) over both nulls (PB19_EFFECT; L = {L}: not even the top layer)"),
          info(f"{tag}.break_depth", depth_text(depth, held),
               label=f"{name}: the break depth (power ≥ {POWER:.0%} to see {PB19_EFFECT:g} at "
               "the layer below it and above)")]  # fmt: skip
    why = fp_tol(0.0, f"the bound −{-bound:.2g} = −4(L n² + n)ε is the float64 rounding of a W1 "
                 "difference: a smaller gap is no gap")  # fmt: skip
    for t, (_, best, decs) in enumerate(judged):
        for d in decs:
            key = f"{tag}.layer{t:02d}.w1_{best}_minus_{d.label}"
            label = (f"{name}, layer {t}: upper end of the {100 * level:.4g}% jackknife interval "
                     f"of W1({best}) − W1({d.label}), one fitted parameter each")
            if d.decision == INCONCLUSIVE:
                ms.append(undecided(key, d.hi, f"[{d.lo:.3g}, {d.hi:.3g}] contains the bound: "
                                    f"{N} windows cannot tell them apart (MDD "
                                    f"{eff[t][d.label][4]:.3g})", label=label))
            else:
                ms.append(at_most(key, d.hi, bound, why, label=label))
    ms += [plain, R.profiles_vs_dense(tag, name, A, lam), R.w1_vs_scipy(tag, name, P, G)]
    ms += mdd_vs_judge(tag, name, eff[-1]["geometric"][1], df, level, bound, POWER, ctx.seed)
    gap = 0.0
    for t in sorted({L // 2, L - 1}):  # the layer crossfit against the library's recomputation
        prof, metric, _, _ = crossfit_library_reference(R.layer_slice(data, t), cfs[t])
        gap = max(gap, prof, metric)
    tol = 16 * L * n * n * _EPS
    ms.append(at_most(f"{tag}.layerwise_crossfit_vs_library", gap, 0.0,
                      fp_tol(tol, f"PB15's bound for two implementations: 16 L n² ε = {tol:.2g}"),
                      label=f"{name}: max |layerwise_crossfit − the library's recomputation "
                      f"(kit.crossfit_library_reference) on layers t … L − 1| at t = {L // 2} "
                      f"and {L - 1}"))  # fmt: skip
    tables = [R.layer_table(tag, name, cfs, judged, lam, as_defined, N, n,
                            (*CANDIDATES, *RIVALS), LEVEL),
              R.effect_table(tag, name, eff, judged, powers(PB19_EFFECT), level, PB19_EFFECT,
                             POWER, N),
              kit.Table(f"{tag}.break_depth_sensitivity", f"{name}: the break depth at other "
                        f"effect sizes (power ≥ {POWER:.0%} at the layer below it and above)",
                        ["effect (W1/(n−1))", "powered from layer", "break depth"],
                        [[e, (r := powered_depth(statuses, powers(e), POWER))[2],
                          depth_text(r[0], r[1])] for e in EFFECTS])]  # fmt: skip
    top = cfs[-1].metrics["w1"]
    ctl = (top[judged[-1][1]] - top["geometric"], level, bound)
    fig = R.figure(tag, name, cfs, {**CANDIDATES, **RIVALS}, LEVEL, held, depth)
    return ms, tables, fig, (ctl, (eff[-1]["geometric"][1], df, level, bound)), scope


# ----------------------------------------------------------------------------------------------
# the check

_CITES = (
    cite("posflow.simulate.models.layerwise:layerwise_profiles",
         "posflow.simulate.rollout.influence run separately from each layer t",
         "toy.layerwise_profiles_vs_rollout"),
    cite("posflow.simulate.models.layerwise:layerwise_w1",
         "scipy.stats.wasserstein_distance and the geometric null refitted per layer",
         "toy.layerwise_w1_vs_scipy"),
    cite("posflow.simulate.models.layerwise:layerwise_crossfit",
         "PB15's library recomputation (kit.crossfit_library_reference) on the layers t … L − 1 "
         "sliced by the check, at the middle and the top layer",
         "toy.layerwise_crossfit_vs_library"),
    cite("posflow.simulate.models.measure:measure",
         "plain torch autograd of p* with respect to every block input (the model's own forward), "
         "window 0", "toy.layer_influence_vs_plain_torch"),
    cite("posflow.simulate.models.layerwise:detectable_difference",
         "a Monte Carlo of the judge itself (kit.crossfit_decision on replicates drawn from the "
         "shifted t at a true advantage of the MDD: HOLDS at 80 %), at the top layer",
         "toy.mdd_vs_judge_monte_carlo"),
    cite("posflow.simulate.models.layerwise:detection_power",
         "the same Monte Carlo of the judge at the MDD and MDD/2",
         "toy.power_vs_judge_monte_carlo"),
    cite("posflow.simulate.models.crossfit:jackknife_interval",
         "the jackknife standard error and Student's t quantile written out",
         "jackknife_interval_vs_direct"),
)  # fmt: skip


@register(
    "PB19",
    "[ours]",
    "on a measured causal LM, for every layer t the residual-aware rollout from t to the top "
    "(measured λ_s scaled by one fitted α, through the measured head-averaged kernels (b) or the "
    "sink-aware kernels (e)) predicts the gradient influence at layer t's input, ‖∂p*/∂x_t‖, "
    "better in W1/(n−1) than the geometric-recency and linear-ramp nulls with one fitted "
    "parameter each — every parameter fitted on one half of the windows and scored on the other "
    "(delete-one-window jackknife t intervals, family-wise 5 % per model, Bonferroni over that "
    "model's layers × rollouts × nulls); the break depth is the lowest layer from which it "
    "holds, reported where the power to see an advantage of PB19_EFFECT is ≥ 80 % at the layer "
    "below it and above (else undetermined below that layer), with each layer's difference, "
    "interval and minimum detectable difference",
    assumptions=(
        "posflow's toy ALiBi LM; SmolLM2-135M when installed; Gemma 3 270M when installed "
        "(--full only); each model gets its own sub-verdict",
        "windows independent (the jackknife leaves one out)",
    ),
    compares=_CITES,
)
def pb19(ctx: Context) -> Evidence:
    """Claim PB19: per model and layer, the cross-fitted rollouts (b), (e) from t against the
    nulls (``layerwise_crossfit``, recomputed by PB15's library reference at two layers), each
    difference's MDD (``detectable_difference``) and power (``detection_power``) against a Monte
    Carlo of the judge; ``layerwise_profiles`` against rollouts from each layer, ``layerwise_w1``
    against scipy, the measured layer influence against plain torch autograd; the judges'
    negative controls; every number against the stored reference."""
    if kit.optional_torch() is None:
        return kit.no_torch()
    ms, tables, figs, notes, scopes, ctl = [], [], [], [], {}, None
    for sub, (m, tabs, fig, c, scope, ident) in _collect(ctx):
        m += regression_measurements(sub.tag, ident, flatten(m, tabs), ctx.size, R.LIVE_TOL,
                                     R.LIVE_REASON, f"every number PB19 reports of {sub.tag}",
                                     R.REFERENCE, R.LIVE_FLOOR)  # fmt: skip
        ms += m
        tables += tabs
        figs.append(fig)
        notes.append(ident.split("; seed")[0])
        scopes[sub.tag] = scope
        ctl = ctl or c
    ms += jackknife_controls(*ctl[0])
    ms += power_controls(*ctl[1], POWER, ctx.seed)
    return Evidence(ms, tables=tables, figures=figs, scopes=scopes,
                    setup="; ".join(notes) + ". Each window measured alone; halves seeded "
                    f"[{ctx.seed}, 24], the same at every layer.",
                    absent=() if len(scopes) > 1 else ("smollm2-135m",))  # fmt: skip


# -- mutants: breaks of the routines PB19 runs through -------------------------------------------

add_mutant("PB19", "layer-influence-one-layer-late", "posflow.simulate.models.measure:measure",
           R.one_layer_late, "measure's gradient at block t's input is taken at block t + 1's")
add_mutant("PB19", "profiles-from-next-layer",
           "posflow.simulate.models.layerwise:layerwise_profiles", R.rollout_from_next_layer,
           "each row of layerwise_profiles starts one layer too high")
add_mutant("PB19", "crossfit-one-layer-high",
           "posflow.simulate.models.layerwise:layerwise_crossfit", R.crossfit_one_layer_high,
           "layer t's influence is compared with the rollout from layer t + 1")
add_mutant("PB19", "mdd-without-power-term",
           "posflow.simulate.models.layerwise:detectable_difference", R.mdd_without_power_term,
           "the minimum detectable difference drops t_{0.8}: the difference seen with 50 % power")
add_mutant("PB19", "decide-on-point-estimate",
           "posflow.proofs_checks.kit._jackknife:crossfit_decision", R.loosened_decision,
           "the jackknife interval collapsed onto its point estimate (a loosened judge)")


def _collect(ctx: Context):
    """[(subject, (measurements, tables, figure, control inputs, scope, identity))]: each model
    judged at its own level (:func:`model_family`), the identity naming its family."""
    out = []
    for sub in subjects(ctx):
        measured = measure_model(sub, WINDOWS[ctx.size].get(sub.tag))
        family = model_family(measured[0].lambdas.shape[1])
        ident = f"{measured[2]}; seed {ctx.seed}; {family} comparisons (Bonferroni, this model's)"
        out.append((sub, (*model_evidence(sub, ctx, measured), ident)))
    return out


def parts(ctx: Context) -> dict:
    """``{tag: (identity, {name: number})}`` of a PB19 run (what the reference stores)."""
    return {sub.tag: (r[5], flatten(r[0], r[1])) for sub, r in _collect(ctx)}


def write_reference(size: str = "quick"):
    """Add this run's parts at ``size`` to ``references/pb19.json`` (an entry of the same
    identity is replaced): ``python -m posflow.proofs_checks.claims.pb19_layerwise [full]``."""
    return store_reference(R.REFERENCE, parts(Context(size=size)), size)


if __name__ == "__main__":  # pragma: no cover - the documented command
    import sys

    print(write_reference(*sys.argv[1:2]))
