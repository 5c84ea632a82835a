"""Claim AT6 (proofs_checks.claims.at06_block_windows):
the measured numbers against independent references."""

import math

import pytest

from posflow.proofs_checks.kit import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx).evidence for cid in ["AT6"]}


def test_at6_block_counts_by_a_plain_loop(results):
    ev = results["AT6"]
    counts = {}
    for n in (512, 8192, 65536):
        c = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if n * math.log(math.sin(f) / f) < math.log(0.1):
                c += 1
        counts[n] = c
    assert counts == {512: 10, 8192: 17, 65536: 23}
    for n, c in counts.items():
        assert ev[f"blocks_mixed_{n}"].value == c
        assert ev[f"blocks_mixed_float64_{n}"].value == c
    assert [round(ev[f"W_{b}"].value, 1) for b in range(3)] == [26.7, 39.6, 58.6]
    assert ev.status == "HOLDS", ev.summary


def test_at6_table_has_every_block(results):
    t = results["AT6"].table("per_block")
    assert len(t.rows) == 48
    b, f, W, approx = t.rows[0][:4]
    assert (b, f) == (0, 1.0)
    assert W == pytest.approx(math.log(100) / -math.log(math.sin(1.0)), rel=1e-12)
    assert approx == pytest.approx(6 * math.log(100), rel=1e-12)


# -- issue 23: citations, negative controls, judge mutants --------------------------------


def test_at6_cited_comparisons_and_controls(results):
    from posflow.proofs_checks.kit import get_claim

    ev = results["AT6"]
    for c in get_claim("AT6").compares:
        assert all(ev[k].judged and ev[k].passed for k in c.keys), c.routine
    controls = [m for m in ev.measurements if m.role == "control"]
    assert len(controls) >= 3 and all(m.passed for m in controls)


@pytest.mark.parametrize("name", ["z-judge-drops-sqrt-N", "fp-judge-self"])
def test_at6_new_mutants_are_killed(name):
    from posflow.proofs_checks.kit import get_claim, mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT6") if m.name == name]
    k = run_mutant(get_claim("AT6"), m, Context(size="quick", seed=0))
    assert k.killed, (k.status, k.newly_failed, k.error)
