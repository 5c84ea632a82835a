"""AT20 on synthetic tasks with an exact error metric: [B]'s orderings on flip-flop and recall.

The store (:mod:`posflow.simulate.models.synthetic_train`; package data ``synthetic_v1`` once
trained) holds one run per (task, scheme, seed) with the count of wrong argmax answers at L =
f·L_0, f = 1 … 16, on test batches shared by every scheme and seed: e_{s,k}(L) = errors / N;
some runs also at f = 32, 64 (:mod:`~posflow.simulate.models.synthetic_extend`: retrained with
every stored count reproduced, or new seeds trained with those lengths). Each phrase of the
catalog statement is one sub-claim, one or more comparisons per trained task, each about the
seed mean of a per-seed statistic x_k, paired by seed where two schemes meet; L_f =
LONG_FACTOR·L_0, L_n = NEAR_FACTOR·L_0 (the LM proxy's, [B]'s "through 4–8K at 512"), L_e(s) the
longest length every seed of s has, ≤ EVENTUAL_FACTOR·L_0:

1. ``rotations_below_rope``   — "accumulated rotations ≪ RoPE": e_rope − e_s ≥ BELOW_BY at L_f,
   s ∈ :data:`BELOW_ROPE` (PaTH, [B]'s abstract; random accumulated Q/K and Q/K/V);
2. ``learned_near_train``     — e_s(L_n) − e_s(L_0) ≤ NEAR_BY, learned Q/K and Q/K/V;
3. ``qkv_le_qk``              — e_{Q/K/V} − e_{Q/K} ≤ QKV_SLACK at L_f, learned and random pairs;
4. ``rotation_only_degrades`` — e_s(L_e) − e_s(L_0) ≥ DEGRADE_BY, s ∈ :data:`ROTATIONS`;
5. ``alibi_flat``             — e_alibi(L_f) − e_alibi(L_0) ≤ FLAT_BY;
6. ``rotations_alibi_flat``   — the same for random Q/K rotations plus ALiBi.

Intervals m ± t_{1−α'/2, n−1}·s/√n over n seeds (``seed_store.t_interval``, compared with scipy
in AT20's LM-proxy evidence), α' = ALPHA/M over all M comparisons (Bonferroni), decided by the
kit's rule (``kit.Decision``, ``kit.combine``). A comparison is blocked (shown, never deciding)
when a scheme is missing or has < MIN_SEEDS seeds, when RoPE or a compared scheme did not learn
the task (seed-mean error at L_0 > LEARNED_TOL), or when RoPE does not degrade (seed-mean
e_rope(L_f) − e_rope(L_0) < ROPE_DEGRADES: lengths that do not challenge RoPE cannot test
extrapolation). A sub-claim FAILS only on an unblocked interval excluding its bound.

*Beyond CPU size.* A scheme that does not learn a task within the store's equal step budget
cannot be judged at that budget. A sub-claim that is INCONCLUSIVE only because of such
comparisons — every other comparison HOLDS, every undecided one is blocked by "did not learn"
alone — is reported with ``beyond_cpu`` set: INCONCLUSIVE with its reason, not deciding AT20
(the issue's rule: a sub-claim that cannot be decided at CPU size, not the whole claim). Any
other undecided comparison (too few seeds, an interval containing its bound) keeps it deciding.

Probes (the sparse FFL(0.98) scored with the FFL(0.8) model) are tabulated and drawn, not
judged. The tables give each run's exact (Clopper–Pearson) interval (``synthetic.error_interval``).
The restatement (learned rotations judged by sub-claim 2, the catalog's phrase for them, rather
than against RoPE; sub-claim 4 at the longest length measured) was made after the first store
had been judged; the earlier statement compared the learned rotations with RoPE at L_f, where
they tie on the first store (undecided either way).

The module runs past 400 lines because the judge's hand-made controls (seven stores with known
answers) sit beside the judge they test, as in the other AT20 modules.
"""

from __future__ import annotations

import dataclasses
import json
import math
from importlib import resources
from pathlib import Path

