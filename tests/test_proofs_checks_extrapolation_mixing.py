"""Claims AT1, AT2, AT3, AT4 (proofs_checks.extrapolation_mixing):
the measured numbers against independent references."""

import math

import pytest

from posflow.proofs_checks.registry import Context, get_claim, run_claim
from posflow.proofs_checks.relaxations_at import (
    spectral_gap_violation,
)


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT1", "AT2", "AT3", "AT4"]}


def test_at1_monte_carlo_matches_sinc_power(results):
    m = results["AT1"].evidence.measured
    n = m["samples_N"]
    for L, row in m["mc_cos_by_L"].items():
        for a, mc in zip(m["scales_a"], row, strict=True):
            # Var cos ≤ 1, so 5/√N is at least 5 standard errors
            assert mc == pytest.approx((math.sin(a) / a) ** int(L), abs=5 / math.sqrt(n))
            assert m["exact_cos_by_L"][L][m["scales_a"].index(a)] == pytest.approx(
                (math.sin(a) / a) ** int(L), rel=1e-12
            )


def test_at2_relaxation_deterministic_angles_do_not_decay():
    rope = {"law": "deterministic", "params": [0.3, 1.0], "L": 100, "gamma": 0.99}
    assert spectral_gap_violation(rope) == pytest.approx(1 - 0.99**100 - 1e-12, rel=1e-12)
    gap = {"law": "uniform", "params": [1.0, 2.0], "L": 10, "gamma": math.sin(1.0)}
    assert spectral_gap_violation(gap) <= 0
    too_fast = {"law": "uniform", "params": [1.0], "L": 10, "gamma": 0.5}
    assert spectral_gap_violation(too_fast) > 0
