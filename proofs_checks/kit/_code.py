"""What code a run executes: posflow's source files and the libraries' versions, taken before
and after ``posflow verify``'s checks so that a run that mixes two versions of the code says so
(a file edited, or a library reinstalled, while the checks ran)."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

__all__ = ["code_changes", "code_state"]


def _version(dist: str) -> str | None:
    """The installed version of distribution ``dist``, or None."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


# the libraries whose versions a record names (and whose change during a run is reported)
_LIBRARIES = ("scipy", "sympy", "numba", "torch", "transformers", "tokenizers")
_PACKAGES = ("posflow", "posflow.theory", "posflow.simulate", "posflow.proofs_checks")


def code_state() -> dict:
    """What code a run executes, to compare before and after it (:func:`code_changes`).

    ``{"sources": {path: (size, mtime_ns)}, "libraries": {name: version}}``: every ``.py`` file
    of posflow's packages (wherever they are installed: a checkout, an editable install or a
    wheel) and the installed versions of NumPy and :data:`_LIBRARIES`. A few milliseconds: file
    metadata only, nothing is read or imported.
    """
    folders = set()
    for name in _PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None:
            folders.update(Path(f) for f in spec.submodule_search_locations or ())
    # a wheel nests the subpackages in posflow/, a checkout keeps them beside it: walk each once
    roots = [f for f in folders if not any(g in f.parents for g in folders)]
    sources = {}
    for path in (p for root in roots for p in root.rglob("*.py")):
        try:
            st = path.stat()
        except OSError:  # removed while listed
            continue
        sources[str(path)] = (st.st_size, st.st_mtime_ns)
    libs = {d: v for d in ("numpy", *_LIBRARIES) if (v := _version(d)) is not None}
    return {"sources": sources, "libraries": libs}


def code_changes(before: dict, after: dict) -> list[str]:
    """How the code of two :func:`code_state` snapshots differs, one phrase per change: the
    source files written, added or removed (up to three named, then a count) and each library
    whose version changed; ``[]`` when they are the same."""
    a, b = before["sources"], after["sources"]
    files = sorted(p for p in a.keys() | b.keys() if a.get(p) != b.get(p))
    out = []
    if files:
        names = ", ".join(Path(p).name for p in files[:3])
        more = f" and {len(files) - 3} more" if len(files) > 3 else ""
        out.append(f"posflow source files ({names}{more})")
    la, lb = before["libraries"], after["libraries"]
    for d in sorted(la.keys() | lb.keys()):
        if la.get(d) != lb.get(d):
            out.append(f"{d} {la.get(d) or 'absent'} → {lb.get(d) or 'absent'}")
    return out
