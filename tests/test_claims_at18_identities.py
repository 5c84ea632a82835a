"""Claim AT18 (proofs_checks.claims.at18_identities): the measured numbers against
independent references."""

import sys

import pytest

from posflow.proofs_checks.claims.at18_identities import _TORCH_SCHEMES
from posflow.proofs_checks.kit import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx).evidence for cid in ["AT18"]}


def test_at18_holds_with_numpy_and_torch_identities(results):
    ev = results["AT18"]
    assert ev.status == "HOLDS", ev.summary
    for name in _TORCH_SCHEMES:
        keys = [f"torch_{name}_scores"] + ([] if name == "path" else [f"torch_{name}_output"])
        for key in keys:
            assert ev[key].value <= 1e-12
            assert ev[key].tol.kind == "floating-point"
    assert ev["torch_zero_init_learned_vs_rope"].value <= 1e-12
    assert ev["so2_scores"].value <= 1e-12


def test_at18_checks_the_chunked_path_transport_on_both_routes(results):
    ev = results["AT18"]
    for key in (
        "householder_route_scores_path",
        "householder_route_scores_from_source",
        "path_attention",
    ):
        assert ev[key].value <= 1e-12
        assert ev[key].tol.kind == "floating-point" and "C = 6" in ev[key].tol.reason


def test_at18_torch_part_is_undecided_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    ev = run_claim(get_claim("AT18"), Context()).evidence
    assert ev.status == "INCONCLUSIVE"
    assert "torch is not importable" in ev["torch_schemes"].note
