"""claims.at20_real: the degradation judge on hand-made stores with known answers (HOLDS with a
jump beyond L, FAILS when the loss keeps falling, INCONCLUSIVE when flat or with one window), the
store order by factor, the controls, and the evidence without a store."""

import json
import math

import numpy as np
import pytest

from posflow.proofs_checks.claims import at20_real as R
from posflow.proofs_checks.kit import FAILS, HOLDS, INCONCLUSIVE
from posflow.simulate.models.context_length import FORMAT, block_sums

CASES = [  # (jump beyond L in nats, windows, expected status)
    (1.0, 4, HOLDS),
    (0.0, 4, FAILS),
    # the loss falls by 0.5·t/(4L); a jump of 0.5·(23.5 − 5.5)/32 cancels it in Δ(4×) (≈ 0,
    # undecided) while Δ(2×) ≈ +0.19 holds
    (0.28125, 4, INCONCLUSIVE),
    (1.0, 1, INCONCLUSIVE),  # one window: no interval
]


@pytest.mark.parametrize("jump, windows, want", CASES)
def test_degradation_status(jump, windows, want):
    sub = R.degradation([R.hand_made_context_store(jump, windows=windows)])
    assert sub["status"] == want, sub["reason"]
    assert [c["bound"] for c in sub["comparisons"]] == ([0.0, 0.0] if windows > 1 else [])


def test_degradation_level_is_bonferroni_over_factors():
    sub = R.degradation([R.hand_made_context_store(1.0)])
    assert [c["alpha"] for c in sub["comparisons"]] == [R.ALPHA / 2] * 2
    n, ppl, lo, hi = sub["ppl"][1]
    assert n == 4 and lo < ppl < hi


def test_the_store_with_more_windows_decides_each_factor():
    small = R.hand_made_context_store(1.0, windows=6, factor=2)
    big = R.hand_made_context_store(0.0, windows=3, factor=4)
    sub = R.degradation([small, big])
    by = {c["label"].split(" ")[0]: c for c in sub["comparisons"]}
    assert by["Δ(2×)"]["n"] == 6 and by["Δ(2×)"]["mean"] > 0.5  # from the 2× store
    assert by["Δ(4×)"]["n"] == 3 and by["Δ(4×)"]["mean"] < 0  # from the 4× store
    assert sub["status"] == FAILS


def test_a_factor_on_one_window_is_shown_not_judged(tmp_path):
    small = R.hand_made_context_store(1.0, windows=5, factor=2)
    one = R.hand_made_context_store(0.0, windows=1, factor=4)  # a partial 4× store
    sub = R.degradation([small, one])
    assert sub["status"] == HOLDS and [c["n"] for c in sub["comparisons"]] == [5]
    assert sub["comparisons"][0]["alpha"] == R.ALPHA  # M = 1 judged factor
    assert list(sub["short"]) == [4] and sub["short"][4] < 0
    _write(tmp_path / "x2", small)
    _write(tmp_path / "x4", one)
    ms, _, _ = R.real_evidence((tmp_path / "x2", tmp_path / "x4"))
    m = next(m for m in ms if m.key == "real_rope_excess_4x_one_window")
    assert m.test == "info" and m.value < 0


def test_controls_pass():
    ms = R._controls()
    assert all(m.passed for m in ms if m.test != "undecided"), [m.describe() for m in ms]
    assert R._statistics_error() < 1e-13


def _write(path, st):
    path.mkdir()
    meta = {"format": FORMAT, "model": "m", **st["meta"]}
    (path / "meta.json").write_text(json.dumps(meta))
    for k, w in enumerate(st["windows"]):
        (path / f"w{st['meta']['factor'] * st['meta']['train_context']}_{k:03d}.json").write_text(
            json.dumps({"format": FORMAT, **w}))


def test_real_evidence_from_stores_on_disk(tmp_path):
    _write(tmp_path / "x2", R.hand_made_context_store(1.0, factor=2, windows=5))
    _write(tmp_path / "x4", R.hand_made_context_store(1.0, factor=4))
    ms, tables, figures = R.real_evidence((tmp_path / "x4", tmp_path / "x2"))
    m = next(m for m in ms if m.key == "sub_claim_rope_degrades")
    assert m.passed and m.value > 0
    ppl = next(t for t in tables if t.key == "real_rope_ppl")
    assert [r[0] for r in ppl.rows] == [1, 2, 4] and [r[2] for r in ppl.rows] == [5, 5, 4]
    fig = figures[0]
    assert fig.name == "at20_real_rope" and HOLDS in fig.title
    assert fig.panels[0].vlines == [(1.0, "training context")]


def test_real_evidence_without_a_store_says_how(tmp_path):
    ms, tables, figures = R.real_evidence((tmp_path / "none",))
    assert [m.test for m in ms] == ["undecided"] and "context_length" in ms[0].note
    assert tables == [] and figures == []


def test_hand_made_store_has_the_stated_losses():
    st = R.hand_made_context_store(0.0, windows=1, L=8, factor=2, block=4)
    total = sum(st["windows"][0]["sums"])
    t = np.arange(1, 16)
    assert math.isclose(total, float(np.sum(2 - 0.5 * t / 16)), abs_tol=15 * 0.01)
    assert len(block_sums(np.zeros(15), 4)) == len(st["windows"][0]["sums"])
