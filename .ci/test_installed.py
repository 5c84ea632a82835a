"""The installed wheel, used as a new user would: from a folder outside the checkout.

Run by ``.ci/wheel`` inside a fresh venv holding only the wheel (and torch); not part of the
main suite. ``POSFLOW_REPO`` is the checkout, ``POSFLOW_WHEEL`` the wheel file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(os.environ["POSFLOW_REPO"])
WHEEL = Path(os.environ["POSFLOW_WHEEL"])
SKIP = {".git", ".venv", ".hypothesis", ".pytest_cache", ".ruff_cache", "__pycache__"}


def posflow(*args, timeout=3000):
    exe = Path(sys.executable).with_name("posflow")
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=timeout,
                          check=False)  # fmt: skip


def package_dir() -> Path:
    spec = importlib.util.find_spec("posflow")
    assert spec is not None and spec.origin is not None
    return Path(spec.origin).parent


def snapshot(root: Path, skip=frozenset()) -> dict[str, str]:
    """{relative path: sha256} of every file under root (folders named in ``skip`` left out)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in skip]
        for f in filenames:
            p = Path(dirpath, f)
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def test_the_package_is_the_installed_wheel_not_the_checkout():
    pkg = package_dir()
    assert "site-packages" in pkg.parts and REPO not in pkg.parents


def test_only_posflow_is_a_top_level_name():
    with zipfile.ZipFile(WHEEL) as z:
        names = z.namelist()
        top = z.read(next(n for n in names if n.endswith("top_level.txt"))).decode().split()
    assert top == ["posflow"]
    roots = {n.split("/")[0] for n in names} - {"posflow"}
    assert len(roots) == 1 and roots.pop().endswith(".dist-info")
    for name in ("theory", "simulate", "proofs_checks"):
        r = subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True,
                           text=True, check=False, cwd="/")  # fmt: skip
        assert r.returncode != 0 and "ModuleNotFoundError" in r.stderr, name


def test_the_wheel_holds_every_subpackage_and_the_package_data():
    with zipfile.ZipFile(WHEEL) as z:
        names = set(z.namelist())
    src = {str(p.relative_to(REPO)).replace(os.sep, "/") for top in
           ("theory", "simulate", "proofs_checks") for p in (REPO / top).rglob("*.py")}  # fmt: skip
    assert {"posflow/" + s for s in src} <= names
    data = {"posflow/simulate/data/measured_configs.json.gz",
            "posflow/simulate/data/NOTICE-ml-uhh-position-bias.txt",
            "posflow/simulate/data/extrapolation_v2/meta.json",
            "posflow/simulate/data/smollm2/study.json"}  # fmt: skip
    assert data <= names
    for folder in ("extrapolation_v2", "smollm2", "gemma3", "synthetic_v1"):
        root = REPO / "simulate/data" / folder
        committed = {p.relative_to(root).as_posix() for p in root.rglob("*.json")}
        assert {n.split(f"/data/{folder}/", 1)[1] for n in names if f"/data/{folder}/" in n} == (
            committed), folder


def test_verify_quick_runs_every_claim_without_error():
    r = posflow("verify", "--quick", "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(r.stdout)
    results = doc["results"] if isinstance(doc, dict) else doc
    assert len(results) >= 36
    assert not [x["id"] for x in results if x["status"] == "ERROR"]


def test_rollout_of_a_measured_model_reads_the_package_data():
    r = posflow("rollout", "--model", "bloom", "--variant", "residual", "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["p_first"] == pytest.approx(0.0203, abs=5e-5) and out["argmin"] == 61
    assert sum(out["profile"]) == pytest.approx(1.0, abs=1e-12)


def test_verify_full_changes_no_file_of_the_package_or_the_checkout(tmp_path):
    pkg, before_pkg = package_dir(), snapshot(package_dir())
    before_repo = snapshot(REPO, SKIP)
    r = posflow("verify", "--full", "--out", str(tmp_path / "report"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "report" / "index.md").is_file()
    after_pkg, after_repo = snapshot(pkg), snapshot(REPO, SKIP)
    changed = sorted(k for k in before_pkg.keys() | after_pkg.keys()
                     if before_pkg.get(k) != after_pkg.get(k))  # fmt: skip
    assert not changed, f"verify --full wrote into the installed package: {changed[:10]}"
    changed = sorted(k for k in before_repo.keys() | after_repo.keys()
                     if before_repo.get(k) != after_repo.get(k))  # fmt: skip
    assert not changed, f"verify --full wrote into the checkout: {changed[:10]}"
