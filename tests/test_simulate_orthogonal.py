"""Step laws of simulate.orthogonal against closed forms, quadrature and Monte Carlo (AT1-AT4)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from posflow.simulate.orthogonal import (
    HaarLaw,
    HouseholderLaw,
    SO2BlockLaw,
    StepLaw,
    block_indices,
    haar,
    mean_operator_norm,
    phase_paths,
    rope_frequencies,
    rotate_blocks,
    so2_matrices,
)

angle = st.floats(min_value=-10.0, max_value=10.0, allow_nan=False)


# ---------------------------------------------------------------- Haar O(d), SO(d) (AT3)


@pytest.mark.parametrize("special", [False, True])
def test_haar_is_orthogonal_with_the_right_determinants(special):
    q = haar(5, 400, seed=0, special=special)
    assert q.shape == (400, 5, 5)
    assert np.abs(q @ np.swapaxes(q, 1, 2) - np.eye(5)).max() < 1e-12
    det = np.linalg.det(q)
    assert np.allclose(np.abs(det), 1.0, atol=1e-12)
    if special:
        assert (det > 0).all()
    else:  # both components of O(d) are visited, each with probability 1/2
        assert 150 < (det < 0).sum() < 250


def test_haar_moments_mean_zero_and_second_moment_one_over_d():
    d, n = 4, 20_000
    m = haar(d, n, seed=1)
    se_mean = np.sqrt(1.0 / d / n)  # Var M_ab = 1/d
    assert np.abs(m.mean(axis=0)).max() < 4 * se_mean  # E M = 0, 16 entries within 4 SE
    sq = m[:, 0, 0] ** 2
    assert abs(sq.mean() - 1.0 / d) < 4 * sq.std(ddof=1) / np.sqrt(n)  # E M_11² = 1/d


@pytest.mark.parametrize("special", [False, True])
def test_haar_entry_law_ks(special):
    # An entry of a Haar matrix is a coordinate of a uniform unit vector:
    # (M_11 + 1)/2 ~ Beta((d−1)/2, (d−1)/2). Significance 0.001 for both KS tests, fixed seeds.
    d = 5
    m11 = haar(d, 4000, seed=2, special=special)[:, 0, 0]
    beta_law = stats.beta((d - 1) / 2, (d - 1) / 2)
    assert stats.kstest((m11 + 1) / 2, beta_law.cdf).pvalue > 1e-3
    group = stats.special_ortho_group if special else stats.ortho_group
    ref = group.rvs(dim=d, size=4000, random_state=3)[:, 0, 0]
    assert stats.ks_2samp(m11, ref).pvalue > 1e-3


def test_haar_law_interface_and_reproducibility():
    law = HaarLaw(6)
    assert isinstance(law, StepLaw)
    assert np.array_equal(law.sample(3, seed=7), law.sample(3, seed=np.random.default_rng(7)))
    assert np.array_equal(law.mean(), np.zeros((6, 6)))
    assert law.gamma == 0.0
    assert mean_operator_norm(law) == (0.0, 0.0)
    assert HaarLaw(1, special=True).gamma == 1.0  # SO(1) = {1}
    assert HaarLaw(1).gamma == 0.0  # O(1) = {±1}


def test_haar_monte_carlo_mean_norm_is_at_noise_level():
    gamma, se = mean_operator_norm(HaarLaw(8), n_samples=4000, seed=4, exact=False)
    # ‖Ê M‖ is pure noise of order √(d/N) ≈ 0.045 for d = 8, N = 4000 ([B] quotes 0.031)
    assert 0.0 < gamma < 0.1
    assert 0.0 < se < gamma


# ---------------------------------------------------------------- SO(2) blocks (AT1, AT6)


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotate_blocks_equals_the_block_matrix(pairing):
    rng = np.random.default_rng(5)
    x, a = rng.standard_normal((7, 6)), rng.uniform(-4, 4, (7, 3))
    m = so2_matrices(a, pairing)
    assert np.allclose(rotate_blocks(x, a, pairing), np.einsum("nab,nb->na", m, x), atol=1e-14)
    i1, i2 = block_indices(6, pairing)
    assert np.allclose(
        m[0][np.ix_([i1[1], i2[1]], [i1[1], i2[1]])],
        [[np.cos(a[0, 1]), -np.sin(a[0, 1])], [np.sin(a[0, 1]), np.cos(a[0, 1])]],
    )


def test_block_indices_pairings():
    assert [list(v) for v in block_indices(6, "half")] == [[0, 1, 2], [3, 4, 5]]
    assert [list(v) for v in block_indices(6, "interleaved")] == [[0, 2, 4], [1, 3, 5]]


@settings(max_examples=40, deadline=None)
@given(a=angle, b=angle, x1=angle, x2=angle)
def test_rotations_compose_and_preserve_norm(a, b, x1, x2):
    x = np.array([x1, x2])
    y = rotate_blocks(rotate_blocks(x, [a]), [b])
    assert np.allclose(y, rotate_blocks(x, [a + b]), atol=1e-12)
    assert np.isclose(np.linalg.norm(y), np.linalg.norm(x), atol=1e-12)


def test_rope_frequencies_match_paper_range():
    f = rope_frequencies(96)
    assert f[0] == 1.0 and np.isclose(f[-1], 1e4 ** (-94 / 96))
    assert np.isclose(f[-1], 1.21e-4, rtol=1e-2)


def _quad_characteristic(density, lo, hi):
    re = integrate.quad(lambda t: np.cos(t) * density(t), lo, hi)[0]
    im = integrate.quad(lambda t: np.sin(t) * density(t), lo, hi)[0]
    return re + 1j * im


@pytest.mark.parametrize("s", [0.3, 1.0, 2.5])
def test_characteristic_values_against_quadrature(s):
    d = 2
    uni = SO2BlockLaw(d, "uniform", s).characteristic()[0]
    assert np.isclose(uni, _quad_characteristic(lambda t: 1 / (2 * s), -s, s), atol=1e-12)
    nor = SO2BlockLaw(d, "normal", s).characteristic()[0]
    assert np.isclose(nor, _quad_characteristic(stats.norm(0, s).pdf, -12 * s, 12 * s), atol=1e-10)
    pos = SO2BlockLaw(d, "positive_uniform", s).characteristic()[0]
    assert np.isclose(pos, _quad_characteristic(lambda t: 1 / (2 * s), 0, 2 * s), atol=1e-12)
    assert np.isclose(SO2BlockLaw(d, "rope", s).characteristic()[0], np.exp(1j * s))


@pytest.mark.parametrize("law", ["uniform", "normal", "positive_uniform", "rope"])
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_so2_mean_against_monte_carlo(law, pairing):
    n = 20_000
    so2 = SO2BlockLaw(4, law, [0.7, 1.9], pairing=pairing)
    m = so2.sample(n, seed=6)
    se = m.std(axis=0, ddof=1) / np.sqrt(n)
    # 4 SE, plus 1e-12 for the summation rounding of the deterministic (rope) law
    assert (np.abs(m.mean(axis=0) - so2.mean()) <= 4 * se + 1e-12).all()
    assert np.isclose(so2.gamma, np.abs(so2.characteristic()).max())
    assert np.isclose(so2.gamma, np.linalg.norm(so2.mean(), 2))


def test_so2_sample_uses_the_sampled_angles_and_default_rope_scale():
    law = SO2BlockLaw(8, "uniform")
    assert np.array_equal(law.scale, rope_frequencies(8))
    a = law.sample_angles(5, seed=8)
    assert (np.abs(a) <= law.scale).all()
    assert np.array_equal(law.sample(5, seed=8), so2_matrices(a))
    c = law.characteristic()
    assert np.isclose(c[0], np.sin(1.0))  # block 0: f_0 = 1, c = sin 1 / 1
    assert law.gamma == np.abs(c).max() == c[-1]  # the slowest block sets γ
    rope = SO2BlockLaw(8, "rope")
    assert np.allclose(rope.mean(), so2_matrices(rope_frequencies(8)))
    assert rope.gamma == pytest.approx(1.0)  # AT16: no spectral gap


def test_so2_uniform_product_characteristic_decay_at1():
    # AT1: E cos Σ_{s<n} θ_s = (sin a / a)^n, E sin = 0 (a = 1, n = 3, N = 100000)
    n_steps, n = 3, 100_000
    law = SO2BlockLaw(2, "uniform", 1.0)
    psi = law.sample_angles(n * n_steps, seed=9).reshape(n, n_steps).sum(axis=1)
    for x, exact in ((np.cos(psi), np.sin(1.0) ** n_steps), (np.sin(psi), 0.0)):
        assert abs(x.mean() - exact) < 4 * x.std(ddof=1) / np.sqrt(n)


# ---------------------------------------------------------------- Householder (AT4)


@pytest.mark.parametrize("beta", [0.0, 0.4, 1.0, 1.7, 2.0])
def test_householder_spectrum_and_orthogonality(beta):
    law = HouseholderLaw(5, beta)
    h = law.sample(3, seed=10)[0]
    assert np.allclose(np.sort(np.linalg.eigvalsh(h)), np.sort([1, 1, 1, 1, 1 - beta]))
    assert law.is_orthogonal == np.allclose(h @ h.T, np.eye(5))
    assert law.is_orthogonal == (beta in (0.0, 2.0))


def test_householder_mean_closed_form_and_monte_carlo():
    d, beta, n = 3, 1.2, 40_000
    law = HouseholderLaw(d, beta)
    assert np.allclose(law.mean(), (1 - beta / d) * np.eye(d))
    assert law.gamma == pytest.approx(1 - beta / d)
    m = law.sample(n, seed=11)
    se = m.std(axis=0, ddof=1) / np.sqrt(n)
    assert (np.abs(m.mean(axis=0) - law.mean()) <= 4 * se).all()
    w = law.sample_vectors(n, seed=11)
    assert np.allclose(np.linalg.norm(w, axis=1), 1.0)
    assert np.allclose(m, np.eye(d) - beta * w[:, :, None] * w[:, None, :])


def test_householder_fixed_direction():
    w = np.array([0.6, 0.8, 0.0])
    law = HouseholderLaw(3, 0.5, w)
    assert np.allclose(law.mean(), np.eye(3) - 0.5 * np.outer(w, w))
    assert np.allclose(law.sample(2, seed=0), law.mean())
    assert law.gamma == pytest.approx(1.0)


# ---------------------------------------------------------------- mean_operator_norm (AT2)


class _NoClosedForm:
    """A law exposing only d and sample (the protocol's minimum)."""

    def __init__(self, inner):
        self.d, self._inner = inner.d, inner

    def sample(self, size, seed=None):
        return self._inner.sample(size, seed=seed)


@pytest.mark.parametrize("law", [SO2BlockLaw(2, "uniform", 1.0), HouseholderLaw(4, 1.5)])
def test_monte_carlo_gamma_agrees_with_the_exact_value(law):
    exact, se0 = mean_operator_norm(law)
    assert se0 == 0.0 and exact == pytest.approx(law.gamma)
    gamma, se = mean_operator_norm(_NoClosedForm(law), n_samples=20_000, seed=12)
    assert se > 0
    assert abs(gamma - exact) < 4 * se + 1e-3  # within 4 jackknife SE (plus O(d/N) bias)
    again = mean_operator_norm(_NoClosedForm(law), n_samples=20_000, seed=12)
    assert again == (gamma, se)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: haar(0, 3), "d"),
        (lambda: haar(3, 0), "size"),
        (lambda: haar(3, 2, seed="x"), "seed"),
        (lambda: HaarLaw(0), "d"),
        (lambda: SO2BlockLaw(5), "d"),
        (lambda: SO2BlockLaw(4, "cauchy"), "law"),
        (lambda: SO2BlockLaw(4, "uniform", -0.1), "scale"),
        (lambda: SO2BlockLaw(4, "normal", [0.1, np.nan]), "scale"),
        (lambda: SO2BlockLaw(4, "uniform", [0.1, 0.2, 0.3]), "scale"),
        (lambda: SO2BlockLaw(4, pairing="zigzag"), "pairing"),
        (lambda: rope_frequencies(4, base=-1.0), "base"),
        (lambda: rotate_blocks(np.ones(4), np.ones(3)), "angles"),
        (lambda: rotate_blocks(np.ones(3), np.ones(1)), "d"),
        (lambda: HouseholderLaw(3, 2.5), "beta"),
        (lambda: HouseholderLaw(3, np.nan), "beta"),
        (lambda: HouseholderLaw(3, 1.0, [1.0, 1e-5, 0.0]), "w"),
        (lambda: HouseholderLaw(3, 1.0, [1.0, 0.0]), "w"),
        (lambda: HouseholderLaw(0, 1.0), "d"),
        (lambda: mean_operator_norm(HaarLaw(2), n_samples=1, exact=False), "n_samples"),
    ],
)
def test_bad_input_names_the_argument(call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call()


def test_mean_operator_norm_rejects_non_laws():
    with pytest.raises(TypeError, match="law"):
        mean_operator_norm(object())


def test_phase_paths_accumulate_the_law():
    law = SO2BlockLaw(2, "rope", scale=0.25)  # deterministic: Σθ = L·0.25
    paths = phase_paths(law, 3, [1, 4], np.random.default_rng(0))
    assert paths[4] == pytest.approx(np.full((3, 1), 1.0))
    with pytest.raises(ValueError, match="checkpoints"):
        phase_paths(law, 3, [0], np.random.default_rng(0))
