"""posflow.simulate.kernels against an independent dense softmax reference."""

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.special import softmax

from posflow.simulate.kernels import (
    DenseKernel,
    alibi_kernel,
    alibi_kernels,
    alibi_slopes,
    dense_kernel,
    is_stochastically_monotone,
    monotonicity_deficit,
    uniform_kernel,
)


def reference_alibi(n, slopes, content, weights=None):
    """Row-by-row causal softmax of c[i=j] - m(i-j), averaged over heads (plain loops)."""
    m = np.atleast_1d(np.asarray(slopes, float))
    c = np.atleast_1d(np.asarray(content, float))
    H = max(m.size, c.size)
    m, c = np.broadcast_to(m, (H,)), np.broadcast_to(c, (H,))
    w = np.full(H, 1.0 / H) if weights is None else np.asarray(weights) / np.sum(weights)
    A = np.zeros((n, n))
    for h in range(H):
        for i in range(n):
            j = np.arange(i + 1)
            A[i, : i + 1] += w[h] * softmax(c[h] * (j == i) - m[h] * (i - j))
    return A


heads = st.integers(1, 4)
floats = dict(allow_nan=False, allow_infinity=False)


@st.composite
def alibi_cases(draw, slope_lo=0.0, slope_hi=3.0, c_abs=50.0):
    n = draw(st.integers(1, 48))
    H = draw(heads)
    m = draw(st.lists(st.floats(slope_lo, slope_hi, **floats), min_size=H, max_size=H))
    c = draw(st.lists(st.floats(-c_abs, c_abs, **floats), min_size=H, max_size=H))
    return n, m, c


