"""Claim PB4 (claims.pb04_no_collapse): the bound against Euler's product."""

import math

import pytest
from claim_runs import baseline


@pytest.fixture(scope="module")
def results():
    class _Runs(dict):
        def __missing__(self, cid):  # each claim's quick seed-0 run, once per test process
            return baseline(cid)

    return _Runs()


def test_pb4_bound_is_below_the_measured_minimum_and_euler_product(results):
    ev = results["PB4"].evidence
    assert ev.status == "HOLDS"
    for row in ev.table("cases").rows:
        _, beta, delta, log_inf, min_log, _, p_first, one_minus_inf = row
        assert min_log >= log_inf and math.isfinite(log_inf)
        assert p_first <= one_minus_inf
        if beta == 2.0:
            # Euler: ∏_{s≥1} (1 − c/s²) = sin(π√c)/(π√c), c = λ0 δ; the check's bound is that
            # minus an integral tail ≤ λ0 δ/10^5
            c = 0.5 * delta
            exact = math.log(math.sin(math.pi * math.sqrt(c)) / (math.pi * math.sqrt(c)))
            assert log_inf <= exact <= log_inf + 1e-5
    for key in ("uniform_beta2", "alibi_beta1.5"):
        assert ev[f"{key}_symbolic_no_collapse"].value is True
        assert ev[f"{key}_p_last_is_P_last_last"].passed
