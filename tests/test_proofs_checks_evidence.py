"""The evidence model: comparisons judged exactly as stated, the status derived (never stated),
the summary generated from the numbers, tolerances that must carry a reason, JSON round trips."""

import json
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posflow.proofs_checks.kit import _evidence as E

FP = E.fp_tol(1e-12, "n·ε rounding, n ≤ 4500")


@given(
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(-1e6, 1e6, allow_nan=False),
    st.floats(0, 1e3, allow_nan=False),
)
def test_comparisons_match_their_definitions(v, r, t):
    """Each comparison is its definition, except that a vacuous one (a tolerance as large as
    the quantity, so that 0 would pass) fails."""
    tol = E.stat_tol(t, "3 standard errors of 100 samples")
    assert E.close("k", v, r, tol).passed is (abs(v - r) <= t and not (r != 0 and t >= abs(r)))
    assert E.at_most("k", v, r, tol).passed is (v <= r + t)
    assert E.at_least("k", v, r, tol).passed is (v >= r - t and not (r > 0 and t >= r))
    if r != 0:
        ok = abs(v / r - 1) <= t and t < 1
        assert E.close("k", v, r, tol, rel=True).passed is ok


@pytest.mark.parametrize(
    ("m", "vacuous"),
    [
        (E.close("a", 0.0, 0.04, E.stat_tol(0.05, "s")), True),  # 0 passes a reference 0.04
        (E.close("b", 0.0, 0.04, E.stat_tol(0.03, "s")), False),
        (E.close("c", 1e-17, 0.0, FP), False),  # an error measure: 0 is the right answer
        (E.close("d", 1.0, 1.0, E.stat_tol(1.0, "s"), rel=True), True),
        (E.at_least("e", 0.5, 0.1, E.stat_tol(0.1, "s")), True),
        (E.at_least("f", 0.5, 0.1, E.stat_tol(0.05, "s")), False),
        (E.at_least("g", 0.5, -1.0, E.stat_tol(5.0, "s")), False),  # a sign test, not a size
        (E.at_most("h", 0.0, 0.5, E.stat_tol(5.0, "s")), False),
    ],
)
def test_a_tolerance_as_large_as_the_quantity_fails_the_comparison(m, vacuous):
    assert m.vacuous is vacuous
    if vacuous:
        assert m.passed is False and "vacuous" in m.describe()


def test_nan_fails_every_judged_test_and_none_silently_passes():
    for m in (
        E.close("a", math.nan, 0.0, FP),
        E.at_most("b", math.nan, 1.0, FP),
        E.at_least("c", float("nan"), 0.0),
        E.close("d", 1.0, 0.0, FP, rel=True),  # reference 0: no relative error exists
    ):
        assert m.passed is False
    assert E.holds("e", False).passed is False and E.holds("f", True).passed is True
    assert E.info("g", math.nan).passed is None


def test_status_is_derived_from_the_measurements():
    ok = E.at_most("err", 1e-15, 0.0, FP)
    bad = E.at_most("err2", 1e-3, 0.0, FP)
    und = E.undecided("power", 0.2, "only 3 seeds")
    assert E.Evidence([ok]).status == "HOLDS"
    assert E.Evidence([ok, und]).status == "INCONCLUSIVE"
    assert E.Evidence([ok, und, bad]).status == "FAILS"
    ctl = E.at_least("control_effect", 0.0, 0.1, role="control")
    assert E.Evidence([ok, ctl]).status == "FAILS"  # a failing control fails the claim


