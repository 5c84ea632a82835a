"""posflow.simulate.values: the far residual of value transport (AT14, AT15) against
explicit route rotations, one call per draw and dense references."""

import numpy as np
import pytest

from posflow.simulate.orthogonal import SO2BlockLaw, haar
from posflow.simulate.transport import so2_value_output
from posflow.simulate.values import (
    far_residual_sq,
    lazy_haar_residual_sq,
    planar_pairs,
    route_sum_value_output,
    unrotated_residual_sq,
)


def test_at14_dense_transport_is_the_explicit_route_product():
    rng = np.random.default_rng(2)
    n, B = 6, 2
    w, v, theta = rng.random(n), rng.standard_normal((n, 2 * B)), rng.uniform(-1, 1, (n, B))
    o = np.zeros(2 * B)
    for j in range(n):  # route j → n−1 from the source: steps j … n−2, as 2×2 matrices
        for b in range(B):
            R = np.eye(2)
            for s in range(j, n - 1):
                t = theta[s, b]
                R = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) @ R
            o[[b, b + B]] += w[j] * (R @ v[j, [b, b + B]])
    assert route_sum_value_output(w, v, theta) == pytest.approx(o, abs=1e-13)
    assert so2_value_output(w[None], v, theta)[0] == pytest.approx(o, abs=1e-13)


def test_at14_stacked_draws_equal_one_call_per_draw():
    M, gap, trials, scales = 7, 3, 5, np.array([0.8, 1.5])
    rng = np.random.default_rng(3)
    w, v = rng.random(M), rng.standard_normal((M, 4))
    batched = far_residual_sq(scales, w, v, gap, trials, np.random.default_rng(4))
    n = M + gap
    theta = SO2BlockLaw(4 * trials, "uniform", scale=np.tile(scales, trials)).sample_angles(
        n, np.random.default_rng(4)
    )
    wf, vf = np.zeros((1, n)), np.zeros((n, 4))
    wf[0, :M], vf[:M] = w, v
    one = [np.sum(so2_value_output(wf, vf, theta[:, 2 * t : 2 * t + 2]) ** 2) for t in range(5)]
    assert batched == pytest.approx(one, rel=1e-12)


def test_planar_pairs_is_the_half_split_pairing():
    v = np.arange(12.0).reshape(2, 6)
    p = planar_pairs(v)
    assert p.shape == (2, 3, 2)
    for j in range(2):
        for b in range(3):
            assert tuple(p[j, b]) == (v[j, b], v[j, b + 3])


def test_unrotated_residual_is_the_plain_weighted_sum():
    rng = np.random.default_rng(5)
    w, v = rng.random(9), rng.standard_normal((9, 4))
    direct = float(np.sum((w @ v) ** 2))
    assert unrotated_residual_sq(w, v, 3) == pytest.approx(direct, rel=1e-13)


def test_far_residual_without_rotation_width_is_the_coherent_sum():
    # zero-width angles: every draw equals ‖Σ a_j v_j‖²
    w, v = np.array([0.2, 0.5, 0.3]), np.array([[1.0, 0.0], [0.5, 0.5], [0.0, 2.0]])
    x = far_residual_sq(np.array([0.0]), w, v, 2, 4, np.random.default_rng(0))
    assert x == pytest.approx([float(np.sum((w @ v) ** 2))] * 4, rel=1e-13)


def test_lazy_haar_residual_by_explicit_route_products():
    d, p, seed, samples = 3, 0.6, 11, 5
    a = np.array([0.7, -0.4, 1.2])
    v = np.random.default_rng(1).standard_normal((3, d))
    n = np.array([2, 5, 1])
    got = lazy_haar_residual_sq(d, p, a, v, n, samples, seed)
    rng = np.random.default_rng(seed)  # the same draws, then a plain loop per sample and token
    steps = haar(d, samples * 5, seed=rng).reshape(samples, 5, d, d)
    lazy = rng.random((samples, 5)) >= p
    want = []
    for s in range(samples):
        total = np.zeros(d)
        for j in range(3):
            P = np.eye(d)
            for t in range(n[j]):  # the new step on the right
                P = P @ (np.eye(d) if lazy[s, t] else steps[s, t])
            total += a[j] * (P @ v[j])
        want.append(float(total @ total))
    assert got == pytest.approx(want, rel=1e-12)


def test_lazy_haar_residual_with_identity_steps_is_the_coherent_sum():
    a, v = np.array([1.0, 0.5]), np.array([[1.0, 0.0], [0.0, 2.0]])
    x = lazy_haar_residual_sq(2, 1e-300, a, v, np.array([3, 1]), 8, 0)  # every step lazy
    assert x == pytest.approx([2.0] * 8, rel=1e-14)
