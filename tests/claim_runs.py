"""One quick, seed-0 run of each claim per test process, shared by the cross-claim tests."""

import functools

from posflow.proofs_checks.kit import _mutants as mutants
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim


@functools.cache
def baseline(cid: str):
    """The unmutated quick result of claim ``cid`` (memo caches cleared first)."""
    mutants.clear_caches()
    return run_claim(get_claim(cid), Context())
