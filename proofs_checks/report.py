"""The verification report: ``index.md`` (figures first), PNG figures and ``results.json``."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

__all__ = ["jsonable", "write_report"]


def jsonable(x):
    """Convert numpy scalars/arrays (and nested containers) to plain JSON types."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return jsonable(x.tolist())
    if isinstance(x, np.bool_ | bool):
        return bool(x)
    if isinstance(x, np.integer):
        return int(x)
    if isinstance(x, np.floating | float):
        v = float(x)
        return v if np.isfinite(v) else str(v)
    if isinstance(x, Path):
        return str(x)
    return x


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list) and len(v) > 8:
        return f"[{len(v)} values]"
    return str(v)


def write_report(results, out, *, size: str) -> Path:
    """Write ``index.md`` and ``results.json`` for ``results`` (a list of Result) into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    records = [jsonable(r.as_json()) for r in results]
    for rec in records:  # figure paths relative to the report folder
        rec["figures"] = [os.path.relpath(f, out) for f in rec["figures"]]
    (out / "results.json").write_text(json.dumps(records, indent=2) + "\n", encoding="utf-8")
    counts = {
        s: sum(r["status"] == s for r in records)
        for s in ("HOLDS", "FAILS", "INCONCLUSIVE", "ERROR")
    }
    lines = [
        "# posflow verification report",
        "",
        f"Size: `{size}`. " + ", ".join(f"{k}: {v}" for k, v in counts.items() if v) + ".",
        "",
        "## Figures",
        "",
    ]
    for rec in records:
        for f in rec["figures"]:
            lines += [f"**{rec['id']}** ({rec['status']})", "", f"![{rec['id']}]({f})", ""]
    lines += ["## Verdicts", "", "| ID | status | statement | time (s) |", "|---|---|---|---|"]
    for rec in records:
        stmt = rec["statement"].replace("|", "\\|")
        lines.append(f"| {rec['id']} | {rec['status']} | {stmt} | {rec['seconds']} |")
    lines += ["", "## Evidence", ""]
    for rec in records:
        lines += [f"### {rec['id']} — {rec['status']}", "", rec["statement"], ""]
        if rec.get("summary"):
            lines += [rec["summary"], ""]
        if rec.get("error"):
            lines += [f"Crashed: `{rec['error']}`", ""]
        for k, v in rec["measured"].items():
            lines.append(f"- `{k}`: {_fmt(v)}")
        lines.append("")
    (out / "index.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "index.md"
