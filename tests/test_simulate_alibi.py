"""Tests of posflow.simulate._alibi against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).

The exact kernel of one head (slope m, content c) is, row i ≥ 0,
A_ii = e^c / Z_i, A_ij = e^{-m (i-j)} / Z_i (j < i), Z_i = e^c + Σ_{k=1}^{i} e^{-m k}; it is
evaluated here in 50-digit mpmath, which has no overflow or underflow.
"""

import math
import re

import mpmath
import numpy as np
import pytest

from posflow.simulate import _alibi, _validate
from posflow.simulate._alibi import AlibiKernel, alibi_kernels, alibi_slopes
from posflow.simulate.backend import to_numpy

U = 2.0**-53  # unit roundoff of float64
mpmath.mp.dps = 50


def whole(msg):
    """A pattern matching exactly the message ``msg``."""
    return f"^{re.escape(msg)}$"


def mp_E(a, i):
    """Σ_{k=0}^{i-1} e^{-a k} (a ≥ 0) in mpmath: (1 − e^{−a i}) / (1 − e^{−a})."""
    if a == 0:
        return mpmath.mpf(i)
    a = mpmath.mpf(a)
    return mpmath.expm1(-a * i) / mpmath.expm1(-a)


def mp_head(n, m, c):
    """(A, w, d) of one head in mpmath: the dense kernel A (n × n, floats), the row weights
    w(i) = e^{-m}/Z_i (m ≥ 0) or e^{-m i}/Z_i (m < 0), and the diagonal A_ii."""
    m, c = mpmath.mpf(m), mpmath.mpf(c)
    A = np.zeros((n, n))
    w, d = np.zeros(n), np.zeros(n)
    for i in range(n):
        logits = [(c if j == i else 0) - m * (i - j) for j in range(i + 1)]
        top = max(logits)
        e = [mpmath.exp(v - top) for v in logits]
        z = mpmath.fsum(e)  # Z_i e^{-top}
        A[i, : i + 1] = [float(v / z) for v in e]
        d[i] = float(e[i] / z)
        if i:
            w[i] = float(mpmath.exp((-m if m >= 0 else -m * i) - top) / z)
    return A, w, d


def mp_kernel(n, slopes, content, weights):
    return sum(h * mp_head(n, m, c)[0] for m, c, h in zip(slopes, content, weights, strict=True))


# ---------------------------------------------------------------------------------------------
# slopes


@pytest.mark.parametrize("H", [1, 2, 3, 4, 8, 16])
def test_slopes_are_the_textbook_powers_of_two(H):
    # m_h = 2^{-8(h+1)/H} against 50-digit powers: the exponent rounds once (relative u), which
    # moves 2^x by |x| ln 2 · u ≤ 5.6 u, and the power is within 1 ulp; an integer exponent
    # (8(h+1)/H whole) gives the exact power of two
    got = alibi_slopes(H)
    assert got.shape == (H,) and got.dtype == np.float64
    for h in range(H):
        x = -8 * (h + 1) / H
        assert got[h] == pytest.approx(float(mpmath.power(2, mpmath.mpf(-8 * (h + 1)) / H)),
                                       rel=8 * U, abs=0)  # fmt: skip
        if x == int(x):
            assert got[h] == math.ldexp(1.0, int(x))


@pytest.mark.parametrize(
    ("arg", "exc", "match"),
    [(0, ValueError, "num_heads must be at least 1; got 0"),
     (2.0, TypeError, "num_heads must be an integer; got 2.0")],
)  # fmt: skip
def test_slopes_reject_a_bad_head_count(arg, exc, match):
    with pytest.raises(exc, match=whole(match)):
        alibi_slopes(arg)


# ---------------------------------------------------------------------------------------------
# partial sums E_i = Σ_{k<i} e^{-a k} and their logarithms

A_VALUES = [0.0, 1e-310, 1e-300, 2.0**-70, 1e-9, 0.3, 1.0, 50.0, 800.0, 1e308]
ROWS = [1, 2, 3, 10, 1000]


def test_partial_sums_match_the_high_precision_geometric_sum():
    # relative error: a·i rounds (u), expm1 twice (1 ulp each), one division: ≤ 5 u
    got = _alibi._partial_sums(np.array(A_VALUES), np.array(ROWS))
    assert got.shape == (len(ROWS), len(A_VALUES))
    for r, i in enumerate(ROWS):
        for h, a in enumerate(A_VALUES):
            assert got[r, h] == pytest.approx(float(mp_E(a, i)), rel=5 * U, abs=0)


@pytest.mark.parametrize(
    ("a", "i_max"),
    [(0.0, 1000), (5e-324, 1000), (1e-310, 1000), (2.0**-61 / 1000, 1000), (2.0**-70, 1000),
     (0.75 * 2.0**-60 / 10, 10)],
)  # fmt: skip
def test_partial_sums_of_a_tiny_slope_are_the_row_count_exactly(a, i_max):
    # a·i_max < 2^-60: Σ e^{-a k} = i (1 − a (i − 1)/2 + …) is within 2^-61 of i relative, so
    # i is the correctly rounded sum (expm1(−a i)/expm1(−a) can be an ulp off, e.g. 7 + 2^-50
    # at a = 0.75·2^-60/10, i = 7, and loses digits for a subnormal a)
    rows = np.arange(1, i_max + 1)
    got = _alibi._partial_sums(np.array([a, 0.5]), rows)
    assert np.array_equal(got[:, 0], rows.astype(float))
    np.testing.assert_allclose(got[-3:, 1], [float(mp_E(0.5, i)) for i in rows[-3:]], rtol=5 * U)


def test_partial_sums_above_the_flat_threshold_use_the_geometric_sum():
    # a·i_max ≫ 2^-60: E_i differs from i by ≈ a i (i − 1)/2, many ulp
    rows = np.arange(1, 2**20 + 1, 4099)
    a = 2.0**-45
    got = _alibi._partial_sums(np.array([a]), rows)[:, 0]
    want = [float(mp_E(a, i)) for i in rows]
    np.testing.assert_allclose(got, want, rtol=5 * U, atol=0)
    assert (got < rows).sum() == rows.size - 1  # only E_1 = 1 is the row count


def test_partial_sums_raise_no_floating_point_error_under_a_strict_error_state():
    # a·i overflows to inf for a = 1e308 (e^{-inf} = 0 is exact) and expm1 underflows for a
    # subnormal a; both are intended and silenced inside, whatever the caller's error state
    with np.errstate(all="raise"):
        E = _alibi._partial_sums(np.array([1e308, 1e-310, 800.0]), np.array([1, 5]))
        g = _alibi._log_partial(np.array([1e308, 1e-310, 800.0]), np.array([1, 5]))
    assert np.array_equal(E, [[1.0, 1.0, 1.0], [1.0, 5.0, 1.0]])
    # the subnormal a carries an absolute spacing 2^-1074, relative 2^-1074/a ≈ 5e-14
    np.testing.assert_allclose(g, [[0, 0, 0], [0, math.log(5), 0]], rtol=0, atol=2**-1072 / 1e-310)


