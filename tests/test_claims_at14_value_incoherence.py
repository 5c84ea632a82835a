"""Claim AT14 (proofs_checks.claims.at14_value_incoherence): the measured numbers against
independent references."""

import math

import numpy as np
import pytest
from claim_runs import holds_with_reasoned_tolerances, results_fixture

from posflow.proofs_checks.claims import at14_value_incoherence as ev_mod
from posflow.theory import transport as th

IDS = ["AT14"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_reasoned_tolerances(results, cid):
    holds_with_reasoned_tolerances(results[cid])


def test_at14_digest_moment_by_the_geometric_sum(results):
    ev = results["AT14"].evidence
    c, M = math.sin(1.0), 200
    # (1/M²) Σ_{j,k} c^{|j−k|}, summed by a plain loop over lags
    exact = (M + 2 * sum((M - lag) * c**lag for lag in range(1, M))) / M**2
    assert ev["digest_mc_vs_exact"].reference == pytest.approx(exact, rel=1e-12)
    assert ev["digest_exact_vs_closed_form"].reference == pytest.approx(exact, rel=1e-12)
    _, mc, se, ex, bound, coherent, _ = ev.table("AT14_cases").rows[0]
    assert ex == pytest.approx(exact, rel=1e-12)
    assert bound == pytest.approx((1 + c) / ((1 - c) * M), rel=1e-12)
    assert coherent == pytest.approx(1.0, rel=1e-12)
    assert abs(mc - exact) <= 4.5 * se  # 4000 draws; z_limit(6) = 4.41
    assert ev["control_unrotated_is_coherent"].value == pytest.approx(1.0, abs=1e-12)
    assert ev["digest_mc_vs_exact"].tol.kind == "statistical"


def test_at14_double_sum_against_two_tokens_by_hand():
    rng = np.random.default_rng(1)
    a, z = rng.standard_normal(2), rng.standard_normal((2, 1, 2))
    c, dist = 0.37, np.array([5, 2])
    by_hand = (
        a[0] ** 2 * np.sum(z[0] ** 2)
        + a[1] ** 2 * np.sum(z[1] ** 2)
        + 2 * a[0] * a[1] * c**3 * float(z[0, 0] @ z[1, 0])
    )
    assert ev_mod._dense_moment(a, z, dist, c) == pytest.approx(by_hand, rel=1e-12)
    assert th.value_side_expectation(a, z, dist, c) == pytest.approx(by_hand, rel=1e-12)
