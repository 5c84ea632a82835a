"""One quick, seed-0 run of each claim per test process, shared by the cross-claim tests, and the
assertions every claim test file makes about its claims' evidence."""

import functools

import pytest

from posflow.proofs_checks.kit import Context, clear_caches, counting, get_claim, run_claim

CALLS: dict[str, dict[str, int]] = {}
"""``{cid: {routine: calls}}``: how often the baseline run of each claim called each routine it
cites (filled in by :func:`baseline`)."""


@functools.cache
def baseline(cid: str):
    """The unmutated quick result of claim ``cid`` (memo caches cleared first), run with every
    routine it cites wrapped in a call counter (:data:`CALLS`)."""
    clear_caches()
    claim = get_claim(cid)
    with counting(claim) as counts:
        res = run_claim(claim, Context())
    CALLS[cid] = dict(counts)
    return res


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
