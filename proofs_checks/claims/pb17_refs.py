"""PB17's references: the stored study it reads, its decision rule, independent recomputations of
the retrieval statistics and the regression against stored reference values (claim PB17).

- :data:`MODELS` lists the measured models (SmolLM2-135M; Gemma 3 270M at --full size);
- :func:`load_study` reads a model's packaged study; a missing or unreadable file is a failing
  measurement naming its path (never a silent fallback to another profile).
- :func:`decision_measurement` turns a :class:`~posflow.proofs_checks.kit.Decision` into a
  measurement by the kit's rule: HOLDS/FAILS judged at the deciding end of the interval,
  INCONCLUSIVE undecided; :func:`decision_controls` runs it on known-wrong intervals.
- :func:`direct_checks` recomputes ``position_curve``, ``bootstrap_spearman``, ``line_profile``
  and ``best_profile`` by direct loops.
- :func:`regression` compares every reported number with ``references/pb17.json`` (SmolLM2) or
  ``references/pb17_gemma3.json`` (written by ``python -m
  posflow.proofs_checks.claims.pb17_retrieval``, the models installed).
"""

from __future__ import annotations

import functools
import json
import math
from importlib import resources

import numpy as np

from posflow.proofs_checks.kit import (
    HOLDS,
    INCONCLUSIVE,
    Decision,
    at_least,
    at_most,
    combine,
    deviation,
    fp_tol,
    holds,
    info,
    regression,
    rejects,
    undecided,
)

MODEL = "smollm2-135m"
# the models PB17 measures: hub key → (name, measurement-key prefix, reference file, tag). SmolLM2's
# keys carry no prefix (they predate the second model); Gemma 3 270M is measured at --full size.
# The fourth entry is the model's tag of subjects.MODEL_FACTS (its scope).
MODELS = {
    "smollm2-135m": ("SmolLM2-135M", "", "pb17.json", "smollm2"),
    "gemma3-270m": ("Gemma 3 270M", "gemma3_", "pb17_gemma3.json", "gemma3"),
}
REFERENCE = MODELS[MODEL][2]
DIP_DEPTH = 0.1  # nats: the interior minimum must lie this far below the lower end
CONFIDENCE = 0.95
RESAMPLES = 2000
DEPTH_GRID = (0.0, 0.05, 0.1, 0.2, 0.5, 1.0)
CONTROL_PROMPTS = 1  # per K: prompts re-scored by a direct full forward pass
# float32 logits (|z| ≲ 30) through two differently shaped forward passes (cached prefix vs
# full): ≲ 1e-5 per logit after ≤ 30 layers; the log-softmax adds ≲ 1e-6; 3 value tokens summed
LOGPROB_TOL = 1e-3
# the regression's tolerance (the live model): float32 logits of an 18–30-layer model move by
# ~1e-6 relative between thread counts and BLAS paths; sums of 3 log-probs, means over ≤ 30
# contexts, bootstrap quantiles and line sums keep that order; 1e-4 relative (floor 1e-2 for
# values near 0)
REG_TOL = 1e-4
REG_REASON = (
    "float32 forward passes of the model differ by ~1e-6 relative between thread counts; the "
    "curves, bootstrap quantiles, line masses and ρ are continuous in them (ρ moves only when "
    "two near-equal ranks swap): 1e-4 relative, floor 1e-2"
)


def study_file(model: str = MODEL):
    """The packaged stored study of ``model`` (``posflow.simulate`` / ``study.STORES``)."""
    from posflow.simulate.models.study import STORES

    return resources.files("posflow.simulate").joinpath(STORES[model])


def load_study(model: str = MODEL):
    """(store, measurement): ``model``'s stored study and a judged ``stored_study_readable`` that
    fails, naming the path, when the file is missing, not JSON or holds no runs (store None)."""
    from posflow.simulate.models.study import best_profile

    f, name = study_file(model), MODELS[model][0]
    try:
        store = json.loads(f.read_text())
        best_profile(store)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return None, holds("stored_study_readable", False,
                           label=f"the stored {name} study {f} is readable "
                           f"({type(e).__name__}: {e})")  # fmt: skip
    return store, holds("stored_study_readable", True,
                        label=f"the stored {name} study {f} is readable")  # fmt: skip


