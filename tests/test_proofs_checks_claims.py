"""Every claim, quick, seed 0: it runs, returns evidence whose every judged comparison carries a
tolerance with a kind and a reason, round-trips through JSON, and its figure specs draw."""

import json

import pytest
from claim_runs import baseline

from posflow.proofs_checks.kit import _registry as registry
from posflow.proofs_checks.kit._evidence import Evidence
from posflow.proofs_checks.kit._figures import render

IDS = [c.id for c in registry.all_claims()]
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("cid", IDS)
def test_claim_evidence_is_well_formed(cid, tmp_path):
    r = baseline(cid)
    assert r.error == "", r.error
    ev = r.evidence
    assert isinstance(ev, Evidence)
    assert r.status == ev.status
    for m in ev.measurements:
        if m.judged and m.test != "true":
            assert m.tol is not None and m.tol.reason, m.key
    d = json.loads(json.dumps(ev.as_json(), allow_nan=False))
    assert Evidence.from_json(d).summary == ev.summary
    for fig in ev.figures:
        path = render(fig, tmp_path / f"{fig.name}.png")
        assert path.read_bytes()[:8] == PNG


def test_checks_are_reproducible_with_a_seed():
    a = registry.run_claim(registry.get_claim("PB1"), registry.Context(seed=3)).evidence
    b = registry.run_claim(registry.get_claim("PB1"), registry.Context(seed=3)).evidence
    assert a.as_json() == b.as_json()
