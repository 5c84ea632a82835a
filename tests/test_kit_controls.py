"""Negative controls (kit.rejects): a control passes exactly when its judge rejected a
known-wrong input, whatever form the judge's outcome takes."""

import pytest

from posflow.proofs_checks import kit
from posflow.proofs_checks.kit import _controls as controls

FP = kit.fp_tol(1e-12, "rounding")


@pytest.mark.parametrize(
    ("judged", "rejected"),
    [
        (kit.at_most("e", 1e-3, 0.0, FP), True),
        (kit.at_most("e", 1e-15, 0.0, FP), False),
        (False, True),
        (True, False),
        (kit.decide(0.1, 0.2, 0.0, "le"), True),  # FAILS: the interval excludes the bound
        (kit.decide(-0.1, 0.2, 0.0, "le"), True),  # INCONCLUSIVE is not an accept either
        (kit.decide(-0.2, -0.1, 0.0, "le"), False),
        ([kit.at_most("a", 0.0), kit.at_most("b", 1.0)], True),  # any reject rejects
        ([kit.at_most("a", 0.0), True], False),
    ],
)
def test_a_control_passes_exactly_when_the_judge_rejects(judged, rejected):
    m = kit.rejects("judge_control", judged, "wrong by construction")
    assert m.role == "control" and m.judged
    assert m.passed is rejected
    assert "negative control" in m.tol.reason


def test_a_judge_loosened_to_accept_everything_fails_its_control():
    def judge(err):  # the loosened judge compares the value with itself
        return kit.close("err", err, err, FP)

    ev = kit.Evidence([kit.at_most("ok", 0.0), kit.rejects("c", judge(1.0), "error 1")])
    assert ev.status == "FAILS" and [m.key for m in ev.failed] == ["c"]


@pytest.mark.parametrize(
    ("judged", "words"),
    [(kit.info("i", 1.0), "judged measurement"), ([], "at least one"), (3.0, "must be"),
     ("MAYBE", "verdict")],
)
def test_bad_judged_outcomes_are_refused(judged, words):
    with pytest.raises((ValueError, TypeError), match=words):
        kit.rejects("c", judged, "wrong")


def test_a_control_must_say_how_its_input_is_wrong():
    with pytest.raises(ValueError, match="wrong"):
        kit.rejects("c", False, " ")


def test_biased_moves_by_k_standard_errors():
    assert controls.biased(1.0, 0.5, 4) == 3.0
    assert controls.biased(1.0, 0.5, -2) == 0.0
    with pytest.raises(ValueError, match="se"):
        controls.biased(1.0, 0.0, 3)


def test_a_vacuous_judge_that_accepts_the_wrong_input_fails_its_control():
    """A judge loosened until its tolerance exceeds the quantity accepts the wrong input: the
    control fails (the vacuity rule must not turn that accept into a reject)."""
    loose = kit.close("c", 0.5, 0.1, kit.stat_tol(1.0, "s"))
    assert loose.vacuous and loose.passed is False and loose.criterion_met() is True
    assert kit.rejects("c", loose, "far off").passed is False
