"""The verification report: ``index.md`` (figures first), PNG figures and ``results.json``.

Every record says where it came from (:func:`provenance`): the posflow version, the git commit
when posflow runs from a checkout, seed, size, UTC date, platform, library versions and thread
count, and what each check's seconds include (``timing``: measured alone, or after earlier checks
of the same process that may have warmed its caches).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

__all__ = ["TIMING_NOTE", "git_commit", "jsonable", "provenance", "records", "write_report"]

TIMING_NOTE = (
    "Seconds are each check's wall-clock time. A check marked 'alone' was the first of its "
    "process and paid for its imports, numba compilation and memoised results itself; one "
    "marked 'after K checks' ran in the same process after K others and may reuse what they "
    "warmed, so it can be faster than when run alone (`posflow verify ID`, or `--isolate`)."
)


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


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def git_commit() -> dict:
    """``{"git_commit": sha, "git_dirty": bool}`` when posflow's own files are tracked by a git
    checkout; ``{}`` otherwise (an installed wheel, no git, any failure)."""
    here = Path(__file__).resolve().parent

    def git(*args):
        return subprocess.run(
            ["git", "-C", str(here), *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
            stdin=subprocess.DEVNULL,
        )

    try:
        tracked = git("ls-files", "--error-unmatch", Path(__file__).name)
        if tracked.returncode != 0:  # not part of a checkout (e.g. a venv inside one)
            return {}
        head = git("rev-parse", "HEAD")
        sha = head.stdout.strip()
        if head.returncode != 0 or len(sha) != 40:
            return {}
        status = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return {}
    out = {"git_commit": sha}
    if status.returncode == 0:
        out["git_dirty"] = bool(status.stdout.strip())
    return out


def provenance(*, seed: int, size: str, threads: int | None, isolated: bool = False) -> dict:
    """Where a run came from: version, commit, seed, size, UTC date, platform, threads."""
    out = {"posflow": _version("posflow") or "unknown"}
    out.update(git_commit())
    out.update(
        seed=seed,
        size=size,
        date=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        platform=platform.platform(),
        python=platform.python_version(),
        numpy=np.__version__,
    )
    for dist in ("scipy", "numba", "torch"):
        v = _version(dist)
        if v is not None:
            out[dist] = v
    out["threads"] = threads
    out["timing"] = (
        "each check alone in its own process" if isolated else "checks in sequence in one process"
    )
    return out


def records(results, prov: dict | None = None) -> list[dict]:
    """JSON records of ``results`` (a list of Result), each with the run's ``provenance``."""
    out = []
    for r in results:
        rec = jsonable(r.as_json())
        if prov is not None:
            rec["provenance"] = prov
        out.append(rec)
    return out


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list) and len(v) > 8:
        return f"[{len(v)} values]"
    return str(v)


def _provenance_lines(prov: dict) -> list[str]:
    commit = prov.get("git_commit")
    if commit:
        commit = f"`{commit}`" + (" (with uncommitted changes)" if prov.get("git_dirty") else "")
    libs = ", ".join(f"{k} {prov[k]}" for k in ("numpy", "scipy", "numba", "torch") if k in prov)
    rows = [
        ("posflow", prov.get("posflow")),
        ("git commit", commit or "not a git checkout"),
        ("seed", prov.get("seed")),
        ("size", prov.get("size")),
        ("date (UTC)", prov.get("date")),
        ("platform", f"{prov.get('platform')}, Python {prov.get('python')}"),
        ("libraries", libs),
        ("threads", prov.get("threads")),
        ("timing", prov.get("timing")),
    ]
    return ["## Provenance", "", *(f"- {k}: {v}" for k, v in rows), ""]


def write_report(results, out, *, size: str, provenance: dict | None = None) -> Path:
    """Write ``index.md`` and ``results.json`` for ``results`` (a list of Result) into ``out``.

    ``results.json`` is a list of records (:func:`records`), each carrying ``provenance``;
    ``index.md`` opens with the figures, then verdicts, evidence and provenance; each claim ID
    links to its entry in ``CLAIMS.md``, the catalog generated from the registry
    (:func:`posflow.proofs_checks.catalog.to_markdown`), written beside it.
    """
    from posflow.proofs_checks.catalog import anchor, to_markdown

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    recs = records(results, provenance)
    for rec in recs:  # figure paths relative to the report folder
        rec["figures"] = [os.path.relpath(f, out) for f in rec["figures"]]
    text = json.dumps(recs, indent=2, allow_nan=False)
    (out / "results.json").write_text(text + "\n", encoding="utf-8")
    (out / "CLAIMS.md").write_text(to_markdown(), encoding="utf-8")
    counts = {
        s: sum(r["status"] == s for r in recs) for s in ("HOLDS", "FAILS", "INCONCLUSIVE", "ERROR")
    }
    where = ""
    if provenance is not None:
        commit = provenance.get("git_commit")
        where = (
            f" posflow {provenance.get('posflow')}"
            + (f" (commit {commit[:12]})" if commit else "")
            + f", seed {provenance.get('seed')}, {provenance.get('threads')} thread(s), "
            f"{provenance.get('date')}; see Provenance."
        )
    lines = [
        "# posflow verification report",
        "",
        f"Size: `{size}`. " + ", ".join(f"{k}: {v}" for k, v in counts.items() if v) + "." + where,
        "",
        "## Figures",
        "",
    ]
    for rec in recs:
        for f in rec["figures"]:
            lines += [f"**{rec['id']}** ({rec['status']})", "", f"![{rec['id']}]({f})", ""]
    lines += [
        "## Verdicts",
        "",
        "| ID | status | statement | time (s) | timing |",
        "|---|---|---|---|---|",
    ]
    for rec in recs:
        stmt = rec["statement"].replace("|", "\\|")
        lines.append(
            f"| [{rec['id']}](CLAIMS.md#{anchor(rec['id'])}) | {rec['status']} | {stmt} | "
            f"{rec['seconds']} | "
            f"{rec.get('timing', '')} |"
        )
    lines += ["", TIMING_NOTE, "", "## Evidence", ""]
    for rec in recs:
        lines += [f"### {rec['id']} — {rec['status']}", "", rec["statement"], ""]
        if rec.get("summary"):
            lines += [rec["summary"], ""]
        if rec.get("error"):
            lines += [f"Crashed: `{rec['error']}`", ""]
        for k, v in rec["measured"].items():
            lines.append(f"- `{k}`: {_fmt(v)}")
        lines.append("")
    if provenance is not None:
        lines += _provenance_lines(provenance)
    (out / "index.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "index.md"