@given(alibi_cases())
def test_alibi_matches_dense_softmax(case):
    n, m, c = case
    K = alibi_kernel(n, m, c)
    A = reference_alibi(n, m, c)
    p = np.random.default_rng(n).random((2, n))
    np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(K.apply_left(p), p @ A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(K.apply_left(p[0]), p[0] @ A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(K.diagonal(), np.diag(A), rtol=0, atol=1e-12)


@given(alibi_cases(slope_lo=-2.0, slope_hi=10.0, c_abs=500.0))
def test_alibi_extreme_content_and_slopes_stay_finite_and_exact(case):
    n, m, c = case
    K = alibi_kernel(n, m, c)
    A = reference_alibi(n, m, c)
    p = np.random.default_rng(0).random(n)
    q = K.apply_left(p)
    assert np.isfinite(q).all() and np.isfinite(K.dense()).all()
    np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-12)
    np.testing.assert_allclose(q, p @ A, rtol=0, atol=1e-12 * max(1.0, p.sum()))


@pytest.mark.parametrize("m, c", [([0.05, 1.0], [2.0, -3.0]), ([0.05], [2.0]), ([1.0], [-3.0])])
def test_alibi_stationary_tail_is_exact_for_long_rows(m, c):
    # rows beyond 45/m share one table row (one-head and multi-head code paths); compare far
    # rows to the direct softmax
    n = 3000
    K = alibi_kernel(n, m, c)
    e = np.zeros(n)
    for i in (0, 1, 899, 901, 2999):
        e[:] = 0
        e[i] = 1.0
        row = K.apply_left(e)
        j = np.arange(i + 1)
        ref = sum(softmax(ch * (j == i) - mh * (i - j)) for mh, ch in zip(m, c, strict=True))
        ref = ref / len(m)
        np.testing.assert_allclose(row[: i + 1], ref, rtol=0, atol=1e-13)
        assert np.all(row[i + 1 :] == 0)


def test_head_weights_are_used():
    A = reference_alibi(10, [0.1, 2.0], [0.0, 5.0], weights=[0.75, 0.25])
    K = alibi_kernel(10, [0.1, 2.0], [0.0, 5.0], head_weights=[0.75, 0.25])
    np.testing.assert_allclose(K.dense(), A, atol=1e-14)


def test_head_weights_within_rounding_of_one_are_accepted():
    # weights computed in float64 (1/3 three times, a sum a few ulp off 1) pass, renormalised
    K = alibi_kernel(10, [0.1, 0.5, 2.0], head_weights=[1 / 3] * 3)
    assert K.head_weights.sum() == pytest.approx(1.0, abs=1e-15)
    K = alibi_kernel(10, [0.1, 2.0], head_weights=[0.5 + 1e-10, 0.5])
    assert K.head_weights.sum() == pytest.approx(1.0, abs=1e-15)


def test_background_shift_has_no_effect():
    # softmax(b + c[i=j] - m(i-j)) does not depend on b: the kernel has no b parameter at all,
    # and the reference with a background added agrees with it.
    n, m, c, b = 12, 0.3, 1.5, 137.0
    A = np.zeros((n, n))
    for i in range(n):
        j = np.arange(i + 1)
        A[i, : i + 1] = softmax(b + c * (j == i) - m * (i - j))
    np.testing.assert_allclose(alibi_kernel(n, m, c).dense(), A, atol=1e-14)


def test_alibi_slopes_textbook_values():
    s = alibi_slopes(8)
    np.testing.assert_allclose(s, [2.0 ** -(k + 1) for k in range(8)], rtol=1e-15)
    assert alibi_slopes(32)[0] == pytest.approx(2 ** (-1 / 4))


def test_uniform_kernel_is_cesaro():
    n = 30
    K = uniform_kernel(n)
    A = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    p = np.random.default_rng(1).random(n)
    np.testing.assert_allclose(K.dense(), A, atol=1e-15)
    np.testing.assert_allclose(K.apply_left(p), p @ A, atol=1e-14)
    np.testing.assert_allclose(K.diagonal(), 1 / np.arange(1, n + 1))
    np.testing.assert_allclose(alibi_kernel(n, 0.0).dense(), A, atol=1e-15)


def test_dense_kernel_round_trip_and_apply():
    A = reference_alibi(9, [0.4], [1.0])
    K = dense_kernel(A)
    p = np.arange(9.0)
    np.testing.assert_array_equal(K.dense(), A)
    np.testing.assert_allclose(K.apply_left(p), p @ A)
    np.testing.assert_array_equal(K.diagonal(), np.diag(A))


@pytest.mark.parametrize(
    "A, match",
    [
        (np.ones((2, 3)) / 3, "square"),
        (np.array([[1.0, 0.0], [np.nan, 0.5]]), "finite"),
        (np.array([[0.5, 0.5], [0.5, 0.5]]), "causal"),
        (np.array([[1.0, 0.0], [0.5, 0.6]]), "row-stochastic"),
        (np.array([[1.0, 0.0], [1.5, -0.5]]), "nonnegative"),
    ],
)
def test_dense_kernel_rejects_bad_matrices(A, match):
    with pytest.raises(ValueError, match=match):
        dense_kernel(A)


def test_dense_kernel_accepts_full_attention_when_asked():
    K = dense_kernel(np.full((3, 3), 1 / 3), causal=False)
    assert K.n == 3


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        (dict(n=0, slopes=1.0), ValueError, "n must be at least 1"),
        (dict(n=2.5, slopes=1.0), TypeError, "n must be an integer"),
        (dict(n=5, slopes=[1.0, np.nan]), ValueError, "slopes must be finite"),
        (dict(n=5, slopes=[1.0, 2.0], content=[0, 1, 2]), ValueError, "one value per head"),
        (dict(n=5, slopes=1.0, content=np.inf), ValueError, "content must be finite"),
        (dict(n=5, slopes=[1.0, 2.0], head_weights=[1.0]), ValueError, "head_weights"),
        (dict(n=5, slopes=[1.0, 2.0], head_weights=[1.0, -1.0]), ValueError, "head_weights"),
        (dict(n=5, slopes="abc"), TypeError, "slopes"),
        (dict(n=8, slopes=[]), ValueError, "slopes must have at least one value"),
        (dict(n=8, slopes=0.5, content=[]), ValueError, "content must have at least one"),
        (dict(n=8, slopes=0.5, head_weights=[]), ValueError, "head_weights"),
        # weights that do not sum to 1 are refused, not rescaled (probe 8)
        (
            dict(n=5, slopes=[1.0, 2.0], head_weights=[3.0, 1.0]),
            ValueError,
            r"head_weights must sum to 1 \(within 1e-09\); got a sum of 4.0",
        ),
        (dict(n=5, slopes=[1.0, 2.0], head_weights=[0.5, 0.4]), ValueError, "sum to 1"),
        (dict(n=5, slopes=[1.0, 2.0], head_weights=[0.0, 0.0]), ValueError, "sum to 1"),
        # sizes whose tables cannot fit are refused before allocating (probe 1)
        (
            dict(n=10**12, slopes=alibi_slopes(8)),
            ValueError,
            r"n = 1000000000000 is too large: alibi_kernel \(its tables\) would need .* GiB",
        ),
        (dict(n=10**12, slopes=0.5), ValueError, "n = 1000000000000 is too large"),
    ],
)
def test_alibi_kernel_rejects_bad_input(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        alibi_kernel(**kwargs)


def reference_alibi_mp(n, slopes, content):
    """The ALiBi kernel row by row in 60-digit arithmetic (any exponent range), then float."""
    with mpmath.workdps(60):
        A = np.zeros((n, n))
        for m, c in zip(slopes, content, strict=True):
            m, c = mpmath.mpf(m), mpmath.mpf(c)
            for i in range(n):
                logits = [(c if j == i else 0) - m * (i - j) for j in range(i + 1)]
                top = max(logits)
                e = [mpmath.exp(v - top) for v in logits]
                z = mpmath.fsum(e)
                A[i, : i + 1] += [float(v / z) / len(slopes) for v in e]
    return A


HUGE = [-1e308, -1e300, -800.0, -50.0, 1e-300, 800.0, 1e300, 1e308]


@pytest.mark.parametrize("m", HUGE)
@pytest.mark.parametrize("c", [-1e308, -900.0, 0.0, 3.0, 900.0, 1e308])
def test_alibi_any_finite_slope_and_content_gives_the_exact_finite_kernel(m, c):
    # no exponential of c, m or m·i is formed: |m| up to 1e308 is exact (the reference is the
    # softmax in 60-digit arithmetic), never NaN or inf
    n = 7
    K = alibi_kernel(n, [m, 0.3], [c, 1.0])
    A = reference_alibi_mp(n, [m, 0.3], [c, 1.0])
    p = np.random.default_rng(0).random((2, n))
    for got in (K.dense(), K.apply_left(p), K.diagonal()):
        assert np.isfinite(got).all()
    np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-13)
    np.testing.assert_allclose(K.apply_left(p), p @ A, rtol=0, atol=1e-13)
    np.testing.assert_allclose(K.diagonal(), np.diag(A), rtol=0, atol=1e-13)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 9),
    m=st.lists(
        st.floats(-1e308, 1e308, allow_nan=False, allow_infinity=False), min_size=1, max_size=3
    ),
    c=st.floats(-1e308, 1e308, allow_nan=False, allow_infinity=False),
)
def test_alibi_extreme_magnitudes_match_high_precision_softmax(n, m, c):
    K = alibi_kernel(n, m, c)
    A = reference_alibi_mp(n, m, [c] * len(m))
    np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-13)
    e = np.ones(n) / n
    q = K.apply_left(e)
    assert np.isfinite(q).all()
    np.testing.assert_allclose(q, e @ A, rtol=0, atol=1e-13)


