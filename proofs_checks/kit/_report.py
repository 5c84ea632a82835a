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
import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np
from markupsafe import Markup, escape

from posflow.proofs_checks.kit._code import _LIBRARIES, _version
from posflow.proofs_checks.kit._markup import _math, _seconds, _tex, _timing_short, _when

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
    "process (or ran in its own, with --isolate) and paid for its imports, numba compilation "
    "and memoised results itself; one marked 'after K' ran in the same process after K other "
    "checks and may reuse what they warmed, so it can be faster than when run alone "
    "(`posflow verify ID`, or `--isolate`)."
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
    for dist in _LIBRARIES:
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


def _provenance_rows(prov: dict) -> list[tuple[str, str]]:
    commit = prov.get("git_commit")
    if commit:
        commit = commit + (" (with uncommitted changes)" if prov.get("git_dirty") else "")
    libs = ", ".join(f"{k} {prov[k]}" for k in ("numpy", *_LIBRARIES) if k in prov)
    rows = [
        ("posflow", prov.get("posflow")),
        ("git commit", commit or "not a git checkout"),
        ("seed", prov.get("seed")),
        ("size", prov.get("size")),
        ("date", _when(prov.get("date"))),
        ("platform", f"{prov.get('platform')}, Python {prov.get('python')}"),
        ("libraries", libs),
        ("threads", prov.get("threads")),
        ("timing", prov.get("timing")),
    ]
    if prov.get("changed_during_run"):
        rows.append(("changed during the run", "; ".join(prov["changed_during_run"])
                     + ": the verdicts may mix two versions of the code"))  # fmt: skip
    return rows


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


def _html_table(head, rows, cls: str = "") -> Markup:
    from posflow.proofs_checks.kit._specs import _num

    h = "".join(f"<th>{_math(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{_math(_num(c))}</td>" for c in r) + "</tr>"
                   for r in rows)  # fmt: skip
    attr = f' class="{escape(cls)}"' if cls else ""
    return Markup(f"<table{attr}><tr>{h}</tr>{body}</table>")


def _md_table_text(head, rows) -> str:
    return "\n".join(_md_table(head, rows))


def _template(name: str):
    """A Jinja2 template of ``templates/`` (HTML autoescaped, Markdown not)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(Path(__file__).with_name("templates")),
        autoescape=jinja2.select_autoescape(["html"]), keep_trailing_newline=True,
        trim_blocks=False, undefined=jinja2.StrictUndefined,
    )  # fmt: skip
    env.filters.update(math=_math, cell=_cell)
    env.globals.update(html_table=_html_table, md_table=_md_table_text)
    return env.get_template(name)


NARROW_FIGURE_PX = 1000
"""A figure at most this wide (pixels at 150 dpi: about two panels) sits beside the measurements
of its claim in the HTML report; wider ones span the page above them."""


def _png_width(data: bytes) -> int:
    """Pixel width of a PNG (its IHDR chunk); 0 for anything else."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR":
        return int.from_bytes(data[16:20], "big")
    return 0


_HTML_HEAD = ["result", "measurement", "value", "compared with", "tolerance"]


def _html_measurements(rec: dict) -> dict:
    """The measurement table of the HTML page: the rows of :func:`measurement_rows` without the
    tolerance value (``compared with`` states it), each tolerance's kind with a reference [k] to
    its reason, and the reasons once each below the table (``html_rows``, ``html_notes``)."""
    from posflow.proofs_checks.kit._evidence import TOLERANCE_KINDS

    rows, notes = [], []
    for mark, label, value, criterion, _, why in measurement_rows(rec):
        if why and why not in notes:
            notes.append(why)
        kind = why.split(":", 1)[0].split(" ", 1)[0]
        kind = kind if kind in TOLERANCE_KINDS else "note"
        ref = f"{kind} [{notes.index(why) + 1}]" if why else ""
        rows.append([mark, label, value, criterion, ref])
    return {"html_rows": rows, "html_notes": notes}


