"""Claim AT7 (proofs_checks.claims.at07_levy): the measured numbers against independent
references."""

import math

import pytest
from claim_runs import holds_with_judged_tolerances, results_fixture

from posflow.theory import transport as th

IDS = ["AT7"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    holds_with_judged_tolerances(results[cid])


def test_at7_exponent_table_lies_between_the_bounds(results):
    tab = results["AT7"].evidence.table("exponent_per_dimension")
    i = {c: j for j, c in enumerate(tab.columns)}
    for row in tab.rows:
        exact, upper = row[i["exact exponent/(dε²)"]], row[i["upper bound/(dε²)"]]
        assert 0.5 <= exact <= upper
        d, eps = row[i["d"]], row[i["ε"]]
        assert exact == pytest.approx(
            -math.log(th.sphere_coordinate_tail(d, eps) / 2) / (d * eps * eps), rel=1e-12
        )


# -- issue 23: closed forms, negative controls, mutants ---------------------------------------

CLOSED = [
    "levy_tail_vs_closed_form",
    "sphere_tail_vs_closed_form",
    "cap_lower_bound_vs_closed_form",
]
CONTROLS = [
    "formula_judge_control_levy_factor_2",
    "formula_judge_control_tail_d_plus_1",
    "z_judge_control_one_count_biased",
    "z_judge_control_above_levy",
    "z_judge_control_below_cap",
    "levy_ratio_judge_control_exponent_doubled",
    "cap_ratio_judge_control_doubled",
]


def test_at7_bounds_match_their_closed_forms_to_rounding(results):
    ev = results["AT7"].evidence
    for key in CLOSED:
        assert ev[key].judged and ev[key].passed and ev[key].value <= 1e-12, key
    assert 0.49 < ev["levy_slack_on_grid"].value < 0.51  # exact ≤ e^(−dε²/2): half the bound


def test_at7_negative_controls_reject(results):
    ev = results["AT7"].evidence
    for key in CONTROLS:
        assert ev[key].role == "control" and ev[key].passed, key


def test_at7_references_against_quadrature():
    """The closed forms of the references against numerical integration of the density of u₁."""
    from scipy.integrate import quad
    from scipy.special import beta

    from posflow.proofs_checks.claims.at07_levy_refs import cap_closed, levy_closed, tail_closed

    for d in (2, 3, 4, 5):
        for e in (0.1, 0.5, 0.9):
            f = lambda x, d=d: (1 - x * x) ** ((d - 3) / 2) / beta(0.5, (d - 1) / 2)  # noqa: E731
            assert tail_closed(d, e) == pytest.approx(2 * quad(f, e, 1)[0], rel=1e-8)
    assert levy_closed(8, 0.5) == pytest.approx(2 * math.exp(-1))
    assert cap_closed(3, 0.5) == pytest.approx(0.75 / (1 * 2))  # a = 1, B(1, ½) = 2


@pytest.mark.parametrize(
    "name",
    ["levy-factor-2-dropped", "cap-bound-a-off-by-one", "z-judge-best-entry",
     "formula-judge-loosened"],
)  # fmt: skip
def test_at7_new_mutants_are_killed(results, name):
    from posflow.proofs_checks.kit import Context, get_claim, mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT7") if m.name == name]
    kill = run_mutant(get_claim("AT7"), m, Context(), results["AT7"])
    assert kill.killed, (name, kill.status, kill.error)
