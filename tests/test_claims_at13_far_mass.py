"""Claim AT13 (proofs_checks.claims.at13_far_mass): ALiBi's far-mass supremum by its closed form
and the stylized ALiBi far mass."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.claims import at13_far_mass as A
from posflow.proofs_checks.kit import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT13"]}


def test_at13_alibi_supremum_by_the_closed_form(results):
    ev = results["AT13"].evidence
    assert ev.status == "HOLDS", ev.summary
    m, W, lam = 0.25, 16, 1.0
    closed = math.exp(2 * lam) / (math.exp(2 * lam) + math.exp(m * W) - 1)
    assert ev.measured["sup_far_mass_L_infinity"] == pytest.approx(closed, rel=1e-12)
    assert ev["sup_L512_vs_closed_form"].value == pytest.approx(closed, abs=1e-9)
    for L in (512, 2048, 8192):
        assert ev[f"stylized_alibi_L{L}_far_mass"].value < 1e-3


def test_the_helpers_references_agree():
    # the check's private references: the closed-form sup at L = ∞ is the corner's direct softmax
    m, w, lam, L = 0.25, 16, 1.0, 4096
    corner = np.where(np.arange(L) >= w, lam, -lam)
    assert A._alibi_direct(corner, m, w) == pytest.approx(A._alibi_sup_closed(m, w, lam, L))
    assert A._alibi_sup_closed(m, w, lam, 1e6) == pytest.approx(
        A._alibi_sup_closed(m, w, lam, math.inf), rel=1e-12
    )


# -- issue 23: citations, negative controls, judge mutants --------------------------------


def test_at13_controls_and_cited_comparisons(results):
    ev = results["AT13"].evidence
    for key in ("fp_judge_control_mask_dropped", "fp_judge_control_window_one_wider",
                "stat_judge_control_biased"):  # fmt: skip
        assert ev[key].role == "control" and ev[key].passed, key
    for c in get_claim("AT13").compares:
        assert all(ev[k].judged and ev[k].passed for k in c.keys), c.routine
    assert ev["attention_weights_vs_loop_softmax"].value < 1e-14


@pytest.mark.parametrize(("name", "key"), [
    ("attention-weights-slope-halved", "attention_weights_vs_loop_softmax"),
    ("loosened-fp-judge", "fp_judge_control_mask_dropped"),
])  # fmt: skip
def test_at13_new_mutants_are_killed(name, key):
    from posflow.proofs_checks.kit import mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT13") if m.name == name]
    k = run_mutant(get_claim("AT13"), m, Context(size="quick", seed=0))
    assert k.killed and key in k.newly_failed, (k.newly_failed, k.error)