import numpy as np

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims.at20_figures import label
from posflow.proofs_checks.claims.at20_judge import (
    ALPHA,
    NEAR_FACTOR,
    decision_controls,
    sub_claim_measurement,
)
from posflow.simulate.models import seed_store as SS
from posflow.simulate.models.synthetic import error_interval

__all__ = ["BELOW_BY", "BELOW_ROPE", "DEGRADE_BY", "EVENTUAL_FACTOR", "FLAT_BY", "LEARNED",
           "LEARNED_TOL", "LONG_FACTOR", "MIN_SEEDS", "NEAR_BY", "NEAR_FACTOR", "PAPER_ORDER",
           "QKV_SLACK", "ROPE_DEGRADES", "ROTATIONS", "STORE_FORMAT", "SUB_CLAIMS",
           "TASK_STORE", "hand_made_store", "judge", "read_store", "task_evidence",
           "task_figure"]  # fmt: skip

TASK_STORE = resources.files("posflow.simulate") / "data" / "synthetic_v1"
STORE_FORMAT = "posflow-synthetic-extrapolation"  # synthetic_train.FORMAT (that module needs torch)
LONG_FACTOR = 16  # the judged length L_f = 16·L_0, the store's longest for every run
EVENTUAL_FACTOR = 64  # "eventually degrades": at the longest length measured, up to 64·L_0
NEAR_BY = 0.05  # "near training error": at most five points above L_0 at NEAR_FACTOR·L_0
BELOW_BY = 0.01  # "lower error than RoPE": by at least one percentage point
QKV_SLACK = 0.01  # Q/K/V may exceed Q/K by at most one point
DEGRADE_BY = 0.01  # "degrades": error at L_f at least one point above L_0
FLAT_BY = 0.02  # "flat": error at L_f at most two points above L_0
ROPE_DEGRADES = 0.05  # RoPE loses ≥ 5 points from L_0 to L_f (the role of ROPE_COLLAPSE)
LEARNED_TOL = 0.05  # a scheme learned the task: seed-mean error at L_0 ≤ 5 %
MIN_SEEDS = 5
ROTATIONS = ("learned_qk", "learned_qkv", "path")  # trained rotation-only schemes
BELOW_ROPE = ("path", "random_qk", "random_qkv")  # "accumulated rotations ≪ RoPE"
LEARNED = ("learned_qk", "learned_qkv")
QKV_PAIRS = (("learned_qkv", "learned_qk"), ("random_qkv", "random_qk"))
SUB_CLAIMS = ("rotations_below_rope", "learned_near_train", "qkv_le_qk", "rotation_only_degrades",
              "alibi_flat", "rotations_alibi_flat")  # fmt: skip
_SENS = {"LONG_FACTOR": (4, 8, 16), "NEAR_FACTOR": (2, 4, 8, 16), "NEAR_BY": (0.02, 0.05, 0.1),
         "EVENTUAL_FACTOR": (16, 32, 64), "BELOW_BY": (0.0, 0.01, 0.05),
         "QKV_SLACK": (0.0, 0.01, 0.05),
         "DEGRADE_BY": (0.0, 0.01, 0.05), "FLAT_BY": (0.005, 0.02, 0.05, 0.1), "ROPE_DEGRADES": (
         0.02, 0.05, 0.1, 0.2), "LEARNED_TOL": (0.01, 0.05, 0.1), "ALPHA": (0.01, 0.05, 0.2),
         "MIN_SEEDS": (3, 5)}  # judge's keyword: the name in lower case  # fmt: skip
_COLORS = {"learned_qk": kit.SCHEME_COLORS["learned"], "nope": "#999999", "path": "#444444",
           "random_qk_alibi": kit.SCHEME_COLORS["accum_alibi"]}  # as at20_figures  # fmt: skip


# -- the store -------------------------------------------------------------------------------
def read_store(store) -> dict | None:
    """``{"meta", "runs": {(task label, scheme, seed): run}}`` of a synthetic store (a path or a
    traversable; torch-free), or None without ``meta.json``. ValueError for another format."""
    store = Path(store) if isinstance(store, str) else store
    if not store.is_dir() or not store.joinpath("meta.json").is_file():
        return None
    meta = json.loads(store.joinpath("meta.json").read_text(encoding="utf-8"))
    runs = {}
    for p in sorted(store.iterdir(), key=lambda q: q.name):
        if p.name.endswith(".json") and p.name != "meta.json":
            r = json.loads(p.read_text(encoding="utf-8"))
            if STORE_FORMAT != meta.get("format") or STORE_FORMAT != r.get("format"):
                raise ValueError(f"{p.name!r} in {str(store)!r} is not a {STORE_FORMAT} run")
            runs[r["task_label"], r["scheme"], int(r["seed"])] = r
    return {"meta": meta, "runs": runs}


