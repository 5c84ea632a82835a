"""Claim AT19 (proofs_checks.claims.at19_stylized): the measured numbers against independent
references, the τ decision rule, the negative controls of every judge and the new mutants."""

import math

import numpy as np
import pytest
from claim_runs import results_fixture

from posflow.proofs_checks.claims import at19_stylized as S
from posflow.proofs_checks.claims import at19_stylized_refs as R
from posflow.proofs_checks.kit import Context, get_claim, mutants_of

IDS = ["AT19"]
results = results_fixture(IDS)


def test_tau_decision_by_paired_z_scores():
    qk = [np.array([0.2, 0.21, 0.19, 0.2]), np.array([1.0, 1.01, 0.99, 1.0])]
    worse = [x + 0.1 for x in qk]
    assert S._tau_decision([10, 100], qk, worse, 0.5, 3.0)[3] == "fails"
    assert S._tau_decision([10, 100], worse, qk, 0.5, 3.0)[3] == "holds"
    # identical errors (no spread of the difference) decide nothing
    assert S._tau_decision([10, 100], qk, qk, 0.5, 3.0)[3] == "undecided"


def test_at19_value_side_and_tau(results):
    ev = results["AT19"].evidence
    assert ev.status == "HOLDS", ev.summary
    assert ev.measured["qkv_far_mass_equals_qk"] == 0.0
    r = ev.measured["far_residual_ratio_at_Lmax"]
    assert 0.5 < r < 1.0  # value rotation helps, but slow blocks keep most of the residual
    assert ev.measured["output_error_ratio_floor"] > 1 / math.sqrt(2) - 0.05
    taus = [row[0] for row in ev.table("tau_sensitivity").rows]
    assert S.TAU in taus and len(taus) >= 3
    blocks = ev.table("value_blocks").rows
    assert all(row[2] < row[3] < row[4] for row in blocks)  # fast < all < slow


def test_at19_near_mass_is_judged_by_pooled_odds_that_resolve_it(results):
    ev = results["AT19"].evidence
    for s in ("rope", "random_qk"):
        m = ev[f"{s}_pooled_near_mass_odds"]
        assert m.judged and m.passed and not m.vacuous
        assert m.tol.kind == "statistical" and "Bonferroni" in m.tol.reason
        assert m.tol.value < 0.5 * m.reference  # resolves the quantity
        assert ev[f"{s}_near_mass_fall_z"].passed
    # every judged comparison resolves its quantity; RoPE at L_max with 4 trials is reported only
    assert not [m.key for m in ev.measurements if m.judged and m.vacuous]
    assert not ev["rope_near_mass_at_Lmax"].judged
    assert ev["random_qk_near_mass_at_Lmax"].judged


def test_at19_controls_and_cited_comparisons(results):
    ev = results["AT19"].evidence
    controls = [m for m in ev.measurements if m.role == "control"]
    assert len(controls) >= 11 and all(m.passed for m in controls)
    for key in ("stat_judge_control_biased_by_z_plus_2_se", "fall_judge_control_flat",
                "same_judge_control_one_trial_one_ulp", "fp_judge_control_worst_trial_wrong",
                "fp_judge_control_cross_terms_dropped", "tau_judge_control_shallow_z",
                "tau_judge_control_schemes_swapped", "floor_judge_control_below_floor",
                "fp_judge_control_crossing_linear_in_L", "fp_judge_control_coherence_one_block_off",
                "count_judge_control_complement"):  # fmt: skip
        assert ev[key].role == "control" and ev[key].passed, key
    for c in get_claim("AT19").compares:
        assert all(ev[k].judged and ev[k].passed for k in c.keys), c.routine
    assert ev["value_side_expectation_max_rel_error"].value < 1e-11
    assert ev["coherence_per_block_vs_closed_form"].value < 1e-11


def test_at19_references_are_independent():
    # the closed form against a brute-force double sum Σ_{j,k} c^{|j−k|}/M² at M = 30
    f = np.array(R.freqs())
    c = np.sin(f) / f
    j = np.arange(30)
    lag = np.abs(j[:, None] - j[None, :])
    brute = np.array([np.sum(cb**lag) for cb in c]) / 30**2
    assert R.coherence_closed(30) == pytest.approx(brute, rel=1e-12)
    # E e^{λu} on S^2: u is uniform on [−1, 1], so E e^{λu} = sinh λ/λ
    assert R.mgf_quadrature(2.0, 3) == pytest.approx(math.sinh(2.0) / 2.0, rel=1e-12)
    # the dense-grid crossing of a curve linear in ln L: e = ln L/ln 1000 crosses 0.5 at √1000
    Ls = [10, 100, 1000]
    assert R.crossing_grid(Ls, [1 / 3, 2 / 3, 1.0], 0.5) == pytest.approx(10**1.5, rel=1e-12)
    assert math.isnan(R.crossing_grid(Ls, [0.1, 0.2, 0.3], 0.5))
    r = type("R", (), {"far_mass": np.array([0.5, 0.8])})
    assert R.odds(r, 64 + 10) == pytest.approx([10.0, 2.5])
    assert R.blocks_mixed_direct(0) == 0


def _kill(name):
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT19") if m.name == name]
    return run_mutant(get_claim("AT19"), m, Context(size="quick", seed=0))


@pytest.mark.parametrize(("name", "key"), [
    ("coherence-lag-off-by-one", "coherence_per_block_vs_closed_form"),
    ("crossing-linear-in-L", "crossing_length_vs_grid"),
    ("far-logit-cv2-d-94", "far_logit_cv2_vs_quadrature"),
    ("loosened-stat-judge", "stat_judge_control_biased_by_z_plus_2_se"),
    ("loosened-fp-judge-best-entry", "fp_judge_control_worst_trial_wrong"),
    ("loosened-same-judge", "same_judge_control_one_trial_one_ulp"),
    ("loosened-tau-judge", "tau_judge_control_shallow_z"),
])  # fmt: skip
def test_at19_new_mutants_are_killed(name, key):
    k = _kill(name)
    assert k.killed and key in k.newly_failed, (k.newly_failed, k.error)
