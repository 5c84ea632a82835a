"""kit._code: what code a run executes (posflow's source files, the libraries' versions) and how
two snapshots differ (``posflow verify`` compares the one before its checks with the one after)."""

from pathlib import Path

import numba
import numpy as np
import pytest

from posflow.proofs_checks.kit import _code as code


def _all_sources() -> set[str]:
    """Every .py file of posflow's four packages, found independently of ``code_state``."""
    import posflow.proofs_checks
    import posflow.simulate
    import posflow.theory

    mods = (posflow, posflow.theory, posflow.simulate, posflow.proofs_checks)
    return {str(f) for m in mods for d in m.__path__ for f in Path(d).rglob("*.py")}


def test_code_state_lists_every_source_file_and_the_libraries():
    state = code.code_state()
    assert set(state["sources"]) == _all_sources()
    some = next(iter(state["sources"]))
    st = Path(some).stat()
    assert state["sources"][some] == (st.st_size, st.st_mtime_ns)
    assert state["libraries"]["numpy"] == np.__version__
    assert state["libraries"]["numba"] == numba.__version__
    assert code.code_changes(state, code.code_state()) == []


_BASE = {"sources": {f"/p/{c}.py": (1, 1) for c in "abcdef"}, "libraries": {"torch": "2.13.0"}}


def _changed(files=(), added=(), removed=(), libs=None):
    src = {k: (v if k.rsplit("/", 1)[1][0] not in files else (1, 2))
           for k, v in _BASE["sources"].items() if k.rsplit("/", 1)[1][0] not in removed}
    src.update({f"/p/{c}.py": (1, 1) for c in added})
    return {"sources": src, "libraries": _BASE["libraries"] if libs is None else libs}


@pytest.mark.parametrize(
    ("after", "phrases"),
    [
        (_BASE, []),
        (_changed(files="b"), ["posflow source files (b.py)"]),
        (_changed(files="abc"), ["posflow source files (a.py, b.py, c.py)"]),
        (_changed(files="abcde"), ["posflow source files (a.py, b.py, c.py and 2 more)"]),
        (_changed(added="z", removed="a"), ["posflow source files (a.py, z.py)"]),
        (_changed(libs={"torch": "2.14.0"}), ["torch 2.13.0 → 2.14.0"]),
        (_changed(files="f", libs={"transformers": "5.25.0"}),
         ["posflow source files (f.py)", "torch 2.13.0 → absent", "transformers absent → 5.25.0"]),
    ],
)
def test_code_changes_names_each_change(after, phrases):
    assert code.code_changes(_BASE, after) == phrases
