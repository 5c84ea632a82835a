"""The continuous-depth limit (PB18): the closed form against a Monte Carlo of the compound
Poisson law, a quadrature, the binomial-mixture mean identity and the float rollout."""

import math

import numpy as np
import pytest
from scipy import integrate, stats

from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import constant, influence
from posflow.theory import rollout as th


def test_the_limit_profile_is_a_probability_vector_equal_to_its_quadrature():
    p = th.continuum_profile(48, 1.5)
    assert (p >= 0).all() and p.sum() == pytest.approx(1.0, abs=1e-14)
    np.testing.assert_allclose(p, th.continuum_profile_quadrature(48, 1.5), atol=1e-12)


def test_profile_from_moments_against_closed_forms():
    import mpmath

    # X ~ U[0, 1] (moments 1/(k+1)): j is uniform on 0..n−1; X ≡ x0 (moments x0^k): Binomial
    n = 12
    p = th.profile_from_moments(lambda k: mpmath.mpf(1) / (k + 1), n, n + 30)
    np.testing.assert_allclose(p, np.full(n, 1 / n), rtol=1e-14)
    x0 = mpmath.mpf(3) / 10
    p = th.profile_from_moments(lambda k: x0**k, n, n + 30)
    np.testing.assert_allclose(p, stats.binom.pmf(np.arange(n), n - 1, 0.3), rtol=1e-12)
    # the limit profile is the profile of its moments e^{−Λk/(k+1)}
    L = mpmath.mpf(2)
    q = th.profile_from_moments(lambda k: mpmath.exp(-L * k / (k + 1)), 30, 70)
    np.testing.assert_array_equal(q, th.continuum_profile(30, 2.0))


def test_mean_position_is_the_mean_of_x():
    # j | X ~ Binomial(n−1, X), so E[j/(n−1)] = E[X] = m_1 = e^{−Λ/2} for every n
    for n, Lam in ((2, 0.3), (17, 1.0), (60, 3.0)):
        p = th.continuum_profile(n, Lam)
        assert np.dot(np.arange(n), p) / (n - 1) == pytest.approx(math.exp(-Lam / 2), rel=1e-12)
    assert th.continuum_moments(1.0, 2) == pytest.approx([1, math.exp(-0.5), math.exp(-2 / 3)])


def test_monte_carlo_of_the_compound_poisson_law():
    rng = np.random.default_rng(0)
    n, Lam, N = 12, 2.0, 200_000
    K = rng.poisson(Lam, N)
    G = np.where(K > 0, rng.gamma(np.maximum(K, 1), 1.0), 0.0)
    j = rng.binomial(n - 1, np.exp(-G))
    emp = np.bincount(j, minlength=n) / N
    p = th.continuum_profile(n, Lam)
    se = np.sqrt(p * (1 - p) / N)
    assert np.all(np.abs(emp - p) <= 5 * se + 1e-12)  # 5 standard errors per entry, 12 entries


def test_the_float_rollout_approaches_the_limit_at_first_order():
    n, Lam = 32, 2.0
    p, d = th.continuum_profile(n, Lam), th.continuum_correction(n, Lam)
    assert d.sum() == pytest.approx(0.0, abs=1e-14)
    rem = []
    for T in (256, 512, 1024):
        ml = Lam / T
        pT = influence(uniform_kernel(n), constant(ml, T))
        rem.append(np.abs(pT - p - ml * d).max())
    # the remainder is second order: halving max λ divides it by 4 (to O(max λ))
    assert rem[0] / rem[1] == pytest.approx(4, rel=0.02)
    assert rem[1] / rem[2] == pytest.approx(4, rel=0.01)