def best_direct(store: dict) -> str:
    """The profile among (a)–(e) of least W1 averaged over the stored n, by a direct loop."""
    sums = {k: 0.0 for k in "abcde"}
    for run in store["runs"].values():
        for k in sums:
            sums[k] += run["stats"][f"w1.{k}"][0]
    return sorted(sums, key=lambda k: (sums[k], k))[0]


# -- the decision rule --------------------------------------------------------------------------
def decision_measurement(key: str, d: Decision, label: str):
    """The kit's rule: HOLDS → the claim's end of the interval against the bound (passes), FAILS
    → the other end (fails), INCONCLUSIVE → undecided with the interval."""
    status = d.decision
    if status == INCONCLUSIVE:
        return undecided(key, d.estimate, f"the interval [{d.lo:.3g}, {d.hi:.3g}] contains "
                         f"{d.bound:.3g}: too few contexts to decide", label=label)  # fmt: skip
    held = status == HOLDS
    if d.op == "ge":  # HOLDS: lo ≥ c; FAILS: hi < c
        end, what, mk = (d.lo, "lower", at_least) if held else (d.hi, "upper", at_least)
    else:  # HOLDS: hi ≤ c; FAILS: lo > c
        end, what, mk = (d.hi, "upper", at_most) if held else (d.lo, "lower", at_most)
    return mk(key, end, d.bound, label=f"{label}: {what} end of the interval "
              f"[{d.lo:.3g}, {d.hi:.3g}] (estimate {d.estimate:.3g})")


def decision_controls(d: Decision) -> list:
    """Negative controls of :func:`decision_measurement` on ``d`` moved to known-wrong places."""
    h = max((d.hi - d.lo) / 2, 1e-3) if math.isfinite(d.hi - d.lo) else 1e-3
    sign = -1.0 if d.op == "ge" else 1.0  # the wrong side

    def at(centre):
        return Decision("control", centre, centre - h, centre + h, d.bound, d.op)

    past = decision_measurement("c", at(d.bound + sign * 3 * h), "c")
    straddle = decision_measurement("c", at(d.bound + sign * h / 2), "c")
    return [
        rejects(f"decision_control_past_bound_{d.label}", past.test == "undecided" or past.passed,
                "interval 3 half-widths past the bound must FAIL"),
        rejects(f"decision_control_straddling_{d.label}", straddle.test != "undecided",
                "interval straddling the bound must be INCONCLUSIVE, not HOLD or FAIL"),
    ]  # fmt: skip


def dip_decision(K: int, curve, label: str) -> Decision:
    """d = min(mean[0], mean[K−1]) − min over interior k of mean[k] ≥ DIP_DEPTH: lower end from
    the ends' lower and the interior minimum's upper bounds, upper end from the ends' upper and
    the interior positions' least lower bound (pointwise percentile intervals)."""
    inner = np.arange(1, K - 1)
    k = int(inner[np.argmin(curve.mean[inner])])
    est = float(min(curve.mean[0], curve.mean[-1]) - curve.mean[k])
    lo = float(min(curve.lo[0], curve.lo[-1]) - curve.hi[k])
    hi = float(min(curve.hi[0], curve.hi[-1]) - curve.lo[inner].min())
    return Decision(label, est, min(lo, est), max(hi, est), DIP_DEPTH, "ge")


_DEPTH_REASON = (
    f"δ = {DIP_DEPTH} nats: a dip must be at least δ below the lower end of the curve "
    "(a modelling cut-off for 'a dip'); table dip_depth_sensitivity gives the verdict at "
    f"δ ∈ {DEPTH_GRID}"
)