# -- many layers in one pass (alibi_kernels) ----------------------------------------------


def same_tables(a, b):
    """Two AlibiKernels hold bit-identical tables."""
    assert np.array_equal(a._diag, b._diag) and np.array_equal(a._w_off, b._w_off)
    assert np.array_equal(a._r, b._r) and np.array_equal(a._hw, b._hw)
    assert len(a._neg_tables) == len(b._neg_tables)
    for (wa, sa), (wb, sb) in zip(a._neg_tables, b._neg_tables, strict=True):
        assert np.array_equal(wa, wb) and np.array_equal(sa, sb)
    for name in ("slopes", "content", "head_weights"):
        assert np.array_equal(getattr(a, name), getattr(b, name))


@st.composite
def layer_cases(draw, slope_lo=-2.0, slope_hi=3.0, c_abs=300.0):
    n = draw(st.integers(1, 40))
    H = draw(heads)
    L = draw(st.integers(1, 5))
    m = draw(st.lists(st.floats(slope_lo, slope_hi, **floats), min_size=H, max_size=H))
    C = draw(
        st.lists(
            st.lists(st.floats(-c_abs, c_abs, **floats), min_size=H, max_size=H),
            min_size=L,
            max_size=L,
        )
    )
    w = draw(st.none() | st.lists(st.floats(0.1, 3.0, **floats), min_size=H, max_size=H))
    w = None if w is None else list(np.asarray(w) / np.sum(w))  # weights must sum to 1
    return n, m, np.array(C), w


@settings(max_examples=60, deadline=None)
@given(layer_cases())
def test_alibi_kernels_equal_one_kernel_per_layer_bit_for_bit(case):
    # the batched tables are the one-by-one tables, bit for bit (same code, one pass), for
    # negative slopes, large content and head weights too
    n, m, C, w = case
    many = alibi_kernels(n, m, C, head_weights=w)
    assert len(many) == C.shape[0]
    p = np.random.default_rng(n).random((2, n))
    for K, c in zip(many, C, strict=True):
        one = alibi_kernel(n, m, c, head_weights=w)
        same_tables(K, one)
        assert np.array_equal(K.apply_left(p), one.apply_left(p))


@settings(max_examples=40, deadline=None)
@given(layer_cases(c_abs=50.0))
def test_alibi_kernels_match_the_dense_softmax(case):
    n, m, C, w = case
    p = np.random.default_rng(1).random((2, n))
    for K, c in zip(alibi_kernels(n, m, C, head_weights=w), C, strict=True):
        A = reference_alibi(n, m, c, weights=w)
        np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-12)
        np.testing.assert_allclose(K.apply_left(p), p @ A, rtol=0, atol=1e-12)
        np.testing.assert_allclose(K.diagonal(), np.diag(A), rtol=0, atol=1e-12)


def test_alibi_kernels_extreme_content_is_exact_and_finite():
    # content ±1e308 and slopes up to 1e308 against the 60-digit softmax (no overflow, no NaN)
    n, m = 7, [1e308, 0.3, 1e-300]
    C = np.array([[-1e308, 1.0, 900.0], [1e308, -900.0, 0.0], [3.0, 1e308, -1e308]])
    for K, c in zip(alibi_kernels(n, m, C), C, strict=True):
        A = reference_alibi_mp(n, m, c)
        assert np.isfinite(K.dense()).all() and np.isfinite(K.diagonal()).all()
        np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-13)
        np.testing.assert_allclose(K.apply_left(np.ones(n)), np.ones(n) @ A, rtol=0, atol=1e-13)


def test_alibi_kernels_share_the_stationary_tail_of_long_rows():
    # n = 3000, min m = 0.05: the tables stop at 45/m + 2 rows and the far rows are exact
    n, m = 3000, [0.05, 1.0]
    C = np.array([[2.0, -3.0], [0.0, 4.0]])
    for K, c in zip(alibi_kernels(n, m, C), C, strict=True):
        assert K._w_off.shape[0] == int(np.ceil(45 / 0.05)) + 2
        e = np.zeros(n)
        e[2999] = 1.0
        j = np.arange(n)
        ref = (
            sum(softmax(ch * (j == n - 1) - mh * (n - 1 - j)) for mh, ch in zip(m, c, strict=True))
            / 2
        )
        np.testing.assert_allclose(K.apply_left(e), ref, rtol=0, atol=1e-13)