def _rates(st, lab, s, L) -> dict:
    """{seed: errors/N at length L} of scheme s on the evaluation ``lab``."""
    out = {}
    for (_, s2, k), r in st["runs"].items():
        ev = r["eval"].get(lab)
        if s2 == s and ev and L in ev["lengths"]:
            j = ev["lengths"].index(L)
            out[k] = ev["errors"][j] / ev["counts"][j] if ev["counts"][j] else math.nan
    return out


def _diff(a: dict, b: dict) -> dict:
    return {k: a[k] - b[k] for k in sorted(set(a) & set(b))}


def _mean(d: dict) -> float:
    return float(np.mean(list(d.values()))) if d else math.nan


def _lengths(st, p) -> tuple[int, int]:
    """(L_0, L_f): L_f the longest store-wide length ≤ long_factor·L_0."""
    cfg = st["meta"]["config"]
    return cfg["train_len"], cfg["train_len"] * max(f for f in cfg["factors"]
                                                    if f <= p["long_factor"])


def _factor(st, task, s, cap) -> int:
    """The longest factor f ≤ cap at which every seed of s on ``task`` was scored (≥ 1)."""
    L0, lens = st["meta"]["config"]["train_len"], None
    for (t, s2, _), r in st["runs"].items():
        if t == task and s2 == s and (ev := r["eval"].get(task)):
            lens = set(ev["lengths"]) if lens is None else lens & set(ev["lengths"])
    return max([L // L0 for L in lens or () if L // L0 <= cap] or [1])


# -- the judge -------------------------------------------------------------------------------
def _comparisons(st, p) -> list:
    """[(sub-claim, task, label, schemes, {seed: x}, op, bound)] on every trained task."""
    L0, Lf = _lengths(st, p)
    f, out = Lf // L0, []
    for t in sorted({t for t, _, _ in st["runs"]}):
        def e(s, factor, t=t):
            return _rates(st, t, s, factor * L0)

        out += [("rotations_below_rope", t, f"e_rope − e_{s} ({f}×) ≥ {p['below_by']}",
                 ["rope", s], _diff(e("rope", f), e(s, f)), "ge", p["below_by"])
                for s in BELOW_ROPE]
        nf = p["near_factor"]
        out += [("learned_near_train", t, f"e_{s}({nf}×) − e_{s}(1×) ≤ {p['near_by']}", [s],
                 _diff(e(s, nf), e(s, 1)), "le", p["near_by"]) for s in LEARNED]
        out += [("qkv_le_qk", t, f"e_{a} − e_{b} ({f}×) ≤ {p['qkv_slack']}", [a, b],
                 _diff(e(a, f), e(b, f)), "le", p["qkv_slack"]) for a, b in QKV_PAIRS]
        for s in ROTATIONS:
            g = _factor(st, t, s, p["eventual_factor"])
            out.append(("rotation_only_degrades", t, f"e_{s}({g}×) − e_{s}(1×) ≥ "
                        f"{p['degrade_by']}", [s], _diff(e(s, g), e(s, 1)), "ge",
                        p["degrade_by"]))  # fmt: skip
        out += [(n, t, f"e_{s}({f}×) − e_{s}(1×) ≤ {p['flat_by']}", [s], _diff(e(s, f), e(s, 1)),
                 "le", p["flat_by"]) for n, s in (("alibi_flat", "alibi"),
                                                 ("rotations_alibi_flat", "random_qk_alibi"))]
    return out  # fmt: skip


def _blocks(st, task, schemes, n, p) -> tuple[list[str], bool]:
    """(why a comparison of ``schemes`` (n paired seeds) on ``task`` cannot count, whether
    every reason is the step budget: a scheme that did not learn the task)."""
    L0, Lf = _lengths(st, p)
    have = {s for t, s, _ in st["runs"] if t == task}
    missing = [s for s in dict.fromkeys((*schemes, "rope")) if s not in have]
    if missing:
        return [f"missing schemes: {', '.join(missing)}"], False
    out = [f"{n} paired seed(s), needs ≥ {p['min_seeds']}"] if n < p["min_seeds"] else []
    budget = []
    for s in dict.fromkeys(("rope", *schemes)):
        if not (e0 := _mean(_rates(st, task, s, L0))) <= p["learned_tol"]:
            budget.append(f"{s} did not learn {task} within the step budget: seed-mean error "
                          f"at 1× {e0:.3g} > LEARNED_TOL {p['learned_tol']}")  # fmt: skip
    drop = _mean(_diff(_rates(st, task, "rope", Lf), _rates(st, task, "rope", L0)))
    if not drop >= p["rope_degrades"]:
        out.append(f"RoPE does not degrade on {task}: seed-mean error {Lf // L0}× − 1× = "
                   f"{drop:.3g} < ROPE_DEGRADES {p['rope_degrades']}")
    return out + budget, bool(budget) and not out


def judge(st, *, long_factor=LONG_FACTOR, near_factor=NEAR_FACTOR, near_by=NEAR_BY,
          eventual_factor=EVENTUAL_FACTOR, below_by=BELOW_BY, qkv_slack=QKV_SLACK,
          degrade_by=DEGRADE_BY, flat_by=FLAT_BY, rope_degrades=ROPE_DEGRADES,
          learned_tol=LEARNED_TOL, alpha=ALPHA, min_seeds=MIN_SEEDS) -> list[dict]:  # fmt: skip
    """The six sub-claims on the store ``st`` (:func:`read_store`), each ``{"name", "status",
    "reason", "beyond_cpu", "comparisons"}`` as ``at20_judge.judge`` returns them (each
    comparison also names its ``task`` and ``budget_only``): t intervals at 1 − alpha/M, the
    kit's rule, blocks and ``beyond_cpu`` as the module doc says."""
    p = dict(long_factor=long_factor, near_factor=near_factor, near_by=near_by,
             eventual_factor=eventual_factor, below_by=below_by, qkv_slack=qkv_slack,
             flat_by=flat_by, degrade_by=degrade_by, rope_degrades=rope_degrades,
             learned_tol=learned_tol, min_seeds=min_seeds)  # fmt: skip
    comps = _comparisons(st, p)
    a = kit.family_level(alpha, max(1, len(comps)))
    out = []
    for name in SUB_CLAIMS:
        rows, decisions = [], []
        for _, task, lab, schemes, vals, op, c in (x for x in comps if x[0] == name):
            stats = SS.comparison_statistics(vals, c, a)
            blocked, budget_only = _blocks(st, task, schemes, stats["n"], p)
            d = kit.Decision(f"{task}: {lab}", stats["mean"], stats["lo"], stats["hi"], c, op, a,
                             blocked)  # fmt: skip
            decisions.append(d)
            rows.append({"label": d.label, "task": task, "schemes": schemes, "op": op,
                         "bound": c, "alpha": a, "values": vals, **stats,
                         "decision": d.decision, "blocked": blocked,
                         "budget_only": budget_only})  # fmt: skip
        status, reason = kit.combine(decisions)
        beyond = status == kit.INCONCLUSIVE and all(
            r["budget_only"] if r["blocked"] else r["decision"] == kit.HOLDS for r in rows)
        out.append({"name": name, "status": status, "comparisons": rows, "reason": reason,
                    "beyond_cpu": beyond})  # fmt: skip
    return out


# -- the judge's own controls: hand-made stores with known answers -------------------------
def hand_made_store(growth: dict, seeds=5, *, noise=0.004, count=4000, factors=(1, 8, 16),
                    base=None) -> dict:  # fmt: skip
    """An in-memory store with known answers on task "t": scheme s has error b_s = base[s]
    (default 0.01) at 1× and b_s + (growth[s] + noise·(k − (seeds − 1)/2))·((f − 1)/15)² at f×
    for seed k (so growth[s] above b_s at 16×: degradation that sets in late), of ``count``
    answers per length."""
    runs, base = {}, base or {}
    for s, g in growth.items():
        b0 = base.get(s, 0.01)
        for k in range(seeds):
            rate = [b0 + (g + noise * (k - (seeds - 1) / 2)) * ((f - 1) / 15) ** 2
                    for f in factors]  # fmt: skip
            ev = {"lengths": [4 * f for f in factors], "counts": [count] * len(factors),
                  "chance": 0.5, "errors": [round(count * min(max(x, 0.0), 1.0)) for x in rate]}
            runs["t", s, k] = {"task_label": "t", "scheme": s, "seed": k, "eval": {"t": ev}}
    return {"meta": {"config": {"train_len": 4, "factors": list(factors)}}, "runs": runs}


PAPER_ORDER = {"rope": 0.3, "learned_qk": 0.12, "learned_qkv": 0.1, "path": 0.1,
               "random_qk": 0.15, "random_qkv": 0.12, "alibi": 0.0, "random_qk_alibi": 0.0}
"""Error growth 1× → 16× of each scheme in [B]'s order (hand-made controls and tests)."""


def _judge_controls() -> list:
    """The judge on hand-made stores: [B]'s order HOLDS; rotations worse than RoPE FAIL; learned
    rotations that leave training error early FAIL; 3 seeds, or RoPE flat, stay INCONCLUSIVE; a
    sub-claim undecided only because random rotations did not learn is beyond CPU size, one
    undecided for too few seeds is not."""
    def subs(growth, seeds=5, **kw):
        return {s["name"]: s for s in judge(hand_made_store(growth, seeds, **kw))}

    def status(growth, seeds=5, **kw):
        return {n: s["status"] for n, s in subs(growth, seeds, **kw).items()}

    undecided = {kit.INCONCLUSIVE}
    worse = status({**PAPER_ORDER, **dict.fromkeys(BELOW_ROPE, 0.45)})["rotations_below_rope"]
    early = status({**PAPER_ORDER, **dict.fromkeys(LEARNED, 0.45)})
    lazy = subs(PAPER_ORDER, base=dict.fromkeys(("random_qk", "random_qkv"), 0.3))
    few = judge({**(h := hand_made_store(PAPER_ORDER)), "runs": {
        k: r for k, r in h["runs"].items() if k[1] != "random_qk" or k[2] < 3}})
    return [
        kit.holds("tasks_control_paper_order_holds", set(status(PAPER_ORDER).values()) == {
            kit.HOLDS}, role="control", label="hand-made store in [B]'s order: all HOLD"),
        kit.rejects("tasks_control_rotations_worse", worse != kit.FAILS,
                    "rotations 15 points above RoPE at 16× must FAIL rotations_below_rope"),
        kit.rejects("tasks_control_learned_early", early["learned_near_train"] != kit.FAILS,
                    "learned rotations 10 points above training error at 8× must FAIL "
                    "learned_near_train"),
        kit.rejects("tasks_control_three_seeds", set(status(PAPER_ORDER, 3).values()) !=
                    undecided, "[B]'s order with 3 seeds must leave every sub-claim undecided"),
        kit.rejects("tasks_control_rope_flat", set(status({**PAPER_ORDER, "rope": 0.0}).values())
                    != undecided, "RoPE flat must leave every sub-claim undecided"),
        kit.holds("tasks_control_beyond_cpu", lazy["qkv_le_qk"]["beyond_cpu"] and not lazy[
            "alibi_flat"]["beyond_cpu"], role="control", label="random rotations that did not "
            "learn: qkv_le_qk reported beyond CPU size, a decided sub-claim not"),
        kit.rejects("tasks_control_few_seeds_not_beyond", any(s["beyond_cpu"] for s in few),
                    "a scheme with 3 of 5 seeds must keep its sub-claims deciding, not beyond "
                    "CPU size"),
    ]  # fmt: skip


# -- tables and the figure -------------------------------------------------------------------
def _cells(st):
    """[((eval label, scheme, factor), {seed: (errors, N)})] over the store, sorted."""
    out, L0 = {}, st["meta"]["config"]["train_len"]
    for (_, s, k), r in st["runs"].items():
        for lab, ev in r["eval"].items():
            for L, e, n in zip(ev["lengths"], ev["errors"], ev["counts"], strict=True):
                out.setdefault((lab, s, L // L0), {})[k] = (e, n)
    return sorted(out.items())


def _band(d: dict):
    x = np.array([e / n for e, n in d.values()])
    return SS.t_interval(x, 0.05) if x.size >= 2 else (float(x.mean()), math.nan, math.nan)


def _tables(st, subs) -> list:
    cells = _cells(st)
    return [
        kit.Table("tasks_errors", "synthetic tasks: seed-mean error, 95 % t interval over seeds",
                  ["task", "scheme", "L/L_train", "seeds", "mean error", "lower", "upper"],
                  [[lab, s, f, len(d), *_band(d)] for (lab, s, f), d in cells]),
        kit.Table("tasks_errors_per_seed", "synthetic tasks: each run's errors with the exact "
                  "(Clopper–Pearson) 95 % interval", ["task", "scheme", "seed", "L/L_train",
                  "errors", "answers", "error", "lower", "upper"],
                  [[lab, s, k, f, e, n, e / n, *error_interval(e, n)]
                   for (lab, s, f), d in cells for k, (e, n) in sorted(d.items())]),
        kit.Table("tasks_sub_claims", "synthetic tasks: each comparison, Bonferroni t interval, "
                  "decision", ["sub-claim", "task", "comparison", "n", "mean", "lower", "upper",
                  "level", "sign p", "decision", "blocked by", "sub-claim verdict"],
                  [[sub["name"], c["task"], c["label"], c["n"], c["mean"], c["lo"], c["hi"],
                    1 - c["alpha"], c["p_sign"], c["decision"], "; ".join(c["blocked"]),
                    sub["status"]] for sub in subs for c in sub["comparisons"]]),
        kit.sensitivity_grid("tasks_sensitivity", "synthetic tasks: sub-claim verdicts at other "
                             "values of each named parameter (the others at defaults)",
                             _SENS, lambda c, v: [r["status"] for r in judge(st, **{c.lower(): v})],
                             SUB_CLAIMS),
    ]  # fmt: skip


def task_figure(st) -> kit.Figure:
    """Error against L/L_train per scheme with its 95 % t band over seeds, log-x, one panel per
    task (probes included), the chance level drawn (AT20). The legend is shared by the panels,
    so a scheme's seed count in it spans all of them (e.g. "3–5 seeds")."""
    by, panels, trained = {}, {}, {t for t, _, _ in st["runs"]}
    chance = {lab: ev["chance"] for r in st["runs"].values() for lab, ev in r["eval"].items()}
    seeds = {}  # scheme -> seed counts over every panel: the legend is shared by the panels
    for (lab, s, f), d in _cells(st):
        by.setdefault((lab, s), []).append((f, *_band(d), len(d)))
        seeds.setdefault(s, set()).add(len(d))
    for (lab, s), rows in by.items():
        f, y, lo, hi, _ = (list(v) for v in zip(*rows, strict=True))
        ser, c = panels.setdefault(lab, []), _COLORS.get(s, kit.SCHEME_COLORS.get(s, "#444444"))
        if all(math.isfinite(v) for v in lo + hi):
            ser.append(kit.Series("", f, y, kind="band", lo=np.clip(lo, 0, 1).tolist(),
                                  hi=np.clip(hi, 0, 1).tolist(), color=c))  # fmt: skip
        n = sorted(seeds[s])
        count = f"{n[0]}" if len(n) == 1 else f"{n[0]}–{n[-1]}"
        ser.append(kit.Series(f"{label(s)} ({count} seeds)", f, y, color=c))
    return kit.Figure("at20_tasks", "AT20: error on synthetic tasks against the length factor", [
        kit.Panel(f"{lab}{'' if lab in trained else ' (probe, not judged)'}", "L / L_train",
                  "error rate (argmax)", ser, logx=True, hlines=[(chance[lab], "chance")],
                  legend="shared") for lab, ser in sorted(panels.items())])  # fmt: skip


def _measurement(sub: dict):
    """A sub-claim's measurement: the judge's (``at20_judge.sub_claim_measurement``), or, when
    it is beyond CPU size, the same reason reported without deciding."""
    m = dataclasses.replace(sub_claim_measurement(sub), key=f"tasks_sub_claim_{sub['name']}")
    if not sub["beyond_cpu"]:
        return m
    return kit.info(m.key, m.value, label=f"{m.label} — INCONCLUSIVE beyond CPU size (reported, "
                    f"not deciding AT20): {m.note}")  # fmt: skip


def task_evidence(store=TASK_STORE) -> tuple[list, list, list]:
    """AT20's synthetic-task evidence of the store ``store``: (measurements, tables, figures):
    the five sub-claims, the judge's controls, equal step budgets, the tables and the figure.
    Without a trained store: one undecided measurement saying how to train it."""
    st = read_store(store)
    if st is None or not st["runs"]:
        why = (f"no trained synthetic store at {store}: train it with `python -m posflow."
               "simulate.models.synthetic_train --store DIR` (resumable; --part k/m shares cores) "
               "and commit DIR as package data simulate/data/synthetic_v1")
        return [kit.undecided("tasks_store", 0, why, label="synthetic-task runs")], [], []
    subs = judge(st)
    ms = [_measurement(sub) for sub in subs]
    ms += [dataclasses.replace(m, key=f"tasks_{m.key}") for m in decision_controls(subs)]
    steps = {r.get("train", {}).get("steps") for r in st["runs"].values()}
    ms += [kit.holds("tasks_equal_step_budgets", steps == {st["meta"]["config"].get("steps")},
                     label="every synthetic-task run trained the store's optimiser steps"),
           kit.info("tasks_runs", len(st["runs"]), label="synthetic-task runs in the store"),
           kit.info("tasks_extended_runs", sum("extended" in r for r in st["runs"].values()),
                    label="runs also scored beyond the store's lengths (synthetic_extend: "
                    "retrained with every stored count reproduced first, or new seeds trained "
                    "with those lengths)")]  # fmt: skip
    ms += _judge_controls()
    return ms, _tables(st, subs), [task_figure(st)]  # fmt: skip


# -- mutants: the judge's own breaks, killed by its controls ------------------------------
def _any_block_beyond_cpu(original):
    def _blocks(st, task, schemes, n, p):
        out, _ = original(st, task, schemes, n, p)
        return out, bool(out)

    return _blocks


def _eventual_at_train_length(original):
    def _factor(st, task, s, cap):
        return 1

    return _factor


_AT = "posflow.proofs_checks.claims.at20_tasks"
kit.add_mutant("AT20", "tasks-any-block-beyond-cpu", f"{_AT}:_blocks", _any_block_beyond_cpu,
               "every blocked comparison counted as beyond CPU size (too few seeds, RoPE flat "
               "too), so undecided sub-claims stop deciding")  # fmt: skip
kit.add_mutant("AT20", "tasks-eventual-at-train-length", f"{_AT}:_factor",
               _eventual_at_train_length, "'eventually degrades' read at the training length "
               "(the longest-length lookup returns 1×)")  # fmt: skip


def main(argv=None) -> int:
    """``python -m posflow.proofs_checks.claims.at20_tasks STORE``: print each sub-claim's
    verdict and comparisons on a synthetic store (2 with one line when there is none)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    st = read_store(args[0]) if len(args) == 1 else None
    if st is None or not st["runs"]:
        print(f"error: no synthetic store at {args[0] if args else '(none given)'}",
              file=sys.stderr)  # fmt: skip
        return 2
    print(f"AT20 synthetic tasks on {args[0]}: {len(st['runs'])} runs")
    for sub in judge(st):
        print(f"{sub['name']}: {sub['status']}{' (beyond CPU size)' if sub['beyond_cpu'] else ''}")
        for c in sub["comparisons"]:
            lo, hi = (f"{v:.3g}" for v in (c["lo"], c["hi"]))
            print(f"  {c['label']}: mean {c['mean']:.3g} [{lo}, {hi}] n = {c['n']} → "
                  f"{c['decision']}{' (blocked: ' + '; '.join(c['blocked']) + ')' if c['blocked'] else ''}")  # noqa: E501
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
