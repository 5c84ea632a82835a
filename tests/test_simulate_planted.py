"""The planted-target sweep and the logit-level references of simulate.transport (claims AT12,
AT13, AT19) against quadrature, dense sums and the simulator itself."""

import math

import numpy as np
import pytest
from scipy import integrate

from posflow.simulate.transport import (
    PLANTED,
    alibi_far_mass_reference,
    coherence_per_block,
    crossing_length,
    far_logit_cv2,
    far_sum_mgf,
    near_mass_reference,
    planted_lengths,
    planted_sweep,
    stylized_attention,
    value_ratio_reference,
)


def _sphere_moment(lam, d):
    dens = lambda u: (1 - u * u) ** ((d - 3) / 2)  # noqa: E731
    num = integrate.quad(lambda u: math.exp(lam * u) * dens(u), -1, 1)[0]
    return num / integrate.quad(dens, -1, 1)[0]


def test_far_logit_mgf_by_quadrature():
    d, lam = 96, 8.0
    assert far_sum_mgf(lam, d) == pytest.approx(_sphere_moment(lam, d), rel=1e-9)


def test_far_logit_cv2_by_quadrature():
    cv2 = _sphere_moment(16.0, 96) / _sphere_moment(8.0, 96) ** 2 - 1
    assert far_logit_cv2() == pytest.approx(cv2, rel=1e-8)


def test_near_mass_reference_is_a_probability_falling_like_one_over_m():
    a, b = near_mass_reference("rope", 8192), near_mass_reference("rope", 65536)
    assert 0 < b["near_mass"] < a["near_mass"] < 1 and b["planted"] < b["near_mass"]
    # for large M the prediction is ≈ K e^Δ / (M E e^s): the product with M settles
    assert b["near_mass"] * (65536 - 64) == pytest.approx(a["near_mass"] * (8192 - 64), rel=0.1)


@pytest.mark.parametrize("scheme", ["rope", "random_qk"])
def test_near_mass_reference_against_the_simulator(scheme):
    L, n = 2048, 48
    sim = stylized_attention(scheme, L, n_trials=n, seed=7)
    ref = near_mass_reference(scheme, L)
    near = 1 - sim.far_mass
    se = math.hypot(near.std(ddof=1) / math.sqrt(n), ref["near_mass_se"])
    assert abs(near.mean() - ref["near_mass"]) < 5 * se + 3 * ref["bias"] * ref["near_mass"]


def test_alibi_reference_against_the_simulator_and_free_of_l():
    ref, ref_se, n_cut = alibi_far_mass_reference(0)
    assert n_cut == 64 + math.ceil(48 * 16) and 0 < ref < 1e-3
    sim = stylized_attention("alibi", 2048, n_trials=48, seed=3).far_mass
    se = math.hypot(sim.std(ddof=1) / math.sqrt(sim.size), ref_se)
    assert abs(sim.mean() - ref) < 5 * se


def test_coherence_per_block_against_a_dense_double_sum():
    M = 37
    f = 10_000.0 ** (-2 * np.arange(48) / 96)
    c = np.sin(f) / f
    n = np.arange(M)
    lag = np.abs(n[:, None] - n[None, :])
    dense = np.array([np.sum(c[b] ** lag) for b in range(48)]) / M**2
    assert coherence_per_block(M).shape == (48,)
    assert np.allclose(coherence_per_block(M), dense, rtol=1e-12, atol=0)
    assert coherence_per_block(1) == pytest.approx(np.ones(48))


def test_value_ratio_reference_against_a_dense_sum():
    L = 64 + 40
    M = L - 64
    f = 10_000.0 ** (-2 * np.arange(48) / 96)
    c = np.sin(f) / f
    n = np.arange(M)
    dense = np.mean([np.sum(c[b] ** np.abs(n[:, None] - n[None, :])) / M**2 for b in range(48)])
    assert value_ratio_reference(L) == pytest.approx(dense + far_logit_cv2() / M, rel=1e-12)
    fast = np.zeros(48)
    fast[0] = 1.0
    assert value_ratio_reference(L, fast) < value_ratio_reference(L)


def test_crossing_interpolates_in_log_length():
    L, b = crossing_length([100, 10_000], [0.0, 1.0], 0.5)
    assert L == pytest.approx(1000.0) and b == (0, 1)
    assert math.isnan(crossing_length([1, 2], [0.1, 0.2], 0.5)[0])
    assert crossing_length([10, 20], [0.6, 0.7], 0.5) == (10.0, (0, 0))


def test_stylized_sweep_is_shared_by_at12_and_at19():
    a = planted_sweep("random_qk", 0)
    assert planted_sweep("random_qk", 0)[8192] is a[8192]


def test_planted_sweep_runs_the_defaults_with_one_seed_per_length():
    assert planted_lengths() == {512: 32, 2048: 8, 8192: 4}
    assert list(planted_lengths(True)) == [512, 2048, 8192, 32768, 65536]
    assert PLANTED.d == 96 and PLANTED.window == 64 and PLANTED.reference_draws == 4000
    qk = planted_sweep("random_qk", 1, only=(512,))
    qkv = planted_sweep("random_qkv", 1, only=(512,))
    assert list(qk) == [512] and qk[512].far_mass.size == 32
    seed = int(np.random.default_rng([1, 1019, 512]).integers(2**63 - 1))
    direct = stylized_attention("random_qk", 512, n_trials=32, seed=seed)
    assert np.array_equal(qk[512].far_mass, direct.far_mass)
    assert np.array_equal(qkv[512].far_mass, qk[512].far_mass)  # common random numbers
