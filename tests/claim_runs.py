"""One quick, seed-0 run of each claim per test process, shared by the cross-claim tests, and the
assertions every claim test file makes about its claims' evidence."""

import functools

import pytest

from posflow.proofs_checks.kit import Context, clear_caches, get_claim, run_claim


@functools.cache
def baseline(cid: str):
    """The unmutated quick result of claim ``cid`` (memo caches cleared first)."""
    clear_caches()
    return run_claim(get_claim(cid), Context())


def results_fixture(ids):
    """A module-scoped fixture ``results``: ``{cid: baseline(cid)}`` for the claims ``ids``."""

    @pytest.fixture(scope="module")
    def results():
        return {cid: baseline(cid) for cid in ids}

    return results


def holds_with_judged_tolerances(res):
    """HOLDS; every judged comparison has a tolerance with a reason, and every statistical one
    names its comparisons and level."""
    assert res.status == "HOLDS", res.error or res.evidence.summary
    for m in res.evidence.measurements:
        if m.judged:
            assert m.tol is not None and m.tol.reason
        if m.tol is not None and m.tol.kind == "statistical":
            assert "comparisons" in m.tol.reason and "level" in m.tol.reason


def holds_with_reasoned_tolerances(r):
    """HOLDS without error; every judged numeric comparison has an exact, floating-point or
    statistical tolerance with a reason; at least one negative control."""
    assert r.error == "", r.error
    ev = r.evidence
    assert ev.status == "HOLDS", ev.summary
    for m in ev.measurements:
        if m.judged and m.test != "true":
            assert m.tol.kind in ("exact", "floating-point", "statistical"), m.key
            assert m.tol.reason, m.key
    assert any(m.role == "control" for m in ev.measurements)