def k_measurements(K, r, k, depth, sep):
    """The decisions, controls and reported numbers of one K of one model (intervals at the
    model's family level ``r["confidence"]``; ρ is the cross-fitted one, ``r["fit"]``)."""
    lp, acc = r["logprob"], r["accuracy"]
    C = r["task"].num_contexts
    conf, fit = r["confidence"], r["fit"]
    a, alo, ahi, _ = fit.interval("alpha", conf)
    dip = dip_decision(K, lp, f"dip_K{K}")
    rho = Decision(f"spearman_K{K}", r["rho"], min(r["rho_lo"], r["rho"]),
                   max(r["rho_hi"], r["rho"]), 0.0, "ge")  # fmt: skip
    status, why = combine([dip, rho])
    fam = f"Bonferroni level {1 - conf:.3g} of this model's family"
    alpha = f"α = {a:.2f} [{alo:.2f}, {ahi:.2f}]"
    return [
        decision_measurement(f"dip_K{K}", dip,
                             f"K = {K}: min(mean[0], mean[K−1]) − interior minimum ≥ δ = "
                             f"{DIP_DEPTH} nats ({conf:.2%} pointwise bootstrap; {fam})"),
        decision_measurement(f"spearman_K{K}", rho,
                             f"K = {K}: Spearman ρ(mean log-prob, per-line profile "
                             f"{fit.rollout} at cross-fitted {alpha}) > 0 ({conf:.2%} bootstrap "
                             f"over contexts, curve and fit resampled; {fam})"),
        *decision_controls(dip), *decision_controls(rho),
        info(f"verdict_K{K}", f"{status} — fitted {alpha}" + (f" ({why})" if why else ""),
             label=f"K = {K}: the statement's verdict (kit.combine) and the fitted α"),
        info(f"dip_depth_K{K}", depth, unit="nats",
             label=f"K = {K}: min(mean[0], mean[K−1]) − mean[k_min] (δ: {_DEPTH_REASON})"),
        info(f"dip_separation_K{K}", sep, unit="nats",
             label=f"K = {K}: min of the ends' lower bounds − the minimum's upper bound"),
        info(f"spearman_point_K{K}", r["rho"], label=f"K = {K}: cross-fitted Spearman ρ"),
        info(f"spearman_lo_K{K}", r["rho_lo"], label=f"K = {K}: lower bound of ρ"),
        holds(f"positions_labelled_K{K}", r["labels_ok"], role="control",
              label=f"K = {K}: the query of position k repeats line k's key (all prompts)"),
        at_most(f"logprob_vs_direct_K{K}", r["direct_err"], 0.0,
                fp_tol(LOGPROB_TOL, "float32 logits (|z| ≲ 30) of a cached-prefix and a "
                       "full forward pass differ by ≲ 1e-5 each after ≤ 30 layers; 3 value "
                       "tokens and the log-softmax: ≲ 1e-4 ≤ 1e-3"),
                role="control", unit="nats",
                label=f"K = {K}: max |teacher-forced log-prob − direct forward pass with "
                f"torch.log_softmax| ({min(CONTROL_PROMPTS, C)} prompts)"),
        info(f"spearman_hi_K{K}", r["rho_hi"],
             label=f"K = {K}: upper {conf:.2%} bootstrap bound of ρ"),
        info(f"argmin_K{K}", k, label=f"K = {K}: position of the minimum"),
        info(f"mean_logprob_K{K}", float(lp.mean.mean()), unit="nats",
             label=f"K = {K}: mean log-prob over positions"),
        info(f"accuracy_K{K}", float(acc.mean.mean()),
             label=f"K = {K}: exact-match accuracy over positions"),
        info(f"seconds_K{K}", r["seconds"], unit="s"),
    ]  # fmt: skip


# -- independent recomputations -----------------------------------------------------------------
def _ranks(x) -> np.ndarray:
    """Average ranks by counting: #{j: x_j < x_i} + (#{j: x_j = x_i} + 1)/2."""
    x = np.asarray(x, float)
    return np.array([(x < v).sum() + ((x == v).sum() + 1) / 2 for v in x])


def spearman_direct(x, y) -> float:
    """Pearson correlation of the average ranks (counted directly; ties allowed)."""
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    den = math.sqrt(float((rx**2).sum() * (ry**2).sum()))
    return float((rx * ry).sum() / den) if den else math.nan


