"""Mutation testing of the numerical core with mutmut 3 (issue 23; not part of CI).

    python benchmarks/mutation.py --list                 # the shards and the oracle
    python benchmarks/mutation.py simulate._mixing       # run one shard (or several, or --all)
    python benchmarks/mutation.py --recheck simulate._mixing   # rerun its survivors only
    python benchmarks/mutation.py --report               # rewrite results/mutation.md only

A shard is one module of ``theory/`` or of the numerical core of ``simulate/`` (``SHARDS``); the
oracle is the fixed list of test files ``ORACLE`` (mutmut runs, for each mutant, only the tests of
these files that call the mutated function; changing the list makes mutmut retest everything).
Each run is ``nice -n 19 mutmut run --max-children 1 'posflow.<shard>.*'`` (one worker: the
machine is shared; ``--children N`` to use more). Equivalent and backend-only survivors are listed
with their reasons in ``benchmarks/mutation_equivalent/SHARD.toml``; ``--survivors SHARD`` prints
the diffs of the survivors not yet triaged.

Why a staging folder: mutmut 3 names a mutant after its file path (``simulate/_mixing.py`` ->
``simulate._mixing``) and its trampolines compare that name with the function's ``__module__``
(``posflow.simulate._mixing``); it also puts ``mutants/`` first on ``sys.path``. The repository's
folders install under ``posflow.*`` through ``setup.py``'s ``package_dir`` map, so mutmut run at
the root would never activate a mutant. The runner therefore builds ``.mutation/`` (git-ignored)
with the installed layout -- ``posflow/`` = ``src/posflow``, ``posflow/theory`` = ``theory``,
``posflow/simulate`` = ``simulate``, ``posflow/proofs_checks`` = ``proofs_checks`` -- plus
``tests/`` and a ``pyproject.toml`` whose ``[tool.mutmut]`` is the repository's table with the
targets added, and runs mutmut there. ``mutants/posflow`` then shadows the editable install (its
finder is appended to ``sys.meta_path``, after the ``sys.path`` finder), so
``import posflow.simulate._mixing`` loads the mutated copy (checked around each shard).
Results persist in ``.mutation/mutants`` (mutmut's ``*.meta`` files): a rerun only tests mutants
without a result, of functions whose source changed, or named by ``--recheck``.

``--recheck`` first drops mutmut's test map (``mutants/mutmut-stats.json``), so that mutmut runs
the whole oracle once and maps every function to every test that calls it (about 40 s). mutmut
updates the map incrementally: after a rename, the new function was mapped only to the tests
that had changed (``simulate._householder._unit_lower_solve``: 23 of the 139 tests calling it),
and two of its mutants survived until the map was rebuilt. A shard run after renames or new
functions should therefore be followed by ``--recheck``; a kill stays valid with any map.

Score of a module: (killed + timeout) / (mutants - equivalent - backend-only).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STAGE = ROOT / ".mutation"
RESULTS = ROOT / "benchmarks" / "results"
EQUIVALENT = ROOT / "benchmarks" / "mutation_equivalent"  # one SHARD.toml per shard
# each shard's table row from its last run with results here, so that a machine that reruns only
# some shards (``.mutation/`` is not committed) still reports the others, marked as stored
SCORES = RESULTS / "mutation_scores.json"
LAYOUT = {"posflow": "src/posflow", "posflow/theory": "theory", "posflow/simulate": "simulate",
          "posflow/proofs_checks": "proofs_checks"}  # fmt: skip

# The oracle: these test files (one fixed list -- mutmut reruns every mutant when it changes).
# For each mutant mutmut runs only the tests of these files that call the mutated function.
ORACLE = [f"tests/test_{name}.py" for name in (
    "simulate_mixing", "simulate_nulls", "simulate_kernels", "simulate_rollout", "simulate_backend",
    "simulate_route_moments", "simulate_orthogonal", "simulate_concentration", "simulate_transport",
    "simulate_values", "simulate_householder", "simulate_alibi", "theory_rollout",
    "theory_transport", "theory_continuum", "theory_drift", "theory_hausdorff",
    "theory_summability", "theory_transport_angles", "theory_transport_mass",
    "theory_transport_values", "theory_transport_windows", "dichotomy")]  # fmt: skip
# The shards: one module each (dotted, below posflow), the numerical core of simulate/ first.
SHARDS = [
    "simulate._mixing", "simulate.nulls", "simulate.kernels", "simulate._kernel", "simulate._alibi",
    "simulate.rollout", "simulate._routes", "simulate.orthogonal", "simulate.transport",
    "simulate._householder",
    *(f"theory.{m}" for m in (
        "_summability", "_exact", "_symbolic", "_drift", "_hausdorff", "_continuum", "rollout",
        "_transport_common", "_transport_angles", "_transport_mass", "_transport_tails",
        "_transport_values", "_transport_windows", "transport")),
]  # fmt: skip
# Files mutmut must never trampoline: numba compiles them (a trampoline is not jittable).
DO_NOT_MUTATE = ["posflow/simulate/_alibi_nb.py"]

STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 36: "timeout",
          -24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", None: "not checked",
          -9: "segfault", -11: "segfault", 34: "skipped"}  # fmt: skip


def _path(shard: str) -> str:
    return "posflow/" + shard.replace(".", "/") + ".py"


def _copy_if_changed(src, dst) -> None:
    """Copy ``src`` to ``dst`` only when their bytes differ, then with a fresh mtime: mutmut
    regenerates a mutated file only when its source is newer, and a source whose mtime went back
    (a checkout, a merge from a worktree) would otherwise leave a stale mutated copy."""
    d = Path(dst)
    if d.exists() and d.read_bytes() == Path(src).read_bytes():
        return
    shutil.copyfile(src, dst)


def _copytree(src: Path, dst: Path) -> None:
    """Copy ``src`` over ``dst``, touching only the files whose contents changed."""
    ign = shutil.ignore_patterns("__pycache__", "*.pyc", ".hypothesis", "*.egg-info")
    shutil.copytree(src, dst, ignore=ign, dirs_exist_ok=True, copy_function=_copy_if_changed)


def stage(shards: list[str]) -> None:
    """Build ``.mutation/``: the installed layout, the tests and the mutmut configuration."""
    STAGE.mkdir(exist_ok=True)
    for dst, src in LAYOUT.items():
        _copytree(ROOT / src, STAGE / dst)
    if (STAGE / "tests").exists():
        shutil.rmtree(STAGE / "tests")
    shutil.copytree(ROOT / "tests", STAGE / "tests",
                    ignore=shutil.ignore_patterns("__pycache__", ".hypothesis"))  # fmt: skip
    base = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mutmut"]
    cfg = dict(base, source_paths=["posflow"], only_mutate=[_path(s) for s in SHARDS],
               do_not_mutate=DO_NOT_MUTATE, pytest_add_cli_args_test_selection=ORACLE)  # fmt: skip
    text = (ROOT / "pyproject.toml").read_text().split("[tool.mutmut]")[0]
    lines = ["[tool.mutmut]"] + [f"{k} = {json.dumps(v)}" for k, v in cfg.items()]
    (STAGE / "pyproject.toml").write_text(text + "\n".join(lines) + "\n")


def check_shadowing(shard: str) -> None:
    """Fail unless ``import posflow.<shard>`` from ``.mutation/mutants`` loads the mutated copy."""
    code = (f"import sys; sys.path.insert(0, {str(STAGE / 'mutants')!r}); "
            f"import posflow.{shard} as m; print(m.__file__)")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=STAGE / "mutants", check=True).stdout.strip()  # fmt: skip
    want = STAGE / "mutants" / _path(shard)
    if Path(out).resolve() != want.resolve():
        raise SystemExit(f"posflow.{shard} loads {out}, not the mutated copy {want}")
    if "mutmut" not in want.read_text():
        raise SystemExit(f"{want} carries no trampolines: is it excluded from mutation?")


def run_shard(shard: str, children: int, recheck: bool) -> dict:
    names = [f"posflow.{shard}.*"]
    if recheck:
        eq = equivalents()
        names = [k for k, v in results(shard).items() if k not in eq
                 and STATUS.get(v, "suspicious") not in ("killed", "timeout")]  # fmt: skip
        if not names:
            print(f"{shard}: no survivors to recheck")
            return {}
        # a fresh test map (module docstring): no survivor for want of the tests that call it
        (STAGE / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")  # fmt: skip
    cmd = ["nice", "-n", "19", shutil.which("mutmut") or "mutmut", "run",
           "--max-children", str(children), *names]  # fmt: skip
    load0, t0 = os.getloadavg(), time.time()
    if (STAGE / "mutants" / _path(shard)).exists():
        check_shadowing(shard)
    proc = subprocess.run(cmd, cwd=STAGE, env=env, text=True, capture_output=True)
    tail = [ln for ln in proc.stdout.replace("\r", "\n").splitlines() if ln.strip()][-25:]
    print("\n".join(tail), proc.stderr[-3000:], sep="\n")
    if proc.returncode:
        raise SystemExit(f"mutmut failed on {shard} (exit {proc.returncode})")
    check_shadowing(shard)
    return {"wall_s": round(time.time() - t0), "load": [round(x, 2) for x in load0],
            "date": _dt.date.today().isoformat(), "children": children, "recheck": recheck,
            "mutants_run": len(names) if recheck else None}  # fmt: skip


def results(shard: str) -> dict[str, int | None]:
    meta = STAGE / "mutants" / (_path(shard) + ".meta")
    if not meta.exists():
        return {}
    return json.loads(meta.read_text())["exit_code_by_key"]


def diffs(shard: str, names) -> dict[str, str]:
    """The changed lines of each mutant (``-`` original, ``+`` mutant), from the mutated file
    (faster than one ``mutmut show`` per mutant)."""
    import ast
    import difflib

    src = (STAGE / "mutants" / _path(shard)).read_text()
    lines = src.split("\n")  # once: ast.get_source_segment splits the whole file on every call
    funcs = {}
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and "__mutmut_" in node.name:
            body = lines[node.lineno - 1 : node.end_lineno]  # as get_source_segment cuts it:
            body[-1] = body[-1].encode()[: node.end_col_offset].decode()  # offsets in bytes
            body[0] = body[0].encode()[node.col_offset :].decode()
            funcs[node.name] = [body[0].replace(node.name, "f"), *body[1:]]
    out = {}
    for name in names:
        short = name.rpartition(".")[2]
        orig = funcs[short.partition("__mutmut_")[0] + "__mutmut_orig"]
        lines = [ln for ln in difflib.unified_diff(orig, funcs[short], lineterm="", n=0)
                 if ln[:1] in "+-" and ln[:3] not in ("---", "+++")]  # fmt: skip
        out[name] = "\n".join(ln.rstrip() for ln in lines)
    return out


def equivalents(table: str | None = None) -> dict[str, str]:
    """Triaged survivors: ``table`` "equivalent", "backend_only" or "open" (survivors no test
    here kills, with the reason; still counted as survived), or the first two (None)."""
    out: dict[str, str] = {}
    for path in sorted(EQUIVALENT.glob("*.toml")):
        data = tomllib.loads(path.read_text())
        for name in ("equivalent", "backend_only") if table is None else (table,):
            out.update(data.get(name, {}))
    return out


def report() -> str:
    runs = json.loads((RESULTS / "mutation.json").read_text()) if (
        RESULTS / "mutation.json").exists() else {}  # fmt: skip
    eq, bo, op = equivalents("equivalent"), equivalents("backend_only"), equivalents("open")
    rows, survivors, not_run = [], [], []
    stored = json.loads(SCORES.read_text()) if SCORES.exists() else {}
    for shard in SHARDS:
        res = results(shard)
        st = {k: STATUS.get(v, "suspicious") for k, v in res.items()}
        if not res and (STAGE / "mutants" / (_path(shard) + ".meta")).exists():
            rows.append(f"| {shard} | 0 (no functions) | | | | | | | — | |")
            continue
        if not res or all(v == "not checked" for v in st.values()):
            if shard in stored:  # not run on this machine: the stored counts of its last run
                r = stored[shard]
                rows.append(f"| {shard} | {r['row']} (stored: run of {r['date']}, not rerun "
                            "here) |")  # fmt: skip
                continue
            not_run.append(f"{shard} ({len(res) or '?'} mutants)")
            continue
        n = len(st)
        killed = sum(v == "killed" for v in st.values())
        timeout = sum(v == "timeout" for v in st.values())
        alive = [k for k, v in st.items() if v not in ("killed", "timeout")]
        n_eq = sum(k in eq for k in alive)
        n_bo = sum(k in bo for k in alive)
        surv = [k for k in alive if k not in eq and k not in bo]
        survivors += [(k, st[k]) for k in surv]
        denom = n - n_eq - n_bo
        score = f"{100 * (killed + timeout) / denom:.1f} %" if denom else "—"
        r = runs.get(shard, {})
        wall = f"{r['wall_s'] / 60:.1f}" if r.get("wall_s") is not None else "?"
        row = (f"{n} | {killed} | {timeout} | {len(surv)} | {n_eq} | {n_bo} | "
               f"{sum(v == 'not checked' for v in st.values())} | {score} | {wall}")  # fmt: skip
        rows.append(f"| {shard} | {row} |")
        stored[shard] = {"row": row, "date": r.get("date") or _dt.date.today().isoformat()}

    SCORES.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")

    def triaged(table):
        return [f"| `{k}` | {v} |" for k, v in table.items()
                if any(k.startswith(f"posflow.{s}.") for s in SHARDS)]

    out = [
        "# Mutation testing (mutmut 3, `benchmarks/mutation.py`)",
        "",
        "Command: `python benchmarks/mutation.py SHARD ...` (`nice -n 19 mutmut run"
        " --max-children 1 'posflow.SHARD.*'` in the staging folder `.mutation/`, see the"
        " script's docstring). Not part of CI.",
        "Oracle: the test files of `benchmarks/mutation.py: ORACLE`; per mutant, mutmut runs"
        " those of their tests that call the mutated function.",
        "Score = (killed + timeout) / (mutants − equivalent − backend-only). Survived = not"
        " killed and not triaged as equivalent or backend-only.",
        "",
        "| shard | mutants | killed | timeout | survived | equivalent | backend-only"
        " | not checked | score | last run (min) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        *rows,
        "",
        "Not run yet: " + (", ".join(not_run) or "none") + ".",
        "",
        "Runs (date, wall time of the last `mutmut run` of the shard, load average 1/5/15 min at"
        " its start; 2 cores shared with other work, one mutmut worker):",
        "",
        *[f"- {s}: {r['date']}, {r['wall_s'] / 60:.1f} min, load {r['load']}"
          for s, r in runs.items()],
        "",
        "## Equivalent mutants (benchmarks/mutation_equivalent/SHARD.toml, [equivalent])",
        "",
        "| mutant | why it cannot change any result |",
        "|---|---|",
        *triaged(eq),
        "",
        "## Backend-only mutants ([backend_only]: identical on NumPy, the only backend installed)",
        "",
        "| mutant | why NumPy cannot tell |",
        "|---|---|",
        *triaged(bo),
        "",
        "## Survivors (counted as survived in the score)",
        "",
        "Each either open with the reason no test here kills it (`[open]` in its SHARD.toml) or"
        " not yet triaged.",
        "",
        *([f"- `{k}` ({s}): {op.get(k, 'not yet triaged')}" for k, s in survivors] or ["none"]),
    ]  # fmt: skip
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("shards", nargs="*", help="shards to run (see --list)")
    ap.add_argument("--all", action="store_true", help="run every shard")
    ap.add_argument("--list", action="store_true", help="list the shards and their oracles")
    ap.add_argument("--recheck", action="store_true", help="rerun the survivors only")
    ap.add_argument("--report", action="store_true", help="only rewrite results/mutation.md")
    ap.add_argument("--survivors", action="store_true",
                    help="print the diffs of the shards' untriaged survivors and exit")
    ap.add_argument("--children", type=int, default=1, help="mutmut workers (default 1)")
    a = ap.parse_args(argv)
    if a.list:
        for s in SHARDS:
            print(f"{s:28s} {_path(s)}")
        print("oracle:", " ".join(ORACLE))
        return 0
    shards = list(SHARDS) if a.all else a.shards
    unknown = [s for s in shards if s not in SHARDS]
    if unknown:
        ap.error(f"unknown shards {unknown}; see --list")
    if a.survivors:
        eq = equivalents()
        for s in shards:
            res = results(s)
            alive = [k for k, v in res.items() if STATUS.get(v, "suspicious") not in (
                "killed", "timeout") and k not in eq]  # fmt: skip
            for k, d in diffs(s, alive).items():
                print(f"## {k} ({STATUS.get(res[k], 'suspicious')})\n{d}")
        return 0
    runs_file = RESULTS / "mutation.json"
    if shards and not a.report:
        stage(shards)
        for s in shards:
            info = run_shard(s, a.children, a.recheck)
            runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
            if info:
                runs[f"{s} (recheck of survivors)" if a.recheck else s] = info
                runs_file.write_text(json.dumps(runs, indent=2) + "\n")
            (RESULTS / "mutation.md").write_text(report())
    (RESULTS / "mutation.md").write_text(report())
    print(f"wrote {RESULTS / 'mutation.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
