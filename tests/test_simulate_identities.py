"""posflow.simulate.identities (claim AT18): the dense route-product references by hand, and
the fast paths' errors against them."""

import math

import numpy as np
import pytest

from posflow.simulate.identities import (
    causal_softmax_rows,
    dense_route,
    dense_scores,
    dense_values,
    numpy_identity_errors,
    so2_dense,
)


def test_dense_rotation_is_the_half_split_block_matrix():
    theta = np.array([[0.3, -1.1]])
    m = so2_dense(theta)[0]
    for b, t in enumerate(theta[0]):
        block = m[np.ix_([b, b + 2], [b, b + 2])]
        assert np.allclose(block, [[math.cos(t), -math.sin(t)], [math.sin(t), math.cos(t)]])
    assert np.allclose(m @ m.T, np.eye(4))


def test_dense_scores_of_one_block_are_the_cosine_of_the_route_angle():
    # d = 2: q_iᵀ R(Σ_{s=j}^{i−1} θ_s) k_j by hand, for q = k = e_1: cos of the route angle
    theta = np.array([[0.1], [0.2], [0.4], [0.8]])
    e1 = np.tile([1.0, 0.0], (4, 1))
    s = dense_scores(e1, e1, so2_dense(theta))
    assert s[3, 0] == pytest.approx(math.cos(0.1 + 0.2 + 0.4))
    assert s[3, 2] == pytest.approx(math.cos(0.4))
    assert s[2, 2] == pytest.approx(1.0)
    # path route (steps j+1 … i)
    sp = dense_scores(e1, e1, so2_dense(theta), 1)
    assert sp[3, 0] == pytest.approx(math.cos(0.2 + 0.4 + 0.8))


def test_dense_route_puts_later_steps_on_the_left():
    rng = np.random.default_rng(0)
    steps = rng.standard_normal((4, 3, 3))
    assert np.allclose(dense_route(steps, 0, 3), steps[2] @ steps[1] @ steps[0])
    assert np.allclose(dense_route(steps, 0, 3, 1), steps[3] @ steps[2] @ steps[1])


def test_dense_values_of_one_block_rotate_each_source_by_its_route_angle():
    theta = np.array([[0.3], [-0.5], [0.9]])
    v = np.array([[1.0, 0.0], [0.0, 1.0], [2.0, 1.0]])
    a = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    o = dense_values(a, v, so2_dense(theta))

    def rot(t, x):
        return np.array(
            [math.cos(t) * x[0] - math.sin(t) * x[1], math.sin(t) * x[0] + math.cos(t) * x[1]]
        )

    want2 = (rot(0.3 - 0.5, v[0]) + rot(-0.5, v[1]) + v[2]) / 3
    assert o[2] == pytest.approx(want2, abs=1e-14)
    assert o[0] == pytest.approx(v[0], abs=1e-15)


def test_causal_softmax_rows_by_hand():
    s = np.array([[0.0, np.nan], [1.0, 2.0]])
    a = causal_softmax_rows(s, 0.5, np.zeros((2, 2)))
    assert a[0] == pytest.approx([1.0, 0.0])
    e = np.exp([0.5, 1.0])
    assert a[1] == pytest.approx(e / e.sum(), rel=1e-14)


def test_numpy_identity_errors_are_rounding_and_catch_a_broken_route(monkeypatch):
    err, chunked, scale = numpy_identity_errors(np.random.default_rng(0), 12, 4, 5)
    assert set(err) >= {"route_product", "so2_scores", "so2_value_output", "frames_path"}
    assert set(chunked) == {
        "householder_route_scores_path",
        "householder_route_scores_from_source",
        "path_attention",
    }
    assert max(err.values()) < 1e-12 and max(chunked.values()) < 1e-12
    # the scale is max‖q‖·max‖k‖ of the first draws of the same stream
    q, k, _ = np.random.default_rng(0).standard_normal((3, 12, 4))
    assert scale == pytest.approx(
        np.linalg.norm(q, axis=1).max() * np.linalg.norm(k, axis=1).max(), rel=1e-15
    )
    from posflow.simulate import identities

    real = identities.so2_scores
    monkeypatch.setattr(identities, "so2_scores", lambda q, k, theta: real(q, k, -theta))
    broken, _, _ = numpy_identity_errors(np.random.default_rng(0), 12, 4, 5)
    assert broken["so2_scores"] > 1e-3 and broken["suffix_sum_scores"] < 1e-12
