"""Every reported number against stored reference values (issue 23: a FAILS or INCONCLUSIVE
claim still detects a break in its pipeline as a newly failing comparison).

A claim stores ``{size: {part: [{"identity": …, "values": {name: number}}]}}`` in
``posflow/proofs_checks/claims/references/<file>.json`` (written by the claim module's
``write_reference``); :func:`regression_measurements` compares a run's numbers (:func:`flatten`)
with the entry of the same identity, with a negative control (one stored number moved by 10× the
tolerance must fail).
"""

from __future__ import annotations

import json
import math
from importlib import resources

from posflow.proofs_checks.kit._controls import rejects
from posflow.proofs_checks.kit._evidence import at_most, fp_tol, info

__all__ = ["deviation", "flatten", "load_reference", "regression", "regression_measurements",
           "store_reference"]  # fmt: skip


def _num(v):
    return isinstance(v, int | float) and not isinstance(v, bool)


def flatten(ms, tables, *, ranks: bool = False) -> dict:
    """Every number of the measurements ``ms`` and the ``tables`` as ``{name: float}``, but the
    errors against plain torch (``*_vs_plain_torch``: float32 noise of another code path, ~1e-5
    and moving between runs, judged on their own) and, unless ``ranks``, the Spearman ρ columns
    (columns with "ρ") of every table.

    A near-tie of a measured profile p̂ (n positions) swapped by float32 noise moves Spearman ρ by
    up to 12/(n(n + 1)) (Σd² changes by twice the other ranking's rank gap of the two, ≤ n − 1,
    and ρ = 1 − 6Σd²/(n(n² − 1))): 2.9e-3 at n = 64, beyond a 1e-4
    tolerance, in point estimates and interval ends alike; the profiles themselves are compared
    through their other numbers (W1, centred W1, first and last entries, λ). ``ranks=True`` keeps
    the ρ columns, for numbers that do not move between runs (a stored study read from JSON).
    """
    out = {m.key: float(m.value) for m in ms if _num(m.value) and "vs_plain_torch" not in m.key}
    for t in tables:
        for i, row in enumerate(t.rows):
            for j, v in enumerate(row):
                if _num(v) and (ranks or "ρ" not in t.columns[j]):
                    out[f"{t.key}[{i}][{t.columns[j]}#{j}]"] = float(v)
    return out


def deviation(v, r, floor: float) -> float:
    """|v − r| / max(|r|, floor) for numbers (0 when both are NaN, inf when one is); 0 or inf
    for other values (equal or not); inf when either is missing (None)."""
    if v is None or r is None:
        return math.inf
    if _num(v) and _num(r):
        v, r = float(v), float(r)
        if math.isnan(r) or math.isnan(v):
            return 0.0 if math.isnan(r) and math.isnan(v) else math.inf
        return abs(v - r) / max(abs(r), floor)
    return 0.0 if v == r else math.inf


def regression(key: str, values: dict, ref: dict, tol: float, reason: str,
               what: str = "every reported number", floor: float = 1e-2) -> list:
    """Max :func:`deviation` of ``values`` from ``ref`` over every name of either (missing on
    one side: inf) ≤ ``tol``; and how many numbers were compared."""
    devs = {k: deviation(values.get(k), ref.get(k), floor) for k in sorted({*values, *ref})}
    worst = max(devs, key=devs.get) if devs else ""
    shown = f"{worst}: {values.get(worst)!r} vs {ref.get(worst)!r}" if worst else "none"
    return [
        at_most(key, devs.get(worst, math.inf), 0.0, fp_tol(tol, reason),
                label=f"max relative deviation of {what} from the stored reference (worst: "
                f"{shown})"),
        info(f"{key}_count", len(devs), label=f"numbers compared by {key}"),
    ]  # fmt: skip


def load_reference(name: str) -> dict:
    """The stored reference numbers ``references/<name>`` (empty when the file is absent)."""
    p = resources.files("posflow.proofs_checks.claims").joinpath("references", name)
    return json.loads(p.read_text()) if p.is_file() else {}


def regression_measurements(part: str, identity: str, values: dict, size: str, tol, reason,
                            what: str, reference: str, floor: float = 1e-2, names=None,
                            tag: str = "") -> list:
    """``part`` (a model tag or "smollm2_study") against its stored reference at ``size`` (in
    ``references/<reference>``), compared only when the reference was made from the same
    ``identity``; with a negative control (one reference number, at least ``floor`` in size,
    moved by 10× the tolerance). ``floor``: deviations are relative to max(|reference|, floor).
    ``names``: a predicate on the numbers' names, to compare only those (of the run and of the
    reference alike) — numbers of another kind get their own call, tolerance and ``tag``
    (appended to the measurement keys)."""
    refs = load_reference(reference).get(size, {}).get(part, [])
    ref = next((r for r in refs if r["identity"] == identity), None)
    key = f"{part}.regression{tag}_vs_reference"
    if ref is None:
        have = "; ".join(repr(r["identity"]) for r in refs) or "none"
        return [info(key, f"not compared: no stored reference of this run ({identity!r}); "
                     f"stored: {have}")]  # fmt: skip
    vals = ref["values"]
    if names is not None:
        values = {k: v for k, v in values.items() if names(k)}
        vals = {k: v for k, v in vals.items() if names(k)}
    if not vals:
        return [info(key, "not compared: the stored reference holds none of these numbers")]
    name = next(k for k, v in vals.items() if abs(v) >= floor)  # not below regression's floor
    moved = {**vals, name: vals[name] * (1 + 10 * tol)}
    return [
        *regression(key, values, vals, tol, reason, what, floor),
        rejects(f"{part}.regression{tag}_control_one_number_moved",
                regression("c", values, moved, tol, reason, what, floor)[0],
                f"the reference's {name} moved by 10× the tolerance"),
    ]


def store_reference(name: str, parts: dict, size: str):
    """Add ``parts`` (``{part: (identity, {name: number})}``) at ``size`` to the claims'
    ``references/<name>`` (an entry of the same identity is replaced; other entries kept);
    returns the path. Run from a source checkout (the file is package data)."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "claims" / "references" / name
    out = json.loads(path.read_text()) if path.is_file() else {}
    at = out.setdefault(size, {})
    for p, (ident, vals) in parts.items():
        kept = [r for r in at.get(p, []) if r["identity"] != ident]
        at[p] = [*kept, {"identity": ident, "values": vals}]
    path.write_text(json.dumps(out, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return path
