"""Claim PB17 (ours): lost in the middle on a real model, measured and predicted.

On SmolLM2-135M (installed with ``posflow models install smollm2-135m``) a synthetic key–value
retrieval task (:mod:`posflow.simulate.models.retrieval`) gives the position curve: the mean
teacher-forced log-prob of the queried value as a function of the queried key's line k. The
prediction is the rollout profile that predicts this model's gradient influence best in the
stored study of issue 13 (least W1 averaged over n = 128 … 1024, chosen before the task is run;
:func:`posflow.simulate.models.study.best_profile`), built from λ_t, the mean attention, the content
and the value norms measured on prompts of the same task
(:func:`posflow.simulate.models.measure.measure`), rolled out from the query's last token and
summed over each key line. All five profiles (a)–(e) are reported; one is judged.

The statement: the curve has an interior dip and its Spearman correlation with the
predicted per-line profile is positive with its bootstrap interval above 0.

Two controls keep the numbers honest: the query of position k repeats line k's key (the positions
are labelled right), and the teacher-forced log-prob of a few prompts equals a direct full forward
pass with ``torch.log_softmax`` at the value's token offsets.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    fp_tol,
    holds,
    info,
    param_tol,
    register,
    undecided,
)

MODEL = "smollm2-135m"
INSTALL = f"posflow models install {MODEL}"
# quick: K = 10 alone with 6 contexts (6 prompts per position) instead of full's three K with
# 30 — the suite runs this check once per mutant, and K = 10 and 20 together cost ~40 s of one
# core; quick is a smoke test of the pipeline whose intervals are wide (full decides). Full took
# 960 s wall on 2 shared cores (K = 10: 319 s, 20: 209 s, 50: 413 s).
QUICK = {"Ks": (10,), "contexts": 6, "measured_prompts": 2}
FULL = {"Ks": (10, 20, 50), "contexts": 30, "measured_prompts": 10}
DIP_DEPTH = 0.1  # nats: the interior minimum must lie this far below the lower end
DEPTH_GRID = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)
CONFIDENCE = 0.95
RESAMPLES = 2000
CONTROL_PROMPTS = 1  # per K: prompts re-scored by a direct full forward pass
# float32 logits (|z| ≲ 30) through two differently shaped forward passes (cached prefix vs
# full): ≲ 1e-5 per logit after 30 layers; the log-softmax adds ≲ 1e-6; 3 value tokens summed
LOGPROB_TOL = 1e-3


@functools.lru_cache(maxsize=1)
def _model():
    from posflow.simulate.models.hub import load_pretrained

    model, _, tok = load_pretrained(MODEL)
    return model, tok


def _installed() -> bool:
    try:
        from posflow.simulate.models.hub import installed_models
    except ImportError:
        return False
    return installed_models().get(MODEL) is not None


def _direct_logprob(model, task, c, k) -> float:
    """log p(value | prompt (c, k)) from one full forward pass and torch.log_softmax."""
    import torch

    ids = torch.from_numpy(task.prompt(c, k, with_value=True)[None])
    n, m = task.prompt_length, task.value_length
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].double(), dim=-1)
    tgt = ids[0, n : n + m]
    return float(logp[torch.arange(n - 1, n - 1 + m), tgt].sum())


def _one_k(model, tok, K, cfg, seed, best):
    from posflow.simulate.models.measure import measure
    from posflow.simulate.models.predict import predict_profiles, predict_sink_profiles
    from posflow.simulate.models.retrieval import (
        bootstrap_spearman,
        build_task,
        line_profile,
        position_curve,
        score,
    )
    from posflow.simulate.models.study import PREDICT_NAMES

    t0 = time.perf_counter()
    task = build_task(tok, K, cfg["contexts"], seed=seed + K)
    sc = score(model, task)
    t_score = time.perf_counter() - t0
    lp = position_curve(sc.logprob, confidence=CONFIDENCE, resamples=RESAMPLES, seed=seed)
    acc = position_curve(sc.correct.astype(float), confidence=CONFIDENCE, resamples=RESAMPLES,
                         seed=seed)  # fmt: skip
    Cm = min(cfg["measured_prompts"], task.num_contexts)
    pairs = [(c, (c * K) // Cm) for c in range(Cm)]  # queries spread over the positions
    meas = measure(model, task.prompts(pairs), influence=False, value_norms=True)
    profiles = {**predict_profiles(meas), **predict_sink_profiles(meas)}
    rhos = {}
    for key, name in PREDICT_NAMES.items():
        lp_k = line_profile(profiles[name], task)
        rhos[key] = (lp_k, *bootstrap_spearman(sc.logprob, lp_k, confidence=CONFIDENCE,
                                                resamples=RESAMPLES, seed=seed))  # fmt: skip
    prof, rho, lo, hi, dropped = rhos[best]
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
        "task": task, "scores": sc, "logprob": lp, "accuracy": acc, "profile": prof,
        "rhos": rhos,
        "rho": rho, "rho_lo": lo, "rho_hi": hi, "dropped": dropped, "labels_ok": labels_ok,
        "direct_err": direct_err, "seconds": time.perf_counter() - t0, "score_seconds": t_score,
        "measured_prompts": Cm,
    }  # fmt: skip


def _dip(curve):
    mean = curve.mean
    K = mean.size
    k = int(np.argmin(mean))
    depth = float(min(mean[0], mean[-1]) - mean[k])
    sep = float(min(curve.lo[0], curve.lo[-1]) - curve.hi[k])
    return k, 0 < k < K - 1, depth, sep


@register(
    "PB17",
    "[ours]",
    "on the real model, the position curve of the key–value retrieval task has an interior "
    "dip, and its rank correlation with the best predicted influence profile over the key "
    "positions is positive with its interval above 0",
    assumptions=(
        f"SmolLM2-135M installed ({INSTALL})",
        "prediction: the rollout profile among (a)–(e) that best predicts SmolLM2's gradient "
        "influence in the stored study (PB15, issue 13), from λ_t, attention, content and "
        "value norms measured on prompts of the task",
    ),
)
def pb17(ctx: Context) -> Evidence:
    missing = _missing_model()
    if missing is not None:
        return missing
    from posflow.simulate.models.study import PROFILES

    cfg = FULL if ctx.full else QUICK
    best, why_best = _judged_profile()
    best_label = PROFILES[best]
    t0 = time.perf_counter()
    model, tok = _model()
    load_s = time.perf_counter() - t0
    res = {K: _one_k(model, tok, K, cfg, ctx.seed, best) for K in cfg["Ks"]}
    ms = [info("best_profile", f"{best}: {best_label}", label=f"judged profile: {why_best}")]
    sens, curve_rows, panels, rho_rows = [], [], [], []
    for K, r in res.items():
        lp, acc = r["logprob"], r["accuracy"]
        k, interior, depth, sep = _dip(lp)
        ms += _k_measurements(K, r, k, interior, depth, sep)
        for key, (_, rho_k, lo_k, hi_k, _) in r["rhos"].items():
            rho_rows.append([K, key, PROFILES[key], rho_k, lo_k, hi_k, key == best])
        for d in DEPTH_GRID:
            sens.append([d, K, depth, depth >= d, bool(interior and depth >= d and sep >= 0)])
        for j in range(K):
            curve_rows.append([K, j, lp.mean[j], lp.lo[j], lp.hi[j], acc.mean[j], acc.lo[j],
                               acc.hi[j], r["profile"][j]])  # fmt: skip
        panels += _k_panels(K, r, best, PROFILES)
    task0 = next(iter(res.values()))["task"]
    ms.append(info("load_seconds", load_s, unit="s"))
    return Evidence(
        ms,
        figures=[Figure("PB17_lost_in_the_middle",
                        f"PB17: key–value retrieval on {MODEL}, measured vs profile {best}",
                        panels)],
        tables=_tables_pb17(sens, rho_rows, curve_rows),
        setup=_setup_pb17(cfg, task0, best, best_label, why_best),
    )  # fmt: skip


def _missing_model():
    """The INCONCLUSIVE evidence when torch, transformers or the model is missing, else None."""
    try:
        import torch  # noqa: F401
        import transformers  # noqa: F401
    except ImportError:
        return Evidence([undecided("model_available", False, "torch and transformers are needed")])
    if not _installed():
        return Evidence(
            [undecided("model_available", False, f"{MODEL} is not installed; {INSTALL}")],
            setup=f"PB17 measures {MODEL}; install it with: {INSTALL}",
        )
    return None


def _judged_profile():
    """The profile judged (chosen before the task is run) and why: the stored study's best."""
    from posflow.simulate.models.study import best_profile, stored_study

    store = stored_study()
    if store is None or not store.get("runs"):
        return "b", "no stored SmolLM2 study (docs/smollm2_study.py): rollout (b)"
    best, mean_w1 = best_profile(store)
    why_best = (
        f"least W1/(n−1) averaged over the stored study's lengths n = "
        f"{', '.join(sorted(store['runs'], key=int))} (English text; "
        + ", ".join(f"{k} {v:.3f}" for k, v in mean_w1.items())
        + ")"
    )
    return best, why_best


