"""Claim AT9 (proofs_checks.claims.at09_score_gap): the measured numbers against independent
references."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.kit import Context, get_claim, run_claim

IDS = ["AT9"]


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in IDS}


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    res = results[cid]
    assert res.status == "HOLDS", res.error or res.evidence.summary
    for m in res.evidence.measurements:
        if m.judged:
            assert m.tol is not None and m.tol.reason
        if m.tol is not None and m.tol.kind == "statistical":
            assert "comparisons" in m.tol.reason and "level" in m.tol.reason


def test_at9_table_medians(results):
    tab = results["AT9"].evidence.table("by_M")
    medians = [r[tab.columns.index("exact median")] for r in tab.rows]
    levels = [r[tab.columns.index("union median level")] for r in tab.rows]
    assert np.all(np.diff(medians) > 0)
    assert all(m < lv < 1 for m, lv in zip(medians, levels, strict=True))
    for r in tab.rows:  # √(2 ln(4M)/d) with d = 32
        assert r[tab.columns.index("union median level")] == pytest.approx(
            math.sqrt(2 * math.log(4 * r[0]) / 32), rel=1e-12
        )
