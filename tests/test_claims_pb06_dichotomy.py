"""Claim PB6 (claims.pb06_dichotomy): the numeric split is the p-series rule."""

import pytest
from claim_runs import baseline


@pytest.fixture(scope="module")
def results():
    class _Runs(dict):
        def __missing__(self, cid):  # each claim's quick seed-0 run, once per test process
            return baseline(cid)

    return _Runs()


def test_pb6_numeric_split_is_the_p_series_rule(results):
    ev = results["PB6"].evidence
    assert ev.status == "HOLDS"
    for beta, sym, num, depth, _, _ in ev.table("classification").rows:
        want = "collapse" if beta <= 1 else "no collapse"
        assert sym == want and num == want, beta
        assert depth in (10**3, 10**4)
    sens = {row[0]: row[-1] for row in ev.table("sensitivity_ratio_extrapolation_decades").rows}
    assert sens[1] == "HOLDS"
    assert sens[0] == "FAILS"  # the bare ratio test at 10^3 calls β = 1.1 collapse
    (fig,) = ev.figures
    panel = fig.panels[0]
    assert panel.logx and panel.logy and len(panel.series) == 6


def test_pb6_classifier_rule():
    from posflow.proofs_checks.claims.pb06_dichotomy import _classify

    assert _classify([1.3, 1.2], 1) == "collapse"
    assert _classify([1.1, 0.9], 1) == "no collapse"
    assert _classify([1.5, 1.1], 1) is None  # 1.1 − 0.4 < 1 ≤ 1.1
    assert _classify([1.5, 1.1], 0) == "collapse"


# -- issue 23: cited routines, negative controls of the judges, new mutants ------------------


def _killed(results, cid, name):
    from posflow.proofs_checks.kit import Context, get_claim
    from posflow.proofs_checks.kit import _mutants as mut

    (m,) = [m for m in mut.mutants_of(cid) if m.name == name]
    kill = mut.run_mutant(get_claim(cid), m, Context(), results[cid])
    return kill.status == "FAILS" and kill.killed


def test_pb6_classifier_on_known_series(results):
    ev = results["PB6"].evidence
    for b in (0.8, 0.9, 1.3, 2):
        assert ev[f"classifier_known_series_b{b:g}"].passed
        assert ev[f"match_judge_control_series_b{b:g}"].role == "control"
        assert ev[f"match_judge_control_series_b{b:g}"].passed
    assert ev["summability_test_known_series"].passed
    assert ev["influence_vs_dense_product"].value <= 3e-12


@pytest.mark.parametrize("name", ["judge-accepts-any-decision", "classifier-flipped"])
def test_pb6_new_mutants_are_killed(results, name):
    assert _killed(results, "PB6", name)
