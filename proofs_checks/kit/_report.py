"""The verification report: ``index.md``, ``index.html`` (standalone, figures inlined), PNG
figures and ``results.json``, all rendered here from the checks' evidence (checks write nothing).

Every record says where it came from (:func:`provenance`): the posflow version, the git commit
when posflow runs from a checkout, seed, size, UTC date, platform, library versions and thread
count, and what each check's seconds include (``timing``: measured alone, or after earlier checks
of the same process that may have warmed its caches).
"""

from __future__ import annotations

import base64
import datetime
import html
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

__all__ = [
    "TIMING_NOTE",
    "git_commit",
    "jsonable",
    "measurement_rows",
    "provenance",
    "records",
    "write_report",
]

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


_MARK = {True: "pass", False: "FAIL", None: ""}


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def measurement_rows(rec: dict) -> list[list[str]]:
    """Rows (result, measurement, value, compared with, tolerance, kind and reason) of a
    record's measurements, formatted for reading (no Python reprs)."""
    from posflow.proofs_checks.kit._evidence import Measurement
    from posflow.proofs_checks.kit._specs import _num

    rows = []
    for d in rec.get("measurements", []):
        m = Measurement.from_json(d)
        value = _num(m.value) + (f" {m.unit}" if m.unit else "")
        if m.test == "undecided":
            mark = "undecided"
        else:
            mark = _MARK[m.passed] if m.judged else "info"
        role = " (control)" if m.role == "control" else ""
        tol = "" if m.tol is None else _num(m.tol.value)
        why = "" if m.tol is None else m.tol.describe()
        if m.test == "undecided":
            why = m.note
        rows.append([mark, m.label + role, value, m.criterion(), tol, why])
    return rows


_HEAD = ["result", "measurement", "value", "compared with", "tolerance", "tolerance: kind, reason"]


def _md_table(head, rows) -> list[str]:
    from posflow.proofs_checks.kit._specs import _num

    out = ["| " + " | ".join(_cell(h) for h in head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_cell(_num(c)) for c in r) + " |" for r in rows]
    return [*out, ""]


def _render_figures(recs: list[dict], out: Path) -> None:
    """Draw every figure spec into ``out/figures/ID-name.png``; record the relative paths."""
    from posflow.proofs_checks.kit._figures import render
    from posflow.proofs_checks.kit._specs import Figure

    for rec in recs:
        paths = [os.path.relpath(f, out) for f in rec.get("figure_paths", [])]
        for spec in rec.get("figures", []):
            fig = Figure.from_json(spec)
            path = out / "figures" / f"{rec['id']}-{fig.name}.png"
            render(fig, path)
            paths.append(os.path.relpath(path, out))
        rec["figure_paths"] = paths
        rec["figures"] = [
            {"name": f["name"], "title": f["title"], "caption": f.get("caption", "")}
            for f in rec.get("figures", [])
        ]


def _evidence_md(rec: dict) -> list[str]:
    lines = [f"### {rec['id']} — {rec['status']}", "", rec["statement"], ""]
    if rec.get("expected"):
        lines += [f"*Expected:* {_expected_words(rec)}", ""]
    if rec.get("setup"):
        lines += [f"*Setup:* {rec['setup']}", ""]
    if rec.get("summary"):
        lines += [f"*Verdict:* {rec['status']} — {rec['summary']}", ""]
    if rec.get("error"):
        lines += [f"Crashed: `{rec['error']}`", ""]
    if rec.get("measurements"):
        lines += _md_table(_HEAD, measurement_rows(rec))
    else:  # not yet moved to measurements
        from posflow.proofs_checks.kit._specs import _num

        for k, v in rec.get("measured", {}).items():
            shown = f"[{len(v)} values]" if isinstance(v, list) and len(v) > 8 else _num(v)
            lines.append(f"- {k}: {shown}")
        lines.append("")
    for t in rec.get("tables", []):
        lines += [f"**{t['title']}**", "", *_md_table(t["columns"], t["rows"])]
        if t.get("note"):
            lines += [t["note"], ""]
    for f in rec.get("figure_paths", []):
        lines += [f"Figure: [{f}]({f}) (shown under Figures)", ""]
    return lines


def _expected_words(rec: dict) -> str:
    """The verdict lock's expectation in words: ``= FAILS (reason)`` or ``≠ HOLDS: regression``."""
    want = rec.get("expected", "")
    if not want:
        return ""
    same = rec["status"] == want
    why = f" ({rec['expected_reason']})" if rec.get("expected_reason") else ""
    return (f"{want}{why}; the verdict matches the lock" if same
            else f"{want}{why}; the verdict DIFFERS from the lock")  # fmt: skip


def _lock_cell(rec: dict) -> str:
    want = rec.get("expected", "")
    if not want:
        return ""
    return f"= {want}" if rec["status"] == want else f"≠ {want} (regression)"


