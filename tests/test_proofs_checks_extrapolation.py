"""The AT relaxations (counterexample searches); the shared helpers are in test_kit_stats.py."""

import pytest

from posflow.proofs_checks.claims.at02_product_mean import spectral_gap_violation
from posflow.proofs_checks.claims.at14_commuting_relaxation import commuting_violation
from posflow.proofs_checks.claims.at17_zero_mean_drift import zero_mean_violation
from posflow.proofs_checks.kit import _counterexamples as counterexamples
from posflow.proofs_checks.kit._registry import get_claim


@pytest.mark.parametrize(
    ("cid", "name", "found"),
    [
        ("AT2", "spectral_gap", True),
        ("AT17", "zero_mean", True),
        ("AT14", "commuting", False),
    ],
)
def test_counterexample_searches(cid, name, found):
    res = counterexamples.search(cid, name, seed=0, max_examples=25)
    assert res.found is found
    if found:
        assert counterexamples.replay(res) > 0
        assert counterexamples.describe(res)


def test_relaxations_are_attached_to_their_claims():
    assert set(get_claim("AT2").relaxations) == {"spectral_gap"}
    assert set(get_claim("AT17").relaxations) == {"zero_mean"}
    assert set(get_claim("AT14").relaxations) == {"commuting"}


def test_relaxations_reject_bad_examples():
    with pytest.raises(ValueError, match="eps"):  # γ comes from the law; ε is required
        spectral_gap_violation({"law": "deterministic", "params": [0.1], "L": 3})
    with pytest.raises(ValueError, match="eps"):
        spectral_gap_violation({"law": "deterministic", "params": [0.1], "L": 3, "eps": 1.5})
    with pytest.raises(ValueError, match="law"):
        zero_mean_violation({"law": "cauchy", "f": 0.1, "n": 3})
    with pytest.raises(ValueError, match="distances"):
        commuting_violation(
            {
                "d": 2,
                "p": 0.5,
                "weights": [1.0, 1.0],
                "values": [[1.0, 0.0], [0.0, 1.0]],
                "distances": [3, 3],
                "seed": 0,
                "samples": 64,
            }
        )
    with pytest.raises(TypeError, match="example"):
        zero_mean_violation([0.1, 3])