def test_the_density_of_g_is_the_poisson_gamma_series():
    Lam = 1.7
    for y in (0.05, 0.7, 3.0, 12.0):
        series = sum(stats.poisson.pmf(k, Lam) * stats.gamma.pdf(y, k) for k in range(1, 80))
        assert float(th.continuum_law_density(y, Lam)) == pytest.approx(series, rel=1e-12)
    mass, _ = integrate.quad(lambda y: float(th.continuum_law_density(y, Lam)), 0, np.inf)
    assert mass == pytest.approx(1 - math.exp(-Lam), abs=1e-10)
    assert float(th.continuum_law_density(1e6, Lam)) == 0.0  # no overflow at large y


def test_the_sympy_identities_hold():
    assert th.continuum_moment_derivation() == {"discrete_limit": 0, "compound_poisson": 0}


BAD = [(0, 1.0, "n"), (3, -1.0, "Lam"), (3, math.nan, "Lam"), (2.5, 1.0, "n")]


@pytest.mark.parametrize(("n", "Lam", "match"), BAD)
def test_bad_input_names_the_argument(n, Lam, match):
    with pytest.raises(ValueError, match=match):
        th.continuum_profile(n, Lam)


# ---------------------------------------------------------------------------------------------
# messages, Λ = 0, the density at y = 0, the quadrature's accuracy and the working precision
# ---------------------------------------------------------------------------------------------

import mpmath  # noqa: E402

BAD_EXACT = [
    (lambda: th.continuum_profile(0, 1.0), "n must be a positive integer; got 0"),
    (lambda: th.continuum_profile(True, 1.0), "n must be a positive integer; got True"),
    (lambda: th.continuum_correction(2.5, 1.0), "n must be a positive integer; got 2.5"),
    (lambda: th.continuum_profile_quadrature(3, -1.0),
     "Lam must be a finite number >= 0; got -1.0"),
    (lambda: th.continuum_moments(math.inf, 3), "Lam must be a finite number >= 0; got inf"),
    (lambda: th.continuum_law_density(1.0, math.nan), "Lam must be a finite number >= 0; got nan"),
]


@pytest.mark.parametrize(("call", "message"), BAD_EXACT)
def test_bad_input_messages_are_exact(call, message):
    with pytest.raises(ValueError) as info:
        call()
    assert str(info.value) == message


def test_lambda_zero_is_the_point_mass_at_the_last_position():
    """Λ = 0: every λ_t = 0, X ≡ 1, so j = n − 1 surely; G ≡ 0 has no density on y > 0."""
    n = 7
    point = np.eye(n)[-1]
    np.testing.assert_array_equal(th.continuum_profile(n, 0.0), point)
    np.testing.assert_allclose(th.continuum_profile_quadrature(n, 0), point, rtol=0, atol=0)
    np.testing.assert_array_equal(th.continuum_correction(n, 0.0), np.zeros(n))
    np.testing.assert_array_equal(th.continuum_moments(0.0, 4), np.ones(5))
    np.testing.assert_array_equal(th.continuum_law_density([0.5, 3.0], 0.0), [0.0, 0.0])


def test_the_density_is_zero_at_y_zero():
    """y = 0 carries no density (G's atom at 0 aside), with no warning."""
    Lam = 1.7
    f = th.continuum_law_density([0.0, 0.7], Lam)
    assert f.dtype == np.float64
    series = sum(stats.poisson.pmf(k, Lam) * stats.gamma.pdf(0.7, k) for k in range(1, 80))
    assert f[0] == 0.0 and f[1] == pytest.approx(series, rel=1e-12)
    assert th.continuum_law_density(0.0, Lam) == 0.0
    assert th.continuum_law_density(0, 0.0) == 0.0  # Λ = y = 0: 0/0 inside, masked


def test_the_density_is_computed_in_float64_for_float32_input():
    """A float32 y is read as the float64 number it stores: the Poisson-Gamma series there."""
    y = np.float32(0.7)
    Lam = 1.7
    series = sum(stats.poisson.pmf(k, Lam) * stats.gamma.pdf(float(y), k) for k in range(1, 80))
    f = th.continuum_law_density(y, Lam)
    assert f.dtype == np.float64 and float(f) == pytest.approx(series, rel=1e-12)


