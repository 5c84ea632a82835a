"""Claims PB10 and PB13 (claims.pb10_13_edges_w1): the edge-mass formula by dense products; W1
is a convention."""

import numpy as np
import pytest
from claim_runs import results_fixture
from shape_refs import softmax_kernel

from posflow.proofs_checks.kit import get_claim

IDS = ["PB10", "PB13"]


results = results_fixture(IDS)


def test_every_claim_holds(results):
    for cid in IDS:
        assert results[cid].status == "HOLDS", (cid, results[cid].evidence.summary)


def test_pb10_edge_mass_formula_by_hand():
    rng = np.random.default_rng(1)
    n, T = 9, 5
    As = [softmax_kernel(n, rng.uniform(0, 2, 2), rng.uniform(-3, 3, 2)) for _ in range(T)]
    lam = rng.uniform(0, 1, T)
    P = np.eye(n)
    for A, lt in zip(As, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * A) @ P
    prod = np.prod([1 - lt * (1 - A[-1, -1]) for A, lt in zip(As, lam, strict=True)])
    assert P[-1, -1] == pytest.approx(prod, rel=1e-13)


def test_pb13_is_a_convention():
    assert get_claim("PB13").source == "[convention]"


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


def test_pb10_pb13_comparisons_and_controls(results):
    ev10, ev13 = results["PB10"].evidence, results["PB13"].evidence
    _controls_pass(ev10, ["edge_judge_control_one_factor_dropped",
                          "drop_judge_control_late_decrease", "dense_judge_control_one_reversed"])
    _controls_pass(ev13, ["ordered_judge_control_crossing_pair",
                          "w1_mean_judge_control_crossing_pair"])
    assert ev10["max_error_influence_vs_dense"].value <= 1e-12
    assert ev13["max_err_W1_vs_cdf_sum"].value <= 1e-10


def test_pb13_crossing_pair_by_hand():
    from posflow.simulate.compare import mean_position, w1

    p, q = [0.5, 0.0, 0.5], [0.0, 1.0, 0.0]
    assert w1(p, q) == pytest.approx(1.0) and mean_position(p) == mean_position(q) == 1.0


@pytest.mark.parametrize(("cid", "name"), [
    ("PB10", "drop-judge-first-sequence-only"), ("PB13", "w1-judge-compares-with-itself"),
    ("PB13", "w1-off-by-one-position")])  # fmt: skip
def test_pb10_pb13_new_mutants_are_killed(results, cid, name):
    assert _killed(results, cid, name)
