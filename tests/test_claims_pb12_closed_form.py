"""Claim PB12 (claims.pb12_closed_form): closed form, Monte Carlo and the Hoeffding bound."""

import math

import numpy as np
import pytest
from claim_runs import results_fixture
from scipy import integrate

from posflow.proofs_checks.claims import pb12_closed_form as pb12
from posflow.theory import rollout as th

IDS = ["PB12"]


results = results_fixture(IDS)


def test_every_claim_holds(results):
    for cid in IDS:
        assert results[cid].status == "HOLDS", (cid, results[cid].evidence.summary)


def test_pb12_numbers_and_bound(results):
    ev = results["PB12"].evidence
    assert ev["atom"].value == pytest.approx((2 / 3) * (1 / 2) * (4 / 5) * (1 / 4), rel=1e-15)
    assert ev["max_abs_error_exact_vs_numeric"].value <= 1e-13
    assert ev["monte_carlo_p0"].tol.kind == "statistical"
    assert ev["cdf_gap_n64000"].value < ev["cdf_gap_n4000"].value
    # the closed-form bound dominates the Hoeffding integral ∫ f(y) e^{-2N(x-y)^2} dy
    law = th.limit_law(["1/3", "1/2", "1/5", "3/4"])
    N = 3999
    for x in (0.1, 0.3, 0.7, 0.95):
        integral = integrate.quad(
            lambda y, x=x: float(law.pdf(y)) * math.exp(-2 * N * (x - y) ** 2), 0, 1, points=[x]
        )[0]
        assert integral <= pb12._hoeffding_bound(law, np.array([x]), N)[0]


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


def test_pb12_comparisons_and_controls(results):
    ev = results["PB12"].evidence
    _controls_pass(ev, ["exact_judge_control_last_entry_moved", "mc_judge_control_bias_2z",
                        "gap_judge_control_one_point_twice_the_bound"])
    assert ev["influence_exact_vs_rational_product"].passed
    assert ev["limit_law_pmf_vs_brute_force"].passed
    assert ev["hoeffding_bound_minus_integral"].value > 0


def test_pb12_rational_rollout_by_hand():
    import sympy as sp

    # n = 2, one layer λ = 1/2: R = [[1, 0], [1/4, 3/4]] → e_1ᵀ R = (1/4, 3/4)
    assert pb12._rational_rollout(2, [sp.Rational(1, 2)]) == [sp.Rational(1, 4), sp.Rational(3, 4)]


@pytest.mark.parametrize("name", ["mc-judge-drops-sqrt-n", "influence-exact-drops-a-layer"])
def test_pb12_new_mutants_are_killed(results, name):
    assert _killed(results, "PB12", name)
