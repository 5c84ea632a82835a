"""Claim AT12 (proofs_checks.claims.at12_far_mass): the near mass of rotation-only attention
against its logit-level prediction."""

import pytest

from posflow.proofs_checks.kit import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT12"]}


def test_at12_holds_with_every_scheme_judged(results):
    ev = results["AT12"].evidence
    assert ev.status == "HOLDS", ev.summary
    for s in ("rope", "random_qk", "learned"):
        m = ev[f"{s}_L8192_near_mass"]
        assert m.tol.kind == "statistical" and "Bonferroni" in m.tol.reason
        assert ev.measured[f"{s}_L512_near_mass"] > ev.measured[f"{s}_L8192_near_mass"]
    assert len(ev.table("near_signal").rows) == 18
