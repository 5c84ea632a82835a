"""Claim PB3 (claims.pb03_diagonal_bound): measured numbers against independent references
(the digest's reproduced value, a direct Fraction computation)."""

import numpy as np
import pytest
from claim_runs import baseline

from posflow.simulate.rollout import power_decay


@pytest.fixture(scope="module")
def results():
    class _Runs(dict):
        def __missing__(self, cid):  # each claim's quick seed-0 run, once per test process
            return baseline(cid)

    return _Runs()


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

    from posflow.proofs_checks.kit import random_layers
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
