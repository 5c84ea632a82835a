"""Claim PB20 (posflow's own, issue 41): like for like, which rollout predicts a measured model?

PB15 judges [A]'s claim as published (α = 1, [A]'s kernels, against attention-only); this claim
is posflow's extension of it. For each measured model (posflow's trained toy ALiBi LM, and
SmolLM2-135M when ``posflow models install smollm2-135m`` has put it in the user cache; Gemma 3
270M at --full) the check reads the shared measurement of the model
(:func:`posflow.simulate.models.subjects.measured`: head-averaged attention A_t, λ_t, [A]'s
content c_{t,h}, value-norm weights and gradient influence ‖∂p*/∂e_j‖ of each window alone) and
compares the measured influence profile p̂ with the rollouts (a) attention only, (b) measured
kernels, (c) [A]'s ALiBi + content kernels, (d) value-norm and (e) sink-aware kernels
(:mod:`posflow.simulate.models.sinks`) and four nulls (:mod:`posflow.simulate.nulls`: geometric
recency and a linear ramp fitted to the mean position, the rollout through *uniform* kernels,
λ_t moved to other layers).

Verdict (like for like; :mod:`.pb20_crossfit`): every predictor gets one fitted parameter — the
rollouts λ_t → clip(α λ_t) ((a): a constant λ ≡ α), the geometric and linear nulls their ratio
and slope — fitted on one half of the windows and scored on the other, both directions averaged
(:mod:`posflow.simulate.models.crossfit`). Each rollout gets its own verdict against every rival
((a) and the four nulls): the delete-one-window jackknife interval of W1(rollout) − W1(rival)
below 0 for all of them, family-wise 5 % over the model's own rollouts × rivals (Bonferroni; a
model's family never depends on which other models are installed), with its fitted α and the
α's jackknife interval — and whether α = 1, [A]'s rollout as defined, lies inside it. A model
HOLDS when some rollout beats every rival (the family counts every rollout's comparisons, so the
choice of the best is covered), FAILS when every rollout is beaten by a rival, else it is
INCONCLUSIVE. The in-sample comparison of issue 12 is reported beside it, not judged. The tables
and figures are assembled in ``pb20_study`` and ``pb20_crossfit``.
"""

from __future__ import annotations

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims import pb20_refs as R
from posflow.proofs_checks.claims.pb20_crossfit import (
    CANDIDATES,
    CF_RIVALS,
    crossfit_evidence,
    jackknife_controls,
)
from posflow.proofs_checks.claims.pb20_insample import (
    by_evidence_key,
    judge,
    library_check,
    rounding,
    what,
)
from posflow.proofs_checks.claims.pb20_sinks import sink_evidence
from posflow.proofs_checks.claims.pb20_study import (
    RIVALS,
    model_figure,
    model_tables,
    reported,
)
from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Scope,
    add_mutant,
    cite,
    combine,
    family_level,
    info,
    register,
    store_reference,
)
from posflow.simulate.models.profiles_bootstrap import bootstrap
from posflow.simulate.models.subjects import (
    GEMMA3_WINDOWS,
    SMOLLM2_WINDOWS,
    Subject,
    installed,
    live_subjects,
    measured,
    scope_of,
    smollm2_windows,
    toy_windows,
)

__all__ = ["pb20", "subjects"]

ALPHA = 0.05  # family-wise level of the verdict


# ----------------------------------------------------------------------------------------------
# the measured models


_toy, _smollm2 = toy_windows, smollm2_windows  # the loaders (posflow.simulate.models.subjects)


def _smollm2_installed() -> bool:
    return installed("smollm2-135m")


# SmolLM2 sizes: quick is a smoke test the suite runs once per mutant (~1 s per sequence at
# n = 64 on one loaded core); full measures the N = 64 at n = 128 (~3 s per sequence).
# Longer windows (n = 128 … 1024) are the stored grouped study (docs/smollm2_study.py).
SMOLLM2_QUICK = SMOLLM2_WINDOWS["quick"]
SMOLLM2_FULL = SMOLLM2_WINDOWS["full"]
GEMMA3_FULL = GEMMA3_WINDOWS  # Gemma 3 270M at --full only (<bos> first: its convention)