def test_log_partial_sums_match_the_high_precision_logarithm():
    # log(−expm1(−a i)) − log(−expm1(−a)): each logarithm is within 1 ulp of its value plus
    # its argument's relative error (≤ 2 u), so the error is ≤ 3 u (|L1| + |L2| + 2)
    a = np.array(A_VALUES)
    got = _alibi._log_partial(a, np.array(ROWS))
    assert got.shape == (len(ROWS), len(A_VALUES))
    for r, i in enumerate(ROWS):
        for h, x in enumerate(A_VALUES):
            want = mpmath.log(mp_E(x, i))
            size = 2 + (abs(float(mpmath.log(-mpmath.expm1(-x)))) if x else 0.0)
            assert abs(got[r, h] - float(want)) <= 3 * U * (2 * size + float(want))


def test_log_partial_sums_of_positive_slopes_only_skip_the_zero_branch():
    # every a > 0: the geometric form everywhere (a = 0 would give log i)
    rows = np.array([1, 4, 9])
    got = _alibi._log_partial(np.array([0.25, 2.0]), rows)
    want = [[float(mpmath.log(mp_E(a, i))) for a in (0.25, 2.0)] for i in rows]
    np.testing.assert_allclose(got, want, rtol=4 * U, atol=4 * U)
    got0 = _alibi._log_partial(np.array([0.0]), rows)
    np.testing.assert_allclose(got0[:, 0], np.log(rows), rtol=0, atol=0)


# ---------------------------------------------------------------------------------------------
# heads, weights, table sizes


def test_heads_broadcast_one_slope_or_one_content_value_and_default_to_uniform_weights():
    m, c, w = _alibi._heads(0.5, [1.0, 2.0, 3.0], None)
    assert np.array_equal(m, [0.5] * 3) and np.array_equal(c, [1.0, 2.0, 3.0])
    assert np.array_equal(w, [1 / 3] * 3)
    m, c, w = _alibi._heads([0.5, 0.25], 4.0, [0.25, 0.75])
    assert np.array_equal(m, [0.5, 0.25]) and np.array_equal(c, [4.0, 4.0])
    assert np.array_equal(w, [0.25, 0.75])
    m[0] = c[0] = 9.0  # writable copies, not views of one broadcast value
    assert m[1] == 0.25 and c[1] == 4.0


@pytest.mark.parametrize(
    ("args", "match"),
    [(([], 1.0, None), "slopes must have at least one value (one per head); got none"),
     ((1.0, [], None), "content must have at least one value (one per head); got none"),
     (([1.0, 2.0], [1.0, 2.0, 3.0], None),
      "slopes and content must be scalars or have one value per head; got 2 slopes and 3 "
      "content values"),
     ((1.0, 1.0, [-0.5, 1.5]), "head_weights must have length 1; got 2"),
     (([1.0, 2.0], 1.0, [-0.5, 1.5]), "head_weights must be nonnegative"),
     (([1.0, 2.0], 1.0, [0.5, 0.5 + 2**-20]),  # the sum 1 + 2^-20 is exact
      "head_weights must sum to 1 (within 1e-09); got a sum of 1.0000009536743164")],
)  # fmt: skip
def test_heads_reject_bad_input_naming_the_argument(args, match):
    with pytest.raises(ValueError, match=whole(match)):
        _alibi._heads(*args)


def test_weights_within_the_tolerance_are_renormalised_exactly():
    # a sum 1 + 5e-10 is accepted (tolerance 1e-9) and divided out: [a, b] / (a + b)
    w = _alibi._weights([0.5 + 5e-10, 0.5], 2)
    assert np.array_equal(w, np.array([0.5 + 5e-10, 0.5]) / (1.0 + 5e-10))
    assert np.array_equal(_alibi._weights([1.0, 0.0], 2), [1.0, 0.0])  # zero weights allowed
    assert _alibi._WEIGHT_ATOL == 1e-9


@pytest.mark.parametrize(
    ("n", "m", "rows"),
    [(1000, [0.5, 1.0], 92),  # ⌈45/0.5⌉ + 2
     (1000, [0.7], 67),  # ⌈64.28…⌉ + 2
     (1000, [0.045, 3.0], 1000),  # 45/0.045 = 1000 rows: not stationary before row n − 1
     (1000, [0.046], 981),  # ⌈978.26…⌉ + 2
     (50, [2.0, -1.0], 50), (50, [0.0], 50), (1, [60.0], 1), (10, [9.0], 7)],
)  # fmt: skip
def test_table_rows_stop_where_every_head_is_stationary(n, m, rows):
    # rows of the tables: min(n, ⌈45 / min m⌉ + 2) (e^{-m j} < e^{-45} beyond); a head with
    # m ≤ 45/n (zero and negative slopes included) keeps all n rows
    assert _alibi._table_rows(n, np.array(m, dtype=float)) == rows


def test_table_memory_estimate_counts_the_documented_tables(monkeypatch):
    # E, R: 2·nt·H+; per layer: weights nt·(H+ + 1), diagonal and row pieces 2n, negative heads
    # 6·n·H−; 8 bytes each (n = 400, nt = ⌈45/0.5⌉ + 2 = 92 with only positive heads)
    seen = []
    monkeypatch.setattr(_alibi, "ensure_memory", lambda *args: seen.append(args))
    m = np.array([0.5, 2.0, 1.0])
    _alibi._ensure_tables_fit(400, m, 3, "test tables")
    floats = 2 * 92 * 3 + 3 * (92 * 4 + 2 * 400)
    assert seen == [(8.0 * floats, "n = 400", "test tables (its tables)")]
    seen.clear()
    _alibi._ensure_tables_fit(400, np.array([0.5, -2.0, 0.0]), 2, "x")
    floats = 2 * 400 * 2 + 2 * (400 * 3 + 2 * 400 + 6 * 400 * 1)  # a head ≤ 0: nt = n
    assert seen == [(8.0 * floats, "n = 400", "x (its tables)")]


def test_tables_that_do_not_fit_are_refused_naming_n(monkeypatch):
    # 1 GiB available; n = 5·10^7 with one negative head (nt = n, H+ = 0) needs
    # n·(0 + 1) + 2n + 6n = 9n floats = 3.6e9 bytes = 3.4 GiB
    monkeypatch.setattr(_validate, "available_memory", lambda: 2**30)
    with pytest.raises(ValueError, match=whole(
            "n = 50000000 is too large: alibi_kernel (its tables) would need 3.4 GiB but only "
            "1.0 GiB of memory is available")):  # fmt: skip
        AlibiKernel(50_000_000, -1.0)
    with pytest.raises(ValueError, match=whole(
            "n = 50000000 is too large: alibi_kernels (its tables) would need 3.4 GiB but only "
            "1.0 GiB of memory is available")):
        alibi_kernels(50_000_000, -1.0, [[0.0]])


# ---------------------------------------------------------------------------------------------
# tables against the exact kernel


