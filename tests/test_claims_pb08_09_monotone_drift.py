"""Claims PB8 and PB9 (claims.pb08_09_monotone_drift): measured numbers against independent
references (closed forms, entry-by-entry softmax kernels)."""

import math

import numpy as np
import pytest
from claim_runs import results_fixture
from shape_refs import softmax_kernel

IDS = ["PB8", "PB9"]


results = results_fixture(IDS)


def test_every_claim_holds(results):
    for cid in IDS:
        assert results[cid].status == "HOLDS", (cid, results[cid].evidence.summary)


def test_pb8_control_is_in_the_verdict(results):
    ev = results["PB8"].evidence
    ctl = ev["negative_slope_deficit"]
    assert ctl.role == "control" and ctl.judged
    A = softmax_kernel(8, [-1.0], [5.0])
    F = np.cumsum(A, axis=1)
    brute = max(F[b, k] - F[a, k] for a in range(8) for b in range(a + 1, 8) for k in range(8))
    assert ctl.value == pytest.approx(brute, abs=1e-13) and brute > 0.1
    assert ev["max_deficit_single_head"].value <= 1e-12


def test_pb9_figure_marks_the_limits(results):
    fig = results["PB9"].evidence.figures[0]
    limits = [s for s in fig.panels[0].series if s.label.startswith("its limit")]
    assert all(s.style == ":" and s.y[0] == s.y[-1] for s in limits)  # flat dotted lines
    levels = sorted(s.y[0] for s in limits)
    q = math.exp(-0.1)
    ref = sorted(q / ((1 - q) * (math.exp(c) * (1 - q) + q)) for c in (0.0, 3.0, -3.0))
    assert levels == pytest.approx(ref, rel=1e-12)
    assert ref[1] == pytest.approx(1 / (math.exp(0.1) - 1), rel=1e-12)


# -- issue 23: cited routines, negative controls of the judges, new mutants ------------------


def _killed(results, cid, name):
    from posflow.proofs_checks.kit import Context, get_claim
    from posflow.proofs_checks.kit import _mutants as mut

    (m,) = [m for m in mut.mutants_of(cid) if m.name == name]
    kill = mut.run_mutant(get_claim(cid), m, Context(), results[cid])
    return kill.status == "FAILS" and kill.killed


def _controls_pass(ev, keys):
    for key in keys:
        assert ev[key].role == "control" and ev[key].passed, key


def test_pb8_pb9_comparisons_and_controls(results):
    ev8, ev9 = results["PB8"].evidence, results["PB9"].evidence
    _controls_pass(ev8, ["deficit_judge_control_last_kernel_not_monotone",
                         "exact_judge_control_negative_slope"])
    _controls_pass(ev9, ["rel_judge_control_one_row_off_by_one"])
    assert ev8["max_deficit_error_vs_brute_force"].value <= 3e-14
    assert ev8["max_rollout_matrix_error_vs_dense"].value <= 1e-13
    assert ev9["alibi_drift_rel_error_vs_direct_sum"].value <= 1e-13


def test_pb9_direct_drift_matches_a_hand_sum():
    from posflow.proofs_checks.claims import pb08_09_monotone_drift_refs as refs

    m, c, i = 0.5, 2.0, 3
    q = math.exp(-m)
    hand = (q + 2 * q**2 + 3 * q**3) / (math.exp(c) + q + q**2 + q**3)
    assert refs._direct_drift(i, m, c) == pytest.approx(hand, rel=1e-15)


@pytest.mark.parametrize(("cid", "name"), [
    ("PB8", "deficit-judge-first-kernel-only"), ("PB8", "slopes-off-by-one"),
    ("PB8", "reversed-layer-order"), ("PB9", "rel-judge-best-row")])  # fmt: skip
def test_pb8_pb9_new_mutants_are_killed(results, cid, name):
    assert _killed(results, cid, name)
