"""Tests of posflow.theory._transport_values against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

import itertools
import math

import numpy as np
import pytest
import sympy as sp

from posflow.theory import transport as tr

F = "np.float64"  # NumPy 2 repr of a float64 entry


# ----------------------------------------------------------------------------------------------
# references
# ----------------------------------------------------------------------------------------------


def pairwise_expectation(a, v, n, chi) -> float:
    """Σ_b Σ_{j,k} a_j a_k E e^{i(φ_j - φ_k)} z_j z̄_k with E e^{i(φ_j - φ_k)} = χ^{n_j - n_k}
    for n_j ≥ n_k and its conjugate otherwise (φ_j - φ_k sums |n_j - n_k| fresh angles)."""
    v = np.asarray(v, dtype=float)
    v = v[:, None, :] if v.ndim == 2 else v
    z = v[..., 0] + 1j * v[..., 1]  # (M, B)
    chi = np.broadcast_to(np.asarray(chi, dtype=complex), (v.shape[1],))
    total = 0.0
    for j, k in itertools.product(range(len(a)), repeat=2):
        d = int(n[j]) - int(n[k])
        e = chi**d if d >= 0 else np.conj(chi) ** (-d)
        total += float(np.sum((a[j] * a[k] * e * z[j] * np.conj(z[k])).real))
    return total


def two_point_enumeration(a, v, n, alpha, beta) -> float:
    """E‖Σ_j a_j R(φ_j) v_j‖² for i.i.d. θ ∈ {α, β} (probability 1/2 each): the mean over all
    2^{max n} equally likely angle sequences, rotating each planar v_j by hand."""
    v = np.asarray(v, dtype=float)
    steps = int(max(n))
    total = 0.0
    for seq in itertools.product((alpha, beta), repeat=steps):
        phi = np.concatenate([[0.0], np.cumsum(seq)])[np.asarray(n)]
        c, s = np.cos(phi), np.sin(phi)
        out_x = np.sum(a * (c * v[:, 0] - s * v[:, 1]))
        out_y = np.sum(a * (s * v[:, 0] + c * v[:, 1]))
        total += out_x**2 + out_y**2
    return total / 2**steps


# ----------------------------------------------------------------------------------------------
# the derivation (AT14)
# ----------------------------------------------------------------------------------------------


def test_value_side_derivation_fields():
    d = tr.value_side_derivation()
    assert d.rotation_split is True and d.cross_term_is_power is True
    assert d.factor_matches is True
    a = sp.Symbol("a", positive=True)
    m = sp.Symbol("m", integer=True, positive=True)
    r = sp.Symbol("r", positive=True)
    assert sp.simplify(d.cross_term - (sp.sin(a) / a) ** m) == 0  # E cos Σ_{l≤m} θ_l = (sin a/a)^m
    assert sp.simplify(d.factor - (1 + r) / (1 - r)) == 0
    # Σ_{k∈ℤ} r^{|k|} at r = 1/3 is 1 + 2 (1/3)/(1 - 1/3) = 2
    assert d.two_sided_sum.subs(r, sp.Rational(1, 3)) == 2
    assert sp.simplify(d.two_sided_sum - (1 + r) / (1 - r)) == 0


# ----------------------------------------------------------------------------------------------
# the exact expectation
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "alpha", "beta"),
    [([0, 3, 1, 6], 0.4, -0.9), ([5, 2], 1.0, 2.5), ([7, 0, 4, 2, 1], -0.3, 0.3),
     ([2], 0.7, 0.1)],
)  # fmt: skip
def test_value_side_expectation_equals_enumeration_of_a_two_point_law(n, alpha, beta):
    rng = np.random.default_rng(len(n))
    a, v = rng.normal(size=len(n)), rng.normal(size=(len(n), 2))
    chi = (complex(math.cos(alpha), math.sin(alpha)) + complex(math.cos(beta), math.sin(beta))) / 2
    ref = two_point_enumeration(a, v, n, alpha, beta)
    # the float sums of at most 2^7 terms of size ≤ 20: 1e-12 relative
    assert tr.value_side_expectation(a, v, n, chi) == pytest.approx(ref, rel=1e-12, abs=1e-14)
    assert tr.value_side_expectation(a, v, np.asarray(n, dtype=float), chi) == pytest.approx(
        ref, rel=1e-12, abs=1e-14
    )


def test_value_side_expectation_of_a_deterministic_rotation_is_the_rotated_norm():
    # χ = e^{if}: φ_j = n_j f exactly, so the value is |Σ_j a_j e^{i n_j f} z_j|²
    rng = np.random.default_rng(3)
    a, v = rng.normal(size=6), rng.normal(size=(6, 3, 2))
    n, f = np.array([9, 0, 4, 13, 2, 7]), np.array([0.3, -1.1, 2.0])
    z = v[..., 0] + 1j * v[..., 1]
    ref = np.sum(np.abs(np.sum(a[:, None] * np.exp(1j * n[:, None] * f) * z, axis=0)) ** 2)
    got = tr.value_side_expectation(a, v, n, np.exp(1j * f))
    assert got == pytest.approx(ref, rel=1e-12)


@pytest.mark.parametrize(
    "chi",
    [0.5, -0.8, 0.3 + 0.4j, [0.9, 0.2j, -0.5 + 0.5j], [1.0], 1 + 5e-13, 0],
)  # fmt: skip
def test_value_side_expectation_equals_the_pairwise_sum(chi):
    rng = np.random.default_rng(11)
    m = 7
    a, v = rng.normal(size=m), rng.normal(size=(m, 3, 2))
    n = rng.choice(30, size=m, replace=False)
    ref = pairwise_expectation(a, v, n, chi)
    assert tr.value_side_expectation(a, v, n, chi) == pytest.approx(ref, rel=1e-12, abs=1e-13)


def test_value_side_expectation_of_one_value_is_its_weighted_norm():
    # M = 1: no cross terms, a² ‖v‖²
    assert tr.value_side_expectation([3.0], [[1.0, 2.0]], [4], 0.5) == pytest.approx(45.0)
    assert tr.value_side_expectation([-2], [[[1, 0], [0, 1]]], [0], [0.1, 0.2]) == 8.0


# ----------------------------------------------------------------------------------------------
# the bound
# ----------------------------------------------------------------------------------------------


def test_value_side_bound_fields_against_sums_typed_in():
    a = np.array([0.5, -1.0, 2.0])
    v = np.array([[[1.0, 0.0], [0.0, 2.0]], [[1.0, 1.0], [3.0, 0.0]], [[0.0, -1.0], [1.0, 1.0]]])
    c = np.array([0.5, -0.6 + 0.8j * 0.5])  # |c| = 0.5 and √(0.36 + 0.16)
    res = tr.value_side_bound(a, v, c)
    r = np.array([0.5, math.sqrt(0.52)])
    factor = (1 + r) / (1 - r)
    # block 0: Σ a²‖v‖² = 0.25·1 + 1·2 + 4·1 = 6.25; block 1: 0.25·4 + 1·9 + 4·2 = 18
    np.testing.assert_allclose(res.factor, factor, rtol=1e-15)
    assert res.diagonal == pytest.approx(24.25, rel=1e-15)
    assert res.bound == pytest.approx(factor[0] * 6.25 + factor[1] * 18, rel=1e-15)
    # Σ a v: block 0 (0.5 - 1, -1 - 2) = (-0.5, -3); block 1 (-3 + 2, 1 + 2) = (-1, 3)
    assert res.coherent == pytest.approx(0.25 + 9 + 1 + 9, rel=1e-15)
    assert all(type(x) is float for x in (res.bound, res.diagonal, res.coherent))


@pytest.mark.parametrize("c", [0.0, 0.5, -0.9, 0.6j, [0.3, -0.7 + 0.1j]])
def test_value_side_bound_dominates_the_exact_expectation(c):
    rng = np.random.default_rng(5)
    a, v = rng.normal(size=12), rng.normal(size=(12, 2, 2))
    n = rng.choice(50, size=12, replace=False)
    res = tr.value_side_bound(a, v, c)
    exact = tr.value_side_expectation(a, v, n, c)
    assert exact <= res.bound * (1 + 1e-12)
    if np.all(np.asarray(c) == 0):  # c = 0: no cross terms, the bound is attained
        assert res.bound == pytest.approx(exact, rel=1e-12)
        assert res.bound == pytest.approx(res.diagonal, rel=1e-15)


def test_value_side_shapes_broadcast_one_chi_over_blocks():
    rng = np.random.default_rng(8)
    a, v = rng.normal(size=4), rng.normal(size=(4, 3, 2))
    n = [0, 2, 5, 9]
    one = tr.value_side_expectation(a, v, n, [0.4])
    assert one == pytest.approx(tr.value_side_expectation(a, v, n, 0.4), rel=1e-15)
    assert one == pytest.approx(pairwise_expectation(a, v, n, 0.4), rel=1e-12)
    np.testing.assert_array_equal(tr.value_side_bound(a, v, [0.4]).factor, np.full(3, 1.4 / 0.6))


# ----------------------------------------------------------------------------------------------
# argument checks: exact messages and the edges of the accepted range
# ----------------------------------------------------------------------------------------------

_A, _V = np.ones(3), np.ones((3, 2))
_ERRORS = [
    (lambda: tr.value_side_bound(_A, [[1.0, np.nan]] * 3, 0.5), ValueError,
     f"values must not be NaN; got {F}(nan) at index (0, 1)"),
    (lambda: tr.value_side_bound(_A, np.ones((3, 3)), 0.5), ValueError,
     "values must have shape (M, 2) or (M, B, 2) with M, B >= 1; got (3, 3)"),
    (lambda: tr.value_side_bound(_A, np.ones(2), 0.5), ValueError,
     "values must have shape (M, 2) or (M, B, 2) with M, B >= 1; got (2,)"),
    (lambda: tr.value_side_bound([], np.ones((0, 2)), 0.5), ValueError,
     "values must have shape (M, 2) or (M, B, 2) with M, B >= 1; got (0, 2)"),
    (lambda: tr.value_side_bound(_A, np.ones((3, 0, 2)), 0.5), ValueError,
     "values must have shape (M, 2) or (M, B, 2) with M, B >= 1; got (3, 0, 2)"),
    (lambda: tr.value_side_bound(_A, np.ones((3, 1, 1, 2)), 0.5), ValueError,
     "values must have shape (M, 2) or (M, B, 2) with M, B >= 1; got (3, 1, 1, 2)"),
    (lambda: tr.value_side_bound(_A, _V, "0.5"), TypeError,
     "c must be a real or complex number or array; got <U3"),
    (lambda: tr.value_side_bound(_A, _V, True), TypeError,
     "c must be a real or complex number or array; got bool"),
    (lambda: tr.value_side_expectation(_A, _V, [0, 1, 2], False), TypeError,
     "chi must be a real or complex number or array; got bool"),
    (lambda: tr.value_side_bound(_A, _V, complex(np.nan, 0)), ValueError,
     "c must be finite; got (nan+0j)"),
    (lambda: tr.value_side_expectation(_A, _V, [0, 1, 2], np.inf), ValueError,
     "chi must be finite; got inf"),
    (lambda: tr.value_side_bound(_A, _V, [[0.5]]), ValueError,
     "c must be a scalar or have shape (B,) = (1,)"),
    (lambda: tr.value_side_bound(_A, np.ones((3, 2, 2)), [0.1, 0.2, 0.3]), ValueError,
     "c must be a scalar or have shape (B,) = (2,)"),
    (lambda: tr.value_side_bound(_A, _V, 1.0), ValueError,
     "c must satisfy |c| < 1; got modulus np.float64(1.0)"),
    (lambda: tr.value_side_bound(_A, np.ones((3, 2, 2)), [0.5, -1j]), ValueError,
     "c must satisfy |c| < 1; got modulus np.float64(1.0)"),
    (lambda: tr.value_side_expectation(_A, _V, [0, 1, 2], 1.5), ValueError,
     "chi must satisfy |chi| <= 1; got modulus np.float64(1.5)"),
    (lambda: tr.value_side_expectation(_A, _V, [0, 1, 2], 1 + 2e-12), ValueError,
     "chi must satisfy |chi| <= 1; got modulus np.float64(1.000000000002)"),
    (lambda: tr.value_side_bound([1.0, np.inf, 0.0], _V, 0.5), ValueError,
     f"weights must be finite; got {F}(inf) at index 1"),
    (lambda: tr.value_side_bound(np.ones(2), _V, 0.5), ValueError,
     "weights must have shape (M,) = (3,); got (2,)"),
    (lambda: tr.value_side_expectation(np.ones((3, 1)), _V, [0, 1, 2], 0.5), ValueError,
     "weights must have shape (M,) = (3,); got (3, 1)"),
    (lambda: tr.value_side_expectation(_A, _V, [0, 1], 0.5), ValueError,
     "distances must have shape (M,) = (3,); got (2,)"),
    (lambda: tr.value_side_expectation(_A, _V, [0, -1, 2], 0.5), ValueError,
     "distances must be an integer >= 0; got np.int64(-1) at index 1"),
    (lambda: tr.value_side_expectation(_A, _V, [4, 1, 4], 0.5), ValueError,
     "distances must be distinct (one value per route length)"),
]


@pytest.mark.parametrize(("call", "error", "message"), _ERRORS)
def test_value_side_argument_errors_are_exact(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_value_side_edges_of_the_accepted_range():
    # |χ| = 1 is allowed (RoPE), with a 1e-12 allowance for rounding of e^{if}; |c| < 1 strictly
    assert tr.value_side_expectation([1.0, 1.0], [[1.0, 0.0]] * 2, [0, 1], 1.0) == 4.0
    assert tr.value_side_expectation([1.0], [[1.0, 0.0]], [0], 1 + 5e-13) == 1.0
    edge = 1.0 + 1e-12  # the allowance itself is accepted, the next float above it is not
    assert tr.value_side_expectation([1.0], [[1.0, 0.0]], [0], edge) == 1.0
    with pytest.raises(ValueError, match=r"chi must satisfy \|chi\| <= 1"):
        tr.value_side_expectation([1.0], [[1.0, 0.0]], [0], np.nextafter(edge, 2.0))
    # c = 1 - 2⁻⁴⁰ (exact in float64): (1 + c)/(1 - c) = 2⁴¹ - 1 exactly
    assert tr.value_side_bound([1.0], [[1.0, 0.0]], 1 - 2.0**-40).bound == 2.0**41 - 1
    assert tr.value_side_bound([2], [[1, 1]], 0).bound == 8.0  # integer input, M = B = 1