def test_slope_tables_hold_the_partial_sums_their_reciprocals_and_the_ratios():
    n, m = 9, np.array([0.5, -0.3, 0.0, 2.0, -1.0])
    st = _alibi._SlopeTables(n, m)
    assert st.n == n and st.nt == n and np.array_equal(st.m, m)
    assert np.array_equal(st.pos, [0, 2, 3]) and np.array_equal(st.neg, [1, 4])
    E = np.array([[float(mp_E(a, i)) for a in (0.5, 0.0, 2.0)] for i in range(1, n)])
    np.testing.assert_allclose(st.E, E, rtol=5 * U)
    np.testing.assert_allclose(st.R, 1 / E, rtol=6 * U)
    assert st.E.flags.c_contiguous
    np.testing.assert_allclose(st.r, np.exp([-0.5, 0.0, -2.0]), rtol=U)
    g = np.array([[float(mpmath.log(mp_E(a, i))) for a in (0.3, 1.0)] for i in range(1, n)])
    np.testing.assert_allclose(st.g, g, rtol=4 * U, atol=8 * U)
    assert _alibi._SlopeTables(9, np.array([0.5])).g is None


def test_layer_tables_are_the_exact_weights_and_diagonal():
    # w_pos[l, i, h] = e^{-m}/Z_i, w_neg[l, i, h] = e^{a i}/Z_i (row 0 zero) and
    # diag[l, i] = Σ_h ω_h A^h_ii, against 50-digit softmax rows; contents of both signs and
    # beyond the exponent range (e^{800} overflows float64)
    n = 8
    m = np.array([0.5, -0.3, 0.0, 2.0, -1.5])
    C = np.array([[1.0, 0.5, -1.0, 3.0, 2.0], [800.0, -800.0, 40.0, -2.0, 800.0]])
    hw = np.array([0.1, 0.2, 0.3, 0.15, 0.25])
    st = _alibi._SlopeTables(n, m)
    with np.errstate(over="raise"):
        diag, w_pos, w_neg = _alibi._layer_tables(st, C, hw)
    assert diag.shape == (2, n) and w_pos.shape == (2, n, 3) and w_neg.shape == (2, n, 2)
    for layer, c in enumerate(C):
        heads = [mp_head(n, mh, ch) for mh, ch in zip(m, c, strict=True)]
        np.testing.assert_allclose(w_pos[layer], np.stack([heads[h][1] for h in (0, 2, 3)], 1),
                                   rtol=1e-14, atol=1e-300)  # fmt: skip
        np.testing.assert_allclose(w_neg[layer], np.stack([heads[h][1] for h in (1, 4)], 1),
                                   rtol=1e-14, atol=1e-300)  # fmt: skip
        want = sum(hw[h] * heads[h][2] for h in range(5))
        np.testing.assert_allclose(diag[layer], want, rtol=1e-14, atol=0)


def test_layer_tables_of_positive_heads_raise_no_floating_point_error_under_a_strict_state():
    # ℓ = c + m = ±900 gives e^{±ℓ} = inf and 0 (overflow, underflow), both exact and intended
    st = _alibi._SlopeTables(6, np.array([0.5, 2.0]))
    with np.errstate(over="raise", under="raise"):
        diag, w_pos, _ = _alibi._layer_tables(st, np.array([[900.0, -900.0]]), np.array([0.5, 0.5]))
    a, b = mp_head(6, 0.5, 900.0), mp_head(6, 2.0, -900.0)
    np.testing.assert_allclose(diag[0], 0.5 * (a[2] + b[2]), rtol=1e-15, atol=0)
    np.testing.assert_allclose(w_pos[0], np.stack([a[1], b[1]], 1), rtol=1e-15, atol=1e-300)


def test_layer_tables_repeat_the_last_table_row_beyond_the_stationary_rows():
    # slopes 9 and 12: nt = ⌈45/9⌉ + 2 = 7 rows < n = 40; the diagonal of rows ≥ 7 is the
    # stationary value, equal to the exact A_ii there within rounding
    n, m, c = 40, np.array([9.0, 12.0]), np.array([[0.5, -1.0]])
    st = _alibi._SlopeTables(n, m)
    assert st.nt == 7
    diag, w_pos, w_neg = _alibi._layer_tables(st, c, np.array([0.5, 0.5]))
    assert w_neg is None and w_pos.shape == (1, 7, 2)
    want = 0.5 * (mp_head(n, 9.0, 0.5)[2] + mp_head(n, 12.0, -1.0)[2])
    np.testing.assert_allclose(diag[0], want, rtol=1e-15, atol=0)
    assert np.all(diag[0, 6:] == diag[0, 6])


def test_one_token_tables():
    diag, w_pos, w_neg = _alibi._layer_tables(_alibi._SlopeTables(1, np.array([0.5, -1.0])),
                                              np.zeros((1, 2)), np.array([0.5, 0.5]))  # fmt: skip
    assert np.array_equal(diag, [[1.0]]) and np.array_equal(w_pos, [[[0.0]]])
    assert np.array_equal(w_neg, [[[0.0]]])


# ---------------------------------------------------------------------------------------------
# the kernel

CASES = [  # (n, slopes, content, head weights)
    (7, [0.5], [1.0], None),
    (9, [0.5, -0.3, 0.0, 2.0], [1.0, 0.5, -1.0, 3.0], [0.1, 0.2, 0.3, 0.4]),
    (6, [-1.0, -0.2], [2.0, -1.0], [0.75, 0.25]),
    (8, [0.0, 1e-4, 0.7, 60.0], [1.0, -3.0, 0.0, 800.0], None),
    (5, [-800.0, 0.3], [-900.0, 1.0], None),
]


def weights_of(m, hw):
    return np.full(len(m), 1 / len(m)) if hw is None else np.asarray(hw, float)


@pytest.mark.parametrize(("n", "m", "c", "hw"), CASES)
def test_kernel_matrices_rows_and_heads_equal_the_exact_softmax(n, m, c, hw):
    w = weights_of(m, hw)
    K = AlibiKernel(n, m, c, hw)
    A = mp_kernel(n, m, c, w)
    np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-14)
    np.testing.assert_allclose(K.diagonal(), np.diag(A), rtol=0, atol=1e-14)
    for h in range(len(m)):
        np.testing.assert_allclose(K.head_dense(h), mp_head(n, m[h], c[h])[0], rtol=0,
                                   atol=1e-14)  # fmt: skip
    p = np.random.default_rng(n).standard_normal((3, n))
    np.testing.assert_allclose(K.apply_left(p), p @ A, rtol=0, atol=1e-13)
    for lam in (0.0, 0.3, 1.0):  # the residual step (1 − λ) p + λ p A of the rollout
        got = K._residual_step(p, lam)
        np.testing.assert_allclose(got, (1 - lam) * p + lam * (p @ A), rtol=0, atol=1e-13)
        assert got is not p


@pytest.mark.parametrize(("n", "m", "c", "hw"), CASES)
def test_kernel_on_array_api_strict_equals_the_exact_softmax(n, m, c, hw):
    # the array-API path (chunked scan instead of the numba recurrence)
    xp = pytest.importorskip("array_api_strict")
    w = weights_of(m, hw)
    K = AlibiKernel(n, m, c, hw, backend="array_api_strict")
    assert not K._use_numba
    A = mp_kernel(n, m, c, w)
    np.testing.assert_allclose(np.asarray(K.dense()), A, rtol=0, atol=1e-14)
    p = np.random.default_rng(n).standard_normal((3, n))
    P = xp.asarray(p)
    np.testing.assert_allclose(np.asarray(K.apply_left(P)), p @ A, rtol=0, atol=1e-13)
    for lam in (0.0, 0.3, 1.0):
        got = np.asarray(K._residual_step(P, lam))
        np.testing.assert_allclose(got, (1 - lam) * p + lam * (p @ A), rtol=0, atol=1e-13)


