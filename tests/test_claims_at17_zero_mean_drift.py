"""Claim AT17 (proofs_checks.claims.at17_zero_mean_drift): the measured numbers against
independent references, and its relaxation."""

import math

import pytest
from claim_runs import holds_with_reasoned_tolerances, results_fixture

from posflow.proofs_checks.claims.at17_zero_mean_drift import zero_mean_violation

IDS = ["AT17"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_reasoned_tolerances(results, cid):
    holds_with_reasoned_tolerances(results[cid])


def test_at17_exact_mean_directions(results):
    ev = results["AT17"].evidence
    f = 0.003
    for n in (512, 8192):
        drift = math.remainder(n * f, 2 * math.pi)  # arg(e^{if} sin f/f)^n = n·f mod 2π
        assert ev[f"positive_uniform_direction_n{n}"].reference == pytest.approx(drift, abs=1e-12)
        assert ev[f"uniform_direction_n{n}"].reference == 0.0
        assert ev[f"uniform_direction_n{n}"].role == "control"
    rows = {(r[0], r[1]): r for r in ev.table("AT17_mean_directions").rows}
    for n in (512, 8192):  # exact concentration |φ|^n = (sin f/f)^n for both laws
        for law in ("positive_uniform", "uniform"):
            assert rows[law, n][6] == pytest.approx((math.sin(f) / f) ** n, rel=1e-12)
    assert ev["ks_positive_slow_512_vs_8192"].value > 0.9  # the two laws barely overlap


def test_at17_relaxation_positive_mean_drifts():
    drift = {"law": "uniform_positive", "f": 0.01, "n": 100}
    c = math.sin(0.01) / 0.01
    assert zero_mean_violation(drift) == pytest.approx(c**100 * math.sin(1.0) - 1e-12, rel=1e-9)
    assert zero_mean_violation({"law": "uniform", "f": 0.01, "n": 100}) <= 0
    mixed = {"law": "uniform_positive", "f": 1.0, "n": 2000}  # |φ|^n ≈ 1e-150
    assert zero_mean_violation(mixed) <= 0
