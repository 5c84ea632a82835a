"""Claims AT5, AT6 (proofs_checks.extrapolation_windows):
the measured numbers against independent references."""

import math

import pytest

from posflow.proofs_checks.registry import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT5", "AT6"]}


def test_at6_block_counts_by_a_plain_loop(results):
    m = results["AT6"].evidence.measured
    counts = {}
    for n in (512, 8192, 65536):
        c = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if n * math.log(math.sin(f) / f) < math.log(0.1):
                c += 1
        counts[str(n)] = c
    assert counts == {"512": 10, "8192": 17, "65536": 23}
    assert m["blocks_mixed_below_0.1_exact"] == counts
    assert m["blocks_mixed_below_0.1_float64"] == counts
    assert [round(w, 1) for w in m["W_0_W_1_W_2"]] == [26.7, 39.6, 58.6]
    assert results["AT6"].status == "HOLDS"
