"""Claim PB4 (claims.pb04_no_collapse): the bound against Euler's product."""

import math

import pytest
from claim_runs import baseline


@pytest.fixture(scope="module")
def results():
    class _Runs(dict):
        def __missing__(self, cid):  # each claim's quick seed-0 run, once per test process
            return baseline(cid)

    return _Runs()


def test_pb4_bound_is_below_the_measured_minimum_and_euler_product(results):
    ev = results["PB4"].evidence
    assert ev.status == "HOLDS"
    for row in ev.table("cases").rows:
        _, beta, delta, log_inf, min_log, _, p_first, one_minus_inf = row
        assert min_log >= log_inf and math.isfinite(log_inf)
        assert p_first <= one_minus_inf
        if beta == 2.0:
            # Euler: ∏_{s≥1} (1 − c/s²) = sin(π√c)/(π√c), c = λ0 δ; the check's bound is that
            # minus an integral tail ≤ λ0 δ/10^5
            c = 0.5 * delta
            exact = math.log(math.sin(math.pi * math.sqrt(c)) / (math.pi * math.sqrt(c)))
            assert log_inf <= exact <= log_inf + 1e-5
    for key in ("uniform_beta2", "alibi_beta1.5"):
        assert ev[f"{key}_symbolic_no_collapse"].value is True
        assert ev[f"{key}_p_last_is_P_last_last"].passed


# -- issue 23: cited routines, negative controls of the judges, new mutants ------------------


def _killed(results, cid, name):
    from posflow.proofs_checks.kit import Context, get_claim
    from posflow.proofs_checks.kit import _mutants as mut

    (m,) = [m for m in mut.mutants_of(cid) if m.name == name]
    kill = mut.run_mutant(get_claim(cid), m, Context(), results[cid])
    return kill.status == "FAILS" and kill.killed


def test_pb4_comparisons_and_controls(results):
    ev = results["PB4"].evidence
    for tag in ("uniform_beta1.5", "uniform_beta2", "alibi_beta1.5", "alibi_beta2"):
        assert ev[f"{tag}_total_mixing_vs_direct_sum"].passed
        assert ev[f"{tag}_influence_vs_dense_product"].value <= 5e-12
        assert ev[f"{tag}_diagonal_vs_dense_product"].value <= 1e-12
        assert ev[f"{tag}_total_mixing_slack"].value >= 0
    for key in ("floor_judge_control_one_row_below", "floor_judge_control_bound_above",
                "rel_judge_control_one_entry_wrong"):
        assert ev[key].role == "control" and ev[key].passed, key


@pytest.mark.parametrize("name", ["judge-best-row", "judge-self-comparison",
                                  "total-mixing-last-layer-dropped"])  # fmt: skip
def test_pb4_new_mutants_are_killed(results, name):
    assert _killed(results, "PB4", name)
