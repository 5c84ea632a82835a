"""Claim AT9 (proofs_checks.claims.at09_score_gap): the measured numbers against independent
references."""

import math

import numpy as np
import pytest
from claim_runs import holds_with_judged_tolerances, results_fixture

IDS = ["AT9"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    holds_with_judged_tolerances(results[cid])


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