def subjects(ctx: Context) -> list[Subject]:
    """The models PB20 judges (:func:`posflow.simulate.models.subjects.live_subjects`, the same
    windows PB15 reports): the toy LM, SmolLM2-135M when installed, Gemma 3 270M at full size
    when installed."""
    return live_subjects(ctx.full, ctx.seed, smollm2=_smollm2_installed(),
                         gemma3=installed("gemma3-270m"))  # fmt: skip


# ----------------------------------------------------------------------------------------------
# the verdict of one model


def _model_evidence(sub: Subject, ctx: Context, family: int, cf_family: int):
    """Measure one model; judge the cross-fitted comparison; bootstrap the in-sample one."""
    model, ids, note, data = measured(sub)  # one measurement per model, shared with PB15
    plain = [
        R.influence_vs_plain(sub.tag, sub.name, model, ids[0], data.influence[0]),
        *R.lambdas_vs_plain(sub.tag, sub.name, model, ids[0], data.lambdas[0]),
    ]
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    bs = by_evidence_key(bootstrap(data, sub.bootstrap, ctx.seed))
    level = 1.0 - family_level(ALPHA, family)
    cf_level = 1.0 - family_level(ALPHA, cf_family)
    cms, ctables, cfig, cdec, cctl = crossfit_evidence(sub, data, bs.perm, cf_level, ctx.seed,
                                                       what, rounding(L, n))  # fmt: skip
    ms, diff_rows = judge(sub.tag, sub.name, bs, level, N)
    lib, lib_decision = library_check(sub, bs, L, n)
    sub_status, _ = combine([*cdec, lib_decision])
    each = "; ".join(f"{m.key.split('.crossfit.verdict_', 1)[1]} {m.value}" for m in cms
                     if ".crossfit.verdict_" in m.key)  # fmt: skip
    ms = [info(f"{sub.tag}.verdict", f"{sub_status} (every rollout, its fitted α and interval: "
               f"{each})", label=f"{sub.name}: sub-verdict"), *cms, *plain, lib, *ms,
          *reported(sub, bs, N)]  # fmt: skip
    tables = [*ctables, *model_tables(sub.tag, sub.name, bs, level, sub.bootstrap, family, ALPHA,
                                      diff_rows)]  # fmt: skip
    ctl = ((bs.w1["b"] - bs.w1["a"], level, -rounding(L, n)), (cctl, cf_level, -rounding(L, n)))
    figs = [model_figure(sub.tag, bs, level, diff_rows, note), cfig]
    scope = Scope(
        **scope_of(
            sub.tag,
            n,
            f"{N} windows",
            seeds=ctx.seed,
            split="one seeded random split into halves, both directions",
        )
    )
    ms.insert(1, info(f"{sub.tag}.scope", scope.line(), label=f"{sub.name}: the sub-verdict's "
                      "scope"))  # fmt: skip
    return ms, tables, figs, note, ctl, scope


_CITES = (
    cite("posflow.simulate.models.crossfit:crossfit",
         "both directions recomputed with plain means over each half, the library's kernels and "
         "rollout at the fitted parameters, the nulls refitted by posflow.simulate.nulls, the "
         "metrics by posflow.simulate.compare and scipy (pb20_crossfit.library_reference); each "
         "rollout's α reproduces the mean position of the half it was fitted on",
         "toy.crossfit_vs_library", "toy.crossfit_fit_residual"),
    cite("posflow.simulate.models.crossfit:split_interval",
         "the interval over the splits written out through scipy.stats (t.interval; the "
         "jackknife se by scipy.stats.sem, the split variance by numpy)",
         "toy.split_interval_vs_scipy"),
    cite("posflow.simulate.models.crossfit:jackknife_interval",
         "the jackknife standard error and Student's t quantile written out",
         "jackknife_interval_vs_direct"),
    cite("posflow.simulate.models.measure:measure",
         "plain torch autograd of p* with respect to the embedding output, window 0",
         "toy.influence_vs_plain_torch"),
    cite("posflow.simulate.models.profiles_bootstrap:bootstrap",
         "an independent batched rollout of every profile on the full sample (library_gap)",
         "toy.library_vs_batched_rollout"),
    cite("posflow.simulate.models.profiles:percentile_interval",
         "linear interpolation of the sorted resamples written out",
         "percentile_interval_vs_direct"),
    cite("posflow.simulate.models.study:best_profile",
         "a direct loop over the stored W1 of (a)–(e)", "smollm2_study.best_vs_direct"),
)  # fmt: skip


