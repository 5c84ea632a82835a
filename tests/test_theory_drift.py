"""Tests of posflow.theory._drift against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy as sp

from posflow.theory import rollout as ro
from posflow.theory._drift import _generic_branch


def direct_alibi_drift(i: int, m: float, c: float) -> mpmath.mpf:
    """μ(i) = Σ_k k e^{-mk} / (e^c + Σ_k e^{-mk}) summed term by term at 60 digits (all terms
    positive: no cancellation, unlike the closed form)."""
    with mpmath.workdps(60):
        mm, cc = mpmath.mpf(m), mpmath.mpf(c)
        w = [mpmath.exp(-mm * k) for k in range(1, i + 1)]
        return sum(k * wk for k, wk in enumerate(w, start=1)) / (mpmath.exp(cc) + sum(w))


# ----------------------------------------------------------------------------- symbols


def test_uniform_drift_default_and_renamed_symbol():
    """μ(i) = i/2 (Σ_{j≤i} (i-j)/(i+1) = i(i+1)/2/(i+1)), in the default or a given symbol."""
    i = sp.Symbol("i", integer=True, nonnegative=True)
    assert ro.uniform_drift() == i / 2
    n = sp.Symbol("n", positive=True)
    assert ro.uniform_drift(n) == n / 2


def test_alibi_drift_expr_renames_every_symbol():
    """Renamed symbols: the expression lives in them only and keeps its values (reference: the
    finite sum at a point)."""
    assert ro.alibi_drift_expr().free_symbols == {
        sp.Symbol("i", integer=True, nonnegative=True),
        sp.Symbol("m", positive=True),
        sp.Symbol("c", real=True),
    }
    r, s, u = sp.Symbol("r", integer=True), sp.Symbol("s", positive=True), sp.Symbol("u")
    expr = ro.alibi_drift_expr(r, s, u)
    assert expr.free_symbols == {r, s, u}
    pt = {r: 5, s: sp.Rational(3, 4), u: sp.Rational(1, 3)}
    w = [sp.exp(-sp.Rational(3, 4) * k) for k in range(1, 6)]
    ref = sum(k * wk for k, wk in enumerate(w, start=1)) / (sp.exp(sp.Rational(1, 3)) + sum(w))
    assert abs(sp.N(expr.subs(pt) - ref, 40)) < sp.Float("1e-35")  # 40-digit evaluation


def test_alibi_drift_limit_expr_renames_m_and_c():
    """μ_∞(m, c) = e^{-m}/[(1-e^{-m})(e^c(1-e^{-m}) + e^{-m})], in the given symbols."""
    s, u = sp.Symbol("s", positive=True), sp.Symbol("u", real=True)
    expr = ro.alibi_drift_limit_expr(s, u)
    assert expr.free_symbols == {s, u}
    q = sp.exp(-s)
    paper = q / ((1 - q) * (sp.exp(u) * (1 - q) + q))
    for sv, uv in [("1/3", "-2"), ("2", "1/2"), ("1/10", "0")]:
        pt = {s: sp.Rational(sv), u: sp.Rational(uv)}
        assert abs(sp.N((expr - paper).subs(pt), 40)) < sp.Float("1e-35")  # 40-digit evaluation


def test_content_derivative_closed_form_in_default_and_renamed_symbols():
    """∂μ_∞/∂c = -e^c e^m / (e^c (e^m - 1) + 1)² (differentiating the closed form by hand)."""
    res = ro.alibi_drift_limit_dc()
    m, c = sp.Symbol("m", positive=True), sp.Symbol("c", real=True)
    assert res.negative is True
    hand = -sp.exp(c) * sp.exp(m) / (sp.exp(c) * (sp.exp(m) - 1) + 1) ** 2
    assert sp.simplify(res.derivative - hand) == 0
    s, u = sp.Symbol("s", positive=True), sp.Symbol("u", real=True)
    renamed = ro.alibi_drift_limit_dc(s, u)
    assert renamed.derivative.free_symbols == {s, u}
    assert sp.simplify(renamed.derivative - hand.subs({m: s, c: u})) == 0


def test_generic_branch_of_a_geometric_sum():
    """Σ_{k=1}^{i} q^k = q(1-q^i)/(1-q) for q ≠ 1, i for q = 1 (written out by hand)."""
    q = sp.Symbol("q", positive=True)
    i = sp.Symbol("i", integer=True, nonnegative=True)
    gen = q * (1 - q**i) / (1 - q)
    assert _generic_branch(sp.Piecewise((i, sp.Eq(q, 1)), (gen, True))) == gen
    assert _generic_branch(gen) == gen  # not a Piecewise: returned as is
    bad = [
        sp.Piecewise((i, sp.Eq(q, 2)), (gen, True)),  # another degenerate point
        sp.Piecewise((i, sp.Eq(q, 1)), (gen, q < 1)),  # a non-trivial second condition
    ]
    for expr in bad:
        with pytest.raises(RuntimeError, match=r"^unexpected summation result Piecewise"):
            _generic_branch(expr)


# ----------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ro.background_shift_residual(0), ValueError, "n must be >= 1; got 0"),
        (lambda: ro.residual_drift_residual(0), ValueError, "n must be >= 1; got 0"),
        (lambda: ro.alibi_drift(-1, 1.0), ValueError, "i must be >= 0; got -1"),
        (lambda: ro.alibi_drift(3, True), TypeError, "m must be a real number; got True"),
        (lambda: ro.alibi_drift(3, "1"), TypeError, "m must be a real number; got '1'"),
        (lambda: ro.alibi_drift(3, 1.0, 1j), TypeError, "c must be a real number; got 1j"),
        (lambda: ro.alibi_drift(3, math.nan), ValueError, "m must be finite; got nan"),
        (lambda: ro.alibi_drift(3, 0.5, -math.inf), ValueError, "c must be finite; got -inf"),
        (lambda: ro.alibi_drift(3, -0.5), ValueError, "m must be >= 0; got -0.5"),
        (lambda: ro.alibi_drift_limit([1.0, math.inf]), ValueError, "m must be finite"),
        (lambda: ro.alibi_drift_limit(1.0, [0.0, math.nan]), ValueError, "c must be finite"),
        (lambda: ro.alibi_drift_limit([0.5, -2.0]), ValueError,
         "m must be > 0 (the limit is infinite at m = 0); got -2.0"),
        (lambda: ro.drift([[1, 0, 0], [0, 1, 0]]), ValueError,
         "A must be square; got shape (2, 3)"),
    ],
    ids=["bg-n", "res-n", "i", "m-bool", "m-str", "c-complex", "m-nan", "c-inf", "m-neg",
         "lim-m", "lim-c", "lim-m0", "square"],
)  # fmt: skip
def test_drift_argument_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


# ----------------------------------------------------------------------------- numeric drift


@pytest.mark.parametrize(
    ("i", "m", "c"),
    [(0, 0.7, 1.5), (8, 1e-30, 0.0), (8, 1e-40, -2.0), (3, 1e-17, 4.0), (20, 2.0, -1.0)],
)
def test_alibi_drift_matches_the_direct_sum(i, m, c):
    """The closed form cancels to (m i)² of its terms' size for small m; the reference is the
    term-by-term sum (rel 1e-14: a few ulp of the final rounding)."""
    ref = float(direct_alibi_drift(i, m, c))
    assert ro.alibi_drift(i, m, c) == pytest.approx(ref, rel=1e-14, abs=0)


def test_alibi_drift_at_huge_positions():
    """i = 10⁴⁰: μ(i) = μ_∞ = 1/(e^m - 1) at c = 0 up to i e^{-mi}, and at m = 0
    μ(i) = i(i+1)/2/(e^c + i) (exact rational with e^c at 60 digits)."""
    i = 10**40
    assert ro.alibi_drift(i, 1.0, 0.0) == pytest.approx(1 / math.expm1(1.0), rel=1e-15)
    ref = sp.N(sp.Integer(i) * (i + 1) / 2 / (sp.exp(sp.Rational(1, 2)) + i), 60)
    assert ro.alibi_drift(i, 0.0, 0.5) == pytest.approx(float(ref), rel=1e-15)
    assert ro.alibi_drift(0, 0.0, 0.5) == 0.0  # row 0 only attends to itself


def test_alibi_drift_limit_default_content_and_types():
    """μ_∞(m, 0) = 1/(e^m - 1); scalars give a Python float, arrays an array."""
    out = ro.alibi_drift_limit(0.5)
    assert type(out) is float
    assert out == pytest.approx(1 / math.expm1(0.5), rel=1e-15)
    arr = ro.alibi_drift_limit([0.5, 2.0], 0.0)
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)
    np.testing.assert_allclose(arr, [1 / math.expm1(0.5), 1 / math.expm1(2.0)], rtol=1e-15)


@pytest.mark.parametrize(
    ("m", "c"),
    [(np.float32(0.5), 0.0), (0.5, np.float32(2.5)), (Fraction(1, 2), Fraction(-5, 2)), (1, 3),
     (0.75, 0.25), (0.75, -0.25)],
    ids=["float32-m", "float32-c", "fractions", "ints", "small-c", "small-negative-c"],
)
def test_alibi_drift_limit_reads_inputs_as_float64(m, c):
    """Inputs are read as float64 (the values are exact binary fractions), both signs of c;
    reference: the closed form at 30 digits (rel 1e-14: a few ulp of float64)."""
    mm, cc = sp.Rational(str(Fraction(float(m)))), sp.Rational(str(Fraction(float(c))))
    q = sp.exp(-mm)
    ref = float(sp.N(q / ((1 - q) * (sp.exp(cc) * (1 - q) + q)), 30))
    assert ro.alibi_drift_limit(m, c) == pytest.approx(ref, rel=1e-14)
