"""Tests of posflow.theory._hausdorff against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy as sp

from posflow.theory import rollout as ro


def poisson_binomial_brute(lams) -> list[Fraction]:
    """Pr(K = k) for K = Σ_t Bernoulli(λ_t), by summing over all 2^T outcomes."""
    pmf = [Fraction(0)] * (len(lams) + 1)
    for outcome in itertools.product((0, 1), repeat=len(lams)):
        p = Fraction(1)
        for hit, lam in zip(outcome, lams, strict=True):
            p *= lam if hit else 1 - lam
        pmf[sum(outcome)] += p
    return pmf


# ----------------------------------------------------------------------------- moments


def test_moments_at_the_ends_of_the_unit_interval():
    """λ = 0 keeps X = 1 (all moments 1); λ = 1 makes X uniform (moments 1/(k+1))."""
    assert ro.hausdorff_moments([0], 3) == [1, 1, 1, 1]
    assert ro.hausdorff_moments([1], 3) == [1, sp.Rational(1, 2), sp.Rational(1, 3),
                                            sp.Rational(1, 4)]  # fmt: skip
    assert ro.hausdorff_moments([], 0) == [1]  # empty product
    assert ro.hausdorff_moments(["1/2"], 0) == [1]


def test_moments_mix_symbols_and_numbers():
    """E[X^k] = ∏_t (1 - λ_t + λ_t/(k+1)), one symbolic and one rational layer."""
    lam = sp.Symbol("lambda", nonnegative=True)
    got = ro.hausdorff_moments([lam, "1/2", sp.Rational(1, 3)], 1)
    assert got[1] == (1 - lam / 2) * sp.Rational(3, 4) * sp.Rational(5, 6)
    assert ro.hausdorff_moments((v for v in ["1/3"]), 1)[1] == sp.Rational(5, 6)  # a generator


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: ro.hausdorff_moments(["1/2"], -1), ValueError, "kmax must be >= 0; got -1"),
        (lambda: ro.hausdorff_moments(["1/2"], 1.0), TypeError, "kmax must be an integer; got 1.0"),
        (lambda: ro.hausdorff_moments("1/2", 1), TypeError,
         "lambdas must be a sequence with one value per layer; got '1/2'"),
        (lambda: ro.hausdorff_moments(b"1", 1), TypeError,
         "lambdas must be a sequence with one value per layer; got b'1'"),
        (lambda: ro.hausdorff_moments(0.5, 1), TypeError,
         "lambdas must be a sequence with one value per layer; got 0.5"),
        (lambda: ro.hausdorff_moments(["1/2", sp.Rational(3, 2)], 1), ValueError,
         "lambdas must lie in [0, 1]; got 3/2 at index 1"),
        (lambda: ro.hausdorff_moments(["1/2", "-1/4"], 1), ValueError,
         "lambdas must lie in [0, 1]; got -1/4 at index 1"),
        (lambda: ro.hausdorff_moments(["1/2", sp.sqrt(2) / 2], 1), TypeError,
         "lambdas[1] must be a rational number; got the sympy expression sqrt(2)/2"),
        (lambda: ro.hausdorff_moments(["1/2", 0.25], 1), TypeError,
         "lambdas[1] must be exact (int, Fraction, sympy Rational or a string like '1/3'); got the"
         " float 0.25; pass exact='rational' (its exact binary value) or exact='nsimplify' (the"
         " simplest nearby rational) to accept floats"),
    ],
    ids=["kmax", "kmax-type", "str", "bytes", "scalar", "above", "below", "irrational", "float"],
)  # fmt: skip
def test_moment_argument_errors(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_moments_read_floats_as_exact_says():
    """0.25 is a binary fraction, so both readings give 1/4: m_1 = 1 - 1/4 + 1/8."""
    for mode in ("rational", "nsimplify"):
        assert ro.hausdorff_moments([0.25], 1, exact=mode)[1] == sp.Rational(7, 8)
    # 0.1 = 3602879701896397/2^55 exactly; nsimplify reads 1/10
    assert ro.hausdorff_moments([0.1], 1, exact="rational")[1] == 1 - Fraction(0.1) / 2
    assert ro.hausdorff_moments([0.1], 1, exact="nsimplify")[1] == sp.Rational(19, 20)


# ----------------------------------------------------------------------------- influence


def test_influence_exact_errors_name_the_argument():
    with pytest.raises(ValueError) as info:
        ro.influence_exact(0, ["1/2"])
    assert str(info.value) == "n must be >= 1; got 0"
    with pytest.raises(TypeError) as info:
        ro.influence_exact(3, [0.5])
    assert str(info.value).startswith("lambdas[0] must be exact")


def test_influence_exact_of_one_token_and_of_two_tokens():
    """n = 1: p = (1); n = 2: the last row of ∏_t [[1, 0], [λ_t/2, 1 - λ_t/2]] is
    (1 - ∏(1 - λ_t/2), ∏(1 - λ_t/2)) (2 × 2 product by hand)."""
    assert ro.influence_exact(1, ["1/2", "1/3"]) == [1]
    stay = (1 - sp.Rational(1, 4)) * (1 - sp.Rational(1, 6))
    assert ro.influence_exact(2, ["1/2", "1/3"]) == [1 - stay, stay]
    assert ro.influence_exact(2, [0.5], exact="rational") == [sp.Rational(1, 4),
                                                             sp.Rational(3, 4)]  # fmt: skip


# ----------------------------------------------------------------------------- limit law


def test_limit_law_exact_fields():
    """pmf: brute-force Poisson-binomial; atom = Pr(K = 0); x is a real symbol named x."""
    lams = [Fraction(1, 2), Fraction(1, 3), Fraction(1, 4)]
    law = ro.limit_law(["1/2", sp.Rational(1, 3), Fraction(1, 4)])
    brute = poisson_binomial_brute(lams)
    assert law.pmf == tuple(sp.Rational(f.numerator, f.denominator) for f in brute)
    assert all(isinstance(w, sp.Rational) for w in law.pmf)
    assert law.atom == law.pmf[0] == sp.Rational(1, 4)
    assert law.lambdas == (sp.Rational(1, 2), sp.Rational(1, 3), sp.Rational(1, 4))
    assert law.x == sp.Symbol("x", real=True)
    assert law.moment(0) == 1


def test_limit_law_without_layers_is_the_atom_at_one():
    """T = 0: X = 1 surely; no density, cdf 0 below 1, pdf 0 everywhere (also at 0)."""
    law = ro.limit_law([])
    assert law.pmf == (1,) and law.atom == 1 and law.density == 0
    assert law.pdf(0.0) == 0.0
    assert np.array_equal(law.pdf(np.array([0.0, 0.3, 1.0])), [0.0, 0.0, 0.0])
    assert np.array_equal(law.cdf(np.array([0.0, 0.3, 1.0])), [0.0, 0.0, 1.0])


def test_limit_law_pdf_and_cdf_at_the_ends():
    """One layer λ = 1/2: X = 1 w.p. 1/2, else Uniform(0, 1): f = 1/2 on (0, 1], F(x) = x/2
    below 1, F(1) = 1. Two layers: f(x) ∝ -ln x near 0, so f(0) = ∞; f(1) = Pr(K = 1)
    ((-ln 1)^{k-1} = 0 for k ≥ 2)."""
    one = ro.limit_law(["1/2"])
    assert one.pdf(0.0) == 0.5 and one.pdf(1.0) == 0.5
    # Q(1, y) = e^{-y}: rounding of exp(log 2), rtol 1e-15
    np.testing.assert_allclose(one.cdf([0.0, 0.5, 1.0, 3.0]), [0.0, 0.25, 1.0, 1.0], rtol=1e-15)
    assert one.pdf(1) == 0.5 and one.pdf([0, 1]).tolist() == [0.5, 0.5]  # integers read as floats
    lazy = ro.limit_law(["1/2", 0])  # a λ = 0 layer: K ≤ 1, the same law as one layer
    assert lazy.pdf(0.0) == 0.5 and lazy.pdf(0.25) == 0.5
    two = ro.limit_law(["1/2", "1/3"])
    assert two.pdf(0.0) == np.inf
    assert two.pdf(1.0) == pytest.approx(0.5, rel=1e-15)  # Pr(K = 1) = 1/2·2/3 + 1/2·1/3
    x = two.x
    assert two.cdf_expr.subs(x, 0) == 0 and two.cdf_expr.subs(x, -1) == 0
    assert two.cdf_expr.subs(x, 1) == 1 and two.cdf_expr.subs(x, 2) == 1
    assert two.cdf_expr.subs(x, sp.Rational(1, 2)) == two.cdf_expr.args[1][0].subs(x, sp.S.Half)


def test_limit_law_scalar_and_array_outputs():
    law = ro.limit_law(["1/2", "1/3"])
    for f in (law.pdf, law.cdf):
        assert type(f(0.5)) is np.float64
        assert f(np.array([[0.2, 0.5]])).shape == (1, 2)
    with pytest.raises(TypeError) as info:
        law.pdf("a")
    assert str(info.value) == "x must be a number or an array of numbers; got 'a'"
    with pytest.raises(TypeError) as info:
        law.cdf([0.5, None, object()])
    assert str(info.value).startswith("x must be a number or an array of numbers; got [0.5, None")
    with pytest.raises(ValueError) as info:
        law.pdf([0.5, np.nan])
    assert str(info.value) == "x must not contain NaN"
    with pytest.raises(ValueError) as info:
        law.moment(-1)
    assert str(info.value) == "k must be >= 0; got -1"


@pytest.mark.parametrize(
    "lams",
    [
        [0.5, Fraction(1, 4)],
        [np.float32(0.5), "1/4"],
        [sp.Float(0.5), sp.Rational(1, 4)],
        [0.5, 0.25],
        [Fraction(1, 2), 0.25],
    ],
    ids=["float-fraction", "float32-str", "sympy-float", "floats", "fraction-float"],
)
def test_limit_law_float_schedules(lams):
    """Any float makes the law numeric: pmf of (1/2, 1/4) is (3/8, 1/2, 1/8) (binary fractions,
    exact in float64), stored as sympy Floats."""
    law = ro.limit_law(lams)
    assert law.pmf == (sp.Float(0.375), sp.Float(0.5), sp.Float(0.125))
    assert all(isinstance(w, sp.Float) for w in law.pmf)
    assert law.lambdas == (sp.Float(0.5), sp.Float(0.25))
    assert law.atom == sp.Float(0.375)
    assert law.pdf(1.0) == 0.5


def test_limit_law_boundary_lambdas_as_floats():
    """λ = 0.0 and 1.0 are allowed: K = 1 surely, X uniform, f = 1 on (0, 1]."""
    law = ro.limit_law([0.0, 1.0])
    assert law.pmf == (sp.Float(0.0), sp.Float(1.0), sp.Float(0.0))
    assert law.pdf(0.0) == 1.0 and law.pdf(0.5) == 1.0
    assert law.cdf(0.25) == pytest.approx(0.25, rel=1e-15)


def test_limit_law_exact_modes_make_floats_rational():
    law = ro.limit_law([0.5, 0.1], exact="nsimplify")
    assert law.lambdas == (sp.Rational(1, 2), sp.Rational(1, 10))
    assert law.atom == sp.Rational(9, 20)
    law = ro.limit_law([0.5, 0.25], exact="rational")
    assert law.pmf == (sp.Rational(3, 8), sp.Rational(1, 2), sp.Rational(1, 8))


@pytest.mark.parametrize(
    ("lams", "kwargs", "error", "message"),
    [
        ("1", {}, TypeError, "lambdas must be a sequence with one value per layer; got '1'"),
        (b"1", {}, TypeError, "lambdas must be a sequence with one value per layer; got b'1'"),
        (0.5, {}, TypeError, "lambdas must be a sequence with one value per layer; got 0.5"),
        ([0.5, "abc"], {}, ValueError,
         "lambdas[1] must be a number such as '1/3'; got the string 'abc'"),
        ([0.5, sp.sqrt(2) / 2], {}, TypeError,
         "lambdas[1] must be a rational number; got the sympy expression sqrt(2)/2"),
        ([0.5, sp.sqrt(2) / 2], {"exact": "rational"}, TypeError,
         "lambdas[1] must be a rational number; got the sympy expression sqrt(2)/2"),
        ([0.5, math.nan], {}, ValueError, "lambdas must be finite; got nan at index 1"),
        ([0.5, math.inf], {}, ValueError, "lambdas must be finite; got inf at index 1"),
        ([0.5, 1.25], {}, ValueError, "lambdas must lie in [0, 1]; got 1.25 at index 1"),
        ([0.5, -0.25], {}, ValueError, "lambdas must lie in [0, 1]; got -0.25 at index 1"),
        ([0.5, "5/4"], {}, ValueError, "lambdas must lie in [0, 1]; got 1.25 at index 1"),
    ],
    ids=["str", "bytes", "scalar", "bad-string", "irrational", "irrational-exact", "nan", "inf",
         "above", "below", "above-exact"],
)  # fmt: skip
def test_limit_law_argument_errors(lams, kwargs, error, message):
    with pytest.raises(error) as info:
        ro.limit_law(lams, **kwargs)
    assert str(info.value) == message
