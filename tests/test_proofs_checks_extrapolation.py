"""The AT relaxations (counterexample searches) and the shared helpers of the AT checks."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.claims._relaxations_at import (
    bounded_logits_violation,
    commuting_violation,
    spectral_gap_violation,
    zero_mean_violation,
)
from posflow.proofs_checks.kit import _counterexamples as counterexamples
from posflow.proofs_checks.kit._registry import get_claim
from posflow.proofs_checks.kit._stats import loglog_slope, mean_se, z_limit
from posflow.simulate.orthogonal import SO2BlockLaw, phase_paths


@pytest.mark.parametrize(
    ("cid", "name", "found"),
    [
        ("AT10", "bounded_logits", True),
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
    assert set(get_claim("AT10").relaxations) == {"bounded_logits"}
    assert set(get_claim("AT2").relaxations) == {"spectral_gap"}
    assert set(get_claim("AT17").relaxations) == {"zero_mean"}
    assert set(get_claim("AT14").relaxations) == {"commuting"}


def test_relaxations_reject_bad_examples():
    with pytest.raises(ValueError, match="near_logits"):
        bounded_logits_violation({"near_logits": [], "far_logits": [0.0], "lam": 1.0})
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


def test_z_limit_is_the_bonferroni_level_of_four_standard_errors():
    from scipy.stats import norm

    assert z_limit(1) == 4.0
    for n in (10, 100, 1000):
        assert 2 * n * norm.sf(z_limit(n)) == pytest.approx(2 * norm.sf(4.0), rel=1e-9)
    assert z_limit(10) < z_limit(100) < z_limit(1000)
    with pytest.raises(ValueError, match="n_comparisons"):
        z_limit(0)


def test_mean_se_and_loglog_slope():
    m, se = mean_se(np.array([1.0, 2.0, 3.0, 4.0]))
    assert m == 2.5 and se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    p, b, s = loglog_slope(x, 3 * x**-0.5)
    assert p == pytest.approx(-0.5) and math.exp(b) == pytest.approx(3) and s < 1e-12
    with pytest.raises(ValueError, match="x"):
        mean_se(np.array([1.0]))
    with pytest.raises(ValueError, match="3 points"):
        loglog_slope([1.0, 2.0], [1.0, 2.0])


def test_phase_paths_accumulate_the_law():
    law = SO2BlockLaw(2, "rope", scale=0.25)  # deterministic: Σθ = L·0.25
    paths = phase_paths(law, 3, [1, 4], np.random.default_rng(0))
    assert paths[4] == pytest.approx(np.full((3, 1), 1.0))
    with pytest.raises(ValueError, match="checkpoints"):
        phase_paths(law, 3, [0], np.random.default_rng(0))