def test_quadrature_reaches_its_requested_relative_accuracy():
    """quad is asked for 1e-12 relative (and 1e-14 absolute): every entry of the n = 8 profile
    (smallest ≈ 0.04) matches the mpmath closed form to rtol 1e-12."""
    p = th.continuum_profile(8, 1.0)
    np.testing.assert_allclose(th.continuum_profile_quadrature(8, 1.0), p, rtol=1e-12, atol=0)


def test_the_closed_forms_are_evaluated_at_n_plus_40_digits():
    """The documented working precision: at Λ = 1e-45 (n = 5) the entries j < n − 1 are ≈ Λ,
    below the 45 digits kept next to the atom, so they show the number of digits used."""
    n, Lam = 5, 1e-45
    L = mpmath.mpf(Lam)
    ref = th.profile_from_moments(lambda k: mpmath.exp(-L * k / (k + 1)), n, n + 40)
    np.testing.assert_array_equal(th.continuum_profile(n, Lam), ref)
    finer = th.profile_from_moments(lambda k: mpmath.exp(-L * k / (k + 1)), n, n + 41)
    assert not np.array_equal(ref, finer)  # the digits do show here


def test_density_is_zero_without_warnings_off_the_support():
    """f(y) = 0 for y ≤ 0 with no √ of a negative number (filterwarnings = error)."""
    from posflow.theory._continuum import continuum_law_density

    got = continuum_law_density(np.array([-3.0, -1e-300, 0.0]), 2.0)
    assert got.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize(("n", "Lam"), [(5, 700.0), (5, 1e4), (3, 50.0)])
def test_quadrature_finds_the_bulk_at_large_total_mixing(n, Lam):
    """At Λ = 700 one quad over [0, ∞) returned p(0) ≈ 4e-33 (the bulk near y ≈ Λ missed); the
    split quadrature agrees with the moments route. Tolerance: quad's requested 1e-12 relative
    and 1e-14 absolute per interval, 3 intervals, n entries ≤ 1: 1e-11."""
    from posflow.theory._continuum import continuum_profile, continuum_profile_quadrature

    got = continuum_profile_quadrature(n, Lam)
    np.testing.assert_allclose(got, continuum_profile(n, Lam), rtol=0, atol=1e-11)


@pytest.mark.parametrize(("y", "Lam", "want"), [
    (np.inf, 2.0, 0.0),  # +∞: off the support, not NaN
    (1e-320, 2.0, 2.0 * np.exp(-2.0)),  # y → 0⁺: the limit Λ e^{−Λ} (Λ/y would overflow)
    (1e-300, 1e-30, 1e-30 * np.exp(-1e-30)),  # Λ y underflows to 0: z = 0, the same limit
])  # fmt: skip
def test_the_density_at_the_ends_of_its_support(y, Lam, want):
    """The limits written out, with no warning (filterwarnings = error): f → Λ e^{−Λ} as
    y → 0⁺ (I_1(z) ≈ z/2) and f(∞) = 0."""
    assert float(th.continuum_law_density(y, Lam)) == pytest.approx(want, rel=1e-12, abs=0)


def test_the_density_refuses_nan():
    with pytest.raises(ValueError, match=r"^y must not be NaN$"):
        th.continuum_law_density([0.5, np.nan], 1.0)


@pytest.mark.parametrize(("n", "Lam"), [(5, 0.3), (4, 0.05)])
def test_quadrature_at_small_total_mixing(n, Lam):
    """Λ < 1/2: the bulk window Λ ± 12(√(2Λ) + 1) reaches below 0 and is clipped there; the
    quadrature equals the mpmath closed form to quad's requested 1e-12 relative."""
    got, want = th.continuum_profile_quadrature(n, Lam), th.continuum_profile(n, Lam)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)