def _view(rec: dict, out: Path) -> dict:
    """What the templates show of one record: anchors, lock words, rows, figures with captions."""
    from posflow.proofs_checks.kit._catalog import anchor

    figs = []
    for i, path in enumerate(rec.get("figure_paths", [])):
        meta = rec["figures"][i] if i < len(rec.get("figures", [])) else {}
        what = " — ".join(" ".join(x.split()) for x in (meta.get("title"), meta.get("caption"))
                          if x)  # fmt: skip
        what = (what or Path(path).stem).rstrip(".")
        suffix = Path(path).suffix.lower().lstrip(".")
        data = (out / path).read_bytes()
        figs.append({
            "path": path,
            "alt": f"{rec['id']}: {' '.join(_tex(meta.get('title') or Path(path).stem).split())}",
            "caption": f"{what}. Verdict of {rec['id']}: {rec['status']}.",
            "mime": "image/svg+xml" if suffix == "svg" else f"image/{suffix}",
            "data": base64.b64encode(data).decode("ascii"), "width": _png_width(data),
        })  # fmt: skip
    narrow = bool(figs) and all(0 < f["width"] <= NARROW_FIGURE_PX for f in figs)
    return dict(
        rec, anchor=f"evidence-{anchor(rec['id'])}", catalog_anchor=anchor(rec["id"]),
        lock=_lock_cell(rec), expected_words=_expected_words(rec), figs=figs,
        beside=narrow and bool(rec.get("measurements")), secs=_seconds(rec["seconds"]),
        when=_timing_short(rec.get("timing") or ""),
        **_html_measurements(rec),
        differs=bool(rec.get("expected")) and rec["status"] != rec["expected"],
        rows=measurement_rows(rec) if rec.get("measurements") else [
            [k, f"[{len(v)} values]" if isinstance(v, list) else v]
            for k, v in rec.get("measured", {}).items()],
        tables=rec.get("tables", []), summary=rec.get("summary"), error=rec.get("error"),
        setup=rec.get("setup"), timing=rec.get("timing"), scope=_scope_lines(rec),
    )  # fmt: skip


def _scope_lines(rec: dict) -> list[str]:
    """``"tag: scope line"`` of each sub-verdict of an empirical record (its ``scope`` field)."""
    from posflow.proofs_checks.kit._scope import scopes_from_json

    return [f"{t}: {sc.line()}" for t, sc in scopes_from_json(rec.get("scope", {})).items()]


def write_report(results, out, *, size: str, provenance: dict | None = None) -> Path:
    """Render ``results`` (a list of Result) into ``out``: ``index.md``, ``index.html``, the
    figures (PNG, drawn here from each evidence's figure specs), ``results.json`` and
    ``CLAIMS.md``.

    ``results.json`` is a list of records (:func:`records`), each carrying ``provenance``.
    ``index.md`` and ``index.html`` are Jinja2 templates (``templates/report.{md,html}.j2``): a
    table of contents, the verdict table (expectation, summary, seconds and what they include),
    then each claim's evidence — statement, expectation, setup, verdict, its figures with
    captions (what is drawn, the verdict) before its measurements (reference, tolerance and the
    tolerance's reason) and tables — and the provenance. Claim IDs link to their evidence and to
    their entry in ``CLAIMS.md``, the catalog generated from the registry
    (:func:`posflow.proofs_checks.kit.to_markdown`), written beside it. The HTML is standalone
    (figures inlined; sub- and superscripts of the statements' mathematics as HTML; long tables
    folded).
    """
    from posflow.proofs_checks.kit._catalog import to_markdown

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
            f"{_when(provenance.get('date'))}"
        )
    differ = [r["id"] for r in recs if r.get("expected") and r["status"] != r["expected"]]
    lock = (f" Verdict lock: {len(differ)} differ{'s' if len(differ) == 1 else ''} from "
            f"expected.toml ({', '.join(differ)})." if differ
            else " Verdict lock: every verdict as expected.")  # fmt: skip
    title_line = (
        f"Size: {size}. " + ", ".join(f"{k}: {v}" for k, v in counts.items() if v) + "." + lock
        + where
    )
    views = [_view(r, out) for r in recs]
    common = dict(recs=views, timing_note=TIMING_NOTE, head=_HEAD, prov=provenance,
                  html_head=_HTML_HEAD,
                  prov_rows=_provenance_rows(provenance) if provenance else [])  # fmt: skip
    md = _template("report.md.j2").render(
        title_line_md=title_line.replace(f"Size: {size}", f"Size: `{size}`"), **common)
    (out / "index.md").write_text(md, encoding="utf-8")
    html_text = _template("report.html.j2").render(title_line=title_line, **common)
    (out / "index.html").write_text(html_text, encoding="utf-8")
    return out / "index.md"