def test_a_zero_step_returns_the_rows_unchanged_even_where_p_A_overflows():
    # λ = 0: (1 − λ) p + λ p A is p itself, for every finite p (here p A overflows: two heads
    # of slope 0, A = [[1, 0], [1/2, 1/2]], (p A)_0 = 2.25·2^1023)
    p = np.full((1, 2), 1.5 * 2.0**1023)
    for K in (AlibiKernel(2, [0.0, 0.0]), AlibiKernel(2, [0.0, 0.0], backend="array_api_strict")):
        got = to_numpy(K._residual_step(K.xp.asarray(p), 0.0))
        assert np.array_equal(got, p)


def test_one_head_step_is_exact_next_to_the_overflow_threshold():
    # one head of slope 0, n = 2: A = [[1, 0], [1/2, 1/2]]; with λ = 1/4 and p = 1.5·2^1023 (1, 1)
    # (1 − λ) p + λ p A = 2^1023 (0.75·1.5 + 0.25·2.25, 0.75·1.5 + 0.25·0.75), exact in binary
    # and finite although p A is not; the fused one-head step never forms p A
    K = AlibiKernel(2, 0.0)
    got = K._residual_step(np.full((1, 2), 1.5 * 2.0**1023), 0.25)
    assert np.array_equal(got, [[1.6875 * 2.0**1023, 1.3125 * 2.0**1023]])


def test_head_dense_raises_no_floating_point_error_under_a_strict_error_state():
    # slope 100: e^{-100 (i - j - 1)} underflows to 0 far from the diagonal, as intended
    K = AlibiKernel(10, [100.0, -0.5], [0.0, 1.0])
    with np.errstate(under="raise", over="raise"):
        H = K.head_dense(0)
    np.testing.assert_allclose(H, mp_head(10, 100.0, 0.0)[0], rtol=0, atol=1e-15)


def test_kernel_content_defaults_to_zero():
    K = AlibiKernel(6, [0.5, -0.3])
    assert np.array_equal(K.content, [0.0, 0.0])
    A = mp_kernel(6, [0.5, -0.3], [0.0, 0.0], [0.5, 0.5])
    np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-14)


def test_kernel_attributes_and_repr():
    K = AlibiKernel(6, [0.5, -0.25], 2.0, [0.75, 0.25])
    assert repr(K) == "AlibiKernel(n=6, heads=2)"
    assert K.n == 6 and K.num_heads == 2 and K.backend == "numpy" and K._use_numba
    assert np.array_equal(K.slopes, [0.5, -0.25]) and np.array_equal(K.content, [2.0, 2.0])
    assert np.array_equal(K.head_weights, [0.75, 0.25])


def test_kernels_of_many_layers_hold_independent_attributes():
    ks = alibi_kernels(5, [0.5, 0.25], [[1.0, 2.0], [3.0, 4.0]], [0.5, 0.5])
    ks[0].slopes[0] = ks[0].head_weights[0] = ks[0].content[0] = 9.0
    assert np.array_equal(ks[1].slopes, [0.5, 0.25])
    assert np.array_equal(ks[1].head_weights, [0.5, 0.5])
    assert np.array_equal(ks[1].content, [3.0, 4.0])


# ---------------------------------------------------------------------------------------------
# many layers


def test_many_layers_equal_the_exact_softmax_of_each_layer():
    n, m = 7, [0.5, -0.3, 0.0]
    C = np.array([[1.0, 0.5, -1.0], [-2.0, 800.0, 3.0], [0.0, 0.0, 0.0]])
    hw = [0.2, 0.3, 0.5]
    ks = alibi_kernels(n, m, C, hw)
    assert len(ks) == 3
    p = np.random.default_rng(1).standard_normal((2, n))
    for K, c in zip(ks, C, strict=True):
        assert isinstance(K, AlibiKernel) and K.n == n and K.backend == "numpy"
        A = mp_kernel(n, m, c, hw)
        np.testing.assert_allclose(K.dense(), A, rtol=0, atol=1e-14)
        np.testing.assert_allclose(K.apply_left(p), p @ A, rtol=0, atol=1e-13)
        assert np.array_equal(K.content, c)


def test_many_layers_broadcast_one_slope_and_default_to_uniform_weights():
    ks = alibi_kernels(6, 0.4, [[1.0, -1.0, 2.0]])
    assert ks[0].num_heads == 3 and np.array_equal(ks[0].head_weights, [1 / 3] * 3)
    A = mp_kernel(6, [0.4] * 3, [1.0, -1.0, 2.0], [1 / 3] * 3)
    np.testing.assert_allclose(ks[0].dense(), A, rtol=0, atol=1e-14)



def _one_on_device(xp, dev, where, args):
    """``args`` with the one named by ``where`` moved to array_api_strict's ``dev`` (or, for
    "backend"/"device", asked through keywords); returns (args, keywords, expected device)."""
    kw = {}
    if where in args:
        args[where] = xp.asarray(args[where], dtype=xp.float64, device=dev)
    else:
        kw = {"backend": "array_api_strict", "device": dev if where == "device" else None}
    return args, kw, dev if where != "backend" else xp.Device("CPU_DEVICE")


@pytest.mark.parametrize("where", ["slopes", "content", "head_weights", "backend", "device"])
def test_many_layers_follow_the_backend_and_device_of_any_argument(where):
    # array-api-strict's second device: an array of one argument, or backend=/device= given
    # explicitly, places every kernel (and every array it returns) there
    xp = pytest.importorskip("array_api_strict")
    dev = xp.Device("device1")
    args = {"slopes": [0.4, -0.2], "content": [[1.0, -1.0], [0.0, 2.0]],
            "head_weights": [0.25, 0.75]}  # fmt: skip
    args, kw, want = _one_on_device(xp, dev, where, args)
    ks = alibi_kernels(6, *args.values(), **kw)
    p = np.random.default_rng(2).standard_normal(6)
    for K, c in zip(ks, ([1.0, -1.0], [0.0, 2.0]), strict=True):
        assert K.backend == "array_api_strict" and K.device == want
        A = mp_kernel(6, [0.4, -0.2], c, [0.25, 0.75])
        np.testing.assert_allclose(to_numpy(K.dense()), A, rtol=0, atol=1e-14)
        q = K.apply_left(xp.asarray(p, device=want))
        assert q.device == want
        np.testing.assert_allclose(to_numpy(q), p @ A, rtol=0, atol=1e-13)