_DEPTH_REASON = (
    f"δ = {DIP_DEPTH} nats: a dip must be at least δ below the lower end of the curve "
    "(a modelling cut-off for 'a dip'); table dip_depth_sensitivity gives the verdict at "
    f"δ ∈ {DEPTH_GRID}"
)


def _k_measurements(K, r, k, interior, depth, sep):
    """The comparisons, controls and reported numbers of one K."""
    lp, acc = r["logprob"], r["accuracy"]
    C = r["task"].num_contexts
    return [
        holds(f"dip_interior_K{K}", interior,
              label=f"K = {K}: the minimum of the mean log-prob (at k = {k}) is interior"),
        at_least(f"dip_depth_K{K}", depth, DIP_DEPTH, param_tol("dip_depth", 0.0, _DEPTH_REASON),
                 unit="nats", label=f"K = {K}: min(mean[0], mean[K−1]) − mean[k_min]"),
        at_least(f"dip_separation_K{K}", sep, 0.0, unit="nats",
                 label=f"K = {K}: min of the ends' lower {CONFIDENCE:.0%} bounds − the "
                 "minimum's upper bound (percentile bootstrap over contexts)"),
        at_least(f"spearman_K{K}", r["rho"], 0.0,
                 label=f"K = {K}: Spearman ρ(mean log-prob, predicted per-line profile)"),
        at_least(f"spearman_lo_K{K}", r["rho_lo"], 0.0,
                 label=f"K = {K}: lower {CONFIDENCE:.0%} bootstrap bound of ρ"),
        holds(f"positions_labelled_K{K}", r["labels_ok"], role="control",
              label=f"K = {K}: the query of position k repeats line k's key (all prompts)"),
        at_most(f"logprob_vs_direct_K{K}", r["direct_err"], 0.0,
                fp_tol(LOGPROB_TOL, "float32 logits (|z| ≲ 30) of a cached-prefix and a "
                       "full forward pass differ by ≲ 1e-5 each after 30 layers; 3 value "
                       "tokens and the log-softmax: ≲ 1e-4 ≤ 1e-3"),
                role="control", unit="nats",
                label=f"K = {K}: max |teacher-forced log-prob − direct forward pass with "
                f"torch.log_softmax| ({min(CONTROL_PROMPTS, C)} prompts)"),
        info(f"spearman_hi_K{K}", r["rho_hi"],
             label=f"K = {K}: upper {CONFIDENCE:.0%} bootstrap bound of ρ"),
        info(f"argmin_K{K}", k, label=f"K = {K}: position of the minimum"),
        info(f"mean_logprob_K{K}", float(lp.mean.mean()), unit="nats",
             label=f"K = {K}: mean log-prob over positions"),
        info(f"accuracy_K{K}", float(acc.mean.mean()),
             label=f"K = {K}: exact-match accuracy over positions"),
        info(f"seconds_K{K}", r["seconds"], unit="s"),
    ]  # fmt: skip


