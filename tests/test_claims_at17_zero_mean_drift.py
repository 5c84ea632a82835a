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


def test_at17_cited_comparisons_and_controls(results):
    from posflow.proofs_checks.kit import get_claim

    ev = results["AT17"].evidence
    for c in get_claim("AT17").compares:
        assert all(ev[k].judged and ev[k].passed for k in c.keys), c.routine
    controls = [m for m in ev.measurements if m.role == "control" and m.test == "true"]
    assert len(controls) >= 10 and all(m.passed for m in controls)
    assert ev["phase_moments_vs_closed_form"].value < 1e-11
    assert ev["sample_angles_positive_uniform_f0.003_mean_sin"].tol.kind == "statistical"


def test_at17_closed_form_reference():
    from posflow.proofs_checks.claims import at17_zero_mean_drift_refs as R

    f = 0.3  # E e^{iθ}, θ ~ Unif[0, 2f]: e^{if} sin f/f
    assert complex(*R.closed_phase("uniform_positive", f, 1)) == pytest.approx(
        complex(math.cos(f), math.sin(f)) * math.sin(f) / f, rel=1e-15)
    assert R.closed_phase("uniform", f, 3) == pytest.approx(((math.sin(f) / f) ** 3, 0.0))
    # the relative judge sees a wrong tiny value that an absolute one would not
    assert not R.rel_judge("k", [2e-39], [1e-39], 1e-11, "r", "l").passed
    assert R.rel_judge("k", [0.0, 1.0], [0.0, 1.0], 1e-11, "r", "l").passed


def _kill(name):
    from posflow.proofs_checks.kit import Context, get_claim, mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT17") if m.name == name]
    return run_mutant(get_claim("AT17"), m, Context(size="quick", seed=0))


@pytest.mark.parametrize(("name", "key"), [
    ("phase-moments-one-step-short", "phase_moments_vs_closed_form"),
    ("loosened-direction-judge", "direction_judge_control_biased_by_z_plus_2_se"),
    ("loosened-rel-judge-absolute", "rel_judge_control_fast_moments_doubled"),
])  # fmt: skip
def test_at17_new_mutants_are_killed(name, key):
    k = _kill(name)
    assert k.killed and key in k.newly_failed, (k.newly_failed, k.error)
