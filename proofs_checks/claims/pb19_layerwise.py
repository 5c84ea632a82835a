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
family-wise 5 % (Bonferroni over layers × candidates × rivals × models). Layer t HOLDS when a
candidate beats both nulls, FAILS when each candidate is beaten by a null, else INCONCLUSIVE; a
model HOLDS when every layer holds, FAILS when some layer fails. The *break depth* is the lowest
t from which every layer holds. Reported beside it: the rollout as defined (α = 1, no fit) and
the in-sample geometric null per layer (:func:`~posflow.simulate.models.layerwise.layerwise_w1`).
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

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
    register,
    regression_measurements,
    store_reference,
    undecided,
)
from posflow.simulate.models.subjects import (
    Subject,
    gemma3_windows,
    installed,
    smollm2_windows,
    toy_windows,
)

__all__ = ["pb19"]

ALPHA = 0.05  # family-wise level of the verdict
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


def subjects(ctx: Context) -> list[Subject]:
    """The toy LM always (PB15's windows); SmolLM2-135M when installed (quick n = 64, N = 16;
    full n = 128, N = 32); Gemma 3 270M when installed, at full size only (n = 128, N = 32)."""
    preset, count = ("default", 64) if ctx.full else ("quick", 32)
    out = [Subject("toy", "toy LM", functools.partial(toy_windows, preset, count, ctx.seed))]
    if _smollm2_installed():
        n, N = (128, 32) if ctx.full else (64, 16)
        out.append(Subject("smollm2", "SmolLM2",
                           functools.partial(smollm2_windows, n, N, ctx.seed)))  # fmt: skip
    if ctx.full and installed("gemma3-270m"):
        out.append(Subject("gemma3", "Gemma 3",
                           functools.partial(gemma3_windows, 128, 32, ctx.seed)))  # fmt: skip
    return out


def layer_status(cf, level: float, bound: float):
    """(status, best candidate, its decisions against each rival) of one layer's CrossFit."""
    w1 = cf.metrics["w1"]
    dec = {x: [crossfit_decision(r, w1[x] - w1[r], level, bound) for r in RIVALS]
           for x in CANDIDATES}  # fmt: skip
    st = {x: combine(d)[0] for x, d in dec.items()}
    best = min(dec, key=lambda x: (_RANK[st[x]], float(w1[x][0])))
    return st[best], best, dec[best]  # FAILS only when every candidate is beaten


def model_status(statuses) -> tuple[str, int]:
    """(model verdict, break depth): FAILS if a layer fails, HOLDS if all hold; the break depth
    is the lowest t from which every layer holds (L when the top layer does not)."""
    depth = len(statuses)
    while depth > 0 and statuses[depth - 1] == HOLDS:
        depth -= 1
    verdict = FAILS if FAILS in statuses else (HOLDS if depth == 0 else INCONCLUSIVE)
    return verdict, depth


# ----------------------------------------------------------------------------------------------
# the evidence of one model


def _pooled(data):
    """Kernels (L, n, n) and λ (L,) pooled over all windows, and the mean layer influence."""
    A = np.asarray(data.attention).mean(axis=0)
    G = np.asarray(data.layer_influence).mean(axis=0)
    return A / A.sum(axis=-1, keepdims=True), np.clip(data.lambdas.mean(axis=0), 0, 1), G


def _slice(data, t: int):
    """The windows of layer t as PB15's data: layers t … L − 1, influence at t's input."""
    windows = getattr(data, "windows", None)
    return SimpleNamespace(attention=data.attention[:, t:], lambdas=data.lambdas[:, t:],
                           influence=data.layer_influence[:, t], content=data.content[:, t:],
                           values=data.values[:, t:], slopes=data.slopes,
                           windows=None if windows is None else tuple(windows)[t:])  # fmt: skip


def measure_model(sub: Subject):
    """(per-window data, the measured layer influence against plain torch, note) of one model;
    the model is dropped afterwards."""
    from posflow.simulate.models.profiles_bootstrap import measure_per_sequence

    model, ids, note = sub.load()
    data = measure_per_sequence(model, ids, layer_influence=True)
    plain = R.layer_influence_vs_plain(sub.tag, sub.name, model, ids[0], data.layer_influence[0])
    return data, plain, note