@register(
    "PB20",
    "[ours]",
    "on a measured causal LM within its training context, a residual-aware rollout (measured "
    "λ_t, scaled by one fitted α as clip(α λ_t), through the measured head-averaged kernels (b), "
    "[A]'s ALiBi + content kernels (c), value-norm (d) or sink-aware kernels (e)) predicts the "
    "measured gradient influence better in W1/(n−1) than the attention-only rollout (a) with "
    "one fitted constant λ and than four nulls with one fitted parameter each: geometric "
    "recency and a linear ramp fitted to the mean position, the rollout through uniform "
    "kernels, and the rollout with λ_t moved to other layers — every parameter fitted on one "
    "half of the windows and scored on the other (cross-fitting, both directions averaged; "
    "delete-one-window jackknife t interval of W1(rollout) − W1(rival) below 0 for every rival, "
    "family-wise 5 %, Bonferroni over the model's own rollouts × rivals); every rollout's verdict "
    "and fitted α with its interval are reported",
    assumptions=(
        "a causal LM trained locally (posflow's ALiBi LM on the standard library), and "
        "SmolLM2-135M when installed (each model gets its own sub-verdict)",
        "windows independent (the jackknife leaves one out; the bootstrap of the in-sample "
        "comparison resamples them)",
    ),
    compares=_CITES,
)
def pb20(ctx: Context) -> Evidence:
    """Claim PB20: per model, the cross-fitted rollouts against (a) and the nulls with one
    parameter each (``crossfit``, recomputed by the library; the judge ``jackknife_interval``
    written out; ``kit.decide`` at the Bonferroni level); the measured influence against plain
    torch autograd (``measure``); the in-sample comparison of issue 12 reported beside it
    (``percentile_interval`` against the sorted resamples; the library rollout against an
    independent batched one in ``bootstrap``); the stored study (a missing or unreadable file
    fails naming its path) with ``best_profile`` against a direct loop; every reported number
    against the stored reference (:mod:`.pb20_refs`). Negative controls: both judges on
    replicates past / straddling the bound (and blocked), the regression on a moved reference
    number."""
    if kit.optional_torch() is None:
        return kit.no_torch()
    ms, tables, figs, notes, family, parts, ctl, extra, scopes = _collect(ctx)
    ms += R.decision_controls(*ctl[0]) + jackknife_controls(*ctl[1])
    for part, (identity, values) in parts.items():
        study = part in R.STUDIES
        tol, why, floor = ((R.STUDY_TOL, R.STUDY_REASON, 1e-2) if study
                           else (R.LIVE_TOL, R.LIVE_REASON, R.LIVE_FLOOR))  # fmt: skip
        what = (
            "every number of the stored study's tables"
            if study
            else (f"every number PB20 reports of {part} (measurements and tables)")
        )
        rest = None if study else (lambda k: not R.fitted(k))  # fitted parameters: apart
        ms += R.regression_measurements(part, identity, values, ctx.size, tol, why, what, floor,
                                        names=rest)  # fmt: skip
        if not study:
            ms += R.regression_measurements(part, identity, values, ctx.size, R.FIT_TOL,
                                            R.FIT_REASON, f"the fitted parameters of {part}",
                                            floor, names=R.fitted, tag="_fitted")  # fmt: skip
    cf_family, bs_family = family
    return Evidence(
        ms,
        tables=tables,
        figures=figs,
        setup="; ".join(notes)
        + f". Each window measured alone. Judged: every predictor with one fitted parameter, "
        f"fitted on one half of the windows (split seeded [{ctx.seed}, 24]) and scored on the "
        f"other, both directions averaged; delete-one-window jackknife t intervals, {cf_family} "
        f"comparisons at family-wise {100 * ALPHA:g}% (each interval "
        f"{100 * (1 - family_level(ALPHA, cf_family)):.4g}%). Reported: the in-sample "
        f"comparison of issue 12, percentile bootstrap over windows (seed [{ctx.seed}, 15]; "
        f"replicate 0 is the full sample), {bs_family} comparisons at family-wise "
        f"{100 * ALPHA:g}% (each interval {100 * (1 - family_level(ALPHA, bs_family)):.3g}%)."
        + extra,
        absent=() if _smollm2_installed() else ("smollm2-135m",),
        scopes=scopes,
    )


