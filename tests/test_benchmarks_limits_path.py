"""benchmarks/_limits_path.py at tiny sizes: the PaTH section returns one row per measured path
with its unit, reference and percent (no timing is asserted)."""

import importlib
from pathlib import Path

import pytest

pytest.importorskip("torch")
BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def section(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    return importlib.import_module("_limits_path")


def test_tiny_run_gives_ratio_rate_and_share_rows(section):
    rows = section.path_sections(10.0, lengths=(64, 300), assembly_t=300, repeat=1)
    assert [r["unit"] for r in rows] == ["×", "×", "GFLOP/s", "GFLOP/s", "%", "%", "%", "%"]
    for r in rows:
        assert set(r) == {"path", "achieved", "unit", "reference", "percent"}
        assert r["achieved"] > 0 and r["reference"] > 0
        assert r["percent"] == pytest.approx(100 * r["achieved"] / r["reference"])
    assert "T = 64" in rows[0]["path"] and "T = 300" in rows[1]["path"]
    assert rows[2]["reference"] == rows[3]["reference"] == 10.0  # the matmul's GFLOP/s
    for r, into in zip(rows[4:6], ("a fresh result", "a reused result (out=)"), strict=True):
        assert r["reference"] == 20.0 and r["achieved"] < 100.0 and f"into {into}" in r["path"]
    fresh, _, clear, beyond = rows[4:]
    assert "page clearing alone of a fresh 300 × 300" in clear["path"]
    assert "less the page clearing alone" in beyond["path"] and clear["reference"] == 20.0
    # the two fresh shares of the same call: beyond = fresh − clearing (both of its total)
    assert beyond["achieved"] == pytest.approx(fresh["achieved"] - clear["achieved"], abs=1e-9)


def test_page_clearing_touches_every_page_of_a_fresh_array(section, monkeypatch):
    """The clearing probe writes one entry per 4 KiB page: every page of the array."""
    seen = []
    real_empty = section.np.empty

    def spy(shape, *a, **k):
        arr = real_empty(shape, *a, **k)
        seen.append(arr)
        arr.fill(1.0)  # so that a page the probe skipped would keep 1.0 in its first entry
        return arr

    monkeypatch.setattr(section.np, "empty", spy)
    assert section._page_clearing(64, 2) >= 0.0
    a, _ = seen
    firsts = a.reshape(-1)[:: 4096 // 8]
    assert len(firsts) == -(-64 * 64 * 8 // 4096) and not firsts.any()


@pytest.mark.parametrize("reuse", [False, True])
def test_the_assembly_timer_leaves_the_writer_in_place(section, reuse):
    put = section.H._put
    section._assembly_share(40, 1, reuse)
    assert section.H._put is put
