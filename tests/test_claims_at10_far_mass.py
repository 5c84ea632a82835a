"""Claim AT10 (proofs_checks.claims.at10_far_mass): the measured numbers against independent
references, and the relaxation ``bounded_logits``."""

import math

import pytest
from claim_runs import holds_with_judged_tolerances, results_fixture

from posflow.proofs_checks.claims.at10_far_mass import bounded_logits_violation
from posflow.proofs_checks.kit import _counterexamples as counterexamples
from posflow.proofs_checks.kit import get_claim

IDS = ["AT10"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    holds_with_judged_tolerances(results[cid])


def test_at10_minimisation_reaches_the_direct_formula(results):
    tab = results["AT10"].evidence.table("numeric_minimisation")
    for K, M, lam, bound, opt, rand in tab.rows:
        direct = M / (M + K * math.exp(2 * lam))
        assert bound == pytest.approx(direct, rel=1e-13)
        assert opt == pytest.approx(direct, abs=1e-9)
        assert rand >= direct - 1e-12


def test_at10_relaxation_breaks_only_outside_the_box():
    breaking = {"near_logits": [1.0], "far_logits": [0.0], "lam": 0.0}
    assert bounded_logits_violation(breaking) == pytest.approx(
        0.5 - 1 / (1 + math.e) - 1e-12, rel=1e-12
    )
    inside = {"near_logits": [0.5, -0.2], "far_logits": [0.1, -0.5, 0.3], "lam": 0.5}
    assert bounded_logits_violation(inside) <= 0
    corner = {"near_logits": [2.0, 2.0], "far_logits": [-2.0] * 5, "lam": 2.0}
    assert -2e-12 <= bounded_logits_violation(corner) <= 0


# -- the relaxation (from tests/test_proofs_checks_extrapolation.py) -----------------------


@pytest.mark.parametrize(("cid", "name", "found"), [("AT10", "bounded_logits", True)])
def test_counterexample_searches(cid, name, found):
    res = counterexamples.search(cid, name, seed=0, max_examples=25)
    assert res.found is found
    if found:
        assert counterexamples.replay(res) > 0
        assert counterexamples.describe(res)


def test_relaxations_are_attached_to_their_claims():
    assert set(get_claim("AT10").relaxations) == {"bounded_logits"}


def test_relaxations_reject_bad_examples():
    with pytest.raises(ValueError, match="near_logits"):
        bounded_logits_violation({"near_logits": [], "far_logits": [0.0], "lam": 1.0})