def _collect(ctx: Context):
    """Every model's evidence and the stored study's, with each part's identity and numbers."""
    from posflow.proofs_checks.claims.pb20_study import study_evidence

    subs = subjects(ctx)
    family, cf_family = families()
    ms, tables, figs, notes, parts, ctl, scopes = [], [], [], [], {}, None, {}
    for sub in subs:
        m, t, f, note, c, scopes[sub.tag] = _model_evidence(sub, ctx, family, cf_family)
        ident = f"{note}; seed {ctx.seed}; {cf_family} comparisons (Bonferroni)"
        parts[sub.tag] = (ident, R.flatten(m, t))
        ms += m
        tables += t
        figs += f
        notes.append(note)
        ctl = ctl or c
    extra = ""
    for tag, (_, name) in R.STUDIES.items():  # the stored studies, every model
        store, readable = R.load_study(tag)
        ms.append(readable)
        if store is not None:
            m, t, f, more = study_evidence(store, tag, name)
            parts[tag] = (store["setup"]["command"], R.flatten(m, t, ranks=True))  # exact
            ms += [*m, R.best_vs_direct(store, tag)]
            tables += t
            figs += f
            extra += " " + more
    sms, stables, sscope = sink_evidence()  # the sink intervention: (e)'s assumption, causally
    ms += sms
    tables += stables
    if sscope is not None:
        scopes["smollm2_sinks"] = sscope
    return ms, tables, figs, notes, (cf_family, family), parts, ctl, extra, scopes


def families() -> tuple[int, int]:
    """(in-sample family, cross-fitted family): each model's own comparisons only — rivals of
    (b); rollouts × rivals — so installing or removing another model moves no sub-verdict."""
    return len(RIVALS), len(CANDIDATES) * len(CF_RIVALS)


def parts(ctx: Context) -> dict:
    """``{part: (identity, {name: number})}`` of a PB15 run (what the reference stores)."""
    return _collect(ctx)[5]


# -- mutants: breaks of the routines PB15 runs through ---------------------------------------------


# fmt: off
add_mutant("PB20", "transposed-measured-kernel", kit.DENSE_APPLY, kit.transposed_dense_apply,
           "the rollout through a measured kernel applies Aᵀ instead of A (p Aᵀ)")
add_mutant("PB20", "residual-dropped", kit.RESIDUAL_STEP, R.residual_dropped,
           "the rollout step drops the residual mixing: p ↦ p A whatever λ_t")
add_mutant("PB20", "influence-is-attention", "posflow.simulate.models.measure:measure",
           R.influence_is_attention,
           "the gradient-influence measurement returns the attention-rollout profile")
# fmt: on
add_mutant(
    "PB20",
    "rollout-float32",
    "posflow.simulate.rollout:influence",
    R.influence_float32,
    "the library rollout's profile rounded to float32",
)
add_mutant(
    "PB20",
    "decide-on-point-estimate",
    "posflow.proofs_checks.claims.pb20_refs:rival_decision",
    R.loosened_rival,
    "the rival's interval collapsed onto its point estimate (a loosened judge)",
)
add_mutant(
    "PB20",
    "crossfit-in-sample",
    "posflow.simulate.models.crossfit:_direction",
    R.crossfit_in_sample,
    "cross-fitting fits every parameter on the half it then scores (in sample)",
)


def write_reference(size: str = "quick"):
    """Add this run's parts at ``size`` to ``references/pb20.json`` (the stored study, the toy
    LM, SmolLM2 when installed; a part's entry of the same identity is replaced):
    ``python -m posflow.proofs_checks.claims.pb20_like_for_like``. The identity names the Bonferroni
    family (the toy LM's intervals depend on whether SmolLM2 is measured) and the toy LM's
    weights (a retrained toy LM is another identity)."""
    return store_reference(R.REFERENCE, parts(Context(size=size)), size)


add_mutant("PB20", "split-variance-dropped", "posflow.simulate.models.crossfit:split_interval",
           R.split_variance_dropped,
           "the interval over the random splits without the split variance")  # fmt: skip


if __name__ == "__main__":  # pragma: no cover - the documented command
    print(write_reference())
