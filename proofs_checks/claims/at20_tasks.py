"""AT20 on synthetic tasks with an exact error metric: [B]'s orderings on flip-flop and recall.

The store (:mod:`posflow.simulate.models.synthetic_train`; package data ``synthetic_v1`` once
trained) holds one run per (task, scheme, seed) with the count of wrong argmax answers at
L = f·L_0, f = 1 … 16, on test batches shared by every scheme and seed: e_{s,k}(L) = errors / N.
Each sub-claim is one or more comparisons per trained task, each about the seed mean of a
per-seed statistic x_k, paired by seed where two schemes meet, at L_f = LONG_FACTOR·L_0:

1. ``rotations_below_rope``   — e_rope − e_s ≥ BELOW_BY at L_f, s ∈ :data:`ROTATIONS`;
2. ``qkv_le_qk``              — e_{Q/K/V} − e_{Q/K} ≤ QKV_SLACK at L_f, learned and random pairs;
3. ``rotation_only_degrades`` — e_s(L_f) − e_s(L_0) ≥ DEGRADE_BY, s ∈ :data:`ROTATIONS`;
4. ``alibi_flat``             — e_alibi(L_f) − e_alibi(L_0) ≤ FLAT_BY;
5. ``rotations_alibi_flat``   — the same for random Q/K rotations plus ALiBi.

Intervals m ± t_{1−α'/2, n−1}·s/√n over n seeds (``seed_store.t_interval``, compared with scipy
in AT20's LM-proxy evidence), α' = ALPHA/M over all M comparisons (Bonferroni), decided by the
kit's rule (``kit.Decision``, ``kit.combine``). A comparison is blocked (shown, never deciding)
when a scheme is missing or has < MIN_SEEDS seeds, when RoPE or a compared scheme did not learn
the task (seed-mean error at L_0 > LEARNED_TOL), or when RoPE does not degrade (seed-mean
e_rope(L_f) − e_rope(L_0) < ROPE_DEGRADES: lengths that do not challenge RoPE cannot test
extrapolation). A sub-claim FAILS only on an unblocked interval excluding its bound. Probes (the
sparse FFL(0.98) scored with the FFL(0.8) model) are tabulated and drawn, not judged. The tables
give each run's exact (Clopper–Pearson) interval (``synthetic.error_interval``).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict
from importlib import resources
from pathlib import Path

import numpy as np

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims.at20_figures import label
from posflow.proofs_checks.claims.at20_judge import ALPHA, decision_controls, sub_claim_measurement
from posflow.simulate.models import seed_store as SS
from posflow.simulate.models.synthetic import error_interval

__all__ = ["BELOW_BY", "DEGRADE_BY", "FLAT_BY", "LEARNED_TOL", "LONG_FACTOR", "MIN_SEEDS",
           "PAPER_ORDER", "QKV_SLACK", "ROPE_DEGRADES", "ROTATIONS", "STORE_FORMAT", "SUB_CLAIMS",
           "TASK_STORE", "hand_made_store", "judge", "read_store", "task_evidence",
           "task_figure"]  # fmt: skip

TASK_STORE = resources.files("posflow.simulate") / "data" / "synthetic_v1"
STORE_FORMAT = "posflow-synthetic-extrapolation"  # synthetic_train.FORMAT (that module needs torch)
LONG_FACTOR = 16  # the judged length L_f = 16·L_0, the store's longest
BELOW_BY = 0.01  # "lower error than RoPE": by at least one percentage point
QKV_SLACK = 0.01  # Q/K/V may exceed Q/K by at most one point
DEGRADE_BY = 0.01  # "degrades": error at L_f at least one point above L_0
FLAT_BY = 0.02  # "flat": error at L_f at most two points above L_0
ROPE_DEGRADES = 0.05  # RoPE loses ≥ 5 points from L_0 to L_f (the role of ROPE_COLLAPSE)
LEARNED_TOL = 0.05  # a scheme learned the task: seed-mean error at L_0 ≤ 5 %
MIN_SEEDS = 5
ROTATIONS = ("learned_qk", "learned_qkv", "path")
QKV_PAIRS = (("learned_qkv", "learned_qk"), ("random_qkv", "random_qk"))
SUB_CLAIMS = ("rotations_below_rope", "qkv_le_qk", "rotation_only_degrades", "alibi_flat",
              "rotations_alibi_flat")  # fmt: skip
_SENS = {"LONG_FACTOR": (4, 8, 16), "BELOW_BY": (0.0, 0.01, 0.05), "QKV_SLACK": (0.0, 0.01, 0.05),
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
    """(L_0, L_f): L_f the longest evaluated length ≤ long_factor·L_0."""
    cfg = st["meta"]["config"]
    return cfg["train_len"], cfg["train_len"] * max(f for f in cfg["factors"]
                                                    if f <= p["long_factor"])


# -- the judge -------------------------------------------------------------------------------
def _comparisons(st, p) -> list:
    """[(sub-claim, task, label, schemes, {seed: x}, op, bound)] on every trained task."""
    L0, Lf = _lengths(st, p)
    f, out = Lf // L0, []
    for t in sorted({t for t, _, _ in st["runs"]}):
        e0 = defaultdict(dict, {s: _rates(st, t, s, L0) for _, s, _ in st["runs"]})
        ef = defaultdict(dict, {s: _rates(st, t, s, Lf) for s in list(e0)})
        out += [("rotations_below_rope", t, f"e_rope − e_{s} ({f}×) ≥ {p['below_by']}",
                 ["rope", s], _diff(ef["rope"], ef[s]), "ge", p["below_by"]) for s in ROTATIONS]
        out += [("qkv_le_qk", t, f"e_{a} − e_{b} ({f}×) ≤ {p['qkv_slack']}", [a, b],
                 _diff(ef[a], ef[b]), "le", p["qkv_slack"]) for a, b in QKV_PAIRS]
        out += [("rotation_only_degrades", t, f"e_{s}({f}×) − e_{s}(1×) ≥ {p['degrade_by']}",
                 [s], _diff(ef[s], e0[s]), "ge", p["degrade_by"]) for s in ROTATIONS]
        out += [(n, t, f"e_{s}({f}×) − e_{s}(1×) ≤ {p['flat_by']}", [s], _diff(ef[s], e0[s]),
                 "le", p["flat_by"]) for n, s in (("alibi_flat", "alibi"),
                                                 ("rotations_alibi_flat", "random_qk_alibi"))]
    return out  # fmt: skip


def _blocks(st, task, schemes, n, p) -> list[str]:
    """Why a comparison of ``schemes`` (n paired seeds) on ``task`` cannot count."""
    L0, Lf = _lengths(st, p)
    have = {s for t, s, _ in st["runs"] if t == task}
    missing = [s for s in dict.fromkeys((*schemes, "rope")) if s not in have]
    if missing:
        return [f"missing schemes: {', '.join(missing)}"]
    out = [f"{n} paired seed(s), needs ≥ {p['min_seeds']}"] if n < p["min_seeds"] else []
    for s in dict.fromkeys(("rope", *schemes)):
        if not (e0 := _mean(_rates(st, task, s, L0))) <= p["learned_tol"]:
            out.append(f"{s} did not learn {task}: seed-mean error at 1× {e0:.3g} > "
                       f"LEARNED_TOL {p['learned_tol']}")
    drop = _mean(_diff(_rates(st, task, "rope", Lf), _rates(st, task, "rope", L0)))
    if not drop >= p["rope_degrades"]:
        out.append(f"RoPE does not degrade on {task}: seed-mean error {Lf // L0}× − 1× = "
                   f"{drop:.3g} < ROPE_DEGRADES {p['rope_degrades']}")
    return out  # fmt: skip


def judge(st, *, long_factor=LONG_FACTOR, below_by=BELOW_BY, qkv_slack=QKV_SLACK,
          degrade_by=DEGRADE_BY, flat_by=FLAT_BY, rope_degrades=ROPE_DEGRADES,
          learned_tol=LEARNED_TOL, alpha=ALPHA, min_seeds=MIN_SEEDS) -> list[dict]:  # fmt: skip
    """The five sub-claims on the store ``st`` (:func:`read_store`), each ``{"name", "status",
    "reason", "comparisons"}`` as ``at20_judge.judge`` returns them (each comparison also names
    its ``task``): t intervals at 1 − alpha/M, the kit's rule, blocks as the module doc says."""
    p = dict(long_factor=long_factor, below_by=below_by, qkv_slack=qkv_slack, flat_by=flat_by,
             degrade_by=degrade_by, rope_degrades=rope_degrades, learned_tol=learned_tol,
             min_seeds=min_seeds)  # fmt: skip
    comps = _comparisons(st, p)
    a = kit.family_level(alpha, max(1, len(comps)))
    out = []
    for name in SUB_CLAIMS:
        rows, decisions = [], []
        for _, task, lab, schemes, vals, op, c in (x for x in comps if x[0] == name):
            stats = SS.comparison_statistics(vals, c, a)
            blocked = _blocks(st, task, schemes, stats["n"], p)
            d = kit.Decision(f"{task}: {lab}", stats["mean"], stats["lo"], stats["hi"], c, op, a,
                             blocked)  # fmt: skip
            decisions.append(d)
            rows.append({"label": d.label, "task": task, "schemes": schemes, "op": op,
                         "bound": c, "alpha": a, "values": vals, **stats,
                         "decision": d.decision, "blocked": blocked})  # fmt: skip
        status, reason = kit.combine(decisions)
        out.append({"name": name, "status": status, "comparisons": rows, "reason": reason})
    return out