def test_summary_names_every_failing_comparison_and_never_says_pass_under_fails():
    ev = E.Evidence(
        [
            E.at_most("a", 1e-15, 0.0, FP, label="max |row sum − 1|"),
            E.at_most("b", 0.5, 0.0, FP, label="max |P − dense|"),
            E.holds("c", False, label="sympy residual zero"),
        ]
    )
    assert ev.status == "FAILS"
    s = ev.summary
    assert "2 of 3 comparisons fail" in s and "max |P − dense|" in s and "sympy residual" in s
    assert "max |row sum − 1|" not in s and "pass" not in s
    held = E.Evidence([E.at_most("a", 1e-15, 0.0, FP, label="max err")])
    assert held.summary.startswith("all 1 comparisons pass") and "max err" in held.summary


def test_inconclusive_summary_says_why():
    ev = E.Evidence([E.holds("x", True), E.undecided("gap", 0.01, "needs T > 1e9")])
    assert "cannot be decided" in ev.summary and "needs T > 1e9" in ev.summary


def test_tolerances_need_a_kind_and_a_reason():
    with pytest.raises(ValueError, match="reason"):
        E.fp_tol(1e-12, "  ")
    with pytest.raises(ValueError, match="kind"):
        E.Tolerance(1e-12, "guess", "why not")
    with pytest.raises(ValueError, match="name its parameter"):
        E.Tolerance(0.5, "parameter", "a cut-off")
    with pytest.raises(ValueError, match="finite"):
        E.fp_tol(math.nan, "x")
    assert (
        E.param_tol("dip_depth", 0.05, "relative dip").describe().startswith("parameter dip_depth")
    )
    # an inequality without a stated tolerance is exact, and says so
    assert E.at_least("k", 1.0, 0.0).tol.kind == "exact"


def test_measurements_hold_scalars_only_and_keys_are_unique():
    with pytest.raises(TypeError, match="Table or a Figure"):
        E.info("profile", np.arange(3))
    assert isinstance(E.info("n", np.int64(3)).value, int)
    assert isinstance(E.info("x", np.float64(0.5)).value, float)
    with pytest.raises(ValueError, match="unique"):
        E.Evidence([E.holds("a", True), E.info("a", 1)])
    with pytest.raises(ValueError, match="judged"):
        E.Evidence([E.info("a", 1)])
    with pytest.raises(TypeError, match="Measurement"):
        E.Evidence([{"a": 1}])
    with pytest.raises(ValueError, match="cells"):
        E.Table("t", "T", ["a", "b"], [[1]])


def test_numbers_are_formatted_for_reading():
    assert E._num(1e-12) == "1e-12" and E._num(1.998e-15) == "1.998e-15"
    assert E._num(0.020312345) == "0.02031" and E._num(123456.0) == "1.235e5"
    assert E._num(True) == "yes" and E._num(3) == "3" and E._num(None) == "—"


def test_evidence_round_trips_through_json():
    fig = E.Figure(
        "profile",
        "uniform kernel, n = 4",
        [
            E.Panel(
                "p",
                "token position j",
                "p(j)",
                [
                    E.Series(
                        "b", [0, 1, 2], [0.2, 0.3, 0.5], kind="band", lo=[0, 0, 0], hi=[1, 1, 1]
                    )
                ],
                hlines=[(0.25, "1/n")],
            )
        ],
    )
    ev = E.Evidence(
        [
            E.close("x", 1.0, 1.0 + 1e-13, FP, unit="nats"),
            E.at_least("y", math.inf, 0.0),
            E.undecided("z", 2, "too few"),
            E.info("w", "bloom"),
        ],
        figures=[fig],
        tables=[E.Table("s", "sensitivity", ["threshold", "verdict"], [[0.1, "HOLDS"]])],
        setup="a test",
    )
    d = json.loads(json.dumps(ev.as_json(), allow_nan=False))
    back = E.Evidence.from_json(d)
    assert back.status == ev.status == "INCONCLUSIVE" and back.summary == ev.summary
    assert back.as_json() == d
    assert back.figures[0].panels[0].hlines == [(0.25, "1/n")]
    assert back.table("s").rows == [[0.1, "HOLDS"]]
    with pytest.raises(KeyError, match="no measurement"):
        back["nope"]