def _judge_max(key, err, tol, reason, label):
    return at_most(key, float(err), 0.0, fp_tol(tol, reason), label=label)


_FP = "float64 means and sums of ≤ 30 values of order 10 in another order: ≤ 1e-13"


def direct_checks(r: dict, seed: int, confidence: float, resamples: int, store, best) -> list:
    """``position_curve``, ``bootstrap_spearman``, ``line_profile`` and ``best_profile`` of one
    K against direct loops, with negative controls of the max-error judge (``confidence``: the
    α = 1 table's; the curve's is ``r["confidence"]``)."""
    from scipy.stats import spearmanr

    x, task, lp = r["scores"].logprob, r["task"], r["logprob"]
    C, K = x.shape
    idx = np.random.default_rng(seed).integers(0, C, size=(resamples, C))
    boot = np.array([[sum(x[i, k] for i in row) / C for k in range(K)] for row in idx])
    a = (1 - confidence) / 2  # the α = 1 table's ρ intervals
    ac = (1 - r.get("confidence", confidence)) / 2  # the curve's: at the model's family level
    ref_lo, ref_hi = np.quantile(boot, ac, axis=0), np.quantile(boot, 1 - ac, axis=0)
    curve_err = max(np.abs(lp.mean - x.sum(0) / C).max(), np.abs(lp.lo - ref_lo).max(),
                    np.abs(lp.hi - ref_hi).max())  # fmt: skip
    rho_err = max(deviation(float(v[1]), spearman_direct(x.mean(0), v[0]), 1.0)
                  for v in r["rhos"].values())  # NaN (a constant profile) must match NaN
    prof, rho_lo = r["rhos"][best][0], r["rhos"][best][2]
    rows = [spearmanr(b, prof).statistic for b in boot]
    rho_lo_err = abs(rho_lo - np.quantile([v for v in rows if np.isfinite(v)], a))
    starts, q = task.line_starts, task.line_length
    line_err = max(
        abs(v[0][k] - sum(r["raw_profiles"][key][j] for j in range(starts[k], starts[k] + q)))
        for key, v in r["rhos"].items() for k in range(K))  # fmt: skip
    return [
        _judge_max(f"position_curve_vs_direct_K{K}", curve_err, 1e-12, _FP,
                   f"K = {K}: max |position_curve (mean, lo, hi) − a direct loop over the same "
                   "resamples|"),
        _judge_max(f"spearman_vs_rank_formula_K{K}", rho_err, 1e-12, "ranks are exact (halves); "
                   "a correlation of K ≤ 50 ranks in another order: ≤ 1e-14",
                   f"K = {K}: max over profiles |ρ − Pearson correlation of directly counted "
                   "average ranks|"),
        _judge_max(f"spearman_lo_vs_scipy_K{K}", rho_lo_err, 1e-12, "ranks are exact; "
                   "the same quantile of the same values",
                   f"K = {K}: |lower bound of ρ − quantile of scipy.stats.spearmanr per resample|"),
        _judge_max(f"line_profile_vs_direct_K{K}", line_err, 1e-12, _FP,
                   f"K = {K}: max |line_profile − Σ of p over each key line| (every profile)"),
        holds(f"best_profile_vs_direct_K{K}", store is not None and best == best_direct(store),
              label=f"K = {K}: the judged profile is the direct argmin of the mean stored W1"),
        rejects(f"curve_judge_control_wrong_position_K{K}",
                _judge_max("c", np.abs(lp.mean - np.roll(x.sum(0) / C, 1)).max(), 1e-12, _FP,
                           "c"), "the reference curve shifted by one position"),
    ]  # fmt: skip


