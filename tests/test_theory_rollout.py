"""Specification of theory.rollout: exact mathematics of residual-aware attention rollout.

References are independent of the code under test: dense products of sympy Rational matrices,
plain numpy rollouts and softmax kernels, and closed forms typed in from paper [A]'s digest.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.theory import rollout as ro

# ----------------------------------------------------------------------------- helpers


def cesaro(n: int) -> sp.Matrix:
    return sp.Matrix(n, n, lambda i, j: sp.Rational(1, i + 1) if j <= i else 0)


def dense_exact_rollout(kernels, lambdas) -> sp.Matrix:
    n = kernels[0].rows
    P = sp.eye(n)
    for A, lam in zip(kernels, lambdas, strict=True):
        P = ((1 - lam) * sp.eye(n) + lam * A) * P
    return P


def numpy_uniform_influence(n: int, lambdas) -> np.ndarray:
    C = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    P = np.eye(n)
    for lam in lambdas:
        P = ((1 - lam) * np.eye(n) + lam * C) @ P
    return P[-1]


def softmax_alibi_drift(i: int, m: float, c: float) -> float:
    logits = np.array([c if j == i else -m * (i - j) for j in range(i + 1)])
    w = np.exp(logits - logits.max())
    w /= w.sum()
    return float(np.sum(w * (i - np.arange(i + 1))))


rationals01 = st.fractions(min_value=0, max_value=1, max_denominator=12)


# ----------------------------------------------------------------------------- PB1, PB2


@pytest.mark.parametrize(("n", "T"), [(3, 1), (3, 3), (4, 2)])
def test_diagonal_identity_holds_symbolically(n, T):
    assert ro.diagonal_identity_residual(n, T) == [0] * n


def test_symbolic_rollout_equals_product_of_substituted_matrices():
    sym = ro.symbolic_rollout(3, 2, stochastic=True)
    rng = np.random.default_rng(0)
    values = {s: sp.Rational(int(rng.integers(0, 5)), 10) for s in sym.entries}
    lam_values = {sym.lambdas[0]: sp.Rational(1, 3), sym.lambdas[1]: sp.Rational(3, 4)}
    kernels = [A.subs(values) for A in sym.kernels]
    expected = dense_exact_rollout(kernels, [sp.Rational(1, 3), sp.Rational(3, 4)])
    assert sym.P.subs(values).subs(lam_values) == expected
    assert all(sym.P[i, j] == 0 for i in range(3) for j in range(i + 1, 3))


def test_row_sums_of_R_and_P_are_one_for_stochastic_kernels():
    res = ro.row_sum_residual(3, 3)
    assert all(r == 0 for layer in res.R for r in layer)
    assert res.P == (0, 0, 0)
    sym = ro.symbolic_rollout(3, 2, stochastic=True)
    assert sym.P[0, 0] == 1
    # without the stochastic constraint the row sums are not identically 1
    free = ro.symbolic_rollout(2, 1)
    assert sp.expand(sum(free.P.row(1)) - 1) != 0


def test_symbolic_kernel_rejects_bad_arguments():
    with pytest.raises(ValueError, match="n"):
        ro.symbolic_kernel(0)
    with pytest.raises(TypeError, match="n"):
        ro.symbolic_kernel(2.0)
    with pytest.raises(ValueError, match="name"):
        ro.symbolic_kernel(2, "not a name")
    with pytest.raises(ValueError, match="T"):
        ro.symbolic_rollout(2, -1)


# ----------------------------------------------------------------------------- PB3


def test_diagonal_bound_by_hand():
    # layer 0: diag (1, 1/2, 1/3), δ = 2/3; layer 1: diag (1/2, 1/2, 1/4), δ = 3/4
    b = ro.diagonal_bound([[1, "1/2", "1/3"], ["1/2", "1/2", "1/4"]], ["1/2", "1/3"])
    # P_ii: (1, 3/4, 2/3) * (5/6, 5/6, 3/4) -> (5/6, 5/8, 1/2)
    assert b == (sp.Rational(1, 2), 2, sp.Rational(2, 3) * sp.Rational(3, 4), sp.Rational(1, 3))


@settings(max_examples=25, deadline=None)
@given(
    st.integers(min_value=2, max_value=4),
    st.lists(rationals01, min_size=1, max_size=3),
    st.data(),
)
def test_diagonal_bound_chain_on_random_rational_kernels(n, lams, data):
    kernels = []
    for _ in lams:
        A = sp.zeros(n, n)
        for i in range(n):
            w = [sp.Integer(data.draw(st.integers(0, 5))) for _ in range(i + 1)]
            w[i] += 1  # keep the row sum positive
            total = sum(w)
            for j in range(i + 1):
                A[i, j] = w[j] / total
        kernels.append(A)
    lam_s = [sp.Rational(f.numerator, f.denominator) for f in lams]
    P = dense_exact_rollout(kernels, lam_s)
    b = ro.diagonal_bound([[A[i, i] for i in range(n)] for A in kernels], lams)
    diag = [P[i, i] for i in range(n)]
    assert b.min_diagonal == min(diag) == diag[b.argmin]
    assert b.min_diagonal >= b.middle >= b.lower


def test_diagonal_bound_is_attained_for_a_stationary_kernel():
    n, lams = 6, ["1/2", "1/5", "2/3"]
    C = cesaro(n)
    b = ro.diagonal_bound([[C[i, i] for i in range(n)]] * 3, lams)
    assert b.argmin == n - 1
    assert b.min_diagonal == b.middle  # the last row has the smallest diagonal in every layer


def test_diagonal_bound_rejects_bad_input():
    with pytest.raises(ValueError, match="diagonals"):
        ro.diagonal_bound([[1, "1/2"]], ["1/2", "1/3"])
    with pytest.raises(ValueError, match="diagonals"):
        ro.diagonal_bound([[1, "3/2"]], ["1/2"])
    with pytest.raises(ValueError, match="lambdas"):
        ro.diagonal_bound([[1, "1/2"]], ["-1/2"])
    with pytest.raises(TypeError, match="exact"):
        ro.diagonal_bound([[1, 0.5]], ["1/2"])


@pytest.mark.parametrize("T", [1, 2, 4])
def test_bound_chain_certificate(T):
    cert = ro.diagonal_bound_certificate(T)
    assert cert.holds
    assert len(cert.upper_terms) == len(cert.lower_terms) == T
    # spot-check the identity at a random nonnegative point
    rng = np.random.default_rng(T)
    point = {s: sp.Rational(int(rng.integers(0, 7)), 7) for s in cert.diagonal.free_symbols}
    lhs = (cert.diagonal - cert.middle).subs(point)
    assert lhs == sum(term.subs(point) for term in cert.upper_terms) >= 0


# ----------------------------------------------------------------------------- PB9 drifts


def test_uniform_drift_is_half_the_position():
    i = sp.Symbol("i", integer=True, nonnegative=True)
    assert ro.uniform_drift(i) == i / 2
    assert ro.drift(cesaro(7)) == [sp.Rational(k, 2) for k in range(7)]


def test_alibi_no_content_closed_form_and_limit():
    i, m = sp.Symbol("i", integer=True, nonnegative=True), sp.Symbol("m", positive=True)
    c = sp.Symbol("c", real=True)
    mu0 = ro.alibi_drift_expr(i, m, c).subs(c, 0)
    q = sp.exp(-m)
    textbook = q / (1 - q) - (i + 1) * q ** (i + 1) / (1 - q ** (i + 1))
    for iv, mv in [(0, "1/2"), (3, "1/3"), (10, 2), (40, "1/10")]:
        pt = {i: iv, m: sp.Rational(mv)}
        assert abs(sp.N(mu0.subs(pt) - textbook.subs(pt), 40)) < sp.Float("1e-35")
    lim0 = ro.alibi_drift_limit_expr(m, c).subs(c, 0)
    assert sp.simplify(lim0 - 1 / (sp.exp(m) - 1)) == 0


def test_alibi_content_limit_matches_the_paper_formula():
    m, c = sp.Symbol("m", positive=True), sp.Symbol("c", real=True)
    em = sp.exp(-m)
    paper = em / ((1 - em) * (sp.exp(c) * (1 - em) + em))
    assert sp.simplify(ro.alibi_drift_limit_expr(m, c) - paper) == 0


def test_content_shrinks_the_drift():
    res = ro.alibi_drift_limit_dc()
    assert res.negative is True
    cs = np.linspace(-30, 30, 61)
    for m in (0.01, 0.5, 3.0):
        assert np.all(np.diff(ro.alibi_drift_limit(m, cs)) < 0)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=0, max_value=60),
    st.floats(min_value=1e-4, max_value=5.0, allow_nan=False),
    st.floats(min_value=-20.0, max_value=20.0, allow_nan=False),
)
def test_numeric_alibi_drift_matches_a_softmax_kernel(i, m, c):
    ref = softmax_alibi_drift(i, m, c)
    assert ro.alibi_drift(i, m, c) == pytest.approx(ref, rel=1e-11, abs=1e-13)


@pytest.mark.parametrize(("m", "c"), [(0.05, 0.0), (0.5, 3.0), (1.0, -300.0), (2.0, 300.0)])
def test_numeric_limit_matches_symbolic_limit_and_large_i(m, c):
    ms, cs = sp.Symbol("m", positive=True), sp.Symbol("c", real=True)
    expr = ro.alibi_drift_limit_expr(ms, cs)
    exact = float(sp.N(expr.subs({ms: sp.Rational(m), cs: sp.Rational(c)}), 30))
    assert ro.alibi_drift_limit(m, c) == pytest.approx(exact, rel=1e-13)
    if abs(c) < 100:
        assert ro.alibi_drift(5000, m, c) == pytest.approx(exact, rel=1e-12)


def test_alibi_drift_at_zero_slope_is_the_uniform_drift():
    assert ro.alibi_drift(8, 0.0) == pytest.approx(4.0, rel=1e-15)
    assert ro.alibi_drift(8, 1e-12) == pytest.approx(4.0, rel=1e-9)


def test_background_shift_has_no_effect():
    assert ro.background_shift_residual(3) == sp.zeros(3, 3)


def test_residual_scales_the_drift():
    assert ro.residual_drift_residual(4) == [0, 0, 0, 0]


def test_drift_functions_reject_bad_input():
    with pytest.raises(ValueError, match="m"):
        ro.alibi_drift_limit(0.0)
    with pytest.raises(ValueError, match="c"):
        ro.alibi_drift_limit(1.0, np.nan)
    with pytest.raises(ValueError, match="i"):
        ro.alibi_drift(-1, 1.0)
    with pytest.raises(ValueError, match="m"):
        ro.alibi_drift(3, -0.5)
    with pytest.raises(ValueError, match="c"):
        ro.alibi_drift(3, 0.5, math.inf)
    with pytest.raises(ValueError, match="A"):
        ro.drift([[1, 0, 0], [0, 1, 0]])


# ----------------------------------------------------------------------------- PB12


SCHEDULES = [
    [],
    ["1/2"],
    [1],
    [0, "1/3"],
    [Fraction(2, 7), sp.Rational(1, 5), "0.75"],
    ["1/3", "1/2", "1/5", "3/4"],
]


@pytest.mark.parametrize("n", [1, 2, 5, 8])
@pytest.mark.parametrize("lams", SCHEDULES)
def test_influence_exact_equals_dense_rational_rollout(n, lams):
    lam_s = [sp.Rational(str(v)) if isinstance(v, str | Fraction) else sp.S(v) for v in lams]
    P = dense_exact_rollout([cesaro(n)] * len(lams), lam_s) if lams else sp.eye(n)
    assert ro.influence_exact(n, lams) == list(P.row(n - 1))


def test_influence_exact_special_cases():
    assert ro.influence_exact(6, []) == [0] * 5 + [1]
    assert ro.influence_exact(6, [1]) == [sp.Rational(1, 6)] * 6
    p = ro.influence_exact(50, ["1/3", "1/2", "1/5"])
    assert sum(p) == 1 and all(v > 0 for v in p)


def test_influence_exact_matches_numpy_rollout_for_bigger_n():
    lams = ["1/10", "1/3", "1/2", "1/4", "9/10", "1/7"]
    n = 300
    exact = np.array([float(v) for v in ro.influence_exact(n, lams)])
    numeric = numpy_uniform_influence(n, [float(Fraction(v)) for v in lams])
    assert np.max(np.abs(exact - numeric)) < 1e-13


def test_hausdorff_moments_are_the_diagonal_of_P():
    lams = ["1/3", "1/2", "1/5"]
    P = dense_exact_rollout([cesaro(6)] * 3, [sp.Rational(v) for v in lams])
    assert ro.hausdorff_moments(lams, 5) == [P[k, k] for k in range(6)]
    lam = sp.Symbol("lambda", nonnegative=True)
    assert ro.hausdorff_moments([lam], 2)[2] == 1 - lam + lam / 3


def test_float_lambdas_need_an_explicit_choice():
    with pytest.raises(TypeError, match="exact"):
        ro.influence_exact(4, [0.1])
    p_bin = ro.hausdorff_moments([0.1], 1, exact="rational")[1]
    assert p_bin == 1 - sp.Rational(3602879701896397, 36028797018963968) / 2
    assert ro.hausdorff_moments([0.1], 1, exact="nsimplify")[1] == sp.Rational(19, 20)
    with pytest.raises(ValueError, match="exact"):
        ro.influence_exact(4, [0.1], exact="round")


def test_influence_exact_rejects_bad_input():
    with pytest.raises(ValueError, match="lambdas"):
        ro.influence_exact(4, ["1/2", "-1/10"])
    with pytest.raises(ValueError, match="lambdas"):
        ro.influence_exact(4, ["3/2"])
    with pytest.raises(ValueError, match="n"):
        ro.influence_exact(0, ["1/2"])
    with pytest.raises(TypeError, match="lambdas"):
        ro.influence_exact(4, "1/2")
    with pytest.raises(ValueError, match="lambdas"):
        ro.influence_exact(4, ["abc"])
    with pytest.raises(ValueError, match="kmax"):
        ro.hausdorff_moments(["1/2"], -1)


def test_limit_law_total_mass_and_moments_exact():
    lams = ["1/2", "1/3", "1/4"]
    law = ro.limit_law(lams)
    x = law.x
    assert law.atom == sp.Rational(1, 4)  # (1/2)(2/3)(3/4)
    assert sum(law.pmf) == 1
    assert law.atom + sp.integrate(law.density, (x, 0, 1)) == 1
    moments = ro.hausdorff_moments(lams, 3)
    for k in (1, 2, 3):
        assert law.moment(k) == moments[k]
        assert law.atom + sp.integrate(x**k * law.density, (x, 0, 1)) == moments[k]
    inner = law.cdf_expr.args[1][0]
    assert sp.simplify(sp.diff(inner, x) - law.density) == 0


def test_limit_law_numeric_pdf_and_cdf():
    law = ro.limit_law(["1/2", "1/3", "1/4"])
    pts = [0.01, 0.2, 0.5, 0.9, 0.999]
    for p in pts:
        assert law.pdf(p) == pytest.approx(float(law.density.subs(law.x, p)), rel=1e-12)
        assert law.cdf(p) == pytest.approx(float(law.cdf_expr.subs(law.x, p)), rel=1e-12)
    assert law.pdf(0.0) == np.inf
    assert np.array_equal(law.pdf(np.array([-1.0, 1.5])), [0.0, 0.0])
    assert np.array_equal(law.cdf(np.array([-1.0, 0.0, 1.0, 2.0])), [0.0, 0.0, 1.0, 1.0])
    assert law.cdf(1 - 1e-12) == pytest.approx(1 - float(law.atom), abs=1e-9)
    grid = np.linspace(0, 1, 201)
    assert np.all(np.diff(law.cdf(grid)) >= 0)
    with pytest.raises(ValueError, match="x"):
        law.cdf(np.nan)


def test_limit_law_float_schedules_are_numeric():
    law = ro.limit_law([0.3, 0.2])
    assert [float(w) for w in law.pmf] == pytest.approx([0.56, 0.38, 0.06], abs=1e-15)
    with pytest.raises(ValueError, match="lambdas"):
        ro.limit_law([0.3, 1.2])
    with pytest.raises(ValueError, match="lambdas"):
        ro.limit_law([0.3, math.nan])


def test_uniform_influence_converges_to_the_limit_law():
    lams = ["1/3", "1/2", "1/5", "3/4"]
    law = ro.limit_law(lams)
    dist = {}
    for n in (100, 400):
        p = np.array([float(v) for v in ro.influence_exact(n, lams)])
        mid = (np.arange(n - 1) + 0.5) / (n - 1)  # between lattice points j/(n-1)
        dist[n] = np.max(np.abs(np.cumsum(p)[:-1] - law.cdf(mid)))
        # measured: 0.0185 at n = 100 and 0.0074 at n = 400 (log-singular density at 0)
        assert dist[n] < 0.2 * math.log(n) ** 2 / n
    assert dist[400] < dist[100] / 2


# ----------------------------------------------------------------------------- PB5, PB6

t = sp.Symbol("t", integer=True, nonnegative=True)
lam0 = sp.Symbol("lambda0", positive=True)
beta = sp.Symbol("beta", positive=True)
a = sp.Symbol("a")
half = sp.Rational(1, 2)

COLLAPSE_TABLE = [
    (half / (t + 1) ** 2, False),
    (half / (t + 1), True),
    (half / sp.sqrt(t + 1), True),
    (half / (t + 1) ** sp.Rational(3, 2), False),
    (0.5 / (t + 1) ** 1.5, False),
    (0.3 / (t + 1) ** 0.9, True),
    (sp.Rational(1, 5), True),
    (sp.S.Zero, False),
    (1, True),
    (2**-t, False),
    (sp.exp(-t) / 2, False),
    (1 / sp.factorial(t), False),
    (1 / (2 * (t + 1) * sp.log(t + 2)), True),
    (1 / (2 * (t + 2) * sp.log(t + 2) ** 2), False),
    (half + half / (t + 1), True),
    (lam0 / (1 + lam0) / (t + 1), True),
    (lam0 / (1 + lam0) / (t + 1) ** beta, None),
    (lam0 / (1 + lam0) / (t + 1) ** (1 + beta), False),
    (a / (t + 1) ** 2, False),
    (a / (t + 1), None),  # a = 0 is allowed, so divergence is not certain
    ((1 + sp.sin(t)) / 4, None),
]


@pytest.mark.parametrize(("schedule", "expected"), COLLAPSE_TABLE, ids=str)
def test_collapse_decisions(schedule, expected):
    assert ro.collapses(schedule, t, cross_check=False) is expected


def test_collapse_with_sympy_cross_check():
    assert ro.collapses(half / (t + 1), t) is True
    assert ro.collapses(half / (t + 1) ** 2, t) is False


@pytest.mark.parametrize(("lam0", "beta", "expected"), [
    ("1", None, True), ("1/5", None, True), ("1/2", "1/2", True), ("1/2", "1", True),
    ("1/2", "11/10", False), ("1/2", "3/2", False), ("1/2", "2", False),
])  # fmt: skip
def test_power_decay_collapses_is_the_p_series_rule(lam0, beta, expected):
    # Σ λ0/(t+1)^β diverges iff β ≤ 1 (a constant schedule: β = 0), and it agrees with
    # collapses on the schedule written out by hand
    assert ro.power_decay_collapses(lam0, beta) is expected
    sched = sp.Rational(lam0) / (t + 1) ** sp.Rational(beta or 0)
    assert ro.collapses(sched, t) is expected


@pytest.mark.parametrize(
    "bad", [2 / (t + 1), -1 / (t + 1), t / 10, 1 / t, sp.Rational(3, 2), -lam0 / (t + 1)], ids=str
)
def test_collapse_rejects_schedules_outside_unit_interval(bad):
    with pytest.raises(ValueError, match="schedule"):
        ro.collapses(bad, t)


def test_collapse_rejects_a_different_symbol_named_t():
    with pytest.raises(ValueError, match="schedule"):
        ro.collapses(half / (sp.Symbol("t") + 1), t)


def test_collapse_rejects_bad_types():
    with pytest.raises(TypeError, match="t"):
        ro.collapses(half / (t + 1), "t")
    with pytest.raises(TypeError, match="schedule"):
        ro.collapses("1/(t+1)", t)


# ------------------------------------ the leaf modules theory._exact and theory._symbolic
# (their own test file would change the mutation oracle, benchmarks/mutation.py: ORACLE;
# theory.rollout re-exports them and is their public face)

from posflow.theory._exact import (  # noqa: E402
    as_count,
    as_exact_lambdas,
    fractions_to_sympy,
    to_fraction,
)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: as_count(1.5, "k"), TypeError, r"k must be an integer; got 1.5"),
        (lambda: to_fraction(math.inf, "x", "rational"), ValueError,
         r"x must be finite; got inf"),
        (lambda: to_fraction(True, "x"), TypeError, r"x must be a number; got the bool True"),
        (lambda: to_fraction(sp.sqrt(2), "x"), TypeError,
         r"x must be a rational number; got the sympy expression sqrt(2)"),
        (lambda: to_fraction([1], "x"), TypeError, r"x must be a number; got [1]"),
        (lambda: as_exact_lambdas([2]), ValueError,
         r"lambdas must lie in [0, 1]; got 2 at index 0"),
        (lambda: ro.symbolic_kernel(1.5), TypeError, r"n must be an integer; got 1.5"),
    ],
    ids=["count", "finite", "bool", "expression", "list", "lambdas", "kernel-n"],
)
def test_exact_argument_errors_name_the_argument(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


@pytest.mark.parametrize("x", [0.1, np.float64(0.1), sp.Float(0.1)], ids=["float", "np", "sympy"])
def test_floats_are_refused_unless_exact_says_how_to_read_them(x):
    with pytest.raises(TypeError) as info:
        to_fraction(x, "x")
    assert str(info.value) == (
        "x must be exact (int, Fraction, sympy Rational or a string like '1/3'); got the float "
        "0.1; pass exact='rational' (its exact binary value) or exact='nsimplify' (the simplest "
        "nearby rational) to accept floats"
    )
    # the binary value of 0.1 is 3602879701896397 / 2^55 (IEEE 754 round-to-nearest)
    assert to_fraction(x, "x", "rational") == Fraction(3602879701896397, 2**55)
    assert to_fraction(x, "x", "nsimplify") == Fraction(1, 10)


def test_nsimplify_reads_irrational_looking_floats_as_rationals():
    # sympy's nsimplify alone returns sqrt(2) for this float; the exact mode must stay rational
    f = to_fraction(math.sqrt(2), "x", "nsimplify")
    assert isinstance(f, Fraction)
    assert abs(f - Fraction(math.sqrt(2))) < Fraction(1, 10**12)
    assert f * f != 2  # rational, so not √2 itself


def test_fractions_to_sympy_keeps_numerator_and_denominator():
    out = fractions_to_sympy([Fraction(-2, 7), Fraction(5), Fraction(0)])
    assert out == [sp.Rational(-2, 7), sp.Integer(5), sp.Integer(0)]
    assert all(isinstance(v, sp.Rational) for v in out)


def test_symbolic_kernel_default_names_and_nonnegative_symbols():
    A, syms = ro.symbolic_kernel(2)
    a00, a10, a11 = (sp.Symbol(f"a_{i}_{j}", nonnegative=True) for i, j in ((0, 0), (1, 0), (1, 1)))
    assert syms == (a00, a10, a11)  # Symbols with other assumptions compare unequal
    assert A == sp.Matrix([[a00, 0], [a10, a11]])
    assert all(s.is_nonnegative for s in syms)
    assert sp.sqrt(a10**2) == a10  # simplification that needs a10 ≥ 0


# ------------------------------------------------ theory._summability: the guards of its tests

import posflow.theory._summability as summability  # noqa: E402
from posflow.theory._summability import _definite, _sympy_opinion  # noqa: E402

_x = sp.Symbol("x", positive=True)
_unevaluated_limit = sp.Limit(sp.sin(_x) * sp.gamma(_x) ** _x, _x, sp.oo)


@pytest.mark.parametrize(
    "value",
    [
        None,
        3,  # not a sympy expression
        sp.Abs(_unevaluated_limit),  # real-valued, but an unevaluated limit
        sp.AccumBounds(-1, 1),  # extended real, but a set of limit points
        sp.Abs(sp.nan, evaluate=False),  # real-typed wrappers around nan and zoo
        sp.Abs(sp.zoo, evaluate=False),
        sp.Piecewise((1, _x > 1), (0, True)),
        sp.I,
    ],
    ids=["None", "int", "limit", "bounds", "nan", "zoo", "piecewise", "imaginary"],
)
def test_limits_that_are_not_definite_are_not_reasoned_with(value):
    assert _definite(value) is False


@pytest.mark.parametrize("value", [sp.oo, -sp.oo, half, sp.log(2)], ids=str)
def test_definite_limits_are_extended_reals(value):
    assert _definite(value) is True


def test_sympy_opinion_says_true_for_divergence():
    assert _sympy_opinion(1 / (t + 1), t) is True  # harmonic series
    assert _sympy_opinion(half**t, t) is False  # geometric series


def test_limits_without_a_value_are_none():
    assert summability._limit(sp.sin(_x), _x) is None  # sin has no limit at ∞ (AccumBounds)
    assert summability._limit(1 / _x, _x) == 0


def _log_scale(x):
    L1 = sp.log(x)
    L2 = sp.log(L1)
    return L1, L2, sp.log(L2)


def test_log_scale_tests_reach_log_log_log_t():
    # Bertrand: Σ 1/(t L1 L2 L3^p) converges iff p > 1; e_0 = e_1 = e_2 = -1, e_3 = -p
    L1, L2, L3 = _log_scale(_x)
    assert summability._decide_positive(1 / (_x * L1 * L2 * L3**2), _x) is False
    # p = 1 needs L_5 = log L_4, beyond the documented depth (scales up to L_4): undecided
    assert summability._decide_positive(1 / (_x * L1 * L2 * L3), _x) is None


@pytest.mark.parametrize(
    ("g", "hide_term", "expected"),
    [
        ((_x + 2) / (2 * _x + 2), False, True),  # term test: g -> 1/2 > 0
        (2**-_x, False, False),  # ratio test: 1/2 < 1
        (sp.Rational(3, 2) ** _x, True, True),  # ratio test: 3/2 > 1 (the term test would say so)
    ],
    ids=["term", "ratio<1", "ratio>1"],
)
def test_term_and_ratio_tests_decide_without_the_log_scale(monkeypatch, g, hide_term, expected):
    # hide the log-scale limits (and, with hide_term, the term limit) so that the remaining
    # comparison test must decide; the verdicts are those of the series themselves
    real = summability._limit

    def limit(expr, x):
        hidden = expr.has(sp.log) or (hide_term and expr == g)
        return None if hidden else real(expr, x)

    monkeypatch.setattr(summability, "_limit", limit)
    assert summability._decide_positive(g, _x) is expected


def test_truth_reads_only_definite_booleans():
    a = sp.Symbol("a")
    assert summability._truth(True) is True and summability._truth(sp.true) is True
    assert summability._truth(False) is False and summability._truth(sp.false) is False
    assert summability._truth(a > 0) is None


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        # provable for every t ≥ 0 from t's assumptions (integer, nonnegative): generic message
        (-(t + 1) / 2, "schedule must lie in [0, 1] for t = 0, 1, 2, ...; got -t/2 - 1/2"),
        (1 + 1 / (t + 1), "schedule must lie in [0, 1] for t = 0, 1, 2, ...; got 1 + 1/(t + 1)"),
        # found only at a sample point
        (sp.sin(t) / t, "schedule must be finite at every t >= 0; got nan at t = 0"),
        (sp.sqrt(t - 1), "schedule must be real; got I at t = 0"),
        (sp.Symbol("a") / t, "schedule must be finite at every t >= 0; got zoo*a at t = 0"),
    ],
    ids=["negative", "above-one", "nan", "imaginary", "zoo-times-parameter"],
)
def test_schedule_range_errors_are_exact(schedule, message):
    with pytest.raises(ValueError) as info:
        ro.collapses(schedule, t)
    assert str(info.value) == message



@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (sp.sin(t), "schedule must lie in [0, 1]; got sin(4) at t = 4"),  # sin(4) < 0
        ("1/2", "schedule must be a sympy expression or a number; got '1/2'"),
        ([1], "schedule must be a sympy expression or a number; got [1]"),
        (half / (sp.Symbol("t") + 1),
         "schedule contains a symbol named 't' that is not t (different sympy assumptions); "
         "build the schedule with the same Symbol you pass as t"),
    ],
    ids=["sampled-negative", "string", "list", "twin"],
)
def test_collapse_argument_errors_are_exact(schedule, message):
    with pytest.raises((TypeError, ValueError)) as info:
        ro.collapses(schedule, t)
    assert str(info.value) == message


def test_collapse_reads_fractions_and_sums_as_a_whole():
    assert ro.collapses(Fraction(2, 3), t) is True  # a positive constant schedule
    # 1/2 − 1/(2(t+2)) → 1/2: diverges (its additive parts are not a factor and a decay)
    assert ro.collapses(half - 1 / (2 * (t + 2)), t) is True


def test_collapse_returns_none_when_sympy_disagrees(monkeypatch):
    def opinion(schedule, t_):  # sympy "converges" where the comparison tests say diverges
        assert schedule == half / (t + 1) and t_ is t
        return False

    monkeypatch.setattr(summability, "_sympy_opinion", opinion)
    assert ro.collapses(half / (t + 1), t) is None  # cross-checked by default
    assert ro.collapses(half / (t + 1), t, cross_check=False) is True


def test_constant_schedule_of_unknown_sign_is_undecided():
    # a constant λ ≥ 0 collapses only if λ > 0 is known; λ = a ≥ 0 might be 0
    assert ro.collapses(sp.Symbol("a", nonnegative=True), t) is None
    assert ro.collapses(sp.Symbol("a", positive=True), t) is True


def test_sympy_opinion_is_none_when_sympy_is_undecided(monkeypatch):
    class Undecided:  # a Sum whose is_convergent() is an undecided condition
        def __init__(self, *args):
            pass

        def is_convergent(self):
            return sp.Symbol("a") < 1

    monkeypatch.setattr(summability.sp, "Sum", Undecided)
    assert _sympy_opinion(half**t, t) is None


def test_collapse_splits_off_a_constant_factor_not_a_constant_term():
    # 1/4 + 1/(4 (t+1)^2) -> 1/4 > 0 diverges; split additively it would look like a p-series
    q = sp.Rational(1, 4)
    assert ro.collapses(q + q / (t + 1) ** 2, t) is True


# ------------------------------------------- theory.rollout: structure, edges and messages


def _nonneg(name: str) -> sp.Symbol:
    return sp.Symbol(name, nonnegative=True)


@pytest.mark.parametrize("stochastic", [False, True])
def test_symbolic_rollout_is_built_from_named_kernels_and_lambdas(stochastic):
    n, T = 3, 2
    sym = ro.symbolic_rollout(n, T, stochastic=stochastic)
    kernels = [ro.symbolic_kernel(n, f"a{t}", stochastic=stochastic) for t in range(T)]
    lams = [_nonneg(f"lambda_{t}") for t in range(T)]
    assert sym.kernels == tuple(A for A, _ in kernels)
    assert sym.lambdas == tuple(lams)
    assert sym.entries == tuple(s for _, syms in kernels for s in syms)
    R = [(1 - lam) * sp.eye(n) + lam * A for (A, _), lam in zip(kernels, lams, strict=True)]
    assert sym.R == tuple(R)
    assert sym.P == (R[1] * R[0]).applyfunc(sp.expand)
    assert all(sym.P[i, j] == sp.expand(sym.P[i, j]) for i in range(n) for j in range(n))


def test_symbolic_rollout_defaults_to_free_kernels_and_allows_zero_layers():
    free = ro.symbolic_rollout(2, 1)
    a = [_nonneg(f"a0_{i}_{j}") for i, j in ((0, 0), (1, 0), (1, 1))]
    assert free.entries == tuple(a)  # the diagonal is a free symbol too
    empty = ro.symbolic_rollout(3, 0)
    assert empty.P == sp.eye(3)
    assert empty.kernels == empty.lambdas == empty.R == empty.entries == ()


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ro.symbolic_rollout(0, 1), ValueError, "n must be >= 1; got 0"),
        (lambda: ro.symbolic_rollout(2.0, 1), TypeError, "n must be an integer; got 2.0"),
        (lambda: ro.symbolic_rollout(2, -1), ValueError, "T must be >= 0; got -1"),
        (lambda: ro.symbolic_rollout(2, None), TypeError, "T must be an integer; got None"),
        (lambda: ro.diagonal_identity_residual(0, 1), ValueError, "n must be >= 1; got 0"),
        (lambda: ro.row_sum_residual(2, -2), ValueError, "T must be >= 0; got -2"),
        (lambda: ro.diagonal_bound_certificate(-1), ValueError, "T must be >= 0; got -1"),
        (lambda: ro.diagonal_bound_certificate(1.0), TypeError, "T must be an integer; got 1.0"),
    ],
)
def test_rollout_count_errors_are_exact(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_diagonal_identity_residual_is_zero_and_one_per_token():
    assert ro.diagonal_identity_residual(2, 2) == [0, 0]
    assert ro.diagonal_identity_residual(3, 0) == [0, 0, 0]  # P = I, empty product 1


def test_row_sum_residuals_have_one_entry_per_row_and_layer():
    res = ro.row_sum_residual(2, 3)
    assert res.R == ((0, 0),) * 3 and res.P == (0, 0)
    assert ro.row_sum_residual(4, 0) == ((), (0, 0, 0, 0))


# diagonal_bound: P_ii = Π_t (1 - λ_t (1 - A_t[i,i])), δ_t = max_i (1 - A_t[i,i]), by hand
_DIAGONAL_CASES = [
    # diagonals, lambdas, (min P_ii, argmin, Π(1 - λδ), Π(1 - λ))
    ([], [], (1, 0, 1, 1)),  # no layers: P = I
    ([[0, 1]], [1], (0, 0, 0, 0)),  # λ = 1, A[0,0] = 0: P_00 = 0
    ([["1/2"]], ["1/3"], (sp.Rational(5, 6), 0, sp.Rational(5, 6), sp.Rational(2, 3))),
    ([["1/2", "1/4", "1/2"]], ["1/2"],
     (sp.Rational(5, 8), 1, sp.Rational(5, 8), sp.Rational(1, 2))),
    # a tie: P_00 = P_11 = (3/4)(1/2) = 3/8 < P_22 = 1; the smallest index is the argmin
    ([["1/2", "1/2", 1], [0, 0, 1]], ["1/2", "1/2"],
     (sp.Rational(3, 8), 0, sp.Rational(3, 8), sp.Rational(1, 4))),
    # layer 0: d = (0, 1/2), layer 1: d = (3/4, 0): the bound chain is strict
    ([[1, "1/2"], ["1/4", 1]], ["1/2", "2/3"],
     (sp.Rational(1, 2), 0, sp.Rational(3, 4) * sp.Rational(1, 2), sp.Rational(1, 6))),
]  # fmt: skip


@pytest.mark.parametrize(("diagonals", "lambdas", "expected"), _DIAGONAL_CASES)
def test_diagonal_bound_cases_by_hand(diagonals, lambdas, expected):
    b = ro.diagonal_bound(diagonals, lambdas)
    assert tuple(b) == expected
    assert all(isinstance(x, sp.Rational) for x in (b.min_diagonal, b.middle, b.lower))
    assert type(b.argmin) is int


def test_diagonal_bound_reads_floats_as_told():
    # 0.5 and 0.25 are exact binary fractions: the same chain as with '1/2', '1/4'
    ref = ro.diagonal_bound([["1/2", "1/4"]], ["1/2"])
    assert ro.diagonal_bound([[0.5, 0.25]], [0.5], exact="rational") == ref
    assert ro.diagonal_bound([[0.5, 0.25]], ["1/2"], exact="nsimplify") == ref
    b = ro.diagonal_bound((("1/3",),), [0.1], exact="nsimplify")  # λ = 1/10
    assert b.min_diagonal == 1 - sp.Rational(1, 10) * sp.Rational(2, 3)


_DIAGONAL_ERRORS = [
    (lambda: ro.diagonal_bound("12", ["1/2", "1/2"]), TypeError,
     "diagonals must be a sequence of T sequences (one per layer)"),
    (lambda: ro.diagonal_bound(iter([[1]]), ["1/2"]), TypeError,
     "diagonals must be a sequence of T sequences (one per layer)"),
    (lambda: ro.diagonal_bound([[1, "1/2"]], ["1/2", "1/3"]), ValueError,
     "diagonals must have one row per layer: len(diagonals) = 1, len(lambdas) = 2"),
    (lambda: ro.diagonal_bound([[1, "3/2"]], ["1/2"]), ValueError,
     "diagonals must lie in [0, 1]; got 3/2 at index [0][1]"),
    (lambda: ro.diagonal_bound([[1], ["-1/4"]], ["1/2", "1/2"]), ValueError,
     "diagonals must lie in [0, 1]; got -1/4 at index [1][0]"),
    (lambda: ro.diagonal_bound([[1, 1], [1, 1, 1]], ["1/2", "1/2"]), ValueError,
     "diagonals rows must all have length 2; row 1 has 3"),
    (lambda: ro.diagonal_bound([[]], ["1/2"]), ValueError,
     "diagonals rows must be non-empty (n >= 1)"),
    (lambda: ro.diagonal_bound([["x"]], ["1/2"]), ValueError,
     "diagonals[0][0] must be a number such as '1/3'; got the string 'x'"),
    (lambda: ro.diagonal_bound([[1, 0.5]], ["1/2"]), TypeError,
     "diagonals[0][1] must be exact (int, Fraction, sympy Rational or a string like '1/3'); "
     "got the float 0.5; pass exact='rational' (its exact binary value) or exact='nsimplify' "
     "(the simplest nearby rational) to accept floats"),
    (lambda: ro.diagonal_bound([[1]], [2]), ValueError,
     "lambdas must lie in [0, 1]; got 2 at index 0"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "error", "message"), _DIAGONAL_ERRORS)
def test_diagonal_bound_errors_are_exact(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_diagonal_bound_accepts_the_ends_of_the_unit_interval():
    assert tuple(ro.diagonal_bound([[0, 1]], [0])) == (1, 0, 1, 1)


@pytest.mark.parametrize("T", [0, 1, 2, 3])
def test_bound_certificate_terms_typed_in(T):
    lam = [_nonneg(f"lambda_{t}") for t in range(T)]
    rho = [_nonneg(f"rho_{t}") for t in range(T)]
    g = [_nonneg(f"g_{t}") for t in range(T)]
    h = [_nonneg(f"h_{t}") for t in range(T)]
    diag = [rho[t] + lam[t] * (g[t] + h[t]) for t in range(T)]
    mid = [rho[t] + lam[t] * g[t] for t in range(T)]
    cert = ro.diagonal_bound_certificate(T)
    assert cert.holds is True
    assert cert.diagonal == sp.Mul(*diag) and cert.middle == sp.Mul(*mid)
    assert cert.lower == sp.Mul(*rho)
    # Π a - Π b = Σ_k (Π_{t<k} a_t)(a_k - b_k)(Π_{t>k} b_t), a_k - b_k = λ_k h_k resp. λ_k g_k
    up = tuple(sp.Mul(*diag[:k]) * lam[k] * h[k] * sp.Mul(*mid[k + 1 :]) for k in range(T))
    low = tuple(sp.Mul(*mid[:k]) * lam[k] * g[k] * sp.Mul(*rho[k + 1 :]) for k in range(T))
    assert cert.upper_terms == up and cert.lower_terms == low


def test_bound_certificate_needs_the_signs_of_its_symbols(monkeypatch):
    # the telescoping identities are polynomial and hold for any symbols, but the terms are
    # nonnegative only when the symbols are: without the assumptions the certificate must fail
    plain = sp.symbols

    def unsigned(names, **assumptions):
        return plain(names)

    monkeypatch.setattr(sp, "symbols", unsigned)
    cert = ro.diagonal_bound_certificate(2)
    assert cert.holds is False
    assert sp.expand(cert.diagonal - cert.middle - sp.Add(*cert.upper_terms)) == 0