@pytest.mark.parametrize("where", ["slopes", "content", "head_weights", "backend", "device"])
def test_one_kernel_follows_the_backend_and_device_of_any_argument(where):
    xp = pytest.importorskip("array_api_strict")
    dev = xp.Device("device1")
    args = {"slopes": [0.4, -0.2, 0.0], "content": [1.0, -1.0, 3.0],
            "head_weights": [0.25, 0.5, 0.25]}  # fmt: skip
    args, kw, want = _one_on_device(xp, dev, where, args)
    K = AlibiKernel(7, *args.values(), **kw)
    assert K.backend == "array_api_strict" and K.device == want
    A = mp_kernel(7, [0.4, -0.2, 0.0], [1.0, -1.0, 3.0], [0.25, 0.5, 0.25])
    for got, ref in ((K.dense(), A), (K.diagonal(), np.diag(A)),
                     (K.head_dense(1), mp_head(7, -0.2, -1.0)[0])):  # fmt: skip
        assert got.device == want
        np.testing.assert_allclose(to_numpy(got), ref, rtol=0, atol=1e-14)
    p = np.random.default_rng(3).standard_normal((2, 7))
    for lam in (0.0, 0.5, 1.0):
        q = K._residual_step(xp.asarray(p, device=want), lam)
        assert q.device == want
        np.testing.assert_allclose(to_numpy(q), (1 - lam) * p + lam * (p @ A), rtol=0, atol=1e-13)


def test_many_layers_size_the_tables_by_the_number_of_layers(monkeypatch):
    # L = 3 layers of H = 2 positive heads, n = 50 rows (slope 0.5: ⌈45/0.5⌉ + 2 > n, nt = n):
    # 2·50·2 slope floats + 3·(50·3 + 2·50) layer floats (_ensure_tables_fit's documented count)
    seen = []
    monkeypatch.setattr(_alibi, "ensure_memory", lambda *args: seen.append(args))
    alibi_kernels(50, [0.5, 1.0], np.zeros((3, 2)))
    assert seen == [(8.0 * (2 * 50 * 2 + 3 * (50 * 3 + 2 * 50)), "n = 50",
                     "alibi_kernels (its tables)")]  # fmt: skip


@pytest.mark.parametrize(
    ("method", "match"),
    [("head_dense", "head_dense() would need 2.2 GiB for a dense (10000, 10000) float64 array"),
     ("dense", "dense() would need 3.0 GiB for a dense (10000, 10000) float64 array")],
)  # fmt: skip
def test_dense_matrices_that_do_not_fit_are_refused(monkeypatch, method, match):
    # 1 GiB available (80 % usable): head_dense() holds 3 and dense() 4 float64 n × n arrays,
    # 3·8·10⁸ B = 2.2 GiB and 3.0 GiB; one array (0.7 GiB) would fit
    K = AlibiKernel(10_000, [0.5, -0.1])
    monkeypatch.setattr(_validate, "available_memory", lambda: 2**30)
    msg = f"{match} but only 1.0 GiB is available; use a vector chain (influence / apply_left)"
    msg += " instead"
    with pytest.raises(ValueError, match=whole(msg)):
        getattr(K, method)(*([0] if method == "head_dense" else []))


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [((5, [0.1, 0.2], b"ab"), TypeError,
      "content must be an array of numbers of shape (L, H); got a string"),
     ((5, [0.1, 0.2], [[1.0, "x"]]), TypeError,
      "content must be an array of numbers of shape (L, H); got [[1.0, 'x']]"),
     ((5, [0.1, 0.2], [1.0, 2.0]), ValueError,
      "content must have shape (L, H) (one row per layer, one value per head); got shape (2,)"),
     ((5, [0.1, 0.2], np.zeros((2, 0))), ValueError,
      "content must have shape (L, H) (one row per layer, one value per head); got shape (2, 0)"),
     ((5, [0.1, 0.2], [[1.0, 2.0], [3.0, -np.inf]]), ValueError,
      "content must be finite; got -inf at [1, 1]"),
     ((5, [0.1, 0.2], np.ones((2, 3))), ValueError,
      "slopes and content must agree on the number of heads H: got 2 slopes and content of "
      "shape (2, 3) (its columns must be 1 or H)"),
     ((5, [0.1, 0.2, 0.3], np.ones((2, 2))), ValueError,
      "slopes and content must agree on the number of heads H: got 3 slopes and content of "
      "shape (2, 2) (its columns must be 1 or H)"),
     ((5, [], [[1.0]]), ValueError, "slopes must have at least one value (one per head); got "
      "none"),
     ((5, [0.1, 0.2], [[1.0, 2.0]], [0.5, 0.25]), ValueError,
      "head_weights must sum to 1 (within 1e-09); got a sum of 0.75")],
)  # fmt: skip
def test_many_layers_reject_bad_input_naming_the_argument(args, exc, match):
    with pytest.raises(exc, match=whole(match)):
        alibi_kernels(*args)


# ---------------------------------------------------------------------------------------------
# the compiled step (posflow.simulate._alibi_nb): reassociated head sums, folded mass sums


def gamma(k):
    """γ_k = k u / (1 − k u), the bound of k roundings."""
    return k * U / (1 - k * U)


def dyadic_step_case(data):
    """Tables on which the head recurrences G_h(j) = p_j w_h(j) + r_h G_h(j+1) are exact in
    float64 on any route (integer p_j < 2^16, w and r powers of two, n ≤ 12: under 45
    significant bits), so the only roundings of a step with λ = 1 and diag = 0 are those of the
    head sums S_j = Σ_h ω_h G_h(j+1) (ω_h arbitrary floats): out[0, j] = Ŝ_j exactly. H = 1
    runs the one-head kernel (its two-row stationary loop when nt < n − 1)."""
    st = hyp_st
    H = data.draw(st.integers(1, 70), label="H")
    n = data.draw(st.integers(1, 12), label="n")
    nt = data.draw(st.integers(1, n), label="nt")
    p = np.array(data.draw(st.lists(st.integers(0, 2**16 - 1), min_size=n, max_size=n)), float)
    w = 2.0 ** -np.array(data.draw(st.lists(st.integers(0, 2), min_size=nt * H,
                                            max_size=nt * H)), float).reshape(nt, H)  # fmt: skip
    w[0] = 0.0  # row 0 draws only from itself
    r = 2.0 ** -np.array(data.draw(st.lists(st.integers(1, 2), min_size=H, max_size=H)), float)
    hw = np.array(data.draw(st.lists(st.floats(1e-3, 1.0), min_size=H, max_size=H)))
    return p[None, :], w, r, hw


def exact_head_sums(p, w, r, hw):
    """(S_j exactly, the serial fused order of the previous kernel) as Fractions and floats:
    acc ← fl(ω_h G_h + acc) for h = 0, 1, …, H − 1 (one rounding per fused multiply-add)."""
    from fractions import Fraction

    n, (nt, H) = p.shape[1], w.shape
    G = [Fraction(0)] * H
    exact, serial = [None] * n, [0.0] * n
    for j in range(n - 1, -1, -1):
        exact[j] = sum((Fraction(hw[h]) * G[h] for h in range(H)), Fraction(0))
        acc = 0.0
        for h in range(H):
            acc = float(Fraction(hw[h]) * G[h] + Fraction(acc))
        serial[j] = acc
        row = w[min(j, nt - 1)]
        G = [Fraction(p[0, j]) * Fraction(row[h]) + Fraction(r[h]) * G[h] for h in range(H)]
        assert all(float(g) == g for g in G)  # the recurrences are exact (docstring above)
    return exact, serial