def test_alibi_kernels_broadcast_a_content_column_and_accept_no_layers():
    many = alibi_kernels(9, [0.5, 0.1], [[1.0], [-2.0]])
    for K, c in zip(many, (1.0, -2.0), strict=True):
        same_tables(K, alibi_kernel(9, [0.5, 0.1], [c, c]))
    assert alibi_kernels(9, [0.5, 0.1], np.zeros((0, 2))) == []
    one = alibi_kernels(4, 0.5, [[1.0, 2.0, 3.0]])[0]  # one slope for three heads
    same_tables(one, alibi_kernel(4, 0.5, [1.0, 2.0, 3.0]))


@pytest.mark.parametrize(
    "args, exc, match",
    [
        ((5, [0.1, 0.2], [1.0, 2.0]), ValueError, r"content must have shape \(L, H\)"),
        ((5, [0.1, 0.2], np.ones((2, 3))), ValueError, "agree on the number of heads"),
        ((5, [0.1, 0.2], [[1.0, np.inf]]), ValueError, "content must be finite"),
        ((5, [0.1, 0.2], "ab"), TypeError, "content"),
        ((5, [], [[1.0]]), ValueError, "slopes must have at least one"),
        ((5, [0.1, np.nan], [[1.0, 1.0]]), ValueError, "slopes must be finite"),
        ((0, [0.1], [[1.0]]), ValueError, "n must be at least 1"),
    ],
)
def test_alibi_kernels_reject_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        alibi_kernels(*args)


def test_alibi_kernels_reject_bad_head_weights():
    with pytest.raises(ValueError, match="head_weights"):
        alibi_kernels(5, [0.1, 0.2], [[1.0, 2.0]], head_weights=[1.0, -1.0])


def test_apply_left_rejects_wrong_length_and_nan():
    K = alibi_kernel(5, 1.0)
    with pytest.raises(ValueError, match="p must have shape"):
        K.apply_left(np.ones(4))
    with pytest.raises(ValueError, match="p must be finite"):
        K.apply_left(np.array([1.0, np.nan, 0, 0, 0]))


def test_dense_request_beyond_memory_is_refused():
    with pytest.raises(ValueError, match="GiB"):
        uniform_kernel(10**7).dense()


# -- stochastic monotonicity -------------------------------------------------------------


def brute_deficit(A):
    F = np.cumsum(A, axis=1)
    n = A.shape[0]
    return max([0.0] + [float((F[b] - F[a]).max()) for a in range(n) for b in range(a + 1, n)])


@given(alibi_cases(slope_lo=0.0, slope_hi=2.0, c_abs=20.0))
def test_alibi_content_family_is_monotone(case):
    n, m, c = case
    K = alibi_kernel(n, m, c)
    assert monotonicity_deficit(K) <= 1e-12
    assert is_stochastically_monotone(K)


@given(alibi_cases(slope_lo=-3.0, slope_hi=3.0, c_abs=30.0))
def test_deficit_matches_brute_force_over_all_pairs(case):
    n, m, c = case
    A = alibi_kernel(n, m, c).dense()
    assert monotonicity_deficit(A) == pytest.approx(brute_deficit(A), abs=1e-14)


def test_negative_slope_with_content_breaks_monotonicity():
    A = reference_alibi(6, [-1.0], [5.0])
    d = monotonicity_deficit(A)
    assert d == pytest.approx(brute_deficit(A), abs=1e-14)
    assert d > 0.1 and not is_stochastically_monotone(A)


def test_monotonicity_rejects_bad_input():
    with pytest.raises(ValueError, match="square"):
        monotonicity_deficit(np.ones((2, 3)))
    with pytest.raises(ValueError, match="tol"):
        is_stochastically_monotone(np.eye(2), tol=-1.0)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # probe 7: a string is not a matrix (numpy's own error named nothing)
        (lambda: is_stochastically_monotone("x"), TypeError, "K must be a Kernel or a square"),
        (lambda: monotonicity_deficit([[1.0, "a"]]), TypeError, "K must be a Kernel"),
        (lambda: is_stochastically_monotone(np.eye(2), tol="0"), TypeError, "tol must be"),
        # probe 1: the uniform kernel's n is refused before its tables are allocated
        (
            lambda: uniform_kernel(10**12),
            ValueError,
            r"n = 1000000000000 is too large: uniform_kernel \(two float64 vectors",
        ),
        (
            lambda: alibi_kernels(10**12, [0.5], [[0.0]]),
            ValueError,
            r"n = 1000000000000 is too large: alibi_kernels",
        ),
        (
            lambda: alibi_kernels(5, [0.5, 1.0], [[0.0, 0.0]], head_weights=[2.0, 2.0]),
            ValueError,
            "head_weights must sum to 1",
        ),
    ],
)
def test_kernel_functions_refuse_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ------------------------------------------------- the base class (posflow.simulate._kernel)


def test_diagonal_returns_a_copy():
    K = uniform_kernel(4)
    d = K.diagonal()
    d[:] = -1.0
    np.testing.assert_array_equal(K.diagonal(), 1.0 / np.arange(1.0, 5.0))  # A_ii = 1/(i+1)


def test_identity_residual_step_does_not_alias_its_rows():
    # λ = 0: (1 − λ) p + λ p A = p, returned as a new array like every other step
    K = uniform_kernel(3)
    p = np.array([[0.25, 0.25, 0.5]])
    q = K._residual_step(p, 0.0)
    np.testing.assert_array_equal(q, [[0.25, 0.25, 0.5]])
    q[0, 0] = 9.0
    assert p[0, 0] == 0.25


