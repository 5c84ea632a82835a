"""Claim AT11 (proofs_checks.claims.at11_logit_bound): the measured numbers against independent
references."""

import pytest

from posflow.proofs_checks.kit import Context, get_claim, run_claim

IDS = ["AT11"]


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


def test_at11_ratios(results):
    ev = results["AT11"].evidence
    assert ev["max_ratio_worst_q_k"].value == pytest.approx(1.0, abs=1e-12)  # ‖P‖_op = 1
    assert ev["attained_ratio"].value == pytest.approx(1.0, abs=1e-14)
    rows = dict(ev.table("max_ratio").rows)
    assert set(rows) >= {"haar", "so2_blocks", "householder_beta2", "route_so2_scores"}
    assert all(0 < v <= 1 + 1e-12 for v in rows.values())
