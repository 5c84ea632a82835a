"""Claims AT7, AT8, AT9, AT10, AT11 (proofs_checks.extrapolation_scores):
the measured numbers against independent references."""

import math

import pytest

from posflow.proofs_checks.registry import Context, get_claim, run_claim
from posflow.proofs_checks.relaxations_at import (
    bounded_logits_violation,
)


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT7", "AT8", "AT9", "AT10", "AT11"]}


def test_at10_bound_values_by_the_direct_formula(results):
    m = results["AT10"].evidence.measured
    for M, b in zip(m["M"], m["bound_values"], strict=True):
        assert b == pytest.approx(M / (M + m["K"] * math.exp(2 * m["lam"])), rel=1e-13)
    for row in m["numeric_minimisation"]:
        direct = row["M"] / (row["M"] + row["K"] * math.exp(2 * row["lam"]))
        assert row["optimiser_min"] == pytest.approx(direct, abs=1e-9)
        assert row["random_search_min"] >= direct - 1e-12
    assert results["AT10"].status == "HOLDS"


def test_at10_relaxation_breaks_only_outside_the_box():
    breaking = {"near_logits": [1.0], "far_logits": [0.0], "lam": 0.0}
    assert bounded_logits_violation(breaking) == pytest.approx(
        0.5 - 1 / (1 + math.e) - 1e-12, rel=1e-12
    )
    inside = {"near_logits": [0.5, -0.2], "far_logits": [0.1, -0.5, 0.3], "lam": 0.5}
    assert bounded_logits_violation(inside) <= 0
    corner = {"near_logits": [2.0, 2.0], "far_logits": [-2.0] * 5, "lam": 2.0}
    assert -2e-12 <= bounded_logits_violation(corner) <= 0