def test_apply_left_rejects_nonfinite_rows_with_its_message():
    with pytest.raises(ValueError) as info:
        uniform_kernel(3).apply_left([0.0, np.nan, 1.0])
    assert str(info.value) == "p must be finite"


def test_kernel_repr_names_the_class_and_n():
    assert repr(uniform_kernel(3)) == "UniformKernel(n=3)"
    assert repr(dense_kernel(np.eye(2))) == "DenseKernel(n=2)"


# ------------------------------------------------ uniform and dense kernels (simulate.kernels)


def cesaro_loops(n):
    """A[i, j] = 1/(i+1) for j ≤ i, by plain loops."""
    A = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            A[i, j] = 1.0 / (i + 1)
    return A


def test_uniform_apply_left_keeps_each_row_of_a_batch():
    n = 6
    p = np.random.default_rng(7).random((3, n))  # distinct rows: a flip across rows shows
    np.testing.assert_allclose(uniform_kernel(n).apply_left(p), p @ cesaro_loops(n),
                               rtol=1e-14, atol=0)  # fmt: skip


def test_uniform_memory_errors_state_the_size():
    # the kernel holds two float64 vectors of length n (16 n bytes); dense() one (n, n) array
    n = 10**12
    with pytest.raises(ValueError) as info:
        uniform_kernel(n)
    assert str(info.value).startswith(
        f"n = {n} is too large: uniform_kernel (two float64 vectors of length n) would need "
        f"{16 * n / 2**30:.1f} GiB but only "
    )
    m = 10**6
    with pytest.raises(ValueError) as info:
        uniform_kernel(m).dense()
    assert str(info.value).startswith(
        f"dense() would need {8 * m * m / 2**30:.1f} GiB for a dense ({m}, {m}) float64 array"
    )


def test_dense_kernel_class_is_causal_by_default():
    upper = np.array([[0.5, 0.5], [0.0, 1.0]])
    with pytest.raises(ValueError, match="causal"):
        DenseKernel(upper)
    np.testing.assert_array_equal(DenseKernel(upper, causal=False).dense(), upper)


def test_dense_kernel_copies_its_matrix_in_and_out():
    A = np.array([[0.5, 0.5], [0.25, 0.75]])
    K = dense_kernel(A, causal=False)  # no tril: only the explicit copy separates K from A
    A[0, 0] = 7.0
    out = K.dense()
    out[1, 1] = 7.0
    np.testing.assert_array_equal(K.dense(), [[0.5, 0.5], [0.25, 0.75]])


def test_dense_kernel_accepts_one_token():
    K = dense_kernel([[1.0]])
    assert K.n == 1
    np.testing.assert_array_equal(K.dense(), [[1.0]])
    np.testing.assert_array_equal(K.apply_left([2.0]), [2.0])


def test_dense_kernel_tolerances_are_inclusive():
    # nonnegative within −1e-12 and causal within 1e-12, both boundaries included
    K = dense_kernel([[1.0, 0.0], [1.0 + 1e-12, -1e-12]])
    np.testing.assert_array_equal(K.dense(), [[1.0, 0.0], [1.0 + 1e-12, -1e-12]])
    K = dense_kernel([[1.0 - 1e-12, 1e-12], [0.5, 0.5]])
    np.testing.assert_array_equal(K.dense(), [[1.0 - 1e-12, 0.0], [0.5, 0.5]])  # zeroed


def test_dense_kernel_row_stochastic_flag_uses_8_n_ulp():
    # rows within 8 n u (u = 2^-53) of 1 count as stochastic; n = 2: 16 u = 8 · 2^-52
    eps = 2.0**-52
    assert dense_kernel([[1.0 + 8 * eps, 0.0], [0.5, 0.5]])._row_stochastic
    assert not dense_kernel([[1.0 + 9 * eps, 0.0], [0.5, 0.5]])._row_stochastic


@pytest.mark.parametrize(
    ("A", "message"),
    [
        ([[1.0, 0.0], [0.5]], "A must be a two-dimensional array of numbers"),
        (np.zeros((0, 0)), "A must have n >= 1 rows"),
        ([[1.0, 0.0], [np.nan, 1.0]], "A must be finite (no NaN or inf entries)"),
        ([[1.0, 0.0], [1.5, -0.5]], "A must be nonnegative; A[1, 1] = -0.5"),
        ([[0.5, 0.5], [0.0, 1.0]], "A must be causal (lower-triangular); A[0, 1] = 0.5 with j > i"),
    ],
    ids=["ragged", "empty", "nan", "negative", "upper"],
)
def test_dense_kernel_errors_name_the_rule_and_the_entry(A, message):
    with pytest.raises((TypeError, ValueError)) as info:
        dense_kernel(A)
    assert str(info.value) == message


