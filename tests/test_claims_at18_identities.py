"""Claim AT18 (proofs_checks.claims.at18_identities): the measured numbers against
independent references."""

import sys

import pytest

from posflow.proofs_checks.claims.at18_identities import _TORCH_SCHEMES
from posflow.proofs_checks.kit import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx).evidence for cid in ["AT18"]}


def test_at18_holds_with_numpy_and_torch_identities(results):
    ev = results["AT18"]
    assert ev.status == "HOLDS", ev.summary
    for name in _TORCH_SCHEMES:
        keys = [f"torch_{name}_scores"] + ([] if name == "path" else [f"torch_{name}_output"])
        for key in keys:
            assert ev[key].value <= 1e-12
            assert ev[key].tol.kind == "floating-point"
    assert ev["torch_zero_init_learned_vs_rope"].value <= 1e-12
    assert ev["so2_scores"].value <= 1e-12


def test_at18_checks_the_chunked_path_transport_on_both_routes(results):
    ev = results["AT18"]
    for key in (
        "householder_route_scores_path",
        "householder_route_scores_from_source",
        "path_attention",
    ):
        assert ev[key].value <= 1e-12
        assert ev[key].tol.kind == "floating-point" and "C = 6" in ev[key].tol.reason


def test_at18_torch_part_is_undecided_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    ev = run_claim(get_claim("AT18"), Context()).evidence
    assert ev.status == "INCONCLUSIVE"
    torch_keys = [m.key for m in ev.measurements if m.key.startswith("torch_")]
    assert torch_keys and all("torch is not importable" in ev[k].note for k in torch_keys)


def test_at18_explicit_references_and_controls(results):
    ev = results["AT18"]
    for c in get_claim("AT18").compares:
        assert all(ev[k].judged and ev[k].passed for k in c.keys), c.routine
    for key in ("rows_judge_control_worst_row_wrong", "rows_judge_control_suffix_one_step_late",
                "rows_judge_control_householder_beta_half"):
        assert ev[key].role == "control" and ev[key].passed, key
    for key in ("explicit_suffix_sum_scores", "explicit_value_inverse_rotation",
                "explicit_zero_init_learned_vs_rope", "explicit_householder_step_vs_matrix"):
        assert ev[key].value <= 1e-12 and ev[key].tol.kind == "floating-point"


def test_at18_explicit_route_is_a_rotation_by_the_summed_angle():
    import numpy as np

    from posflow.proofs_checks.claims import at18_identities_refs as R

    theta = np.array([[0.3], [0.5], [-0.2]])
    P = R.explicit_routes(theta)
    c, s = np.cos(0.8), np.sin(0.8)  # θ_0 + θ_1 for j = 0 → i = 2
    assert P[2, 0, 0] == pytest.approx(np.array([[c, -s], [s, c]]), abs=1e-15)
    assert np.array_equal(P[1, 1, 0], np.eye(2))
    e = R.row_errors(np.array([[1.0, np.nan], [1.0, 2.0]]), np.array([[1.0, np.nan], [1.0, 2.5]]))
    assert e.tolist() == [0.0, 0.5]


@pytest.mark.parametrize(("name", "key"), [
    ("loosened-rows-judge-best-row", "rows_judge_control_worst_row_wrong"),
    ("loosened-rows-judge-100x", "rows_judge_control_worst_row_wrong"),
])  # fmt: skip
def test_at18_loosened_judges_are_killed(name, key):
    from posflow.proofs_checks.kit import mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT18") if m.name == name]
    k = run_mutant(get_claim("AT18"), m, Context(size="quick", seed=0))
    assert k.killed and key in k.newly_failed, (k.newly_failed, k.error)
