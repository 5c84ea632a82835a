"""Run stores on disk shared by the multi-seed trainers (AT20's LM proxy, issue 25's tasks).

A store is a folder of JSON files, one per finished run, and ``meta.json`` naming what the runs
were made with; files are written atomically (a temporary file renamed into place), so a killed
process never leaves a half-written run.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata, resources
from pathlib import Path


def write_json(path: Path, obj) -> None:
    """Write ``obj`` as JSON (sorted keys) to ``path`` atomically."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(obj, sort_keys=True) + "\n")
    os.replace(tmp, path)


def sources_hash(package: str, names) -> str:
    """sha256 (first 16 hex digits) of the source files ``names`` of ``package`` (paths relative
    to it, each name hashed before its bytes), read from the installed package with
    :mod:`importlib.resources`, so that edited code is never taken for the old."""
    h = hashlib.sha256()
    pkg = resources.files(package)
    for name in names:
        h.update(name.encode())
        h.update(pkg.joinpath(name).read_bytes())
    return h.hexdigest()[:16]


def package_version() -> str:
    """posflow's installed version ("0+unknown" in a tree that was never installed)."""
    try:
        return metadata.version("posflow")
    except metadata.PackageNotFoundError:  # pragma: no cover - an unbuilt tree
        return "0+unknown"


def code_identity(modules) -> dict:
    """What code wrote a stored record: ``{"posflow": version, "sources": sha256}``.

    ``sources`` is :func:`sources_hash` of the named files, paths relative to the
    ``posflow.simulate`` package (e.g. ``"models/lm.py"``). It is a record, not a key: stores
    written before it existed, or by another version, still resume.
    """
    return {"posflow": package_version(), "sources": sources_hash("posflow.simulate", modules)}


def check_meta(store: Path, want: dict, keys, width: int = 300) -> None:
    """Create ``store`` with ``meta.json`` = ``want``, or check that its ``meta.json`` agrees with
    ``want`` on ``keys``: ValueError naming the store and the first key that differs."""
    meta = store / "meta.json"
    if meta.is_file():
        have = json.loads(meta.read_text())
        for k in keys:
            if have.get(k) != want[k]:
                raise ValueError(
                    f"store {str(store)!r} holds runs of another {k} ({have.get(k)!r:.{width}} "
                    f"vs {want[k]!r:.{width}}); choose another store or delete it"
                )
    else:
        store.mkdir(parents=True, exist_ok=True)
        write_json(meta, want)


def parse_part(text: str) -> tuple[int, int]:
    """(k, m) of a ``--part k/m`` argument (runs k, k + m, … of m processes); ValueError
    otherwise."""
    k, sep, m = text.partition("/")
    if not (sep and k.isdigit() and m.isdigit() and 0 <= int(k) < int(m)):
        raise ValueError(f"part must be k/m with 0 <= k < m; got {text!r}")
    return int(k), int(m)