def _k_panels(K, r, best, profiles):
    """The three panels of one K: measured log-prob, exact match, predicted profiles."""
    lp, acc = r["logprob"], r["accuracy"]
    C = r["task"].num_contexts
    x = list(range(K))
    prof = r["profile"] / r["profile"].sum()
    return [
        Panel(f"measured, K = {K} ({C} prompts per position)", "key position k",
              "log p(value) [nats]",
              [Series(f"{CONFIDENCE:.0%} bootstrap band", x, lp.mean, kind="band",
                      lo=lp.lo, hi=lp.hi, color="measured"),
               Series("mean log-prob", x, lp.mean, kind="line", color="measured")]),
        Panel(f"exact match, K = {K}", "key position k", "accuracy",
              [Series(f"{CONFIDENCE:.0%} bootstrap band", x, acc.mean, kind="band",
                      lo=acc.lo, hi=acc.hi, color="measured"),
               Series("accuracy", x, acc.mean, kind="markers", color="measured")],
              ylim=(0, 1)),
        Panel(f"predicted ({best}), K = {K}, ρ = {r['rho']:.2f}", "key position k",
              r"$\sum_{j \in \mathrm{line}\ k}\, p(j)$, normalised",
              [Series(profiles[best], x, prof, color="residual")]
              + [Series(profiles[k], x, v[0] / v[0].sum(), style="--")
                 for k, v in r["rhos"].items() if k != best]),
    ]  # fmt: skip


