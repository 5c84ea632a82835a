"""PB20's sink evidence: Sink_ε in both conventions, and the intervention that tests (e)'s
assumption in the forward pass (issue 41, item 7).

The sink-aware rollout (e) (:mod:`posflow.simulate.models.sinks`) assumes that a query's
attention on token 0 carries no information, and returns it to the query's own state. The
stored intervention (``posflow sinks smollm2-135m --n 64 --windows 8 --target diagonal uniform
drop --json``; :func:`posflow.simulate.models.sink_intervention.sink_intervention`, package data
``simulate/data/smollm2/sink_intervention.json``) moves, in every head of one layer (or of all
layers), each row's attention on token 0 to the diagonal — (e)'s assumption taken literally —
or spreads it uniformly over the row's other keys (the control), or drops its value term, and
measures the change of the next-token loss (paired t intervals over windows) and of the gradient
influence (W1/(n − 1) to the unmodified profile, percentile bootstrap). Sink_ε (Gu et al. 2025:
per head, the attention token 0 receives averaged over the queries that see it, ε = 0.3) is
stated in both conventions: threshold the mean over windows, or threshold each window and
average. Reported beside PB20's verdict with its scope, not judged: the numbers come from a file
written by a documented command (the intervention's routines are tested against a plain-torch
reference in ``tests/test_sink_intervention.py``); the file's presence and shape are judged.
"""

from __future__ import annotations

import json
from importlib import resources

import numpy as np

from posflow.proofs_checks.kit import Scope, Table, holds, info
from posflow.simulate.models.subjects import scope_of

__all__ = ["SINK_FILE", "SINK_SHARE", "sink_evidence"]

SINK_FILE = "data/smollm2/sink_intervention.json"
# a layer is a sink layer when at least this share of its heads is a sink (Sink_ε, mean over
# windows then threshold): a named choice for the pooled summary; every layer is in the table
SINK_SHARE = 0.5


def _load():
    f = resources.files("posflow.simulate").joinpath(SINK_FILE)
    try:
        d = json.loads(f.read_text())
        rows = d["intervention"]["rows"]
        _ = d["sinks"]["rate"], d["sinks"]["rate_per_sequence"], d["sinks"]["heads_above"]
        return d, rows, ""
    except (OSError, ValueError, KeyError, TypeError) as e:
        return None, None, f"{f}: {type(e).__name__}: {e}"


def _cell(row) -> str:
    lo, hi = row["dnll_interval"]
    return f"{row['dnll']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def sink_evidence(tag: str = "smollm2_sinks") -> tuple[list, list, Scope | None]:
    """(measurements, tables, scope) of the stored sink intervention (see the module
    docstring); a missing or malformed file fails, naming the file and what is wrong."""
    d, rows, err = _load()
    ok = holds(f"{tag}.readable", d is not None, label="the stored sink intervention "
               f"({SINK_FILE}) is readable, with its rows and both Sink_ε conventions")  # fmt: skip
    if d is None:
        ok.note = err
        return [ok], [], None
    iv, sk = d["intervention"], d["sinks"]
    L, targets = int(iv["layers"]), list(iv["targets"])
    by = {(r["layers"], r["target"]): r for r in rows}
    sinks = [t for t in range(L) if sk["heads_above"][t] >= SINK_SHARE]
    contrast = {c["layers"]: c for c in iv.get("diagonal_minus_uniform", [])}
    worse = [t for t in sinks if contrast.get(str(t), {}).get("dnll_interval", [0, 0])[0] > 0]
    better = [t for t in sinks if contrast.get(str(t), {}).get("dnll_interval", [0, 0])[1] < 0]
    everything = next((k for k, _ in by if k not in {str(t) for t in range(L)}), None)
    mean = {x: float(np.mean([by[(str(t), x)]["dnll"] for t in sinks])) for x in targets}
    words = ", ".join(f"{x} {mean[x]:+.3f}" for x in targets)
    alll = ", ".join(f"{x} {_cell(by[(everything, x)])}" for x in targets) if everything else ""
    ms = [
        ok,
        info(f"{tag}.sink_eps", f"{100 * sk['rate']:.1f} % of heads (mean over windows, then "
             f"ε = {sk['eps']:g}); {100 * sk['rate_per_sequence']:.1f} % (each window "
             "thresholded, then averaged: Gu et al.'s own code)",
             label="Sink_ε in both conventions"),
        info(f"{tag}.dnll_sink_layers", words, label=f"mean ΔNLL (nats) over the "
             f"{len(sinks)} sink layers (≥ {SINK_SHARE:g} of heads Sink_ε), one layer at a time, "
             "per target"),
        info(f"{tag}.diagonal_vs_uniform", f"diagonal − uniform: interval above 0 in "
             f"{len(worse)} of {len(sinks)} sink layers, below 0 in {len(better)}",
             label="(e)'s assumption read literally — token 0's attention returned to the "
             "diagonal — against spreading it uniformly (95 % paired t intervals of ΔNLL)"),
    ]  # fmt: skip
    if alll:
        ms.append(info(f"{tag}.dnll_all_layers", alll, label="ΔNLL (nats) with every layer "
                       "intervened at once, 95 % paired t interval"))  # fmt: skip
    cols = ["layers", "attention on 0", "Sink_ε heads (mean)", "Sink_ε heads (per window)"]
    cols += [f"ΔNLL {x} [95 %]" for x in targets] + [f"W1 {x}" for x in targets]
    cols += ["diagonal − uniform ΔNLL [95 %]"]
    table = []
    for key in [str(t) for t in range(L)] + ([everything] if everything else []):
        t = int(key) if key.isdigit() else None
        c = contrast.get(key)
        table.append([
            key, iv["attention_on_0"][t] if t is not None else float("nan"),
            sk["heads_above"][t] if t is not None else float("nan"),
            sk["heads_above_per_sequence"][t] if t is not None else float("nan"),
            *[_cell(by[(key, x)]) for x in targets], *[by[(key, x)]["w1"] for x in targets],
            _cell(c) if c else "",
        ])  # fmt: skip
    scope = Scope(**scope_of("smollm2", int(iv["n"]), f"{iv['windows']} windows",
                             seeds=iv["seed"], intervention="; ".join(targets)))  # fmt: skip
    tables = [Table(f"{tag}.intervention", f"SmolLM2: each head's attention on token 0 moved in "
                    f"one layer at a time (and all at once) — to the diagonal ((e)'s assumption), "
                    f"spread uniformly, or its value term dropped; baseline NLL "
                    f"{iv['nll_base']:.3f} nats; {iv['intervals']} ({scope.line()})", cols,
                    table)]  # fmt: skip
    return ms, tables, scope
