"""kit._scope: the scope of an empirical verdict, a paper's setting, and what a run outside it
may decide."""

import pytest

from posflow.proofs_checks.kit import (
    FAILS,
    INCONCLUSIVE,
    Evidence,
    Scope,
    Setting,
    at_most,
    fp_tol,
    info,
    not_in_setting,
    rejects,
    scope_line,
    scoped,
)
from posflow.simulate.models.subjects import MODEL_FACTS, scope_of

SC = Scope("m", "1M", "float32", "text", 64, "16 windows", "0", "300",
           (("layers × d_model", "2 × 64"),))  # fmt: skip
PAPER = Setting("[X]", "n = 256", lambda s: [] if s.n == 256 else [f"n = {s.n}, not 256"])


def test_line_names_every_field():
    line = SC.line()
    for part in ("m (1M, float32)", "text", "n = 64", "16 windows", "seeds 0", "300 steps",
                 "layers × d_model 2 × 64"):  # fmt: skip
        assert part in line, (part, line)
    assert "steps" not in Scope("m", "1", "f", "t", 8, "2 windows").line()  # pretrained


@pytest.mark.parametrize(
    ("field", "value", "err"),
    [
        ("model", "", ValueError),
        ("model", 3, TypeError),
        ("n", 0, ValueError),
        ("n", True, ValueError),
        ("samples", " ", ValueError),
        ("extra", ("x",), TypeError),
    ],
)
def test_bad_fields_name_themselves(field, value, err):
    kw = dict(model="m", parameters="1", precision="f", text="t", n=8, samples="2 windows")
    kw[field] = value
    with pytest.raises(err, match=field):
        Scope(**kw)


def test_scopes_travel_with_the_evidence_json():
    ev = Evidence([at_most("x", 0.0)], scopes={"toy": SC})
    back = Evidence.from_json(ev.as_json())
    assert back.scopes == {"toy": SC} and scope_line(back.scopes) == "toy: " + SC.line()
    with pytest.raises(TypeError, match="scopes"):
        Evidence([at_most("x", 0.0)], scopes={"toy": "n = 64"})


def _ms():
    return [
        at_most("fails", 2.0, 1.0),
        at_most("passes", 0.0, 1.0),
        rejects("ctl", False, "a control that passes"),
        at_most("ctl_fails", 2.0, 1.0, fp_tol(0, "x"), role="control"),
        info("i", 1),
    ]


def test_outside_the_setting_a_run_is_reported_not_deciding():
    got, gaps = scoped(_ms(), SC, PAPER)
    assert gaps == ["n = 64, not 256"]
    by = {m.key: m for m in got}
    for k, word in (("fails", "fails"), ("passes", "passes")):
        assert by[k].test == "info" and f"{word} at this scope" in by[k].label
        assert "outside [X]'s setting (n = 64, not 256)" in by[k].label
    assert by["ctl_fails"].judged and not by["ctl_fails"].passed  # controls stay judged
    m = not_in_setting("runs", PAPER, 0)
    assert m.test == "undecided" and "not run in [X]'s setting" in m.note
    assert Evidence([by["fails"], m]).status == INCONCLUSIVE
    assert not_in_setting("runs", PAPER, 1) is None


def test_inside_the_setting_or_for_posflows_own_claims_nothing_changes():
    inside = Scope("m", "1M", "float32", "text", 256, "16 windows")
    for sc, setting in ((inside, PAPER), (SC, None)):
        got, gaps = scoped(_ms(), sc, setting)
        assert gaps == [] and Evidence(got).status == FAILS


def test_every_measured_model_has_its_facts():
    for tag in MODEL_FACTS:
        sc = Scope(**scope_of(tag, 64, "4 windows", seeds=3, split="halves"))
        assert "n = 64" in sc.line() and "split halves" in sc.line()
    with pytest.raises(ValueError, match="tag"):
        scope_of("nosuch", 64, "4 windows")
    with pytest.raises(ValueError, match="samples"):
        scope_of("toy", 64, "")
