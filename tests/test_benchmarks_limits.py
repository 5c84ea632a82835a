"""benchmarks/limits.py at tiny sizes: the harness runs, its registry and ``--only`` work, and the
table keeps the rows of sections it did not re-measure (no timing is asserted)."""

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPT = BENCH / "limits.py"


@pytest.fixture
def limits(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("limits")


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=300)  # fmt: skip


def table_rows(text):
    return [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]


def test_quick_run_writes_one_row_per_measured_path_with_its_reference(tmp_path):
    out = tmp_path / "limits.md"
    res = run("--quick", "--out", str(out))
    assert res.returncode == 0, res.stderr[-2000:]
    assert "triad" in res.stdout and "matmul" in res.stdout and "load" in res.stdout
    rows = table_rows(out.read_text())
    assert rows[0].startswith("| section | path | achieved | reference | % of reference | load")
    body = rows[1:]
    alibi = [r for r in body if r.startswith("| alibi |")]
    assert len(alibi) == 3  # the ALiBi section: one head (GB/s), 32 heads (GFLOP/s) twice
    assert "1 head" in alibi[0] and "GB/s | triad" in alibi[0]
    assert "32 heads" in alibi[1] and "GFLOP/s | matmul" in alibi[1]
    assert "one step" in alibi[2] and "GFLOP/s | matmul" in alibi[2]
    sections = [r.split("|")[1].strip() for r in body]
    assert sections.count("dense") == 1 and sections.count("path") >= 2
    assert "GB/s | triad" in body[sections.index("dense")]
    for line in body:
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[4].endswith("%") and float(cells[5]) >= 0


def test_only_reruns_one_section_and_keeps_the_rows_of_the_others(tmp_path):
    out = tmp_path / "limits.md"
    out.write_text(
        "| section | path | achieved | reference | % of reference | load (1 min) |\n"
        "|---|---|---|---|---|---|\n"
        "| other | some path | 1.00 GB/s | triad 2.00 GB/s | 50 % | 0.10 |\n"
        "| alibi | stale row | 1.00 GB/s | triad 2.00 GB/s | 50 % | 0.10 |\n"
    )
    res = run("--quick", "--only", "alibi", "--out", str(out), "--clock", "wall")
    assert res.returncode == 0, res.stderr[-2000:]
    text = out.read_text()
    assert "on the wall clock" in text
    body = table_rows(text)[1:]
    assert body[0] == "| other | some path | 1.00 GB/s | triad 2.00 GB/s | 50 % | 0.10 |"
    assert len(body) == 4 and all("stale" not in line for line in body)


def test_an_unknown_section_is_refused_naming_the_choices():
    res = run("--quick", "--only", "nope")
    assert res.returncode == 2 and "alibi" in res.stderr


def test_the_registry_names_are_unique_and_the_references_are_positive(limits):
    names = [name for name, _ in limits.SECTIONS]
    assert len(names) == len(set(names)) and "alibi" in names
    assert limits.triad_gbs(2**12, block=2**8, repeat=1) > 0
    assert limits.matmul_gflops(32, repeat=1) > 0
    row = limits.Row("p", 3.0, "GB/s", 4.0, "triad", 0.5)
    assert row.percent == 75.0
    assert limits.table_line("s", row) == "| s | p | 3.00 GB/s | triad 4.00 GB/s | 75 % | 0.50 |"