def _html_table(head, rows) -> str:
    from posflow.proofs_checks.kit._specs import _num

    h = "".join(f"<th>{html.escape(str(c))}</th>" for c in head)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(_num(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><tr>{h}</tr>{body}</table>"


def _html(recs: list[dict], out: Path, title_line: str, prov: dict | None) -> str:
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>posflow verification report"
        "</title><style>body{font-family:sans-serif;max-width:70em;margin:auto;padding:1em}"
        "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 6px;"
        "font-size:90%}.HOLDS{color:#1a7f37}.FAILS{color:#cf222e}.INCONCLUSIVE{color:#9a6700}"
        ".ERROR{color:#8250df}img{max-width:100%}</style></head><body>",
        "<h1>posflow verification report</h1>",
        f"<p>{e(title_line)}</p>",
        "<h2>Verdicts</h2>",
        "<table><tr><th>ID</th><th>status</th><th>expected</th><th>statement</th>"
        "<th>summary</th></tr>",
    ]
    for r in recs:
        parts.append(
            f"<tr><td><a href='#{r['id'].lower()}'>{r['id']}</a></td>"
            f"<td class='{r['status']}'>{r['status']}</td>"
            f"<td>{e(_lock_cell(r))}</td><td>{e(r['statement'])}</td>"
            f"<td>{e(r.get('summary') or r.get('error', ''))}</td></tr>"
        )
    parts.append("</table><h2>Evidence</h2>")
    for r in recs:
        parts.append(
            f"<h3 id='{r['id'].lower()}'>{r['id']} — <span class='{r['status']}'>"
            f"{r['status']}</span></h3><p>{e(r['statement'])}</p>"
        )
        if r.get("expected"):
            parts.append(f"<p><em>Expected:</em> {e(_expected_words(r))}</p>")
        if r.get("setup"):
            parts.append(f"<p><em>Setup:</em> {e(r['setup'])}</p>")
        if r.get("summary"):
            parts.append(f"<p><em>Verdict:</em> {e(r['summary'])}</p>")
        if r.get("error"):
            parts.append(f"<p>Crashed: <code>{e(r['error'])}</code></p>")
        if r.get("measurements"):
            parts.append(_html_table(_HEAD, measurement_rows(r)))
        elif r.get("measured"):
            rows = [[k, v if not isinstance(v, list) else f"[{len(v)} values]"]
                    for k, v in r["measured"].items()]  # fmt: skip
            parts.append(_html_table(["measured", "value"], rows))
        for t in r.get("tables", []):
            parts.append(f"<p><strong>{e(t['title'])}</strong></p>")
            parts.append(_html_table(t["columns"], t["rows"]))
            if t.get("note"):
                parts.append(f"<p>{e(t['note'])}</p>")
        for f in r.get("figure_paths", []):
            data = base64.b64encode((out / f).read_bytes()).decode("ascii")
            parts.append(f"<p><img alt='{e(r['id'])}' src='data:image/png;base64,{data}'></p>")
    if prov is not None:
        parts.append("<h2>Provenance</h2><ul>")
        parts += [f"<li>{e(line[2:])}</li>" for line in _provenance_lines(prov)[2:-1]]
        parts.append("</ul>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(results, out, *, size: str, provenance: dict | None = None) -> Path:
    """Render ``results`` (a list of Result) into ``out``: ``index.md``, ``index.html``, the
    figures (PNG, drawn here from each evidence's figure specs), ``results.json`` and
    ``CLAIMS.md``.

    ``results.json`` is a list of records (:func:`records`), each carrying ``provenance``;
    ``index.md`` opens with the verdict table, then each claim's evidence (its measurements with
    the reference, tolerance and the tolerance's reason; its tables; its figures) and the
    provenance; each claim ID links to its entry in ``CLAIMS.md``, the catalog generated from
    the registry (:func:`posflow.proofs_checks.kit.to_markdown`), written beside it.
    """
    from posflow.proofs_checks.kit._catalog import anchor, to_markdown

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    recs = records(results, provenance)
    _render_figures(recs, out)
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
    differ = [r["id"] for r in recs if r.get("expected") and r["status"] != r["expected"]]
    lock = (f" Verdict lock: {len(differ)} differ{'s' if len(differ) == 1 else ''} from "
            f"expected.toml ({', '.join(differ)})." if differ
            else " Verdict lock: every verdict as expected.")  # fmt: skip
    title_line = (
        f"Size: {size}. " + ", ".join(f"{k}: {v}" for k, v in counts.items() if v) + "." + lock
        + where
    )
    lines = [
        "# posflow verification report",
        "",
        title_line.replace(f"Size: {size}", f"Size: `{size}`"),
        "",
        "## Figures",
        "",
    ]
    for rec in recs:
        for f in rec["figure_paths"]:
            lines += [f"**{rec['id']}** ({rec['status']})", "", f"![{rec['id']}]({f})", ""]
    lines += [
        "## Verdicts",
        "",
        "| ID | status | expected | statement | summary | time (s) | timing |",
        "|---|---|---|---|---|---|---|",
    ]
    for rec in recs:
        lines.append(
            f"| [{rec['id']}](CLAIMS.md#{anchor(rec['id'])}) | {rec['status']} | "
            f"{_lock_cell(rec)} | "
            f"{_cell(rec['statement'])} | {_cell(rec.get('summary') or rec.get('error', ''))} | "
            f"{rec['seconds']} | {rec.get('timing', '')} |"
        )
    lines += ["", TIMING_NOTE, "", "## Evidence", ""]
    for rec in recs:
        lines += _evidence_md(rec)
    if provenance is not None:
        lines += _provenance_lines(provenance)
    (out / "index.md").write_text("\n".join(lines), encoding="utf-8")
    (out / "index.html").write_text(_html(recs, out, title_line, provenance), encoding="utf-8")
    return out / "index.md"
