"""Claims AT18 (proofs_checks.extrapolation_identities):
the measured numbers against independent references."""

import pytest

from posflow.proofs_checks.registry import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT18"]}