# -- the judge's own controls: hand-made stores with known answers -------------------------
def hand_made_store(growth: dict, seeds=5, *, noise=0.004, count=4000, factors=(1, 16)) -> dict:
    """An in-memory store with known answers: scheme s has error 0.01 at 1× and 0.01 +
    growth[s] at 16× (± ``noise`` by seed), of ``count`` answers per length, on task "t"."""
    runs = {}
    for s, g in growth.items():
        for k in range(seeds):
            rate = [0.01, 0.01 + g + noise * (k - (seeds - 1) / 2)]
            ev = {"lengths": [4 * f for f in factors], "counts": [count] * 2, "chance": 0.5,
                  "errors": [round(count * min(max(x, 0.0), 1.0)) for x in rate]}
            runs["t", s, k] = {"task_label": "t", "scheme": s, "seed": k, "eval": {"t": ev}}
    return {"meta": {"config": {"train_len": 4, "factors": list(factors)}}, "runs": runs}


PAPER_ORDER = {"rope": 0.3, "learned_qk": 0.12, "learned_qkv": 0.1, "path": 0.1,
               "random_qk": 0.15, "random_qkv": 0.12, "alibi": 0.0, "random_qk_alibi": 0.0}
"""Error growth 1× → 16× of each scheme in [B]'s order (hand-made controls and tests)."""


