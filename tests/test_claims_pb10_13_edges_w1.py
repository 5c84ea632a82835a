"""Claims PB10 and PB13 (claims.pb10_13_edges_w1): the edge-mass formula by dense products; W1
is a convention."""

import numpy as np
import pytest
from claim_runs import results_fixture
from shape_refs import softmax_kernel

from posflow.proofs_checks.kit import get_claim

IDS = ["PB10", "PB13"]


results = results_fixture(IDS)


def test_every_claim_holds(results):
    for cid in IDS:
        assert results[cid].status == "HOLDS", (cid, results[cid].evidence.summary)


def test_pb10_edge_mass_formula_by_hand():
    rng = np.random.default_rng(1)
    n, T = 9, 5
    As = [softmax_kernel(n, rng.uniform(0, 2, 2), rng.uniform(-3, 3, 2)) for _ in range(T)]
    lam = rng.uniform(0, 1, T)
    P = np.eye(n)
    for A, lt in zip(As, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * A) @ P
    prod = np.prod([1 - lt * (1 - A[-1, -1]) for A, lt in zip(As, lam, strict=True)])
    assert P[-1, -1] == pytest.approx(prod, rel=1e-13)


def test_pb13_is_a_convention():
    assert get_claim("PB13").source == "[convention]"