def test_numpy_array_protocol_gives_the_dense_matrix_with_the_memory_guard():
    """np.asarray(K): for the uniform kernel the matrix 1/(i+1) below the diagonal written out,
    for a dense kernel the matrix it was built from; dtype honoured, copy=False refused (no
    stored array to share), and n = 10⁶ refused by dense()'s guard before allocating."""
    from posflow.simulate.kernels import dense_kernel, uniform_kernel

    want = np.array([[1 / (i + 1) if j <= i else 0.0 for j in range(5)] for i in range(5)])
    np.testing.assert_array_equal(np.asarray(uniform_kernel(5)), want)
    A = np.tril(np.random.default_rng(3).random((6, 6)) + 0.1)
    A /= A.sum(axis=1, keepdims=True)
    got = np.asarray(dense_kernel(A))
    np.testing.assert_array_equal(got, A)
    assert isinstance(got, np.ndarray) and got is not A
    assert np.asarray(uniform_kernel(3), dtype=np.float32).dtype == np.float32
    with pytest.raises(ValueError) as info:
        np.asarray(uniform_kernel(3), copy=False)
    assert str(info.value) == ("np.asarray(kernel, copy=False): a kernel stores no (n, n) array "
                               "to share; use copy=None or True")  # fmt: skip
    K = uniform_kernel(3)  # the protocol method itself: the dtype it is asked for, or float64
    assert K.__array__().dtype == np.float64 and K.__array__(np.float32).dtype == np.float32
    np.testing.assert_array_equal(K.__array__(np.float32), np.asarray(K).astype(np.float32))
    with pytest.raises(ValueError, match=r"dense\(\) would need .* GiB"):
        np.asarray(uniform_kernel(10**6))


# ------------------------------------- dense kernels: the one-pass check against a plain reference

from posflow.simulate import _validate  # noqa: E402
from posflow.simulate import kernels as kernels_module  # noqa: E402


def plain_check(A, causal=True, atol=1e-9):
    """The rules of dense_kernel written out with plain NumPy on a C-ordered float64 copy:
    ("error", message) for the first rule broken, else ("ok", checked matrix, row sums)."""
    A = np.array(A, dtype=np.float64, order="C")
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        return "error", f"A must be a square matrix; got shape {A.shape}"
    if A.shape[0] < 1:
        return "error", "A must have n >= 1 rows"
    if not np.isfinite(A).all():
        return "error", "A must be finite (no NaN or inf entries)"
    bad = np.argwhere(A < -1e-12)
    if bad.size:
        i, j = bad[0]
        return "error", f"A must be nonnegative; A[{i}, {j}] = {A[i, j]}"
    if causal:
        up = np.argwhere(np.triu(np.abs(A), 1) > 1e-12)
        if up.size:
            i, j = up[0]
            rule = "A must be causal (lower-triangular)"
            return "error", f"{rule}; A[{i}, {j}] = {A[i, j]} with j > i"
        A = np.tril(A)
    s = A.sum(axis=1)
    i = int(np.argmax(np.abs(s - 1)))
    if abs(s[i] - 1) > atol:
        return "error", (f"A must be row-stochastic (rows sum to 1 within {atol:g}); row {i} sums "
                         f"to {float(s[i])!r}")  # fmt: skip
    return "ok", A, s


def built(A, causal=True):
    """dense_kernel's outcome in the form of plain_check."""
    try:
        K = dense_kernel(A, causal)
    except (TypeError, ValueError) as exc:
        return "error", str(exc)
    return "ok", K.dense(), np.sum(K.dense(), axis=1)


def assert_same_outcome(got, want):
    assert got[0] == want[0], (got[:2], want[:2])
    if want[0] == "error":
        assert got[1] == want[1]
    else:
        np.testing.assert_array_equal(got[1], want[1])  # the stored matrix, bit for bit
        np.testing.assert_array_equal(got[2], want[2])


def random_kernel(rng, n, causal):
    A = rng.random((n, n)) + 0.01
    A = np.tril(A) if causal else A
    return A / A.sum(axis=1, keepdims=True)


KINDS = ["valid", "nan", "inf", "-inf", "negative", "negative_at_tol", "upper", "upper_at_tol",
         "upper_negative", "upper_nan", "row_sum", "row_sum_at_tol", "tiny_upper"]  # fmt: skip


def perturbed(rng, n, causal, kind):
    """A random valid kernel with one rule broken, or an entry set exactly at its tolerance
    with its row sum kept (the removed weight moved to another entry of the row)."""
    A = random_kernel(rng, n, causal)
    upper = kind in ("upper", "upper_at_tol", "upper_negative", "upper_nan", "tiny_upper")
    if n == 1 and (upper or causal):
        return A  # no entry above the diagonal, no second entry in the row
    if upper:
        i = int(rng.integers(n - 1))
        j = int(rng.integers(i + 1, n))  # strictly above the diagonal
    else:
        i = int(rng.integers(1 if causal else 0, n))
        j = int(rng.integers(i + 1 if causal else n))  # allowed (on or below the diagonal)
    k = (j + 1) % (i + 1 if causal else n)  # another allowed entry of row i (i ≥ 1 if causal)
    value = {"nan": np.nan, "inf": np.inf, "-inf": -np.inf, "negative": -1.5e-12,
             "negative_at_tol": -1e-12, "upper": 2e-12, "upper_at_tol": -1e-12,
             "upper_negative": -2e-12, "upper_nan": np.nan,
             "tiny_upper": 5e-13}.get(kind)  # fmt: skip
    if value is not None:
        A[i, k] += A[i, j]
        A[i, j] = value
    elif kind == "row_sum":
        A[i] *= 1 + 3e-9
    elif kind == "row_sum_at_tol":
        A[i, j] += 1e-9 - 1e-11  # within atol = 1e-9 (the rounding of the sum is ≪ 1e-11)
    return A


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 40),
    st.booleans(),
    st.sampled_from(KINDS),
    st.sampled_from(["C", "F", "list", "float32"]),
    st.integers(0, 2**32 - 1),
)
def test_dense_kernel_agrees_with_a_plain_numpy_check(n, causal, kind, layout, seed):
    """Random valid kernels and kernels breaking one rule (NaN, ±inf, a negative entry, an
    entry above the diagonal, a row sum off by 3e-9, or exactly at a tolerance): the same error
    message or the same stored matrix and row sums, bit for bit, as the plain check, for
    C- and F-ordered arrays, nested lists and float32 arrays (converted first)."""
    A = perturbed(np.random.default_rng(seed), n, causal, kind)
    if layout == "float32":
        A = A.astype(np.float32)
    arg = {"C": A, "F": np.asfortranarray(A), "list": A.tolist(), "float32": A}[layout]
    assert_same_outcome(built(arg, causal), plain_check(A, causal))