def _tables_pb17(sens, rho_rows, curve_rows):
    return [
        Table("dip_depth_sensitivity", "dip verdict at other depth thresholds δ",
              ["delta_nats", "K", "depth_nats", "depth_passes", "dip_passes"], sens,
              note="dip_passes: interior minimum, depth ≥ δ and the bootstrap separation ≥ 0"),
        Table("spearman_by_profile",
              f"Spearman ρ of the mean log-prob curve with each predicted per-line profile "
              f"({CONFIDENCE:.0%} bootstrap over contexts)",
              ["K", "profile", "what", "rho", "lo", "hi", "judged"], rho_rows),
        Table("position_curves", "per-position curves",
              ["K", "k", "logprob_mean", "logprob_lo", "logprob_hi", "accuracy",
               "accuracy_lo", "accuracy_hi", "predicted_line_mass"], curve_rows),
    ]  # fmt: skip


def _setup_pb17(cfg, task0, best, best_label, why_best):
    return (
        f"{MODEL} (float32, eager attention); K ∈ {cfg['Ks']}, {cfg['contexts']} random contexts "
        f"(seeded), each queried at every position, so {cfg['contexts']} prompts per position; "
        f"keys one-token words, values 3-digit numbers (3 tokens); a line is "
        f"{task0.line_length} tokens after a {task0.preamble_length}-token preamble. Log-prob "
        "summed over the value's 3 tokens under teacher forcing; exact match = every value "
        "token the teacher-forced argmax (≡ greedy decoding). Intervals: percentile bootstrap "
        f"over contexts, {RESAMPLES} resamples, {CONFIDENCE:.0%}. Prediction: λ_t and mean "
        f"attention measured on {cfg['measured_prompts']} prompts per K (queries spread over "
        f"the positions), profile {best} ({best_label}; chosen beforehand: {why_best}) from the "
        "query's last token, summed over each key line (newline included); the profile is held "
        "fixed in the bootstrap of ρ. The other profiles' ρ are reported in table "
        "spearman_by_profile, not judged."
    )


# -- mutants ------------------------------------------------------------------------------------
def _shifted_queries(original):
    def build_task_with_shifted_queries(*args, **kwargs):
        task = original(*args, **kwargs)
        task.query_ids = np.roll(task.query_ids, -1, axis=1)  # label k now asks key k + 1
        task.value_ids = np.roll(task.value_ids, -1, axis=1)
        return task

    return build_task_with_shifted_queries


def _wrong_offset(original):
    def value_scores_one_token_early(logits, targets):
        import torch

        return original(torch.roll(logits, 1, dims=1), targets)  # z_{n−2+i} scores v_i

    return value_scores_one_token_early


add_mutant(
    "PB17",
    "query-position-shifted",
    "posflow.simulate.models.retrieval:build_task",
    _shifted_queries,
    "the prompt labelled position k queries key k + 1 (cyclically)",
)
add_mutant("PB17", "logprob-wrong-offset", "posflow.simulate.models.retrieval:_value_scores",
           _wrong_offset, "value token i scored by the logits one position too early")  # fmt: skip
