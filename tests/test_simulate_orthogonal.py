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


# ---------------------------------------------------------------- mean_operator_norm by brute force


class _Recorded:
    """Gaussian (non-symmetric) steps drawn from the Generator it is handed; keeps every draw."""

    def __init__(self, d, dtype=np.float64):
        self.d, self.dtype, self.sizes, self.draws = d, dtype, [], []

    def sample(self, size, seed=None):
        m = (seed.standard_normal((size, self.d, self.d)) + 0.3).astype(self.dtype)
        self.sizes.append(size)
        self.draws.append(m)
        return m


def _jackknife_reference(batches):
    """γ̂ and its delete-one-batch jackknife SE, recomputed from the batches one by one."""
    top = lambda a: np.linalg.svd(a, compute_uv=False)[0]  # noqa: E731
    every = np.concatenate(batches).astype(np.float64)
    loo = [top(np.concatenate(batches[:b] + batches[b + 1 :]).astype(np.float64).mean(axis=0))
           for b in range(len(batches))]  # fmt: skip
    B = len(batches)
    return top(every.mean(axis=0)), np.sqrt((B - 1) / B * np.sum((loo - np.mean(loo)) ** 2))


@pytest.mark.parametrize(("n_samples", "n_batches"), [(50, 7), (12, 2), (9, 9)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_mean_operator_norm_jackknife_against_brute_force(n_samples, n_batches, dtype):
    law = _Recorded(3, dtype)
    gamma, se = mean_operator_norm(law, n_samples, seed=13, n_batches=n_batches)
    # every draw is used once, in n_batches batches of ⌊N/B⌋ or ⌈N/B⌉ steps
    assert sum(law.sizes) == n_samples and len(law.sizes) == n_batches
    assert set(law.sizes) <= {n_samples // n_batches, -(-n_samples // n_batches)}
    ref_gamma, ref_se = _jackknife_reference(law.draws)
    # float64 sums of at most 50 entries of size O(1): 1e-12 is ~10³ ulp of room
    assert gamma == pytest.approx(ref_gamma, rel=1e-12)
    assert se == pytest.approx(ref_se, rel=1e-9, abs=1e-14)


def test_mean_operator_norm_default_batches_and_seed_stream():
    law = _Recorded(2)
    gamma, se = mean_operator_norm(law, seed=14)
    assert law.sizes == [128] * 32  # N = 4096 steps in B = 32 batches by default
    ref_gamma, ref_se = _jackknife_reference(law.draws)
    assert gamma == pytest.approx(ref_gamma, rel=1e-12)
    assert se == pytest.approx(ref_se, rel=1e-9)
    # the batches are consecutive draws of one Generator seeded with `seed`
    rng = np.random.default_rng(14)
    first = rng.standard_normal((128, 2, 2)) + 0.3
    np.testing.assert_array_equal(law.draws[0], first)


def test_mean_operator_norm_exact_flag_and_laws_without_closed_form():
    law = HouseholderLaw(3, 0.9)
    gamma, se = mean_operator_norm(law, n_samples=64, seed=1, n_batches=4, exact=False)
    assert se > 0.0 and gamma != law.gamma  # a Monte Carlo estimate, not the closed form

    class Coin(StepLaw):
        """+I with probability 3/4, −I otherwise: no closed form declared (E M = I/2)."""

        d = 2

        def sample(self, size, seed=None):
            return _biased_sign(seed, size)[:, None, None] * np.eye(2)

    coin = Coin()
    assert coin.is_orthogonal and not coin.has_closed_form and coin.gamma is None
    with pytest.raises(NotImplementedError, match=r"^Coin has no closed-form mean$"):
        coin.mean()
    g, s = mean_operator_norm(coin, n_samples=40_000, seed=2)
    # γ̂ = |mean of N signs|, SE √(1 − 1/4)/√N; the 32-batch jackknife estimates the SE with
    # relative error ≈ 1/√62 ≈ 0.13, so 50 % is 4 of its standard errors
    se = np.sqrt(0.75 / 40_000)
    assert abs(g - 0.5) < 4 * se and s == pytest.approx(se, rel=0.5)


def _biased_sign(seed, size):
    return np.where(np.random.default_rng(seed).random(size) < 0.75, 1.0, -1.0)


class _OnlyD:
    d = 2


class _OnlySample:
    def sample(self, size, seed=None):
        return np.zeros((size, 2, 2))


class _WrongShape:
    d = 2

    def sample(self, size, seed=None):
        return np.zeros((size, 3, 3))


@pytest.mark.parametrize(
    ("call", "exc", "match"),
    [
        (lambda: mean_operator_norm(_OnlyD()), TypeError,
         r"^law must provide d and sample\(size, seed\)$"),
        (lambda: mean_operator_norm(_OnlySample()), TypeError, r"^law must provide d and sample"),
        (lambda: mean_operator_norm(_WrongShape(), 8, n_batches=2), ValueError,
         r"^law.sample returned shape \(4, 3, 3\); expected \(4, 2, 2\)$"),
        (lambda: mean_operator_norm(HaarLaw(2), exact=False, n_batches=1), ValueError,
         "^n_batches must be >= 2; got 1$"),
        (lambda: mean_operator_norm(HaarLaw(2), 3, exact=False, n_batches=4), ValueError,
         "^n_samples must be >= 4; got 3$"),
        (lambda: mean_operator_norm(HaarLaw(2), 4.0, exact=False), TypeError,
         "^n_samples must be an integer; got float$"),
        (lambda: mean_operator_norm(HaarLaw(2), exact=False, n_batches=2.0), TypeError,
         "^n_batches must be an integer; got float$"),
        (lambda: haar(3, 2, seed=True), TypeError,
         "^seed must be None, an int or a numpy Generator; got bool$"),
        (lambda: haar(3, 2, seed=1.0), TypeError, "got float$"),
        (lambda: haar(0, 3), ValueError, "^d must be >= 1; got 0$"),
        (lambda: haar(3, 0), ValueError, "^size must be >= 1; got 0$"),
        (lambda: HaarLaw(0), ValueError, "^d must be >= 1; got 0$"),
        (lambda: SO2BlockLaw(1), ValueError, r"^d must be even for SO\(2\) blocks; got 1$"),
        (lambda: SO2BlockLaw(0), ValueError, "^d must be >= 1; got 0$"),
        (lambda: block_indices(4, "zigzag"), ValueError,
         r"^pairing must be one of \('half', 'interleaved'\); got 'zigzag'$"),
        (lambda: block_indices(3), ValueError, "^d must be even for SO"),
        (lambda: SO2BlockLaw(4, "cauchy"), ValueError,
         r"^law must be one of \('uniform', 'normal', 'rope', 'positive_uniform'\); got 'cauchy'$"),
        (lambda: SO2BlockLaw(4, "uniform", [0.1, 0.2, 0.3]), ValueError,
         r"^scale must be a scalar or have shape \(2,\); got \(3,\)$"),
        (lambda: SO2BlockLaw(6, "uniform", [0.1, -0.5, np.inf]), ValueError,
         r"^scale must be finite and >= 0; got -0.5 at block 1$"),
        (lambda: SO2BlockLaw(6, "uniform", [0.1, 0.0, np.inf]), ValueError,
         r"^scale must be finite and >= 0; got inf at block 2$"),
        (lambda: SO2BlockLaw(2).sample_angles(0), ValueError, "^size must be >= 1; got 0$"),
        (lambda: rotate_blocks(np.float64(1.0), [0.0]), ValueError,
         "^x must have a last axis of even length d$"),
        (lambda: rotate_blocks(np.ones(3), [0.0]), ValueError, "^d must be even for SO"),
        (lambda: rotate_blocks(np.ones(4), np.ones(3)), ValueError,
         r"^angles must have last axis d/2 = 2; got \(3,\)$"),
        (lambda: rotate_blocks(np.ones(4), 0.5), ValueError,
         r"^angles must have last axis d/2 = 2; got \(\)$"),
        (lambda: rotate_blocks(np.ones(4), np.ones(2), "zigzag"), ValueError, "^pairing must be"),
        (lambda: rotate_blocks("ab", np.ones(1)), TypeError, "^x must be an array of numbers$"),
        (lambda: rotate_blocks(np.ones(2), "a"), TypeError,
         "^angles must be an array of numbers$"),
        (lambda: so2_matrices(0.5), ValueError,
         "^angles must have a last axis of length d/2 >= 1$"),
        (lambda: so2_matrices(np.ones((3, 0))), ValueError, "^angles must have a last axis"),
        (lambda: HouseholderLaw(3, -0.1), ValueError, r"^beta must lie in \[0, 2\]; got -0.1$"),
        (lambda: HouseholderLaw(3, 1.0, [1.0, 0.0]), ValueError,
         r"^w must have shape \(3,\); got \(2,\)$"),
        (lambda: HouseholderLaw(2, 1.0, [1.0 + 2e-12, 0.0]), ValueError,
         r"^w must be a unit vector \(tolerance 1e-12\); got norm 1.000000000002$"),
        (lambda: HouseholderLaw(2, 1.0, [np.nan, 0.0]), ValueError, "got norm nan$"),
        (lambda: HouseholderLaw(2, 1.0).sample_vectors(0), ValueError, "^size must be >= 1"),
        (lambda: phase_paths(SO2BlockLaw(2), 3, [], np.random.default_rng(0)), ValueError,
         r"^checkpoints must be integers >= 1; got \[\]$"),
        (lambda: phase_paths(SO2BlockLaw(2), 3, [3, 0], np.random.default_rng(0)), ValueError,
         r"^checkpoints must be integers >= 1; got \[3, 0\]$"),
    ],
)  # fmt: skip
def test_bad_input_messages(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_boundary_inputs_are_accepted():
    # the smallest valid sizes and the edges of the documented ranges
    assert mean_operator_norm(_Recorded(1), 2, seed=0, n_batches=2)[1] >= 0.0
    assert haar(1, 1, seed=0).shape == (1, 1, 1)
    assert SO2BlockLaw(2, "uniform", 0.0).gamma == 1.0  # sin s / s -> 1 at s = 0
    assert SO2BlockLaw(2).sample_angles(1, seed=0).shape == (1, 1)
    # |‖w‖ − 1| ≤ 1e-12 is a unit vector: 1 + 5e-13 is accepted
    assert HouseholderLaw(2, 1.0, [1.0 + 5e-13, 0.0]).w[0] == 1.0 + 5e-13
    assert HouseholderLaw(2, 0.0).is_orthogonal and HouseholderLaw(2, 2.0).is_orthogonal
    assert HouseholderLaw(1, 0.5).sample_vectors(1, seed=0).shape == (1, 1)
    np.testing.assert_array_equal(so2_matrices([0.0]), np.eye(2))
    np.testing.assert_array_equal(rotate_blocks([3.0, 4.0], [0.0]), [3.0, 4.0])


# ---------------------------------------------------------------- constructions pinned exactly


@pytest.mark.parametrize("d", [1, 2, 4])
def test_haar_is_the_qr_factor_with_positive_diagonal(d):
    # Q is the unique factor of G = QR with diag R > 0 (G the Gaussian draws of the seed), and
    # SO(d) flips the first column of exactly the Q with det Q = −1
    g = np.random.default_rng(21).standard_normal((300, d, d))
    q = haar(d, 300, seed=21)
    r = np.swapaxes(q, 1, 2) @ g
    assert np.abs(np.tril(r, -1)).max(initial=0.0) < 1e-12
    assert (np.diagonal(r, axis1=1, axis2=2) > 0).all()
    s = haar(d, 300, seed=21, special=True)
    neg = np.linalg.det(q) < 0
    assert 0 < neg.sum() < 300
    np.testing.assert_array_equal(s[~neg], q[~neg])
    np.testing.assert_array_equal(s[neg][:, :, 0], -q[neg][:, :, 0])
    np.testing.assert_array_equal(s[neg][:, :, 1:], q[neg][:, :, 1:])


def test_haar_law_passes_its_group_and_seed():
    law = HaarLaw(3, special=1)
    assert law.special is True and repr(law) == "HaarLaw(d=3, special=True)"
    assert repr(HaarLaw(2)) == "HaarLaw(d=2, special=False)"
    np.testing.assert_array_equal(law.sample(20, seed=5), haar(3, 20, seed=5, special=True))
    np.testing.assert_array_equal(HaarLaw(2, special=True).mean(), np.zeros((2, 2)))  # SO(2)
    np.testing.assert_array_equal(HaarLaw(1, special=True).mean(), [[1.0]])


def test_so2_matrices_closed_form_and_batch_shape():
    a, b = 0.3, -1.1
    ca, sa, cb, sb = np.cos(a), np.sin(a), np.cos(b), np.sin(b)
    half = [[ca, 0, -sa, 0], [0, cb, 0, -sb], [sa, 0, ca, 0], [0, sb, 0, cb]]
    inter = [[ca, -sa, 0, 0], [sa, ca, 0, 0], [0, 0, cb, -sb], [0, 0, sb, cb]]
    np.testing.assert_array_equal(so2_matrices([a, b]), half)  # "half" is the default
    np.testing.assert_array_equal(so2_matrices([a, b], "interleaved"), inter)
    angles = np.random.default_rng(0).uniform(-3, 3, (2, 3, 2))
    m = so2_matrices(angles)
    assert m.shape == (2, 3, 4, 4)
    np.testing.assert_array_equal(m[1, 2], so2_matrices(angles[1, 2]))


@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_rotate_blocks_batches_broadcasts_and_passes_nan(pairing):
    rng = np.random.default_rng(22)
    x, a = rng.standard_normal((2, 3, 6)), rng.uniform(-4, 4, 3)  # one angle row for all
    y = rotate_blocks(x, a, pairing)
    assert y.shape == (2, 3, 6)
    ref = np.einsum("ab,ijb->ija", so2_matrices(a, pairing), x)  # the block matrix times x
    np.testing.assert_allclose(y, ref, rtol=0, atol=1e-14)
    # no finiteness check: a NaN in x or in an angle propagates through its own block only
    i1, i2 = block_indices(4, pairing)
    cases = (([np.nan, 1.0, 2.0, 3.0], [0.5, -0.5]), ([1.0, 2.0, 3.0, 4.0], [np.nan, -0.5]))
    for xs, angles in cases:
        z = rotate_blocks(np.array(xs), angles, pairing)
        assert np.isnan(z[[i1[0], i2[0]]]).all()  # block 0
        p, q = xs[i1[1]], xs[i2[1]]
        np.testing.assert_allclose(z[[i1[1], i2[1]]], [p * np.cos(0.5) + q * np.sin(0.5),
                                   -p * np.sin(0.5) + q * np.cos(0.5)], rtol=1e-15)  # fmt: skip


def test_rotate_blocks_default_pairing_is_half():
    x, a = np.arange(4.0), [0.5, 1.5]
    np.testing.assert_array_equal(rotate_blocks(x, a), rotate_blocks(x, a, "half"))
    np.testing.assert_allclose(rotate_blocks(x, a), so2_matrices(a) @ x, rtol=0, atol=1e-15)


def test_so2_law_defaults_scale_and_repr():
    law = SO2BlockLaw(4)
    assert (law.law, law.pairing) == ("uniform", "half")
    assert repr(law) == "SO2BlockLaw(d=4, law='uniform', pairing='half')"
    # f_b = base^(−2b/d): base 100, d = 4 gives (1, 1/10)
    np.testing.assert_allclose(SO2BlockLaw(4, base=100.0).scale, [1.0, 0.1], rtol=1e-15)
    np.testing.assert_allclose(law.scale, [1.0, 0.01], rtol=1e-15)  # base 10⁴
    other = SO2BlockLaw(6, "normal", 0.4, pairing="interleaved")
    np.testing.assert_array_equal(other.scale, [0.4, 0.4, 0.4])
    assert repr(other) == "SO2BlockLaw(d=6, law='normal', pairing='interleaved')"
    # E M in the interleaved pairing: [[Re c, −Im c], [Im c, Re c]] on (2b, 2b + 1)
    pos = SO2BlockLaw(4, "positive_uniform", [0.5, 1.2], pairing="interleaved")
    c = np.exp(1j * pos.scale) * np.sin(pos.scale) / pos.scale
    ref = np.zeros((4, 4))
    for b in range(2):
        ref[2 * b : 2 * b + 2, 2 * b : 2 * b + 2] = [[c[b].real, -c[b].imag],
                                                     [c[b].imag, c[b].real]]  # fmt: skip
    np.testing.assert_allclose(pos.mean(), ref, rtol=0, atol=1e-15)
    assert pos.gamma == pytest.approx(np.abs(c).max(), rel=1e-15)


@pytest.mark.parametrize(
    ("law", "reference"),
    [("uniform", lambda s: stats.uniform(-s, 2 * s)), ("normal", lambda s: stats.norm(0, s)),
     ("positive_uniform", lambda s: stats.uniform(0, 2 * s))],
)  # fmt: skip
def test_so2_angle_laws_ks(law, reference):
    # every block has its documented law (KS at significance 0.001 per block, fixed seed)
    scale = [0.2, 1.5, 3.0]
    a = SO2BlockLaw(6, law, scale).sample_angles(3000, seed=23)
    assert a.shape == (3000, 3)
    for b, s in enumerate(scale):
        assert stats.kstest(a[:, b], reference(s).cdf).pvalue > 1e-3


def test_so2_rope_angles_are_the_scales():
    law = SO2BlockLaw(4, "rope", [0.25, 2.0])
    a = law.sample_angles(3, seed=0)
    np.testing.assert_array_equal(a, [[0.25, 2.0]] * 3)
    a[0, 0] = 9.0  # a writable copy, not a view of the law's scale
    assert law.scale[0] == 0.25


def test_householder_repr_and_fixed_vectors():
    w = np.array([0.0, 0.6, 0.8])
    law = HouseholderLaw(3, 0.5, w)
    assert repr(law) == "HouseholderLaw(d=3, beta=0.5, w=fixed)"
    assert repr(HouseholderLaw(2, 1)) == "HouseholderLaw(d=2, beta=1.0, w=random)"
    v = law.sample_vectors(4, seed=0)
    np.testing.assert_array_equal(v, np.tile(w, (4, 1)))
    v[0, 0] = 5.0  # a writable copy
    assert law.w[0] == 0.0
    assert not law.is_orthogonal and HouseholderLaw(3, 2.0, w).is_orthogonal


def test_householder_random_directions_are_uniform_on_the_sphere():
    # w = g/‖g‖ for Gaussian g (the seed's draws); w_1² ~ Beta(1/2, (d − 1)/2) (KS, 0.001)
    d = 4
    law = HouseholderLaw(d, 1.0)
    w = law.sample_vectors(2000, seed=24)
    g = np.random.default_rng(24).standard_normal((2000, d))
    np.testing.assert_allclose(w, g / np.linalg.norm(g, axis=1)[:, None], rtol=1e-15, atol=0)
    assert stats.kstest(w[:, 0] ** 2, stats.beta(0.5, (d - 1) / 2).cdf).pvalue > 1e-3


def test_phase_paths_are_running_sums_of_consecutive_draws():
    law = SO2BlockLaw(4, "uniform", [0.5, 2.0])
    rng, ref_rng = np.random.default_rng(25), np.random.default_rng(25)
    paths = phase_paths(law, 5, [6, 2, 3, 3], rng)
    assert sorted(paths) == [2, 3, 6]
    draws = ref_rng.uniform(-law.scale, law.scale, size=(6, 5, 2))  # one (5, 2) draw per step
    cum = np.cumsum(draws, axis=0)
    for L in (2, 3, 6):
        np.testing.assert_allclose(paths[L], cum[L - 1], rtol=0, atol=1e-14)
    # exactly max(checkpoints) draws were taken from the caller's Generator
    assert rng.random() == ref_rng.random()
    paths[6][0, 0] = 99.0  # each checkpoint is its own array
    assert paths[3][0, 0] != 99.0 and paths[2][0, 0] != 99.0


def test_float32_inputs_are_computed_in_float64():
    # angles, scales and directions given in float32 give exactly what their float64 values give
    a32 = np.float32([0.3, 1.7, -2.9])
    a64 = a32.astype(np.float64)
    np.testing.assert_array_equal(so2_matrices(a32), so2_matrices(a64))
    s32 = np.abs(a32)
    for law in ("uniform", "normal", "positive_uniform"):
        c32 = SO2BlockLaw(6, law, s32).characteristic()
        np.testing.assert_array_equal(c32, SO2BlockLaw(6, law, np.abs(a64)).characteristic())
        assert c32.dtype == np.complex128  # documented: a complex array
    # float32(0.6, 0.8) has norm 1 + 2.4e-8 in float64: not a unit vector within 1e-12
    with pytest.raises(ValueError, match=r"^w must be a unit vector .*got norm 1\.00000002"):
        HouseholderLaw(2, 1.0, np.float32([0.6, 0.8]))


def test_block_indices_default_pairing_is_half():
    assert [list(v) for v in block_indices(4)] == [[0, 1], [2, 3]]
    with pytest.raises(ValueError, match=r"^d must be >= 1; got 0$"):
        HouseholderLaw(0, 1.0)
