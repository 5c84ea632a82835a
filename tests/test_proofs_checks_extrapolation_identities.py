"""Claims AT18 (proofs_checks.extrapolation_identities):
the measured numbers against independent references."""

import math
import sys

import numpy as np
import pytest

from posflow.proofs_checks.claims.at18_identities import (
    _TORCH_SCHEMES,
    _dense_route,
    _dense_scores,
    _so2_dense,
)
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim


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


def test_dense_rotation_is_the_half_split_block_matrix():
    theta = np.array([[0.3, -1.1]])
    m = _so2_dense(theta)[0]
    for b, t in enumerate(theta[0]):
        block = m[np.ix_([b, b + 2], [b, b + 2])]
        assert np.allclose(block, [[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    assert np.allclose(m @ m.T, np.eye(4))


def test_dense_scores_of_one_block_are_the_cosine_of_the_route_angle():
    # d = 2: q_iᵀ R(Σ_{s=j}^{i−1} θ_s) k_j by hand, for q = k = e_1: cos of the route angle
    theta = np.array([[0.1], [0.2], [0.4], [0.8]])
    e1 = np.tile([1.0, 0.0], (4, 1))
    s = _dense_scores(e1, e1, _so2_dense(theta))
    assert s[3, 0] == pytest.approx(math.cos(0.1 + 0.2 + 0.4))
    assert s[3, 2] == pytest.approx(math.cos(0.4))
    assert s[2, 2] == pytest.approx(1.0)
    # path route (steps j+1 … i)
    sp = _dense_scores(e1, e1, _so2_dense(theta), 1)
    assert sp[3, 0] == pytest.approx(math.cos(0.2 + 0.4 + 0.8))


def test_dense_route_puts_later_steps_on_the_left():
    rng = np.random.default_rng(0)
    steps = rng.standard_normal((4, 3, 3))
    assert np.allclose(_dense_route(steps, 0, 3), steps[2] @ steps[1] @ steps[0])
    assert np.allclose(_dense_route(steps, 0, 3, 1), steps[3] @ steps[2] @ steps[1])


def test_at18_torch_part_is_undecided_without_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    ev = run_claim(get_claim("AT18"), Context()).evidence
    assert ev.status == "INCONCLUSIVE"
    assert "torch is not importable" in ev["torch_schemes"].note