hyp_st = pytest.importorskip("hypothesis.strategies")
hyp = pytest.importorskip("hypothesis")


@hyp.given(hyp_st.data())
def test_reassociated_head_sums_are_within_the_stated_bound_of_the_serial_order(data):
    # bound (*) of _alibi_nb, |ŷ − y| ≤ γ_{H+1} (p d + Σ_h ω_h G_h) for any order of the sum,
    # here with d = 0: the term p·d is an exact zero, which adds no rounding, so γ_H S; the
    # serial order of the previous kernel (emulated exactly with Fractions) obeys it too, so
    # the two differ by at most 2 γ_H S (all terms are nonnegative: Σ_h ω_h |G_h| = S)
    from posflow.simulate._alibi_nb import alibi_step

    p, w, r, hw = dyadic_step_case(data)
    n, H = p.shape[1], r.size
    out = np.empty_like(p)
    alibi_step(p, np.zeros(n), w, r, hw, 1.0, out)
    exact, serial = exact_head_sums(p, w, r, hw)
    for j in range(n):
        S = float(exact[j])
        assert abs(out[0, j] - exact[j]) <= gamma(H) * S
        assert abs(serial[j] - exact[j]) <= gamma(H) * S
        assert abs(out[0, j] - serial[j]) <= 2 * gamma(H) * S


def test_the_step_of_real_tables_stays_within_the_bound_of_the_serial_order():
    # ALiBi tables (rounded recurrences, n beyond the stationary row, a tail of n mod 4 rows):
    # the step against the previous kernel's serial order y = p_j d_j + Σ_h ω_h G_h and
    # row-by-row recurrence, written out here in plain Python; both sums satisfy bound (*),
    # and the blend (1 − λ) p_j + λ y adds at most a few roundings of out_j (6 u out_j).
    # n = 1121, 3000 at one head: one and two chunks of stationary rows on the F route
    # (_stationary_states: 1024 rows from j = n − 1 down, while all of them lie at j ≥ 91)
    from posflow.simulate._alibi_nb import CHUNK, alibi_step

    assert CHUNK == 1024
    for H, n in ((32, 203), (7, 150), (2, 101), (1, 203), (1, 150), (1, 1121), (1, 3000)):
        K = AlibiKernel(n, np.linspace(0.5, 3.0, H), np.linspace(-1, 2, H))  # 45/min m < n
        assert K._w_off.shape[0] == 92
        p = np.random.default_rng(H).random((1, n))
        lam = 0.3
        out = np.empty_like(p)
        alibi_step(p, K._diag, K._w_off, K._r, K._hw, lam, out)
        G, nt = np.zeros(H), K._w_off.shape[0]
        for j in range(n - 1, -1, -1):
            y = p[0, j] * K._diag[j]
            for h in range(H):
                y += K._hw[h] * G[h]
            want = (1 - lam) * p[0, j] + lam * y
            # the recurrences round too (here without fused multiply-adds; the one-head kernel
            # two rows at a time on the G route, four on the F route): a term of G_h(j+1)
            # meets ≤ 2 (n − j) + 3 roundings on any of these routes, so they differ by at
            # most 2 γ_{2(n−j)+3} G
            tol = lam * (2 * gamma(H + 1) + 2 * gamma(2 * (n - j) + 3)) * y * 1.01 + 6 * U * want
            assert abs(out[0, j] - want) <= tol, (H, n, j)
            G = p[0, j] * K._w_off[min(j, nt - 1)] + K._r * G


# The step of several heads computes in the domain scaled by 2^960 (_alibi_nb, above
# _step_heads): its subnormal inputs and outputs pass through their bit patterns.
TINY = 2.0**-1022  # the smallest normal float64


@pytest.mark.parametrize("H, n", [(32, 203), (2, 101), (3, 7)])
def test_the_step_on_subnormal_rows_is_the_normal_step_scaled_and_rounded_once(H, n):
    # rows Ps = 2^-500 Pn, exactly (Pn from 2^-572 to 1, signs mixed, zeros), so that Ps holds
    # subnormals: in the scaled domain the two steps are the same arithmetic 2^500 apart, so
    # step(Ps) must be step(Pn) · 2^-500 as IEEE multiplication rounds it (once, to the
    # subnormal grid, to nearest even) — independent of the kernel's bit-pattern conversions
    from posflow.simulate._alibi_nb import alibi_step

    K = AlibiKernel(n, np.linspace(0.5, 3.0, H), np.linspace(-1, 2, H))
    rng = np.random.default_rng(n)
    # the second half subnormal after scaling (its outputs draw on it alone: p A_{·j} ← i ≥ j)
    late = np.arange(n) >= n // 2
    e = np.where(late, rng.integers(523, 572, (2, n)), rng.integers(0, 60, (2, n)))
    pn = rng.random((2, n)) * 2.0**-e * rng.choice([-1, 1], (2, n))
    pn[:, ::17] = 0.0
    ps = pn * 2.0**-500
    pn = ps * 2.0**500  # exact: scaling up loses nothing
    assert ((ps != 0) & (np.abs(ps) < TINY)).mean() > 0.3
    outs = []
    for p in (pn, ps):
        out = np.full_like(p, np.nan)
        alibi_step(p, K._diag, K._w_off, K._r, K._hw, 0.3, out)
        outs.append(out)
    want = outs[0] * 2.0**-500
    assert ((want != 0) & (np.abs(want) < TINY)).any()
    np.testing.assert_array_equal(outs[1], want)



def _zero_block_rows(n, rng):
    """Rows with zero blocks behind nonzero entries (states not 0 there), behind zeros only,
    −0 entries, an all-zero row, a row too large for the scaled domain (both routes) and lone
    entries at a block's ends (blocks of 256 = LANES entries from the row's end)."""
    P = rng.random((8, n)) * rng.choice([-1.0, 1.0], (8, n))
    P[0, : n - 100] = 0.0  # a rollout's first layers: support at the end only
    P[1, 1000:2500] = 0.0  # zeros behind nonzero entries: the states carry into them
    P[2] = 0.0
    P[3, : n - 700] = -0.0
    P[3, 300:310] = 1e-310  # subnormal entries after a long zero run
    P[4, :3000] = 0.0
    P[4, -1] = 1e300  # beyond 2^62/n: done again unscaled
    P[5, ::2] = 0.0
    P[6:] = 0.0  # one entry each: the first and the last entry of the second block
    P[6, n - 1 - 256] = P[7, n - 2 * 256] = 1.0
    return P