def _judge_controls() -> list:
    """The judge on hand-made stores: [B]'s order HOLDS; rotations worse than RoPE FAIL; 3
    seeds, or RoPE flat, stay INCONCLUSIVE."""
    def status(growth, seeds=5):
        return {s["name"]: s["status"] for s in judge(hand_made_store(growth, seeds))}

    undecided = {kit.INCONCLUSIVE}
    worse = status({**PAPER_ORDER, **dict.fromkeys(ROTATIONS, 0.45)})["rotations_below_rope"]
    return [
        kit.holds("tasks_control_paper_order_holds", set(status(PAPER_ORDER).values()) == {
            kit.HOLDS}, role="control", label="hand-made store in [B]'s order: all HOLD"),
        kit.rejects("tasks_control_rotations_worse", worse != kit.FAILS,
                    "rotations 15 points above RoPE at 16× must FAIL rotations_below_rope"),
        kit.rejects("tasks_control_three_seeds", set(status(PAPER_ORDER, 3).values()) !=
                    undecided, "[B]'s order with 3 seeds must leave every sub-claim undecided"),
        kit.rejects("tasks_control_rope_flat", set(status({**PAPER_ORDER, "rope": 0.0}).values())
                    != undecided, "RoPE flat must leave every sub-claim undecided"),
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
    task (probes included), the chance level drawn (AT20)."""
    by, panels, trained = {}, {}, {t for t, _, _ in st["runs"]}
    chance = {lab: ev["chance"] for r in st["runs"].values() for lab, ev in r["eval"].items()}
    for (lab, s, f), d in _cells(st):
        by.setdefault((lab, s), []).append((f, *_band(d), len(d)))
    for (lab, s), rows in by.items():
        f, y, lo, hi, n = (list(v) for v in zip(*rows, strict=True))
        ser, c = panels.setdefault(lab, []), _COLORS.get(s, kit.SCHEME_COLORS.get(s, "#444444"))
        if all(math.isfinite(v) for v in lo + hi):
            ser.append(kit.Series("", f, y, kind="band", lo=np.clip(lo, 0, 1).tolist(),
                                  hi=np.clip(hi, 0, 1).tolist(), color=c))  # fmt: skip
        ser.append(kit.Series(f"{label(s)} ({min(n)} seeds)", f, y, color=c))
    return kit.Figure("at20_tasks", "AT20: error on synthetic tasks against the length factor", [
        kit.Panel(f"{lab}{'' if lab in trained else ' (probe, not judged)'}", "L / L_train",
                  "error rate (argmax)", ser, logx=True, hlines=[(chance[lab], "chance")],
                  legend="shared") for lab, ser in sorted(panels.items())])  # fmt: skip


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
    ms = [dataclasses.replace(sub_claim_measurement(sub), key=f"tasks_sub_claim_{sub['name']}")
          for sub in subs]
    ms += [dataclasses.replace(m, key=f"tasks_{m.key}") for m in decision_controls(subs)]
    steps = {r.get("train", {}).get("steps") for r in st["runs"].values()}
    ms += [kit.holds("tasks_equal_step_budgets", steps == {st["meta"]["config"].get("steps")},
                     label="every synthetic-task run trained the store's optimiser steps"),
           kit.info("tasks_runs", len(st["runs"]), label="synthetic-task runs in the store")]
    ms += _judge_controls()
    return ms, _tables(st, subs), [task_figure(st)]  # fmt: skip


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
        print(f"{sub['name']}: {sub['status']}")
        for c in sub["comparisons"]:
            lo, hi = (f"{v:.3g}" for v in (c["lo"], c["hi"]))
            print(f"  {c['label']}: mean {c['mean']:.3g} [{lo}, {hi}] n = {c['n']} → "
                  f"{c['decision']}{' (blocked: ' + '; '.join(c['blocked']) + ')' if c['blocked'] else ''}")  # noqa: E501
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
