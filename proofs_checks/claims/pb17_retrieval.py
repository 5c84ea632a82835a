"""Claim PB17 (ours): lost in the middle on real models, measured and predicted.

On SmolLM2-135M (installed with ``posflow models install smollm2-135m``) and, at --full size, on
Gemma 3 270M when installed (``posflow models install gemma3-270m``; its prompts start with <bos>,
its tokenizer's convention; its measurement keys carry the prefix ``gemma3_``) a synthetic key–value
retrieval task (:mod:`posflow.simulate.models.retrieval`) gives the position curve: the mean
teacher-forced log-prob of the queried value as a function of the queried key's line k. The
prediction is the rollout profile that predicts this model's gradient influence best in its
stored study (least W1 averaged over its stored n, chosen before the task is run;
:func:`posflow.simulate.models.study.best_profile`) with its one parameter α (λ_t → clip(αλ_t))
cross-fitted over contexts (:mod:`posflow.simulate.models.retrieval_fit`, issue 41): fitted to
the measured gradient influence's mean position on one half of the contexts, scored on the other
half's curve, both directions over 10 random splits, the bootstrap refitting α; α = 1 and the
measured influence's own ρ (the ceiling) are reported beside it, and the five profiles (a)–(e) at
α = 1. Each model's intervals are at its own Bonferroni level (its dip and ρ at each K).

The statement: the curve has an interior dip and its Spearman correlation with the
predicted per-line profile is positive with its bootstrap interval above 0.

Two controls keep the numbers honest: the query of position k repeats line k's key (the positions
are labelled right), and the teacher-forced log-prob of a few prompts equals a direct full forward
pass with ``torch.log_softmax`` at the value's token offsets.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from posflow.proofs_checks.claims import pb17_figures as F
from posflow.proofs_checks.claims import pb17_refs as R
from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    add_mutant,
    cite,
    holds,
    info,
    register,
    undecided,
)
from posflow.simulate.models.subjects import installed

MODEL = R.MODEL
INSTALL = f"posflow models install {MODEL}"
# quick: K = 10, 8 contexts (halves of 4; full: three K, 30) — the suite runs this check once per
# mutant, and quick's intervals are wide (full decides). The fit's bootstrap refits α in each
# replicate (~10 ms at K = 10 on one core, ~0.15 s at K = 50).
QUICK = {"Ks": (10,), "contexts": 8, "splits": 10, "fit_resamples": 400}
FULL = {"Ks": (10, 20, 50), "contexts": 30, "splits": 10, "fit_resamples": 1000}
DIP_DEPTH = R.DIP_DEPTH
DEPTH_GRID = R.DEPTH_GRID
CONFIDENCE = R.CONFIDENCE
RESAMPLES = R.RESAMPLES
CONTROL_PROMPTS = R.CONTROL_PROMPTS
LOGPROB_TOL = R.LOGPROB_TOL


@functools.lru_cache(maxsize=2)
def _model(key: str = MODEL):
    from posflow.simulate.models.hub import load_pretrained

    model, _, tok = load_pretrained(key)
    return model, tok


def models(ctx: Context) -> list[str]:
    """The models measured at ctx's size: SmolLM2-135M; Gemma 3 270M too at --full size when
    installed (its prompts start with <bos>, its tokenizer's convention)."""
    return [MODEL] + (["gemma3-270m"] if ctx.full and installed("gemma3-270m") else [])


def _installed() -> bool:
    return installed(MODEL)


def _direct_logprob(model, task, c, k) -> float:
    """log p(value | prompt (c, k)) from one full forward pass and torch.log_softmax."""
    import torch

    ids = torch.from_numpy(task.prompt(c, k, with_value=True)[None])
    n, m = task.prompt_length, task.value_length
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
    tgt = ids[0, n : n + m]
    return float(logp[torch.arange(n - 1, n - 1 + m), tgt].sum())


def _one_k(model, tok, K, cfg, seed, best, bos=False):
    from posflow.simulate.models.measure import measure
    from posflow.simulate.models.predict import predict_profiles, predict_sink_profiles
    from posflow.simulate.models.retrieval import (
        bootstrap_spearman,
        build_task,
        line_profile,
        position_curve,
        score,
    )
    from posflow.simulate.models.retrieval_fit import crossfit_retrieval
    from posflow.simulate.models.study import PREDICT_NAMES

    t0 = time.perf_counter()
    _, level, conf = F.family(cfg["Ks"])  # this model's family: its own comparisons only
    task = build_task(tok, K, cfg["contexts"], seed=seed + K, bos=bos)
    sc = score(model, task)
    t_score = time.perf_counter() - t0
    lp = position_curve(sc.logprob, confidence=conf, resamples=RESAMPLES, seed=seed)
    acc = position_curve(sc.correct.astype(float), confidence=conf, resamples=RESAMPLES,
                         seed=seed)  # fmt: skip
    C = task.num_contexts
    pairs = [(c, (c * K) // C) for c in range(C)]  # one prompt per context, spread over k
    meas = measure(model, task.prompts(pairs), value_norms=True, heads=False, qk="summary",
                   per_sequence=True)  # fmt: skip
    profiles = {**predict_profiles(meas), **predict_sink_profiles(meas)}
    rhos = {}
    for key, name in PREDICT_NAMES.items():  # α = 1, pooled over all contexts: reported only
        lp_k = line_profile(profiles[name], task)
        rhos[key] = (lp_k, *bootstrap_spearman(sc.logprob, lp_k, confidence=CONFIDENCE,
                                                resamples=RESAMPLES, seed=seed))  # fmt: skip
    windows = F.windows_of(meas)
    fit = crossfit_retrieval(sc.logprob, windows, task, rollout=best, splits=cfg["splits"],
                             resamples=cfg["fit_resamples"], seed=seed)  # fmt: skip
    rho, lo, hi, dropped = fit.interval("fitted", conf)
    # controls: positions labelled right; scores equal a direct forward pass
    q = task.query_ids.shape[2]
    starts = task.line_starts
    labels_ok = all(
        np.array_equal(task.query_ids[c, k], task.context_ids[c, starts[k] : starts[k] + q])
        for c in range(task.num_contexts)
        for k in range(K)
    )
    ctl = [(c, (c * 7 + 3) % K) for c in range(min(CONTROL_PROMPTS, task.num_contexts))]
    direct_err = max(abs(_direct_logprob(model, task, c, k) - sc.logprob[c, k]) for c, k in ctl)
    return {
        "task": task, "scores": sc, "logprob": lp, "accuracy": acc, "profile": fit.profile,
        "rhos": rhos, "raw_profiles": {k: profiles[n] for k, n in PREDICT_NAMES.items()},
        "rho": rho, "rho_lo": lo, "rho_hi": hi, "dropped": dropped, "labels_ok": labels_ok,
        "direct_err": direct_err, "seconds": time.perf_counter() - t0, "score_seconds": t_score,
        "measured_prompts": C, "fit": fit, "windows": windows, "level": level,
        "confidence": conf,
    }  # fmt: skip


def _dip(curve):
    mean = curve.mean
    K = mean.size
    k = int(np.argmin(mean))
    depth = float(min(mean[0], mean[-1]) - mean[k])
    sep = float(min(curve.lo[0], curve.lo[-1]) - curve.hi[k])
    return k, 0 < k < K - 1, depth, sep


def run_tasks(ctx: Context, store=None, key: str = MODEL):
    """{K: the measurements of :func:`_one_k`} of hub model ``key`` at ctx's size, and the model
    (PB17's data)."""
    from posflow.simulate.models.study import BOS, best_profile

    if store is None:
        store, _ = R.load_study(key)
    cfg = FULL if ctx.full else QUICK
    model, tok = _model(key)
    best = best_profile(store)[0]
    bos = BOS[key] == "prepend"
    return {K: _one_k(model, tok, K, cfg, ctx.seed, best, bos) for K in cfg["Ks"]}, model


_RET = "posflow.simulate.models.retrieval"
_CITES = (
    cite(f"{_RET}:position_curve", "a direct loop over the same context resamples (means and "
         "numpy quantiles)", "position_curve_vs_direct_K10"),
    cite(f"{_RET}:bootstrap_spearman", "the correlation of directly counted ranks, and scipy."
         "spearmanr on every resample", "spearman_vs_rank_formula_K10",
         "spearman_lo_vs_scipy_K10"),
    cite(f"{_RET}:line_profile", "a direct sum of the profile over each key line's tokens",
         "line_profile_vs_direct_K10"),
    cite(f"{_RET}:score", "one full forward pass with torch.log_softmax at the value's offsets",
         "logprob_vs_direct_K10"),
    cite(f"{_RET}:build_task", "the context's key tokens at line k (every prompt)",
         "positions_labelled_K10"),
    cite("posflow.simulate.models.study:best_profile", "a direct loop over the stored study's "
         "W1 of (a)–(e)", "best_profile_vs_direct_K10"),
    cite("posflow.simulate.models.retrieval_fit:crossfit_retrieval", "split 0 and two bootstrap "
         "replicates recomputed directly: plain sums, posflow.simulate.rollout.influence through "
         "dense kernels, α by bisection on a 129-point grid, counted ranks",
         "crossfit_vs_direct_K10"),
)  # fmt: skip


@register(
    "PB17",
    "[ours]",
    "on each measured real model, the position curve of the key–value retrieval task has an "
    "interior dip, and its rank correlation with the best predicted influence profile over the "
    "key positions, its one parameter α cross-fitted on other contexts, is positive with its "
    "interval above 0",
    assumptions=(
        f"SmolLM2-135M installed ({INSTALL}); Gemma 3 270M measured too at --full size when "
        "installed (posflow models install gemma3-270m)",
        "prediction: the rollout profile among (a)–(e) that best predicts the model's gradient "
        "influence in its stored study (read by PB15 and PB20), λ_t → clip(αλ_t) with α fitted "
        "to the measured gradient influence's mean position on one half of the contexts and "
        "scored on the other "
        "(both directions, 10 random splits; the bootstrap refits α), from λ_t, attention and "
        "gradient influence measured on one prompt of every context",
        "each model's intervals at its own Bonferroni level: 0.05 over its dip and ρ at each K",
    ),
    compares=_CITES,
)
def pb17(ctx: Context) -> Evidence:
    """Claim PB17: the interior dip and ρ > 0, each decided by the kit's rule from its interval.

    Per measured model (:func:`models`): the judged profile is ``best_profile`` of its stored
    study (a missing or unreadable study fails, naming its path). Compared with direct loops:
    ``position_curve``,
    ``bootstrap_spearman``, ``line_profile``, ``best_profile``; ``score`` against a direct
    forward pass; ``build_task``'s positions. Every reported number is compared with the stored
    reference of its model and size. Negative controls: the decision rule on intervals past and
    straddling the bound, the max-error judge on a shifted curve, the regression on a moved
    reference number.
    """
    store, readable = R.load_study()
    missing = _missing_model(readable, store)
    if missing is not None:
        return missing
    ms, figures, rows = [], [], ([], [], [], [])
    setups, scopes = [], {}
    measured = models(ctx)
    for key in measured:
        name, prefix = R.MODELS[key][:2]
        store, readable = R.load_study(key)
        if store is None:  # a missing second study fails, naming its path
            ms.append(_prefixed(prefix, [readable])[0])
            continue
        t0 = time.perf_counter()
        res, model = run_tasks(ctx, store, key)
        load_s = time.perf_counter() - t0 - sum(r["seconds"] for r in res.values())
        m, fig, r, setup, scopes[key] = _model_evidence(ctx, key, store, readable, res, model)
        m.append(info("load_seconds", load_s, unit="s"))
        ms += _prefixed(prefix, m)
        figures.append(fig)
        for acc, add in zip(rows, r, strict=True):
            acc += [[name, *row] for row in add]
        setups.append(f"{name}: {setup}")
    gemma = "gemma3-270m"  # measured at --full size only: absent there when not installed
    absent = (gemma,) if ctx.full and gemma not in measured else ()
    if absent:
        setups.append(f"{R.MODELS[gemma][0]} is not installed (posflow models install {gemma}).")
    return Evidence(ms, figures=figures, tables=F.tables_pb17(*rows), setup=" ".join(setups),
                    absent=absent, scopes=scopes)


def _prefixed(prefix: str, ms: list) -> list:
    """The measurements with ``prefix`` before each key (one model's keys among several)."""
    for m in ms:
        m.key = prefix + m.key
    return ms


def _model_evidence(ctx, key, store, readable, res, model):
    """(measurements, figure, (sensitivity, ρ, curve) rows, setup) of one measured model."""
    from posflow.simulate.models.study import BOS, PROFILES

    cfg = FULL if ctx.full else QUICK
    name, prefix = R.MODELS[key][:2]
    best, why_best = _judged_profile(store)
    ms = [readable, info("best_profile", f"{best}: {PROFILES[best]}",
                         label=f"judged profile: {why_best}"),
          F.family_measurement(name, cfg["Ks"])]  # fmt: skip
    sens, curve_rows, panels, rho_rows, fit_rows = [], [], [], [], []
    for K, r in res.items():
        lp, acc = r["logprob"], r["accuracy"]
        k, interior, depth, sep = _dip(lp)
        ms += R.k_measurements(K, r, k, depth, sep)
        ms += F.fit_measurements(K, r["fit"], r["confidence"])
        ms += F.direct_crossfit(K, r["fit"], r["windows"], r["scores"].logprob, r["task"])
        ms += R.direct_checks(r, ctx.seed, CONFIDENCE, RESAMPLES, store, best)
        fit_rows += [[K, s, *r["fit"].interval(s, r["confidence"])[:3]]
                     for s in ("alpha", "fitted", "unit", "ceiling")]  # fmt: skip
        for p, (_, rho_k, lo_k, hi_k, _) in r["rhos"].items():
            rho_rows.append([K, p, PROFILES[p], rho_k, lo_k, hi_k, p == best])
        for d in DEPTH_GRID:
            sens.append([d, K, depth, depth >= d, bool(interior and depth >= d and sep >= 0)])
        for j in range(K):
            curve_rows.append([K, j, lp.mean[j], lp.lo[j], lp.hi[j], acc.mean[j], acc.lo[j],
                               acc.hi[j], r["profile"][j]])  # fmt: skip
        panels += F.k_panels(K, r, best, PROFILES)
    ms += R.regression_measurements(res, model, ctx.size, key)
    fig = Figure("PB17_lost_in_the_middle" + (f"_{prefix.rstrip('_')}" if prefix else ""),
                 f"PB17: key–value retrieval on {name}, measured vs profile {best}", panels)
    setup = F.setup_pb17(cfg, next(iter(res.values()))["task"], best, PROFILES[best], why_best,
                         name, BOS[key] == "prepend")
    scope = F.scope_pb17(key, cfg, res, ctx.seed)
    return ms, fig, (sens, rho_rows, curve_rows, fit_rows), setup, scope



_CITED_K10 = ("position_curve_vs_direct_K10", "spearman_vs_rank_formula_K10",
              "spearman_lo_vs_scipy_K10", "line_profile_vs_direct_K10", "logprob_vs_direct_K10",
              "positions_labelled_K10", "crossfit_vs_direct_K10")  # fmt: skip


def _missing_model(readable, store):
    """The evidence when the study is unreadable (FAILS) or torch, transformers or the model is
    missing (INCONCLUSIVE; the comparisons that need the model undecided), else None."""
    ms = [readable]
    if store is not None:
        from posflow.simulate.models.study import best_profile

        ms.append(holds("best_profile_vs_direct_K10", best_profile(store)[0] == R.best_direct(
            store), label="the judged profile is the direct argmin of the mean stored W1"))
    why = ""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        why = "torch and transformers are needed"
    else:
        if not _installed():
            why = f"{MODEL} is not installed; {INSTALL}"
    if not why and store is not None:
        return None
    if not why:  # the study is unreadable: nothing to judge the curve against
        why = "no judged profile: the stored study is unreadable"
    ms.append(undecided("model_available", False, why))
    ms += [undecided(k, math.nan, why) for k in _CITED_K10 if k not in {m.key for m in ms}]
    absent = ("smollm2-135m",) if "not installed" in why else ("torch",) if "torch" in why else ()
    return Evidence(ms, setup=f"PB17 measures {MODEL}; install it with: {INSTALL}", absent=absent)


def _judged_profile(store):
    """The profile judged (chosen before the task is run) and why: the stored study's best."""
    from posflow.simulate.models.study import best_profile

    best, mean_w1 = best_profile(store)
    why_best = (
        f"least W1/(n−1) averaged over the stored study's lengths n = "
        f"{', '.join(sorted(store['runs'], key=int))} (English text; "
        + ", ".join(f"{k} {v:.3f}" for k, v in mean_w1.items())
        + ")"
    )
    return best, why_best


# -- mutants ------------------------------------------------------------------------------------
add_mutant(
    "PB17",
    "query-position-shifted",
    "posflow.simulate.models.retrieval:build_task",
    R.shifted_queries,
    "the prompt labelled position k queries key k + 1 (cyclically)",
)
add_mutant("PB17", "logprob-wrong-offset", "posflow.simulate.models.retrieval:_value_scores",
           R.wrong_offset, "value token i scored by the logits one position too early")  # fmt: skip



# (PB15's regression against SmolLM2's stored numbers also kills it — `posflow verify --mutants
# PB15` with the model installed — but the suite measures only the toy LM under PB15's mutants.)
add_mutant("PB17", "lambda-of-next-layer", "posflow.simulate.models.measure:measure",
           R.lambda_next_layer, "the measured λ_t of layer t is layer t + 1's (cyclically)")
add_mutant("PB17", "alpha-fitted-on-scored-half", "posflow.simulate.models.retrieval_fit:_sides",
           F.fit_on_scored_half, "each direction fits α on the half it scores (in sample)")
add_mutant("PB17", "decide-on-point-estimate",
           "posflow.proofs_checks.claims.pb17_refs:decision_measurement", R.decide_on_estimate,
           "the decision rule judges the point estimate, ignoring the interval (loosened judge)")


def write_reference(sizes=("quick",), keys=(MODEL,)):
    """Write ``references/pb17*.json`` from runs of PB17 at ``sizes`` on the hub models ``keys``
    (installed; ``python -m posflow.proofs_checks.claims.pb17_retrieval [quick|full] [KEY …]``;
    full takes ~15 min on SmolLM2). Returns the paths and {(key, size): the run's results}."""
    import json
    from pathlib import Path

    paths, runs = [], {}
    for key in keys:
        path = Path(__file__).parent / "references" / R.MODELS[key][2]
        out = json.loads(path.read_text()) if path.is_file() else {}
        for size in sizes:
            res, model = run_tasks(Context(size=size), key=key)
            out[size] = R.reference_values(res, model)
            runs[key, size] = res
        path.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
        paths.append(path)
    return paths, runs


if __name__ == "__main__":  # pragma: no cover - the documented command
    import sys

    args = sys.argv[1:]
    sizes = tuple(a for a in args if a in ("quick", "full")) or ("quick",)
    keys = tuple(a for a in args if a in R.MODELS) or (MODEL,)
    print(write_reference(sizes, keys)[0])