# slopes whose states reach 0: with two heads one alone for a block (slope 8 drops its state
# within one block of 256 entries, slope 0.5 keeps it), first or last
@pytest.mark.parametrize("m", [[8.0, 0.5], [0.5, 8.0], np.geomspace(4.0, 0.5, 32)])
def test_zero_blocks_written_directly_equal_the_full_arithmetic(m):
    # _heads_row writes a block of zero entries behind zero states as zeros (skip=True); the
    # full arithmetic (skip=False) must give the same numbers (a −0 may come out +0) and the
    # same mass sums, bit for bit, on the scaled and the unscaled route
    from posflow.simulate._alibi_nb import LANES, _step_heads

    n = 5000
    H = len(m)
    K = AlibiKernel(n, m, np.linspace(-1, 2, H))
    P = _zero_block_rows(n, np.random.default_rng(H))
    res = []
    for skip in (True, False):
        out, sums = np.full_like(P, np.nan), np.full(P.shape[0], np.nan)
        bufs = np.zeros(H), np.zeros(H), np.zeros(LANES), np.zeros(LANES)
        _step_heads(P, K._diag, K._w_off, K._r, K._hw, 0.3, out, sums, *bufs, skip)
        res.append((out, sums))
    (o1, s1), (o0, s0) = res
    np.testing.assert_array_equal(o1, o0)
    differ = o1.view(np.int64) != o0.view(np.int64)
    assert (o1[differ] == 0).all()  # only signed zeros may differ
    np.testing.assert_array_equal(s1.view(np.int64), s0.view(np.int64))
    assert (o1[1, 2400:2500] != 0).all()  # the states carried into the zeros: not skipped
    assert (o1[0, : n - 100] == 0).mean() > 0.5 and (o1[2] == 0).all()
    assert LANES == 256 and o1[6, n - 257] != 0 and o1[7, n - 512] != 0


@pytest.mark.parametrize("big", [2.0**62 / 6 * 1.01, 1e300, 1.5e307])
def test_rows_too_large_for_the_scaled_domain_are_done_unscaled(big):
    # 2^960 p would overflow for entries beyond 2^62/n: such a row is done again on the
    # unscaled route, so the step stays finite and equals the dense (1 − λ) p + λ p A (here
    # within 1e-14 relative, a few roundings per entry); the other row of the same call, a
    # probability row, stays on the scaled route with its own mass sum (folded sums: _WORK)
    from posflow.simulate._alibi_nb import _WORK, alibi_step

    n = 6
    K = AlibiKernel(n, [0.5, 1.0, 0.0], [0.0, 1.0, -1.0])
    A = sum(K._hw[h] * K.head_dense(h) for h in range(3))
    p = np.array([[big, big / 3, 0.0, big / 7, 1.0, big / 2], [0.1, 0.2, 0.3, 0.15, 0.05, 0.2]])
    lam = 0.3
    out = np.empty_like(p)
    alibi_step(p, K._diag, K._w_off, K._r, K._hw, lam, out)
    want = (1 - lam) * p + lam * (p @ A)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, want, rtol=1e-14, atol=0)
    np.testing.assert_allclose(_WORK.sums[:2], want.sum(axis=1), rtol=1e-14)

def test_tails_below_the_subnormal_grid_are_zero_and_the_rest_within_half_a_grid_step():
    # one step (λ = 1) from the last token: out_j = Σ_h ω_h w_h(n−1) r_h^{n−2−j} for j < n − 1,
    # decaying far below 2^-1074. Exact reference in mpmath from the kernel's own float
    # tables; the recurrences round once per row (relative γ_{n−j+H+2}), the output once to
    # the grid (2^-1075 absolute). A serial recurrence in gradual underflow stalls instead:
    # r·2^-1074 rounds back to 2^-1074 for r > 1/2, a floor of nonzero entries ~1e-323
    # where the exact value is below 1e-400.
    from posflow.simulate._alibi_nb import alibi_step

    n, H = 3000, 4
    K = AlibiKernel(n, np.array([0.3, 0.35, 0.4, 0.45]))  # r_h = e^{-m_h} > 1/2
    p = np.zeros((1, n))
    p[0, -1] = 1.0
    out = np.full_like(p, np.nan)
    alibi_step(p, K._diag, K._w_off, K._r, K._hw, 1.0, out)
    w = K._w_off[min(n - 1, K._w_off.shape[0] - 1)]
    grid = mpmath.mpf(2) ** -1075
    below = 0
    for j in range(n - 1):
        exact = sum(mpmath.mpf(K._hw[h]) * mpmath.mpf(w[h]) * mpmath.mpf(K._r[h]) ** (n - 2 - j)
                    for h in range(H))  # fmt: skip
        tol = grid + gamma(n - j + H + 2) * exact
        assert abs(mpmath.mpf(out[0, j]) - exact) <= tol, j
        if exact < grid * (1 - gamma(n - j + H + 2)):  # rounds to 0 on any of those routes
            below += 1
            assert out[0, j] == 0.0, j
    assert below > 100
    assert ((out > 0) & (out < TINY)).sum() > 30


def test_states_too_small_to_reach_the_output_grid_are_dropped_not_left_subnormal():
    # G_h decays by r_h > 1/2 per row from the last token: after 10⁴ rows its scaled value
    # (2^960 e^{-0.3·10⁴}) lies far below the scaled subnormal range, where a recurrence in
    # gradual underflow would stall at 2^-1074 (and run every later product in microcode);
    # below _G_FLOOR (true value < 2^-1660, beneath any output's rounding) it is set to 0
    from posflow.simulate._alibi_nb import _G_FLOOR, _WORK, alibi_step

    n, H = 10_000, 2
    K = AlibiKernel(n, np.array([0.3, 0.4]))
    p = np.zeros((1, n))
    p[0, -1] = 1.0
    out = np.empty_like(p)
    alibi_step(p, K._diag, K._w_off, K._r, K._hw, 1.0, out)
    assert _G_FLOOR == 2.0**-700
    np.testing.assert_array_equal(_WORK.G[:H], 0.0)
    assert out[0, : n - 3000].max() == 0.0 and out[0, -2] > 0

@pytest.mark.parametrize("seed", range(3))
def test_the_scaling_helpers_are_exact_products_by_powers_of_two(seed):
    # _up(x) = 2^960 x exactly (from the bit pattern when x is subnormal) and _down(y) = 2^-960 y
    # as IEEE multiplication rounds it, ties to even included, for values of every range
    from posflow.simulate._alibi_nb import _down, _up

    rng = np.random.default_rng(seed)
    sub = rng.integers(0, 2**52, 200) * 2.0**-1074  # subnormals and 0 (exact)
    x = np.concatenate([sub, -sub, rng.random(100) * 2.0 ** -rng.integers(0, 1020, 100),
                        [TINY, -TINY, 1.0, np.inf, -np.inf, 0.0, -0.0]])  # fmt: skip
    for v in x:
        assert _up(v) == v * 2.0**960
    ties = (rng.integers(0, 2**52, 100) + 0.5) * 2.0**-114  # exactly halfway on the grid
    y = np.concatenate([ties, -ties, rng.random(200) * 2.0 ** -rng.integers(0, 200, 200),
                        rng.random(50) * 2.0 ** rng.integers(0, 900, 50), [0.0, 2.0**-62]])
    for v in y:
        assert _down(v) == v * 2.0**-960, v
    assert np.isnan(_up(np.nan)) and np.isnan(_down(np.nan))


