"""Claim AT11 (proofs_checks.claims.at11_logit_bound): the measured numbers against independent
references."""

import pytest
from claim_runs import holds_with_judged_tolerances, results_fixture

IDS = ["AT11"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    holds_with_judged_tolerances(results[cid])


def test_at11_ratios(results):
    ev = results["AT11"].evidence
    assert ev["max_ratio_worst_q_k"].value == pytest.approx(1.0, abs=1e-12)  # ‖P‖_op = 1
    assert ev["attained_ratio"].value == pytest.approx(1.0, abs=1e-14)
    rows = dict(ev.table("max_ratio").rows)
    assert set(rows) >= {"haar", "so2_blocks", "householder_beta2", "route_so2_scores"}
    assert all(0 < v <= 1 + 1e-12 for v in rows.values())
