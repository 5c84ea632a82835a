"""Claim AT1 (proofs_checks.claims.at01_characteristic):
the measured numbers against independent references."""

import math

import pytest

from posflow.proofs_checks.kit import Context, get_claim, run_claim, z_limit


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx).evidence for cid in ["AT1"]}


@pytest.mark.parametrize("cid", ["AT1"])
def test_claims_hold_on_the_quick_run(results, cid):
    assert results[cid].status == "HOLDS", results[cid].summary


def test_at1_monte_carlo_matches_sinc_power(results):
    ev = results["AT1"]
    t = ev.table("decay")
    scales = [float(c.split("=")[1]) for c in t.columns[1:5]]
    n = ev["samples_N"].value
    for row in t.rows:
        L = int(row[0])
        exact, mc = row[1:5], row[5:9]
        for a, e, m in zip(scales, exact, mc, strict=True):
            assert e == pytest.approx((math.sin(a) / a) ** L, rel=1e-12)
            # Var cos ≤ 1, so 6/√N is at least 6 standard errors
            assert m == pytest.approx(e, abs=6 / math.sqrt(n))
    assert ev["max_z_cos"].tol.kind == "statistical"
    assert ev["max_z_cos"].tol.value == pytest.approx(z_limit(2 * len(t.rows) * 4))