def test_the_four_block_lane_pass_gives_the_bits_of_four_single_block_passes():
    # _lanes_add4 claims the same TwoSums in the same order per lane as _lanes_add called on
    # the blocks last-first: equal S and E, bit for bit, on values of mixed sign and scale
    from posflow.simulate._alibi_nb import LANES, _lanes_add, _lanes_add4

    rng = np.random.default_rng(5)
    x = rng.standard_normal(4 * LANES) * 2.0 ** rng.integers(-60, 60, 4 * LANES)
    S0, E0 = rng.standard_normal(LANES), rng.standard_normal(LANES) * 1e-17
    S1, E1, S4, E4 = S0.copy(), E0.copy(), S0.copy(), E0.copy()
    for q in (3, 2, 1, 0):
        _lanes_add(x[q * LANES : (q + 1) * LANES], S1, E1)
    _lanes_add4(x, S4, E4)
    assert np.array_equal(S1, S4) and np.array_equal(E1, E4)


def test_a_row_whose_f_state_overflows_is_done_again_on_the_g_route():
    # slope 0.05: F = G/w ≈ p/(1 − e^{-0.05}) ≈ 20.5 p overflows for p = 10^307 where G does
    # not (on the F route the stationary outputs would be infinite); the step must give the
    # finite rows of the G route, 10^307 times those of the row p = 1 (which stays on the
    # F route) within rounding, and that row within rounding of the plain recurrence
    from posflow.simulate._alibi_nb import CHUNK, alibi_step

    n = 2048
    K = AlibiKernel(n, 0.05)
    assert n - K._w_off.shape[0] >= CHUNK
    assert 1e307 > np.finfo(np.float64).max * (1 - K._r[0])
    p = np.ones((2, n))
    p[0] *= 1e307
    out = np.empty_like(p)
    alibi_step(p, K._diag, K._w_off, K._r, K._hw, 0.5, out)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out[0] / 1e307, out[1], rtol=1e-13, atol=0)
    G, nt = 0.0, K._w_off.shape[0]
    for j in range(n - 1, -1, -1):
        want = 0.5 + 0.5 * (K._diag[j] + K._hw[0] * G)
        assert abs(out[1, j] - want) <= 1e-12 * want
        G = K._w_off[min(j, nt - 1), 0] + K._r[0] * G


def test_steps_write_over_only_rows_nothing_else_refers_to():
    # the spare rows of rows_out: a chain of steps writes into two arrays in turn, but never
    # over rows a caller (or a view, or the step's own input) still holds
    from posflow.simulate._alibi_nb import rows_out

    K = AlibiKernel(500, 0.5)
    p0 = np.random.default_rng(0).random((2, 500))
    keep = p0.copy()
    chain = [p0]
    for _ in range(6):
        chain.append(K._residual_step(chain[-1], 0.3))
    assert np.array_equal(p0, keep)
    assert len({id(a) for a in chain}) == len(chain)  # all held: none reused
    want = [a.copy() for a in chain]
    rows = chain[-1]
    ids = set()
    for _ in range(6):  # nothing holds the rows two steps back: two arrays in turn
        rows = K._residual_step(rows, 0.3)
        ids.add(id(rows))
    assert len(ids) <= 3
    for a, b in zip(chain, want, strict=True):
        assert np.array_equal(a, b)
    view = K._residual_step(rows, 0.3)[:, :10]  # a view keeps its base alive: not reused
    base = view.base
    before = base.copy()
    K._residual_step(K._residual_step(rows, 0.3), 0.3)
    assert np.array_equal(base, before)
    assert rows_out(np.empty((3, 7))).shape == (3, 7)


def test_the_step_folds_a_compensated_row_sum_into_the_rows_it_writes():
    # λ = 0 writes p itself; 1 followed (in the step's backward order) by 1000 values 2^-54:
    # a plain running sum stays at 1 (each 1 + 2^-54 rounds to 1), the exact sum is
    # 1 + 1000·2^-54 (250 ulp more); the folded TwoSum sum is within one rounding of it
    import math

    from posflow.simulate import _alibi_nb

    for H in (1, 3):
        n = 1001
        K = AlibiKernel(n, alibi_slopes(H))
        p = np.full((2, n), 2.0**-54)
        p[:, -1] = 1.0
        p[1] *= 3.0
        out = np.empty_like(p)
        _alibi_nb.alibi_step(p, K._diag, K._w_off, K._r, K._hw, 0.0, out)
        assert np.array_equal(out, p)
        sums = _alibi_nb._folded_sums(out)
        for b in range(2):
            exact = math.fsum(p[b])
            assert abs(sums[b] - exact) <= U * exact and sums[b] > p[b, -1]


def test_mass_update_takes_the_folded_sums_of_the_step_it_follows(monkeypatch):
    # right after a step, mass_update must not read the rows again; for other rows (or rows
    # rescaled in place after the step) it sums them itself, with the same result
    from posflow.simulate import _alibi_nb

    K = AlibiKernel(50, alibi_slopes(4))
    p = np.random.default_rng(0).random((3, 50))
    out = np.empty_like(p)
    _alibi_nb.alibi_step(p, K._diag, K._w_off, K._r, K._hw, 0.5, out)
    folded = _alibi_nb._folded_sums(out).copy()

    def refuse(*args):
        raise AssertionError("the rows were summed again")

    S, target = np.ones(3), np.ones(3)
    with monkeypatch.context() as mp:
        mp.setattr(_alibi_nb, "_mass_update_rows", refuse)
        _alibi_nb.mass_update(out, S, target, 1e-12, True)
    assert np.array_equal(S, folded)
    other = out.copy()
    assert _alibi_nb._folded_sums(other) is None
    S2 = np.ones(3)
    _alibi_nb.mass_update(other, S2, np.ones(3), 1e-12, True)
    assert np.allclose(S2, folded, rtol=2 * U, atol=0)
    out *= 0.5  # in place: the last column changes, so the recorded sums no longer apply
    assert _alibi_nb._folded_sums(out) is None


def test_influence_is_bitwise_the_same_for_one_and_two_threads_and_across_threads():
    # no kernel result may depend on the thread count, and steps running at once in two
    # threads (the compiled steps release the GIL) keep their own work buffers and sums
    from concurrent.futures import ThreadPoolExecutor

    import numba

    from posflow.simulate import _threads
    from posflow.simulate.rollout import constant, influence, rollout_matrix

    cases = [(AlibiKernel(3001, alibi_slopes(H) if H > 1 else 0.5), constant(0.3, 7))
             for H in (1, 32, 33)]  # fmt: skip
    before = numba.get_num_threads()
    try:
        _threads.set_threads(1)
        one = [influence(K, lam) for K, lam in cases]
        one_matrix = rollout_matrix(cases[1][0], cases[1][1][:2])
        _threads.set_threads(2)
        two = [influence(K, lam) for K, lam in cases]
        two_matrix = rollout_matrix(cases[1][0], cases[1][1][:2])
        with ThreadPoolExecutor(2) as pool:
            both = list(pool.map(lambda c: influence(*c), cases * 2))
    finally:
        _threads.set_threads(before)
    for a, b in zip(one, two, strict=True):
        assert np.array_equal(a, b)
    for a, b in zip(one * 2, both, strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(one_matrix, two_matrix)
