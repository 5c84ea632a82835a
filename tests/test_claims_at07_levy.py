"""Claim AT7 (proofs_checks.claims.at07_levy): the measured numbers against independent
references."""

import math

import pytest

from posflow.proofs_checks.kit import Context, get_claim, run_claim
from posflow.theory import transport as th

IDS = ["AT7"]


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


def test_at7_exponent_table_lies_between_the_bounds(results):
    tab = results["AT7"].evidence.table("exponent_per_dimension")
    i = {c: j for j, c in enumerate(tab.columns)}
    for row in tab.rows:
        exact, upper = row[i["exact exponent/(dε²)"]], row[i["upper bound/(dε²)"]]
        assert 0.5 <= exact <= upper
        d, eps = row[i["d"]], row[i["ε"]]
        assert exact == pytest.approx(
            -math.log(th.sphere_coordinate_tail(d, eps) / 2) / (d * eps * eps), rel=1e-12
        )
