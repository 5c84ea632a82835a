"""posflow.simulate.transport's moments of route phases, route products and far scores
(``posflow.simulate._route_moments``) against independent references."""

import math

import numpy as np
import pytest

from posflow.simulate.orthogonal import HaarLaw, HouseholderLaw, SO2BlockLaw, phase_paths
from posflow.simulate.transport import (
    phase_path_moments,
    route_product_moments,
    so2_far_score_moments,
    so2_score_moments,
)


def _law_96():
    f = 10000.0 ** (-2 * np.arange(48) / 96)
    return f, np.log(np.sin(f) / f), np.log(np.sin(2 * f) / (2 * f))


def test_at5_score_moments_by_a_plain_monte_carlo():
    # s = Σ_b w_b cos ψ_b(D), ψ_b a sum of D uniforms on [−f_b, f_b]: mean and variance
    f, lc, lc2 = _law_96()
    w = np.full(48, 1 / 48)
    (mean,), (var,) = so2_score_moments(lc, lc2, w, [64])
    rng = np.random.default_rng(3)
    psi = rng.uniform(-f, f, size=(64, 20000, 48)).sum(axis=0)
    s = np.cos(psi) @ w
    assert s.mean() == pytest.approx(mean, abs=5 * math.sqrt(var / s.size))
    assert s.var() == pytest.approx(var, rel=0.1)
    assert mean == pytest.approx(np.mean((np.sin(f) / f) ** 64), rel=1e-12)


def test_at5_far_law_is_the_mixture_over_distances():
    f, lc, lc2 = _law_96()
    w = np.full(48, 1 / 48)
    mu, var = so2_far_score_moments(lc, lc2, w, 27, 511)
    means = [np.mean((np.sin(f) / f) ** D) for D in range(27, 512)]
    assert mu == pytest.approx(np.mean(means), rel=1e-12)
    assert var >= np.var(means)


def test_far_score_variance_is_the_mixture_variance_of_a_dense_table():
    # Var s at D ~ Unif{lo..hi} = E[E[s²|D]] − μ², from a dense per-distance table
    _, lc, lc2 = _law_96()
    w = np.linspace(0.0, 0.05, 48)
    D = np.arange(3, 40)
    c1, c2 = np.exp(np.outer(D, lc)), np.exp(np.outer(D, lc2))
    mean_d = c1 @ w
    second = np.array(
        [
            sum(w[a] * w[b] * (c1[i, a] * c1[i, b] if a != b else (1 + c2[i, a]) / 2)
                for a in range(48) for b in range(48))
            for i in range(D.size)
        ]
    )  # fmt: skip
    mu, var = so2_far_score_moments(lc, lc2, w, 3, 39)
    assert mu == pytest.approx(mean_d.mean(), rel=1e-12)
    assert var == pytest.approx(second.mean() - mean_d.mean() ** 2, rel=1e-9)


def test_phase_path_moments_are_the_means_of_phase_paths():
    law = SO2BlockLaw(4, "uniform", scale=np.array([0.5, 1.5]))
    got = phase_path_moments(law, 50, [3, 1], np.random.default_rng(5))
    paths = phase_paths(law, 50, [1, 3], np.random.default_rng(5))
    assert got.steps == [1, 3]
    for i, L in enumerate([1, 3]):
        c, s = np.cos(paths[L]), np.sin(paths[L])
        assert np.array_equal(got.cos[i], c.mean(axis=0))
        assert np.array_equal(got.sin[i], s.mean(axis=0))
        assert got.cos_se[i] == pytest.approx(c.std(axis=0, ddof=1) / math.sqrt(50), rel=1e-14)
        assert got.sin_se[i] == pytest.approx(s.std(axis=0, ddof=1) / math.sqrt(50), rel=1e-14)
    assert got.cos.shape == got.sin_se.shape == (2, 2)


@pytest.mark.parametrize("law", [HouseholderLaw(3, 1.0), HaarLaw(2)])
def test_route_product_moments_by_an_explicit_loop(law):
    N, L = 40, 3
    mean, se = route_product_moments(law, N, L, np.random.default_rng(11))
    rng = np.random.default_rng(11)
    steps = [law.sample(N, seed=rng) for _ in range(L)]
    for n in range(1, L + 1):
        P = np.empty((N, law.d, law.d))
        for r in range(N):  # M_n ⋯ M_1 of route r, one matrix product at a time
            acc = np.eye(law.d)
            for k in range(n):
                acc = steps[k][r] @ acc
            P[r] = acc
        assert mean[n - 1] == pytest.approx(P.mean(axis=0), abs=1e-13)
        assert se[n - 1] == pytest.approx(P.std(axis=0, ddof=1) / math.sqrt(N), abs=1e-13)
    assert mean.shape == se.shape == (L, law.d, law.d)


def test_route_product_moments_of_so2_blocks_decay_like_the_characteristic():
    law = SO2BlockLaw(2, "uniform", scale=1.0)
    mean, se = route_product_moments(law, 20000, 4, np.random.default_rng(2))
    for n in range(1, 5):
        assert mean[n - 1, 0, 0] == pytest.approx(math.sin(1.0) ** n, abs=6 * se[n - 1, 0, 0])