@pytest.mark.parametrize("n", [1, 2, 7, 8, 9, 31, 127, 128, 129, 200, 257, 300, 1000])
@pytest.mark.parametrize("causal", [True, False])
def test_the_one_pass_check_gives_numpys_row_sums_and_matrix_bit_for_bit(n, causal):
    """dense_checked_copy: the copy (upper triangle zeroed when causal) and np.sum's pairwise
    row sums of it, bit for bit, for n across the 8- and 128-entry blocks of NumPy's pairwise
    sum (n = 1000: splits that are not multiples of 128); checked in place too (out = A).
    Entries spanning 10 decades make any other order show."""
    rng = np.random.default_rng(n)
    A = rng.random((n, n)) * 10.0 ** rng.integers(-5, 5, (n, n))
    want = np.tril(A) if causal else A.copy()
    if causal:
        A[np.triu_indices(n, 1)] = rng.uniform(-1e-12, 1e-12, n * (n - 1) // 2)
    out = np.empty((n, n))
    sums = _validate.dense_checked_copy(A, causal, out)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(sums, np.sum(want, axis=1))
    B = A.copy()
    np.testing.assert_array_equal(_validate.dense_checked_copy(B, causal, B), sums)
    np.testing.assert_array_equal(B, want)


@pytest.mark.parametrize(
    "n", [*range(1, 10), *range(10, 300, 7), 383, 384, 385, 1000, 2048, 4097, 65549]
)
def test_the_compiled_pairwise_sum_is_numpys_bit_for_bit(n):
    """_pairwise_sum against np.sum (its reference: the same additions in the same order) for
    n across the 8- and 128-entry blocks and splits that are not powers of two, with the
    entries from k on zero (a causal row) for k at the ends, inside a leaf and at random;
    entries over 16 decades, so that any other order or a skipped nonzero entry shows."""
    rng = np.random.default_rng(n)
    a = rng.random(n) * 10.0 ** rng.integers(-8, 8, n)
    frames, vals = np.empty((64, 3), np.int64), np.empty(64)
    for k in sorted({0, 1, 7, 9, 127, 129, n // 3, n - 1, n, int(rng.integers(0, n + 1))}):
        b = a.copy()
        b[min(k, n) :] = 0.0
        assert 0.0 + _validate._pairwise_sum(b, min(k, n), frames, vals) == np.sum(b), k


@pytest.mark.parametrize(
    ("kind", "value", "ok"),
    [("lower", 0.0, True), ("lower", -1e-12, True), ("lower", np.nextafter(-1e-12, -1), False),
     ("lower", np.nan, False), ("lower", np.inf, False), ("lower", -np.inf, False),
     ("lower", 1e308, True), ("upper", 1e-12, True), ("upper", -1e-12, True),
     ("upper", np.nextafter(1e-12, 1), False), ("upper", np.nextafter(-1e-12, -1), False),
     ("upper", np.nan, False), ("upper", np.inf, False), ("upper", -0.0, True)],
)  # fmt: skip
@pytest.mark.parametrize("block", ["first", "last"])
def test_the_one_pass_check_draws_each_line_where_the_rules_do(kind, value, ok, block):
    """Each entry rule at its boundary (tolerances inclusive, the next float beyond them
    refused, NaN and ±inf refused), in the first and in the last rows (n = 300)."""
    n = 300
    A = random_kernel(np.random.default_rng(1), n, True)
    i = 1 if block == "first" else n - 2
    A[i, i - 1 if kind == "lower" else i + 1] = value
    sums = _validate.dense_checked_copy(A, True, np.empty((n, n)))
    assert (sums is not None) == ok
    assert _validate.dense_checked_copy(A, False, np.empty((n, n))) is not None or (
        not np.isfinite(value) or value < -1e-12
    )  # without causality only finiteness and the sign count


BAD_EXACT = [
    (np.ones((2, 3)) / 3, True, "A must be a square matrix; got shape (2, 3)"),
    (np.ones((2, 2, 2)) / 2, True, "A must be a square matrix; got shape (2, 2, 2)"),
    (np.ones(4) / 4, True, "A must be a square matrix; got shape (4,)"),
    (np.zeros((0, 0)), True, "A must have n >= 1 rows"),
    ([[1.0, 0.0], [np.inf, 0.0]], True, "A must be finite (no NaN or inf entries)"),
    ([[1.0, np.nan], [0.5, 0.5]], True, "A must be finite (no NaN or inf entries)"),
    ([[1.0, -0.5], [0.5, 0.5]], True, "A must be nonnegative; A[0, 1] = -0.5"),
    ([[1.5, -0.5], [0.5, 0.5]], False, "A must be nonnegative; A[0, 1] = -0.5"),
    ([[1.0, 0.0, 0.0], [0.5, 0.5, 3e-12], [0.2, 0.3, 0.5]], True,
     "A must be causal (lower-triangular); A[1, 2] = 3e-12 with j > i"),
    ([[1.0, 0.0], [0.5, 0.6]], True,
     "A must be row-stochastic (rows sum to 1 within 1e-09); row 1 sums to 1.1"),
    ([[0.5, 0.6], [0.5, 0.5]], False,
     "A must be row-stochastic (rows sum to 1 within 1e-09); row 0 sums to 1.1"),
    ([[0.5, 0.5], [0.5, 0.5]], True,
     "A must be causal (lower-triangular); A[0, 1] = 0.5 with j > i"),
]  # fmt: skip


@pytest.mark.parametrize(("A", "causal", "message"), BAD_EXACT)
def test_each_dense_kernel_error_keeps_its_message(A, causal, message):
    """Every rule still raises its own message, naming the first entry (row-major) or the
    worst row; the same through a float64 array and a nested list (an empty list would be
    shape (0,), another message)."""
    A = np.asarray(A, dtype=np.float64)
    for arg in (A, A.tolist()) if A.size else (A,):
        with pytest.raises(ValueError) as info:
            dense_kernel(arg, causal)
        assert str(info.value) == message
        assert plain_check(arg, causal) == ("error", message)


def test_a_large_kernel_reports_the_entry_in_its_last_block():
    """n = 600: a violation late in the matrix is found and named."""
    n = 600
    A = random_kernel(np.random.default_rng(5), n, True)
    A[n - 1, 3] = -1e-9
    with pytest.raises(ValueError) as info:
        dense_kernel(A)
    assert str(info.value) == f"A must be nonnegative; A[{n - 1}, 3] = -1e-09"
    A[n - 1, 3] = 0.0
    A[n - 3, n - 1] = 1e-6
    with pytest.raises(ValueError, match=rf"^A must be causal .*A\[{n - 3}, {n - 1}\] = 1e-06"):
        dense_kernel(A)


def test_a_valid_numpy_kernel_never_runs_the_array_api_check(monkeypatch):
    """The one-pass check decides a valid kernel alone; the array-API check (many passes)
    runs only to name a broken rule."""

    def refuse(*args, **kwargs):
        raise AssertionError("the array-API check ran")

    monkeypatch.setattr(kernels_module, "_validated", refuse)
    A = random_kernel(np.random.default_rng(2), 50, True)
    np.testing.assert_array_equal(dense_kernel(A).dense(), A)
    np.testing.assert_array_equal(dense_kernel(A.tolist()).dense(), A)
    with pytest.raises(AssertionError, match="array-API check ran"):
        dense_kernel(2 * A)


def test_the_input_is_never_changed_and_the_kernel_never_shares_it():
    """Entries within 1e-12 above the diagonal are zeroed in the kernel, not in the caller's
    array (float64, float32 or list); the kernel's matrix is its own and C-ordered."""
    n = 12  # row i: 2^-1, 2^-2, …, 2^-i, 2^-i (exact in float32, sums exactly 1)
    A = np.zeros((n, n))
    for i in range(n):
        A[i, :i] = 2.0 ** -np.arange(1, i + 1)
        A[i, i] = 2.0**-i
    A[2, 7] = 1e-13
    for arg in (A, A.astype(np.float32), np.asfortranarray(A)):
        before = np.array(arg, copy=True)
        K = dense_kernel(arg)
        np.testing.assert_array_equal(arg, before)
        assert K._A[2, 7] == 0.0 and K._A.flags.c_contiguous
        assert not np.shares_memory(K._A, arg)
    lst = A.tolist()
    dense_kernel(lst)
    assert lst[2][7] == 1e-13


def test_building_a_dense_kernel_allocates_one_matrix():
    """No (n, n) temporaries: the peak of traced allocations while building is the kernel's
    own matrix (8 n² bytes) plus O(n) (tracemalloc sees NumPy's allocations)."""
    import tracemalloc

    n = 512
    A = random_kernel(np.random.default_rng(6), n, True)
    dense_kernel(A)  # compiled and cached before tracing
    tracemalloc.start()
    K = dense_kernel(A)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert K.n == n
    assert peak <= 8 * n * n + 64 * n + 2**16  # the matrix, a few vectors of n, Python objects


def test_the_row_stochastic_flag_is_the_plain_row_sums_defect():
    """_row_stochastic ⟺ max |Σ_j A_ij − 1| ≤ 8 n 2⁻⁵³ with NumPy's row sums of the stored
    matrix, for kernels built as quotients M / M.sum (rounding defects) at several n."""
    for n in (3, 17, 130, 400):
        A = random_kernel(np.random.default_rng(n), n, True)
        K = dense_kernel(A)
        defect = np.max(np.abs(np.sum(K.dense(), axis=1) - 1))
        assert K._row_stochastic == (defect <= 8 * n * 2.0**-53)