def test_quadrature_keeps_its_relative_accuracy_on_tiny_entries():
    """At Λ = 50 the entries j = 1, 2 are 5.6e-11 and 1.9e-14: quad's absolute floor 1e-14
    (not the default 1.5e-8) keeps them to 1e-6 relative against the closed form."""
    got, want = th.continuum_profile_quadrature(5, 50.0), th.continuum_profile(5, 50.0)
    assert 1e-15 < want[2] < 1e-13
    np.testing.assert_allclose(got[:3], want[:3], rtol=1e-6, atol=0)


# ---------------------------------------------------------------------------------------------
# the integer binomial recurrence of profile_from_moments against mpmath.binomial
# ---------------------------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _profile_with_mpmath_binomials(moment, n, dps):
    """The former evaluation: every binomial by ``mpmath.binomial`` at ``dps`` digits."""
    with mpmath.workdps(dps):
        m = [moment(kk) for kk in range(n)]
        out = []
        for j in range(n):
            N = n - 1 - j
            s = mpmath.fsum((-1) ** r * mpmath.binomial(N, r) * m[j + r] for r in range(N + 1))
            out.append(mpmath.binomial(n - 1, j) * s)
        return np.array([float(x) for x in out])


def test_mpmath_binomials_are_the_exact_integers_at_the_working_precision():
    """The premise of the recurrence: at n + 40 digits mpmath.binomial(N, r) equals math.comb
    exactly for every N < n (the largest, C(127, 63), has 38 digits)."""
    for n in (16, 64, 128):
        with mpmath.workdps(n + 40):
            for N in range(n):
                assert [mpmath.binomial(N, r) for r in range(N + 1)] == [
                    math.comb(N, r) for r in range(N + 1)
                ]


@pytest.mark.parametrize("n", [1, 2, 3, 16, 64, 128])
@pytest.mark.parametrize("Lam", [0.0, 0.5, 2.0])
def test_the_closed_forms_equal_their_mpmath_binomial_evaluation_bit_for_bit(n, Lam):
    """continuum_profile and continuum_correction as floats are identical (not merely close) to
    the evaluation with mpmath.binomial: each term is one rounding of the same exact product."""
    L = mpmath.mpf(Lam)

    def corr(kk):
        u = mpmath.mpf(kk) / (kk + 1)
        return -L / 2 * u**2 * mpmath.exp(-L * u)

    want = _profile_with_mpmath_binomials(lambda kk: mpmath.exp(-L * kk / (kk + 1)), n, n + 40)
    np.testing.assert_array_equal(th.continuum_profile(n, Lam), want)
    np.testing.assert_array_equal(th.continuum_correction(n, Lam),
                                  _profile_with_mpmath_binomials(corr, n, n + 40))  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.fractions(min_value=-1, max_value=1, max_denominator=10**6), min_size=1,
             max_size=24),
    st.integers(min_value=0, max_value=30),
)  # fmt: skip
def test_profile_from_moments_is_exactly_the_mpmath_binomial_sum(moments, extra_dps):
    """Any moment sequence (rationals in [−1, 1] as mpf, dps = n + 10 … n + 40 digits): the
    floats are identical to the evaluation with mpmath.binomial."""
    n = len(moments)
    dps = n + 10 + extra_dps

    def moment(kk):
        return mpmath.mpf(moments[kk].numerator) / moments[kk].denominator

    np.testing.assert_array_equal(th.profile_from_moments(moment, n, dps),
                                  _profile_with_mpmath_binomials(moment, n, dps))  # fmt: skip


def test_profile_from_moments_takes_plain_numbers_as_moments():
    """A moment given as a Python float is used exactly (as mpmath.binomial · float did)."""
    n = 9
    want = _profile_with_mpmath_binomials(lambda kk: 0.5**kk, n, n + 30)
    np.testing.assert_array_equal(th.profile_from_moments(lambda kk: 0.5**kk, n, n + 30), want)
    np.testing.assert_allclose(want, stats.binom.pmf(np.arange(n), n - 1, 0.5), rtol=1e-14)
