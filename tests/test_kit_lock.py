"""The verdict lock (``kit/expected.toml``): parsing, the expectation of every claim, and
``posflow verify`` exiting 0 only when every verdict equals its expectation."""

import json

import pytest
from cli_usage import run

from posflow.proofs_checks import kit
from posflow.proofs_checks.kit import _lock as lock
from posflow.proofs_checks.kit import _registry as registry


def test_the_packaged_lock_parses_and_names_only_registered_claims_with_reasons():
    exps = lock.expectations()
    ids = {c.id for c in kit.all_claims()}
    assert set(exps) <= ids, set(exps) - ids
    for e in exps.values():
        assert e.quick in kit.STATUSES and e.full in kit.STATUSES
        assert (e.quick, e.full) != ("HOLDS", "HOLDS") or e.scope, (
            f"{e.id}: a HOLDS needs no line unless it records the scope of an empirical verdict")
        assert e.reason.strip(), e.id


def test_an_unlisted_claim_is_expected_to_hold_at_both_sizes():
    e = lock.expectation("NOT-A-CLAIM")
    assert (e.at("quick"), e.at("full"), e.reason) == ("HOLDS", "HOLDS", "")
    with pytest.raises(ValueError, match="size"):
        e.at("medium")


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"PB1": "FAILS"}, "inline table"),
        ({"PB1": {"verdict": "FAILS"}}, "needs a reason"),
        ({"PB1": {"verdict": "MAYBE", "reason": "x"}}, "verdict must be one of"),
        ({"PB1": {"verdict": "FAILS", "reason": "x", "why": "y"}}, "unknown keys"),
        ({"PB1": {"full": "INCONCLUSIVE"}}, "needs a reason"),
    ],
)
def test_a_malformed_lock_is_refused_naming_the_claim(table, words):
    with pytest.raises(ValueError, match=words) as info:
        lock._parse(table, "expected.toml")
    assert "PB1" in str(info.value)


def test_per_size_overrides():
    e = lock._parse({"PB1": {"verdict": "FAILS", "full": "HOLDS", "reason": "r"}}, "f")["PB1"]
    assert (e.quick, e.full) == ("FAILS", "HOLDS")


def _result(cid, status, expected):
    return registry.Result(kit.get_claim(cid), status, None, 0.0, expected=expected)


def test_mismatches_name_each_differing_claim_and_an_error_always_differs():
    rs = [_result("PB1", "HOLDS", "HOLDS"), _result("PB2", "FAILS", "HOLDS"),
          _result("PB3", "ERROR", "HOLDS")]  # fmt: skip
    assert lock.lock_mismatches(rs, "quick") == [
        "PB2: HOLDS expected, got FAILS",
        "PB3: HOLDS expected, got ERROR",
    ]
    assert rs[0].as_expected and not rs[1].as_expected


def test_run_claim_records_the_expectation(monkeypatch):
    monkeypatch.setattr(lock, "expectations", lambda: {"PB2": lock.Expectation("PB2", "FAILS",
                                                                               "HOLDS", "r")})
    monkeypatch.setattr(registry, "expectation", lock.expectation)
    r = registry.run_claim(kit.get_claim("PB2"), registry.Context())
    assert (r.status, r.expected, r.expected_reason) == ("HOLDS", "FAILS", "r")
    assert json.loads(json.dumps(r.as_json()))["expected"] == "FAILS"


@pytest.mark.parametrize(("expected", "code"), [("HOLDS", 0), ("FAILS", 1)])
def test_verify_exits_by_the_lock(capsys, monkeypatch, expected, code):
    exp = lock.Expectation("PB2", expected, expected, "" if expected == "HOLDS" else "a reason")
    monkeypatch.setattr(registry, "expectation", lambda cid: exp)
    got, _out, err = run(capsys, "verify", "PB2", "--threads", "1")
    assert got == code, err
    if code:
        assert "verdict lock: PB2: FAILS expected, got HOLDS" in err
    else:
        assert "verdict lock" not in err


def test_the_report_shows_the_expectation(tmp_path, monkeypatch):
    exp = lock.Expectation("PB2", "FAILS", "FAILS", "a recorded reason")
    monkeypatch.setattr(registry, "expectation", lambda cid: exp)
    r = registry.run_claim(kit.get_claim("PB2"), registry.Context())
    index = kit.write_report([r], tmp_path, size="quick")
    text = index.read_text(encoding="utf-8")
    assert "Verdict lock: 1 differs from expected.toml (PB2)" in text
    assert "≠ FAILS (regression)" in text and "a recorded reason" in text
    assert "a recorded reason" in (tmp_path / "index.html").read_text(encoding="utf-8")


def test_an_entry_states_its_scope():
    from posflow.proofs_checks.kit._lock import _parse, expectations

    got = _parse({"PB99": {"verdict": "INCONCLUSIVE", "reason": "r", "scope": "toy, n = 64"}}, "t")
    assert got["PB99"].scope == "toy, n = 64"
    with pytest.raises(ValueError, match="scope must be a string"):
        _parse({"PB99": {"scope": 3}}, "t")
    assert "n = 256" in expectations()["PB15"].scope  # the locked [A] verdict names its setting
