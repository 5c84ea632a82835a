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


# -- the layering of proofs_checks: cli → claims → kit, and claims see only kit/theory/simulate --

KIT, CLAIMS, CLI = (f"posflow.proofs_checks.{p}" for p in ("kit", "claims", "cli"))


def _under(mod: str, pkg: str) -> bool:
    return mod == pkg or mod.startswith(pkg + ".")


def _family(mod: str) -> str:
    """``pb15`` for ``…claims.pb15_study``: the ID a claim module's name starts with."""
    return mod.rpartition(".")[2].split("_")[0]


def test_claims_import_only_kit_theory_simulate():
    """A claim module imports kit, theory and simulate; another claim module only when both
    belong to one claim split across files for size (their names start with the same ID)."""
    allowed = (KIT, "posflow.theory", "posflow.simulate")
    bad = sorted(
        (m, d) for m, deps in GRAPH.items() if _under(m, CLAIMS) and m != CLAIMS for d in deps
        if not any(_under(d, a) for a in allowed)
        and not (_under(d, CLAIMS) and d != CLAIMS and _family(d) == _family(m))
    )  # fmt: skip
    assert not bad


@pytest.mark.parametrize(("side", "never"), [
    (KIT, (CLAIMS, CLI)),
    (CLAIMS, (CLI,)),
])  # fmt: skip
def test_proofs_checks_layers_point_one_way(side, never):
    bad = sorted(
        (m, d) for m, deps in GRAPH.items() if _under(m, side) for d in deps
        if any(_under(d, n) for n in never)
    )  # fmt: skip
    assert not bad


AREAS = ("posflow.theory", "posflow.simulate", KIT, CLAIMS, CLI)


def _area(mod: str) -> str:
    """The package a module belongs to for the privacy rule (the root ``posflow`` otherwise);
    each claim module is its own area (no private names pass between claim modules)."""
    if _under(mod, CLAIMS) and mod != CLAIMS:
        return ".".join(mod.split(".")[:4])
    return next((a for a in AREAS if _under(mod, a)), "posflow")


def _private_reaches(modules: dict[str, Path]) -> list[tuple[str, str]]:
    """(module, what) for every import of a private module or name owned by another area."""
    out = []
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.ImportFrom) and node.module and node.level == 0):
                continue
            if not node.module.startswith("posflow"):
                continue
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            for t in targets:
                parts = t.split(".")
                first = next((i for i, s in enumerate(parts) if s.startswith("_")
                              and not s.startswith("__")), None)  # fmt: skip
                if first is None:
                    continue
                owner = ".".join(parts[:first])
                if _area(owner) != _area(name) or (owner == "posflow" and name != "posflow"):
                    out.append((name, t))
    return sorted(set(out))


def test_no_private_names_cross_a_package():
    assert _private_reaches(_modules()) == []


def test_the_privacy_rule_sees_a_planted_reach(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("from posflow.proofs_checks.kit._registry import register\n"
                 "from posflow.simulate.rollout import _chain\n", encoding="utf-8")  # fmt: skip
    found = _private_reaches({f"{CLAIMS}.planted": f})
    assert found == [(f"{CLAIMS}.planted", "posflow.proofs_checks.kit._registry"),
                     (f"{CLAIMS}.planted", "posflow.proofs_checks.kit._registry.register"),
                     (f"{CLAIMS}.planted", "posflow.simulate.rollout._chain")]  # fmt: skip
    inside = tmp_path / "k.py"
    inside.write_text("from posflow.proofs_checks.kit._evidence import Evidence\n",
                      encoding="utf-8")  # fmt: skip
    assert _private_reaches({f"{KIT}.other": inside}) == []


# -- start-up: what ``import posflow`` and ``posflow --help`` leave unloaded (benchmarks/startup.py
# measures the seconds; here, the heavy modules they must not import) --


@pytest.mark.parametrize(("code", "absent"), [
    ("import posflow",
     ("scipy.stats", "matplotlib", "posflow.proofs_checks.kit", "torch", "pandas")),
    ("from posflow.proofs_checks.cli import build_parser; build_parser()",
     ("scipy.stats", "matplotlib", "posflow.proofs_checks.kit", "torch", "pandas")),
    ("import posflow.proofs_checks.kit", ("matplotlib", "torch", "pandas")),
    ("import posflow.simulate.sweep", ("pandas",)),
])  # fmt: skip
def test_start_up_leaves_heavy_modules_unloaded(code, absent):
    import subprocess
    import sys

    probe = f"{code}; import sys; print([m for m in {list(absent)!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_lazy_package_names_still_resolve():
    from posflow import proofs_checks

    assert proofs_checks.get_claim("PB1").id == "PB1" and "get_claim" in dir(proofs_checks)
    with pytest.raises(AttributeError, match="no attribute"):
        proofs_checks.not_a_name  # noqa: B018
