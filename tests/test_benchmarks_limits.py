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
    assert rows[0].startswith("| section | path | achieved | reference | % of reference | % range")
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
        assert cells[4].endswith("%") and cells[5].endswith("%") and float(cells[8]) >= 0
        assert cells[7] in ("–", "0 of 1", "1 of 1")  # --quick: one round


def test_only_reruns_one_section_and_keeps_the_rows_of_the_others(tmp_path):
    out = tmp_path / "limits.md"
    out.write_text(
        "| section | path | achieved | reference | % of reference | % range | goal | rounds "
        "meeting it | load (1 min) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
        "| other | some path | 1.00 GB/s | triad 2.00 GB/s | 50 % | 50–50 % | – | – | 0.10 |\n"
        "| alibi | stale row | 1.00 GB/s | triad 2.00 GB/s | 50 % | 50–50 % | – | – | 0.10 |\n"
    )
    res = run("--quick", "--only", "alibi", "--out", str(out), "--clock", "wall")
    assert res.returncode == 0, res.stderr[-2000:]
    text = out.read_text()
    assert "on the wall clock" in text
    body = table_rows(text)[1:]
    assert body[0] == (
        "| other | some path | 1.00 GB/s | triad 2.00 GB/s | 50 % | 50–50 % | – | – | 0.10 |"
    )
    assert len(body) == 4 and all("stale" not in line for line in body)
    assert "Rows of other are kept from an earlier run written to this file" in text


def test_rounds_are_summarised_by_medians_ranges_and_the_rounds_meeting_the_goal(limits):
    """Three rounds of one path with a goal: medians of the achieved rate, the reference and
    each round's own ratio (not the ratio of the medians), the ratio's range, the goal and the
    count of rounds meeting it; a row without a goal shows dashes."""
    rows = [limits.Row("influence, ALiBi 1 head, x", a, "GB/s", r, "triad", ld)
            for a, r, ld in [(14.0, 20.0, 0.2), (21.0, 28.0, 0.9), (24.0, 30.0, 0.4)]]  # fmt: skip
    s = limits.Summary(rows)  # ratios 70 %, 75 %, 80 %: all meet ≥ 70 %
    assert s.met() == 3
    assert limits.summary_line("alibi", s) == (
        "| alibi | influence, ALiBi 1 head, x | 21.00 GB/s | triad 28.00 GB/s | 75 % | 70–80 % "
        "| ≥ 70 % | 3 of 3 | 0.90 |"
    )
    rows[0].achieved = 13.9  # 69.5 %: below the goal
    assert limits.Summary(rows).met() == 2
    other = limits.Summary([limits.Row("one step, x", 1.0, "GFLOP/s", 2.0, "matmul", 0.1)])
    assert other.met() is None and limits.summary_line("s", other).endswith("| – | – | 0.10 |")
    assert limits.goal_of("householder_route_scores (NumPy), T = 1") == ("<=", 100.0)


def test_zero_rounds_are_refused():
    res = run("--quick", "--rounds", "0")
    assert res.returncode == 2 and "--rounds must be at least 1" in res.stderr


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
