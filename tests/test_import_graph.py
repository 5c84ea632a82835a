"""The import graph of posflow: no circles, and data flows theory/simulate → proofs_checks only."""

import ast
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"posflow": ROOT / "src" / "posflow", "posflow.theory": ROOT / "theory",
           "posflow.simulate": ROOT / "simulate",
           "posflow.proofs_checks": ROOT / "proofs_checks"}  # fmt: skip


def _modules() -> dict[str, Path]:
    out = {}
    for pkg, folder in FOLDERS.items():
        for p in folder.rglob("*.py"):
            rel = p.relative_to(folder).with_suffix("").parts
            if pkg == "posflow" and len(rel) > 1:
                continue
            name = ".".join((pkg, *rel)).removesuffix(".__init__")
            out[name] = p
    return out


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module → posflow modules it imports, at any depth of the file (functions included)."""
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and not name.startswith(t + "."):  # a parent package is
                    deps.add(t)  # imported implicitly anyway; a child's own package is no edge
        graph[name] = deps
    return graph


GRAPH = _edges(_modules())


def test_every_module_is_found():
    assert "posflow.simulate.kernels" in GRAPH and "posflow.proofs_checks.cli" in GRAPH
    assert importlib.util.find_spec("posflow.simulate.kernels").origin == str(
        ROOT / "simulate" / "kernels.py"
    )


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_planted_circle():
    planted = {k: set(v) for k, v in GRAPH.items()}
    planted["posflow.simulate._kernel"].add("posflow.simulate.kernels")
    assert any("posflow.simulate._kernel" in c for c in _cycles(planted))


@pytest.mark.parametrize(("side", "never"), [
    ("posflow.theory", ("posflow.simulate", "posflow.proofs_checks")),
    ("posflow.simulate", ("posflow.theory", "posflow.proofs_checks")),
])  # fmt: skip
def test_data_flows_one_way(side, never):
    bad = sorted(
        (m, d) for m, deps in GRAPH.items() if m.startswith(side) for d in deps
        if d.startswith(never)
    )  # fmt: skip
    assert not bad
