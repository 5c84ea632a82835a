"""Tests of posflow.theory._transport_mass against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

from posflow.theory import _transport_mass as tm
from posflow.theory import transport as tr

DPS = 40  # digits of the mpmath references, far below the float64 tolerances used


@mpmath.workdps(DPS)
def mp_far_mass(near, far):
    """Σ_far e^{f} / (Σ_far e^{f} + Σ_near e^{n}), summed term by term in mpmath."""
    f = mpmath.fsum(mpmath.exp(x) for x in far)
    return float(f / (f + mpmath.fsum(mpmath.exp(x) for x in near)))


@mpmath.workdps(DPS)
def mp_alibi_far_mass(s, m, w):
    """Σ_{n≥W} e^{s_n - mn} / Σ_n e^{s_n - mn}, summed term by term in mpmath."""
    terms = [mpmath.exp(mpmath.mpf(x) - mpmath.mpf(m) * n) for n, x in enumerate(s)]
    return float(mpmath.fsum(terms[w:]) / mpmath.fsum(terms))


# ----------------------------------------------------------------------------------------------
# AT10: the far-mass lower bound M/(M + K e^{2λ})
# ----------------------------------------------------------------------------------------------


def test_far_mass_derivation_expressions():
    """ρ = (e^x + A)/(e^x + A + e^y + B); by the quotient rule ∂ρ/∂x = e^x (e^y + B)/S² and
    ∂ρ/∂y = -e^y (e^x + A)/S² with S the denominator; the corner M e^{-λ}/(M e^{-λ} + K e^{λ})."""
    d = tr.far_mass_derivation()
    x, y = sp.symbols("x y", real=True)
    a, b = sp.symbols("A B", nonnegative=True)
    m, k = sp.symbols("M K", positive=True)
    lam = sp.Symbol("lambda", nonnegative=True)
    s = sp.exp(x) + a + sp.exp(y) + b
    assert d.rho == (sp.exp(x) + a) / s
    assert d.d_rho_d_far == sp.factor(sp.exp(x) * (sp.exp(y) + b) / s**2)
    assert d.d_rho_d_near == sp.factor(-sp.exp(y) * (sp.exp(x) + a) / s**2)
    assert d.corner_value == m * sp.exp(-lam) / (m * sp.exp(-lam) + k * sp.exp(lam))
    assert d.bound == m / (m + k * sp.exp(2 * lam))
    assert d.limit_m_to_infinity == 1
    flags = ("far_derivative_positive", "near_derivative_negative", "corner_equals_bound",
             "limit_is_one", "increasing_in_m", "decreasing_in_lambda")  # fmt: skip
    assert all(getattr(d, f) is True for f in flags) and d.proven is True


@pytest.mark.parametrize(
    "flag",
    ["far_derivative_positive", "near_derivative_negative", "corner_equals_bound",
     "limit_is_one", "increasing_in_m", "decreasing_in_lambda"],
)  # fmt: skip
def test_far_mass_derivation_proven_needs_every_fact(flag):
    import dataclasses

    d = dataclasses.replace(tr.far_mass_derivation(), **{flag: False})
    assert d.proven is False


# (near logits, far logits): single tokens, unequal lengths, logits in the thousands
_FAR_MASS_CASES = [([0.0], [0.0]), ([1.0, -2.0], [0.5]), ([3.0], [-1.0, 2.0, 0.25]),
                   ([1000.0, 999.0], [998.0]), ([-700.0], [-710.0, -705.0])]  # fmt: skip


@pytest.mark.parametrize(("near", "far"), _FAR_MASS_CASES)
def test_far_mass_against_direct_sum(near, far):
    got = tr.far_mass(near, far)
    assert type(got) is float
    assert got == pytest.approx(mp_far_mass(near, far), rel=1e-14)  # a few ulps of lse/expit


def test_far_mass_broadcasts_leading_dimensions():
    rng = np.random.default_rng(0)
    near = rng.normal(size=(3, 1, 4))
    far = rng.normal(size=(5, 2))
    got = tr.far_mass(near, far)
    assert got.shape == (3, 5)
    want = [[mp_far_mass(near[i, 0], far[j]) for j in range(5)] for i in range(3)]
    np.testing.assert_allclose(got, want, rtol=1e-14)
    # one side without leading dimensions: it is shared by every row of the other
    near, far = near[0, 0, :3], far[:2]
    for got, want in [(tr.far_mass(near, far), [mp_far_mass(near, f) for f in far]),
                      (tr.far_mass(far, near), [mp_far_mass(f, near) for f in far])]:  # fmt: skip
        assert got.shape == (2,)
        np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize(
    ("near", "far", "message"),
    [(0.5, [0.0], "near_logits must have a last axis of length K >= 1"),
     (np.zeros((2, 0)), [0.0], "near_logits must have a last axis of length K >= 1"),
     ([0.0], 0.5, "far_logits must have a last axis of length M >= 1"),
     ([0.0], np.zeros((3, 0)), "far_logits must have a last axis of length M >= 1"),
     (np.zeros((2, 3)), np.zeros((3, 3)), "near_logits and far_logits must have broadcastable "
      "leading shapes; got (2, 3) and (3, 3)"),
     ([np.nan], [0.0], "near_logits must not be NaN; got np.float64(nan) at index 0"),
     ([0.0], [-np.inf], "far_logits must be finite; got np.float64(-inf) at index 0")],
)  # fmt: skip
def test_far_mass_argument_errors(near, far, message):
    with pytest.raises(ValueError) as info:
        tr.far_mass(near, far)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("m", "k", "lam"),
    [(1, 1, 0.0), (1.0, 3.0, 0.75), (2.5, 1.0, 2.0), (10_000, 4, 3.0), (3, 2, 40.0)],
)
def test_far_mass_bounds_against_closed_form(m, k, lam):
    """M/(M + K e^{2λ}) and K e^{2λ}/(M + K e^{2λ}) in 40-digit mpmath (λ = 40: e^{80})."""
    low, high = tr.far_mass_lower_bound(m, k, lam), tr.near_signal_upper_bound(m, k, lam)
    assert type(low) is float and type(high) is float
    with mpmath.workdps(DPS):
        e2 = mpmath.exp(2 * mpmath.mpf(lam))
        assert low == pytest.approx(float(m / (m + k * e2)), rel=1e-14)
        assert high == pytest.approx(float(k * e2 / (m + k * e2)), rel=1e-14)


def test_far_mass_bounds_broadcast():
    m, k, lam = np.array([1.0, 5.0, 50.0]), np.array([[1.0], [2.0]]), 0.5
    want = m / (m + k * math.exp(1.0))
    for got, ref in [(tr.far_mass_lower_bound(m, k, lam), want),
                     (tr.near_signal_upper_bound(m, k, lam), 1.0 - want)]:  # fmt: skip
        assert got.shape == (2, 3)
        np.testing.assert_allclose(got, ref, rtol=1e-14)


_BOUND_ERRORS = [
    ((0.5, 1, 1.0), ValueError, "M must be >= 1; got np.float64(0.5)"),
    ((1, 0.5, 1.0), ValueError, "K must be >= 1; got np.float64(0.5)"),
    ((1, 1, -0.5), ValueError, "lam must be >= 0; got np.float64(-0.5)"),
    ((1, 1, np.inf), ValueError, "lam must be finite; got np.float64(inf)"),
    ((1, 1, "1"), TypeError, "lam must be a real number or array of real numbers; got dtype <U1"),
]


@pytest.mark.parametrize("fn", [tr.far_mass_lower_bound, tr.near_signal_upper_bound])
@pytest.mark.parametrize(("args", "error", "message"), _BOUND_ERRORS)
def test_far_mass_bound_argument_errors(fn, args, error, message):
    with pytest.raises(error) as info:
        fn(*args)
    assert str(info.value) == message


@pytest.mark.parametrize(("m", "k", "lam"), [(1, 1, 0.0), (3, 2, 1.5), (2.0, 5, 0.25)])
def test_far_mass_minimiser_is_the_corner(m, k, lam):
    near, far = tr.far_mass_minimiser(m, k, lam)
    assert near.dtype == np.float64 and far.dtype == np.float64
    np.testing.assert_array_equal(near, np.full(k, lam))
    np.testing.assert_array_equal(far, np.full(int(m), -lam))
    # the corner value M e^{-λ}/(M e^{-λ} + K e^{λ}) is the closed-form bound
    assert mp_far_mass(near, far) == pytest.approx(m / (m + k * math.exp(2 * lam)), rel=1e-14)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [((0, 1, 1.0), ValueError, "M must be an integer >= 1; got np.int64(0)"),
     ((1, 0, 1.0), ValueError, "K must be an integer >= 1; got np.int64(0)"),
     ((1, 1, -1.0), ValueError, "lam must be >= 0; got np.float64(-1.0)"),
     ((1, 1, [1.0]), TypeError, "lam must be a scalar; got an array of shape (1,)")],
)  # fmt: skip
def test_far_mass_minimiser_argument_errors(args, error, message):
    with pytest.raises(error) as info:
        tr.far_mass_minimiser(*args)
    assert str(info.value) == message


# ----------------------------------------------------------------------------------------------
# AT13: ALiBi far mass
# ----------------------------------------------------------------------------------------------


def test_alibi_derivation_expressions():
    """Geometric sums Σ_{n=0}^{W-1} e^{-mn} = (1 - e^{-mW})/(1 - e^{-m}) and
    Σ_{n=W}^{L-1} e^{-mn} = (e^{-mW} - e^{-mL})/(1 - e^{-m}); the L → ∞ limit and the ratio bound
    typed in from the digest."""
    d = tr.alibi_far_mass_derivation()
    m, lam = sp.symbols("m lambda", positive=True)
    big_l, w = sp.symbols("L W", positive=True)
    a, e = sp.symbols("a E", positive=True)
    s = sp.Symbol("s", nonnegative=True)
    q = sp.exp(-m)
    assert d.near_sum == (1 - sp.exp(-m * w)) / (1 - q)
    assert d.far_sum == (sp.exp(-m * w) - sp.exp(-m * big_l)) / (1 - q)
    far, near = sp.exp(lam) * d.far_sum, sp.exp(-lam) * d.near_sum
    assert d.sup_far_mass == far / (far + near)
    assert d.reparametrised == a * s / (a * s + e)
    assert d.s_limit == 1
    closed = sp.exp(2 * lam) / (sp.exp(2 * lam) + sp.exp(m * w) - 1)
    assert d.limit_closed_form == closed and d.limit_l_to_infinity == closed
    assert d.ratio_bound == sp.exp(2 * lam) / (sp.exp(m * w) - 1)
    flags = ("reparametrisation_exact", "increasing_in_s", "s_increasing_in_l", "limit_matches",
             "limit_free_of_l", "ratio_bound_dominates")  # fmt: skip
    assert all(getattr(d, f) is True for f in flags) and d.bounded_in_l is True


@pytest.mark.parametrize(
    ("field", "value"),
    [("reparametrisation_exact", False), ("increasing_in_s", False),
     ("s_increasing_in_l", False), ("s_limit", sp.Rational(1, 2)), ("limit_matches", False),
     ("limit_free_of_l", False)],
)  # fmt: skip
def test_alibi_bounded_in_l_needs_every_fact(field, value):
    import dataclasses

    d = dataclasses.replace(tr.alibi_far_mass_derivation(), **{field: value})
    assert d.bounded_in_l is False


def test_geometric_sum_keeps_the_ratio_not_one_branch():
    m = sp.Symbol("m", positive=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    got = tm._geometric(sp.exp(-m * n), n, 2, 5, sp.exp(-m))
    assert sp.simplify(got - sum(sp.exp(-m * k) for k in range(2, 6))) == 0
    assert tm._geometric(n, n, 0, 4, sp.exp(-m)) == 10  # no branches: returned as is
    w = sp.Symbol("W", positive=True)
    got = tm._geometric(sp.exp(-m * n), n, 0, w - 1, sp.exp(-m))
    assert sp.simplify(got - (1 - sp.exp(-m * w)) / (1 - sp.exp(-m))) == 0
    with pytest.raises(RuntimeError, match=r"^unexpected geometric-sum branches: Piecewise"):
        tm._geometric(sp.exp(-m * n), n, 0, w - 1, sp.exp(-2 * m))


@pytest.mark.parametrize(
    ("s", "m", "w"),
    [([0.5, -1.0, 2.0, 0.0, 1.5], 0.3, 2), ([0.0, 0.0, 0.0], 0.0, 1), ([1.0, -1.0], 2.0, 1),
     (list(np.linspace(-3.0, 3.0, 40)), 0.05, 7), ([700.0, 705.0, 710.0], 1.0, 2)],
)  # fmt: skip
def test_alibi_far_mass_against_direct_sum(s, m, w):
    got = tr.alibi_far_mass(s, m, w)
    assert type(got) is float
    assert got == pytest.approx(mp_alibi_far_mass(s, m, w), rel=1e-13)  # lse of ≤ 40 terms


def test_alibi_far_mass_rows_and_short_rows():
    rng = np.random.default_rng(1)
    s = rng.uniform(-2.0, 2.0, size=(2, 3, 9))
    got = tr.alibi_far_mass(s, 0.4, 3)
    assert got.shape == (2, 3)
    want = [[mp_alibi_far_mass(row, 0.4, 3) for row in block] for block in s]
    np.testing.assert_allclose(got, want, rtol=1e-13)
    for length in (1, 3):  # L ≤ W: the far set is empty
        short = tr.alibi_far_mass(np.ones((4, 2, length)), 0.4, 3)
        assert short.shape == (4, 2) and short.dtype == np.float64 and np.all(short == 0.0)
    assert tr.alibi_far_mass([1.0, 2.0, 3.0], 0.4, 3) == 0.0


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [((1.0, 0.5, 1), ValueError, "content_logits must have a last axis of length L >= 1"),
     ((np.zeros((2, 0)), 0.5, 1), ValueError,
      "content_logits must have a last axis of length L >= 1"),
     (([0.0, 1.0], -0.5, 1), ValueError, "m must be >= 0; got np.float64(-0.5)"),
     (([0.0, 1.0], 0.5, 0), ValueError, "W must be an integer >= 1; got np.int64(0)"),
     (([0.0, np.inf], 0.5, 1), ValueError,
      "content_logits must be finite; got np.float64(inf) at index 1")],
)  # fmt: skip
def test_alibi_far_mass_argument_errors(args, error, message):
    with pytest.raises(error) as info:
        tr.alibi_far_mass(*args)
    assert str(info.value) == message


def mp_alibi_corner(m, w, lam, length):
    """The far mass at the corner (near content -λ, far +λ) by direct summation."""
    return mp_alibi_far_mass([-lam] * w + [lam] * (length - w), m, w)


@pytest.mark.parametrize(
    ("m", "w", "lam"), [(0.5, 3, 1.0), (1.0, 1, 0.0), (2.0**-6, 16, 2.5), (3.0, 2, 0.5)]
)
def test_alibi_bound_against_corner_sum_and_limit(m, w, lam):
    """Finite L: the corner sum (attained); L = None: e^{2λ}/(e^{2λ} + e^{mW} - 1) in mpmath."""
    lengths = [1, w, w + 1, w + 2, 3 * w + 5, 200]
    got = tr.alibi_far_mass_bound(m, w, lam, lengths)
    assert got.dtype == np.float64 and got.shape == (6,)
    want = [0.0 if n <= w else mp_alibi_corner(m, w, lam, n) for n in lengths]
    np.testing.assert_allclose(got, want, rtol=1e-13, atol=0.0)
    one = tr.alibi_far_mass_bound(m, w, lam, w + 2)
    assert type(one) is float and one == pytest.approx(want[3], rel=1e-13)
    limit = tr.alibi_far_mass_bound(m, w, lam)
    assert type(limit) is float
    with mpmath.workdps(DPS):
        e2 = mpmath.exp(2 * mpmath.mpf(lam))
        assert limit == pytest.approx(float(e2 / (e2 + mpmath.expm1(m * w))), rel=1e-14)


def test_alibi_ratio_bound_against_closed_form():
    """e^{2λ}/(e^{mW} - 1) in 40-digit mpmath, small mW included (expm1), and above 1."""
    for m, w, lam in [(0.5, 3, 1.0), (1e-10, 1, 0.0), (2.0, 4, 3.0), (0.25, 8, 0.0)]:
        with mpmath.workdps(DPS):
            want = mpmath.exp(2 * mpmath.mpf(lam)) / mpmath.expm1(mpmath.mpf(m) * w)
        assert tr.alibi_far_mass_ratio_bound(m, w, lam) == pytest.approx(float(want), rel=1e-13)
    assert tr.alibi_far_mass_ratio_bound(1e-10, 1, 0.0) > 1.0


def test_alibi_ratio_bound_overflow():
    """mW = 40: e^{mW} - 1 rounds to e^{mW}, so ln(value) = 2λ - 40 exactly in float64."""
    finite = tr.alibi_far_mass_ratio_bound(1.0, 40, 374.0)
    assert finite == pytest.approx(math.exp(708.0), rel=1e-14)  # libm exp: an ulp or two
    assert tr.alibi_far_mass_ratio_bound(1.0, 40, 374.95) == math.inf  # e^{709.9} > 1.8e308
    # finite up to the largest float64 (ln 1.797e308 = 709.78): e^{709.5} is 1.355e308
    assert tr.alibi_far_mass_ratio_bound(1.0, 40, 374.75) == pytest.approx(math.exp(709.5),
                                                                            rel=1e-14)  # fmt: skip
    assert tr.alibi_far_mass_ratio_bound(1.0, 40, 1000.0) == math.inf


_ALIBI_BOUND_ERRORS = [
    ((0.0, 4, 1.0), ValueError, "m must be > 0; got np.float64(0.0)"),
    ((np.inf, 4, 1.0), ValueError, "m must be finite; got np.float64(inf)"),
    ((0.5, 0, 1.0), ValueError, "W must be an integer >= 1; got np.int64(0)"),
    ((0.5, 4, -1.0), ValueError, "lam must be >= 0; got np.float64(-1.0)"),
    ((0.5, 4, [1.0]), TypeError, "lam must be a scalar; got an array of shape (1,)"),
]


@pytest.mark.parametrize(("args", "error", "message"), _ALIBI_BOUND_ERRORS)
@pytest.mark.parametrize("fn", [tr.alibi_far_mass_bound, tr.alibi_far_mass_ratio_bound])
def test_alibi_bound_argument_errors(fn, args, error, message):
    with pytest.raises(error) as info:
        fn(*args)
    assert str(info.value) == message


def test_alibi_bound_length_errors():
    with pytest.raises(ValueError) as info:
        tr.alibi_far_mass_bound(0.5, 4, 1.0, [8, 0])
    assert str(info.value) == "L must be an integer >= 1; got np.int64(0) at index 1"


def test_ratio_bound_at_exactly_the_overflow_threshold_is_finite():
    """m = 5.562684646267895e-309 (W = 1, λ = 0) makes ln(value) = −ln(1 − e^{−m}) land exactly on
    ln(max float64) (rounded): the value ≈ 1/m is finite, e^{ln max} = 1.79769313486227e308."""
    from posflow.theory._transport_mass import _LOG_MAX, alibi_far_mass_ratio_bound

    m = 5.562684646267895e-309
    assert -np.log(-np.expm1(-m)) == _LOG_MAX
    got = alibi_far_mass_ratio_bound(m, 1, 0.0)
    assert np.isfinite(got) and got == float(np.exp(_LOG_MAX))
