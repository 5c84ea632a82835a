"""Claim AT7 (proofs_checks.claims.at07_levy): the measured numbers against independent
references."""

import math

import pytest
from claim_runs import holds_with_judged_tolerances, results_fixture

from posflow.theory import transport as th

IDS = ["AT7"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    holds_with_judged_tolerances(results[cid])


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
