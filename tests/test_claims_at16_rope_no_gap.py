"""Claim AT16 (proofs_checks.claims.at16_rope_no_gap): the measured numbers against
independent references."""

import math

import pytest
from claim_runs import holds_with_reasoned_tolerances, results_fixture

IDS = ["AT16"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_reasoned_tolerances(results, cid):
    holds_with_reasoned_tolerances(results[cid])


def test_at16_blocks_outside_training_by_a_plain_loop(results):
    ev = results["AT16"].evidence
    for D, count, count64 in ev.table("AT16_outside_training").rows:
        expect = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if 512 * f < 2 * math.pi and math.fmod(D * f, 2 * math.pi) > 512 * f:
                expect += 1
        assert count == count64 == expect
        assert ev[f"outside_training_D{D}"].role == ("control" if D < 512 else "test")
    assert ev["unwrapped_blocks"].value == sum(
        512 * 10000.0 ** (-2 * b / 96) < 2 * math.pi for b in range(48)
    )
    assert ev["spectral_gap_rope"].value == pytest.approx(0.0, abs=1e-15)
    assert ev["route_mean_decay"].value == pytest.approx(0.0, abs=1e-14)
    assert ev["control_uniform_route_mean"].value < 0.2