def model_evidence(sub: Subject, ctx: Context, measured, family: int):
    """(measurements, table, figure, control replicates) of one measured model; ``family`` is
    the number of comparisons of the Bonferroni family."""
    from posflow.simulate.models.layerwise import (
        layerwise_crossfit,
        layerwise_profiles,
        layerwise_w1,
    )

    tag, name = sub.tag, sub.name
    data, plain, _ = measured
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    level, bound = 1.0 - family_level(ALPHA, family), -_rounding(L, n)
    cfs = layerwise_crossfit(data, rollouts=tuple(CANDIDATES), seed=ctx.seed)
    judged = [layer_status(cf, level, bound) for cf in cfs]
    verdict, depth = model_status([s for s, _, _ in judged])
    A, lam, G = _pooled(data)
    P = layerwise_profiles(A, lam)
    as_defined = layerwise_w1(P, G)
    ms = [info(f"{tag}.verdict", verdict, label=f"{name}: every layer's rollout against the "
               "nulls"),
          info(f"{tag}.break_depth", depth, label=f"{name}: the lowest layer t from which every "
               f"layer's rollout beats both nulls (L = {L}: not even the top layer)")]
    why = fp_tol(0.0, f"the bound −{-bound:.2g} = −4(L n² + n)ε is the float64 rounding of a W1 "
                 "difference: a smaller gap is no gap")  # fmt: skip
    for t, (_, best, decs) in enumerate(judged):
        for d in decs:
            key = f"{tag}.layer{t:02d}.w1_{best}_minus_{d.label}"
            label = (f"{name}, layer {t}: upper end of the {100 * level:.4g}% jackknife interval "
                     f"of W1({best}) − W1({d.label}), one fitted parameter each")
            if d.decision == INCONCLUSIVE:
                ms.append(undecided(key, d.hi, f"[{d.lo:.3g}, {d.hi:.3g}] contains the bound: "
                                    f"{N} windows cannot tell them apart", label=label))
            else:
                ms.append(at_most(key, d.hi, bound, why, label=label))
    ms += [plain, R.profiles_vs_dense(tag, name, A, lam), R.w1_vs_scipy(tag, name, P, G)]
    gap = 0.0
    for t in sorted({L // 2, L - 1}):  # the layer crossfit against the library's recomputation
        prof, metric, _, _ = crossfit_library_reference(_slice(data, t), cfs[t])
        gap = max(gap, prof, metric)
    tol = 16 * L * n * n * _EPS
    ms.append(at_most(f"{tag}.layerwise_crossfit_vs_library", gap, 0.0,
                      fp_tol(tol, f"PB15's bound for two implementations: 16 L n² ε = {tol:.2g}"),
                      label=f"{name}: max |layerwise_crossfit − the library's recomputation "
                      f"(kit.crossfit_library_reference) on layers t … L − 1| at t = {L // 2} "
                      f"and {L - 1}"))  # fmt: skip
    rows = []
    for t, (cf, (st, best, _)) in enumerate(zip(cfs, judged, strict=True)):
        iv = {k: cf.interval("w1", k, LEVEL) for k in (*CANDIDATES, *RIVALS)}
        rows.append([t, float(lam[t]), float(as_defined["mean_position"][t]),
                     float(as_defined["rollout"][t]), float(as_defined["geometric"][t]),
                     *(x for k in iv for x in (iv[k][0], iv[k][2], iv[k][3])), best, st])
    cols = ["layer t", "λ_t", "measured mean position", "W1 (b), α = 1", "W1 geometric, in "
            "sample", *(f"{c} {k}" for k in (*CANDIDATES, *RIVALS) for c in ("W1", "lo", "hi")),
            "best", "status"]  # fmt: skip
    table = kit.Table(f"{tag}.layerwise", f"{name}: per layer t, the rollout from t against the "
                      f"influence at t's input (cross-fitted W1/(n−1), {100 * LEVEL:g}% jackknife "
                      f"intervals; N = {N} windows, n = {n})", cols, rows)  # fmt: skip
    top = cfs[-1].metrics["w1"]
    ctl = (top[judged[-1][1]] - top["geometric"], level, bound)
    return ms, table, _figure(tag, name, cfs, depth), ctl


def _figure(tag, name, cfs, depth):
    from posflow.simulate.models.profiles import color

    L = len(cfs)
    x = np.arange(L)
    series = []
    for i, (k, label) in enumerate((*CANDIDATES.items(), *RIVALS.items())):
        iv = np.array([cf.interval("w1", k, LEVEL) for cf in cfs])
        series.append(kit.Series(label, x + 0.15 * (i - 1.5), iv[:, 0], "errorbar",
                                 yerr=[iv[:, 0] - iv[:, 2], iv[:, 3] - iv[:, 0]], color=color(k)))
    d = np.array([cf.difference("w1", "e", "geometric", LEVEL) for cf in cfs])
    diff = kit.Series("(e) − geometric", x, d[:, 0], "errorbar",
                      yerr=[d[:, 0] - d[:, 2], d[:, 3] - d[:, 0]], color=color("e"))
    vl = [(depth - 0.5, f"break depth {depth}")] if 0 < depth < L else []
    panels = [kit.Panel("cross-fitted W1/(n−1), one parameter each", "layer t",
                        "W1/(n−1)", series, vlines=vl, legend="shared"),
              kit.Panel("W1(e) − W1(geometric)", "layer t", "W1 difference",
                        [diff], hlines=[(0.0, "")], vlines=vl)]  # fmt: skip
    return kit.Figure(f"pb19_{tag}_layerwise", f"PB19, {name}: the rollout from layer t against "
                      f"the influence at layer t's input ({100 * LEVEL:g}% jackknife intervals; "
                      "the verdict uses the Bonferroni level)", panels)  # fmt: skip


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
    "(delete-one-window jackknife t intervals, family-wise 5 %, Bonferroni over layers × "
    "rollouts × nulls × models); the break depth is the lowest layer from which it holds",
    assumptions=(
        "posflow's toy ALiBi LM; SmolLM2-135M when installed; Gemma 3 270M when installed "
        "(--full only); each model gets its own sub-verdict",
        "windows independent (the jackknife leaves one out)",
    ),
    compares=_CITES,
)
def pb19(ctx: Context) -> Evidence:
    """Claim PB19: per model and layer, the cross-fitted rollouts (b), (e) from t against the
    nulls (``layerwise_crossfit``, recomputed by PB15's library reference at two layers);
    ``layerwise_profiles`` against rollouts from each layer, ``layerwise_w1`` against scipy, the
    measured layer influence against plain torch autograd; the judge's negative controls
    (replicates past / straddling the bound); every number against the stored reference."""
    if kit.optional_torch() is None:
        return kit.no_torch()
    family, per_model = _collect(ctx)
    ms, tables, figs, notes, ctl = [], [], [], [], None
    for sub, (m, table, fig, c, ident) in per_model:
        m += regression_measurements(sub.tag, ident, flatten(m, [table]), ctx.size, R.LIVE_TOL,
                                     R.LIVE_REASON, f"every number PB19 reports of {sub.tag}",
                                     R.REFERENCE, R.LIVE_FLOOR)  # fmt: skip
        ms += m
        tables.append(table)
        figs.append(fig)
        notes.append(ident.split("; seed")[0])
        ctl = ctl or c
    ms += jackknife_controls(*ctl)
    ms.append(info("family", family, label="comparisons in the Bonferroni family (layers × "
                   "rollouts × nulls, summed over the models)"))
    return Evidence(ms, tables=tables, figures=figs,
                    setup="; ".join(notes) + ". Each window measured alone; halves seeded "
                    f"[{ctx.seed}, 24], the same at every layer.",
                    absent=() if len(per_model) > 1 else ("smollm2-135m",))  # fmt: skip


# -- mutants: breaks of the routines PB19 runs through -------------------------------------------

add_mutant("PB19", "layer-influence-one-layer-late", "posflow.simulate.models.measure:measure",
           R.one_layer_late, "measure's gradient at block t's input is taken at block t + 1's")
add_mutant("PB19", "profiles-from-next-layer",
           "posflow.simulate.models.layerwise:layerwise_profiles", R.rollout_from_next_layer,
           "each row of layerwise_profiles starts one layer too high")
add_mutant("PB19", "crossfit-one-layer-high",
           "posflow.simulate.models.layerwise:layerwise_crossfit", R.crossfit_one_layer_high,
           "layer t's influence is compared with the rollout from layer t + 1")
add_mutant("PB19", "decide-on-point-estimate",
           "posflow.proofs_checks.kit._jackknife:crossfit_decision", R.loosened_decision,
           "the jackknife interval collapsed onto its point estimate (a loosened judge)")


def _collect(ctx: Context):
    """(Bonferroni family, [(subject, (measurements, table, figure, controls, identity))])."""
    subs = subjects(ctx)
    measured = [measure_model(sub) for sub in subs]
    family = len(CANDIDATES) * len(RIVALS) * sum(d.lambdas.shape[1] for d, _, _ in measured)
    out = []
    for sub, got in zip(subs, measured, strict=True):
        ident = f"{got[2]}; seed {ctx.seed}; {family} comparisons (Bonferroni)"
        out.append((sub, (*model_evidence(sub, ctx, got, family), ident)))
    return family, out


def parts(ctx: Context) -> dict:
    """``{tag: (identity, {name: number})}`` of a PB19 run (what the reference stores)."""
    return {sub.tag: (r[4], flatten(r[0], [r[1]])) for sub, r in _collect(ctx)[1]}


def write_reference(size: str = "quick"):
    """Add this run's parts at ``size`` to ``references/pb19.json`` (an entry of the same
    identity is replaced): ``python -m posflow.proofs_checks.claims.pb19_layerwise [full]``."""
    return store_reference(R.REFERENCE, parts(Context(size=size)), size)


if __name__ == "__main__":  # pragma: no cover - the documented command
    import sys

    print(write_reference(*sys.argv[1:2]))
