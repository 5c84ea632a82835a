"""Claims PB1–PB7 (proofs_checks.position_bias): measured numbers against independent
references (the digest's reproduced values, closed forms, direct computations)."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.registry import Context, get_claim, run_claim
from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import influence, power_decay


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {
        cid: run_claim(get_claim(cid), ctx)
        for cid in ["PB1", "PB2", "PB3", "PB4", "PB5", "PB6", "PB7"]
    }


def test_pb3_reproduces_the_digest_example(results):
    ev = results["PB3"].evidence
    assert ev.status == "HOLDS"
    # uniform kernel n = 64, λ_t = 0.5/(t+1)², T = 100: min P_ii = 0.3675 (papers/A §6.3)
    exact = ev["uniform_n64_T100_min_Pii_exact"].value
    assert exact == pytest.approx(0.3675, abs=5e-5)
    d = 1 - 1 / np.arange(1, 65)
    direct = np.prod(1 - np.outer(power_decay(0.5, 2.0, 100), d), axis=0).min()
    assert exact == pytest.approx(direct, rel=1e-12)


def test_pb3_exact_sides_match_an_independent_fraction_computation():
    # theory.diagonal_bound's middle/lower against a direct Fraction product on one rollout
    from fractions import Fraction

    from posflow.proofs_checks._common import random_layers
    from posflow.theory import rollout as th

    ks, lam = random_layers(np.random.default_rng(5), 6, 7)
    db = th.diagonal_bound([k.diagonal() for k in ks], lam, exact="rational")
    mid = low = Fraction(1)
    for k, lt in zip(ks, lam, strict=True):
        d = max(1 - Fraction(float(a)) for a in k.diagonal())
        mid *= 1 - Fraction(float(lt)) * d
        low *= 1 - Fraction(float(lt))
    assert db.middle == mid and db.lower == low
    assert db.min_diagonal >= db.middle >= db.lower


def test_pb5_reproduces_the_digest_table(results):
    cases = {
        c["kernel"] + "/" + c["schedule"]: c["one_minus_P_last0"]
        for c in results["PB5"].evidence.measured["cases"]
    }
    assert cases["uniform/λ ≡ 1"]["10"] == pytest.approx(4.4e-2, rel=0.02)
    assert cases["uniform/λ ≡ 0.2"]["100"] == pytest.approx(1.2e-3, rel=0.05)
    # independent: e_{n-1} C^10 for the Cesàro matrix by dense powers
    n = 64
    C = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    row = np.linalg.matrix_power(C, 10)[-1]
    assert cases["uniform/λ ≡ 1"]["10"] == pytest.approx(1 - row[0], rel=1e-9)


def test_pb6_symbolic_split_is_the_p_series_rule(results):
    for c in results["PB6"].evidence.measured["cases"]:
        assert c["collapses_symbolic"] is (c["beta"] <= 1)
        assert c["collapses_numeric"] is (c["beta"] <= 1)


def test_pb4_bound_is_below_the_measured_minimum(results):
    for c in results["PB4"].evidence.measured["cases"]:
        assert c["collapses_symbolic"] is False
        assert min(c["log_min_Pii_at"].values()) >= c["log_infinite_product_bound"]
        assert math.isfinite(c["log_infinite_product_bound"])


def test_uniform_influence_sanity():
    # the uniform kernel's one-layer influence is the last row of the Cesàro matrix
    p = influence(uniform_kernel(5), [1.0])
    np.testing.assert_allclose(p, np.full(5, 0.2))
