"""Claim AT9 (proofs_checks.claims.at09_score_gap): the measured numbers against independent
references."""

import math

import numpy as np
import pytest
from claim_runs import holds_with_judged_tolerances, results_fixture

IDS = ["AT9"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    holds_with_judged_tolerances(results[cid])


def test_at9_table_medians(results):
    tab = results["AT9"].evidence.table("by_M")
    medians = [r[tab.columns.index("exact median")] for r in tab.rows]
    levels = [r[tab.columns.index("union median level")] for r in tab.rows]
    assert np.all(np.diff(medians) > 0)
    assert all(m < lv < 1 for m, lv in zip(medians, levels, strict=True))
    for r in tab.rows:  # √(2 ln(4M)/d) with d = 32
        assert r[tab.columns.index("union median level")] == pytest.approx(
            math.sqrt(2 * math.log(4 * r[0]) / 32), rel=1e-12
        )


# -- issue 23: closed forms, negative controls, mutants ---------------------------------------

CLOSED = [
    "union_bound_vs_closed_form",
    "quantile_vs_closed_form",
    "balanced_tail_vs_gil_pelaez",
    "max_tail_vs_closed_form",
    "quantile_root_vs_closed_form",
]
CONTROLS = [
    "formula_judge_control_union_factor_2",
    "formula_judge_control_quantile_ln_m",
    "exact_judge_control_rate_doubled",
    "z_judge_control_biased_count",
]


def test_at9_routines_match_closed_forms(results):
    ev = results["AT9"].evidence
    for key in CLOSED:
        assert ev[key].judged and ev[key].passed and ev[key].value <= 1e-11, key
    assert ev["union_slack_at_levels"].value >= 0


def test_at9_negative_controls_reject(results):
    ev = results["AT9"].evidence
    for key in CONTROLS:
        assert ev[key].role == "control" and ev[key].passed, key


def test_at9_quantile_by_hand():
    import math

    from posflow.theory import transport as th

    # δ = 1, c = ½, M = 50, d = 8: √(2 ln 100/8)
    assert th.score_gap_quantile(1.0, 50, 8) == pytest.approx(math.sqrt(math.log(100) / 4))
    assert th.score_gap_union_bound(0.5, 50, 8) == pytest.approx(100 * math.exp(-1))


@pytest.mark.parametrize(
    "name",
    ["union-bound-factor-2-dropped", "quantile-ln-M", "max-tail-M-minus-1", "z-judge-best-entry",
     "exact-judge-clips-excess"],
)  # fmt: skip
def test_at9_new_mutants_are_killed(results, name):
    from posflow.proofs_checks.kit import Context, get_claim, mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT9") if m.name == name]
    kill = run_mutant(get_claim("AT9"), m, Context(), results["AT9"])
    assert kill.killed, (name, kill.status, kill.error)