# -- regression against the stored reference ---------------------------------------------------
def reference_values(res: dict, model) -> dict:
    """Every number PB17 reports, flattened: per K the curves, the line masses of the judged
    profile, ρ with its interval for every profile at α = 1, the cross-fit's α and ρ (fitted, at
    α = 1, ceiling) with their intervals; and the model's identity."""
    out = {"model": str(getattr(model.config, "_name_or_path", "")),
           "parameters": float(sum(p.numel() for p in model.parameters()))}  # fmt: skip
    for K, r in res.items():
        for f, c in (("logprob", r["logprob"]), ("accuracy", r["accuracy"])):
            for g in ("mean", "lo", "hi"):
                out.update({f"K{K}.{f}.{g}.{k}": float(v) for k, v in enumerate(getattr(c, g))})
        out.update({f"K{K}.profile.{k}": float(v) for k, v in enumerate(r["profile"])})
        for p, (_, rho, lo, hi, dropped) in r["rhos"].items():
            out.update({f"K{K}.rho.{p}": float(rho), f"K{K}.rho_lo.{p}": float(lo),
                        f"K{K}.rho_hi.{p}": float(hi), f"K{K}.dropped.{p}": float(dropped)})
        fit = r.get("fit")
        for name in () if fit is None else ("alpha", "fitted", "unit", "ceiling"):
            est, lo, hi, dropped = fit.interval(name, r["confidence"])
            out.update({f"K{K}.fit.{name}": est, f"K{K}.fit.{name}_lo": lo,
                        f"K{K}.fit.{name}_hi": hi, f"K{K}.fit.{name}_dropped": float(dropped)})
    return out


def load_reference(model: str = MODEL):
    """``model``'s stored reference values by size, or None when the file is absent."""
    p = resources.files("posflow.proofs_checks.claims").joinpath("references", MODELS[model][2])
    return json.loads(p.read_text()) if p.is_file() else None


def regression_measurements(res: dict, model, size: str, key: str = MODEL) -> list:
    """The regression of this run against the stored reference of its size (hub model ``key``),
    compared only when the reference was made on the same model (name and parameter count)."""
    vals = reference_values(res, model)
    ref = (load_reference(key) or {}).get(size)
    if ref is None or (ref["model"], ref["parameters"]) != (vals["model"], vals["parameters"]):
        why = "no stored reference at this size" if ref is None else f"reference of {ref['model']}"
        return [info("regression_vs_reference", f"not compared: {why}")]
    name = next(k for k, v in ref.items() if k.startswith("K") and isinstance(v, float) and v)
    moved = {**ref, name: ref[name] * (1 + 10 * REG_TOL)}
    return [
        *regression("regression_vs_reference", vals, ref, REG_TOL, REG_REASON),
        rejects("regression_control_one_number_moved",
                regression("c", vals, moved, REG_TOL, REG_REASON)[0],
                f"the reference's {name} moved by 10× the tolerance"),
    ]


# -- mutant wrappers (registered in pb17_retrieval) ---------------------------------------
def shifted_queries(original):
    def build_task_with_shifted_queries(*args, **kwargs):
        task = original(*args, **kwargs)
        task.query_ids = np.roll(task.query_ids, -1, axis=1)  # label k now asks key k + 1
        task.value_ids = np.roll(task.value_ids, -1, axis=1)
        return task

    return build_task_with_shifted_queries


def wrong_offset(original):
    def value_scores_one_token_early(logits, targets):
        import torch

        return original(torch.roll(logits, 1, dims=1), targets)  # z_{n−2+i} scores v_i

    return value_scores_one_token_early


def lambda_next_layer(original):
    @functools.wraps(original)
    def measure(model, input_ids, **kw):
        m = original(model, input_ids, **kw)
        if m.lambdas is not None:
            m.lambdas = np.roll(m.lambdas, -1)  # layer t reports layer t + 1's λ
        if m.lambda_per_sequence is not None:
            m.lambda_per_sequence = np.roll(m.lambda_per_sequence, -1, axis=1)
        return m

    return measure


def decide_on_estimate(original):
    @functools.wraps(original)
    def decision_measurement(key, d, label):
        e = d.estimate  # the interval collapsed onto the point estimate
        return original(key, Decision(d.label, e, e, e, d.bound, d.op), label)

    return decision_measurement
