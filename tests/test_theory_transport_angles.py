"""Tests of posflow.theory._transport_angles against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

from posflow.theory import transport as tr

F = "np.float64"  # NumPy 2 repr of a float64 entry
THETA = sp.Symbol("theta", real=True)
STEPS = sp.Symbol("L", integer=True, nonnegative=True)
A, SIGMA = sp.Symbol("a", positive=True), sp.Symbol("sigma", positive=True)
F_POS, F_REAL = sp.Symbol("f", positive=True), sp.Symbol("f", real=True)


def mp_log_abs_sinc(x: float) -> float:
    """ln|sin x / x| at 60 digits (0 at x = 0)."""
    if x == 0.0:
        return 0.0
    with mpmath.workdps(60):
        y = mpmath.mpf(x)
        return float(mpmath.log(abs(mpmath.sin(y) / y)))


def mp_mod_two_pi(d: int, f: float) -> float:
    """D·f mod 2π at 60 digits (D·f is exact: an integer times a float)."""
    with mpmath.workdps(60):
        return float(mpmath.fmod(d * mpmath.mpf(f), 2 * mpmath.pi))


# ----------------------------------------------------------------------------------------------
# the derivation: every field against the textbook characteristic functions, typed in
# ----------------------------------------------------------------------------------------------

_SINC_A, _SINC_F = sp.sin(A) / A, sp.sin(F_POS) / F_POS
_DERIVATIONS = {
    # law: (parameter, density, support, E cos θ, E sin θ, φ, symmetric,
    #       E cos Σθ, E sin Σθ, |φ|, |φ^L| = 1)
    "uniform": (A, 1 / (2 * A), (-A, A), _SINC_A, 0, _SINC_A, True,
                _SINC_A**STEPS, 0, sp.Abs(sp.sin(A)) / A, False),
    "normal": (SIGMA, sp.exp(-(THETA**2) / (2 * SIGMA**2)) / (SIGMA * sp.sqrt(2 * sp.pi)),
               (-sp.oo, sp.oo), sp.exp(-(SIGMA**2) / 2), 0, sp.exp(-(SIGMA**2) / 2), True,
               sp.exp(-STEPS * SIGMA**2 / 2), 0, sp.exp(-(SIGMA**2) / 2), False),
    "uniform_positive": (F_POS, 1 / (2 * F_POS), (0, 2 * F_POS), sp.sin(2 * F_POS) / (2 * F_POS),
                         sp.sin(F_POS) ** 2 / F_POS, sp.exp(sp.I * F_POS) * _SINC_F, False,
                         _SINC_F**STEPS * sp.cos(STEPS * F_POS),
                         _SINC_F**STEPS * sp.sin(STEPS * F_POS), sp.Abs(sp.sin(F_POS)) / F_POS,
                         False),
    "deterministic": (F_REAL, sp.DiracDelta(THETA - F_REAL), (-sp.oo, sp.oo), sp.cos(F_REAL),
                      sp.sin(F_REAL), sp.exp(sp.I * F_REAL), False, sp.cos(STEPS * F_REAL),
                      sp.sin(STEPS * F_REAL), 1, True),
}  # fmt: skip


def _agree(expr, ref, points) -> bool:
    """expr and ref agree to 25 digits at every point (dicts of symbol values)."""
    for point in points:
        diff = complex(sp.N((sp.sympify(expr) - ref).subs(point), 30))
        if not abs(diff) < 1e-25:
            return False
    return True


@pytest.mark.parametrize("law", list(_DERIVATIONS))
def test_angle_characteristic_fields_are_the_textbook_ones(law):
    (p, density, support, e_cos, e_sin, phi, symmetric, sum_cos, sum_sin, modulus,
     unit) = _DERIVATIONS[law]  # fmt: skip
    c = tr.angle_characteristic(law)
    assert c.law == law
    assert c.parameter == p and c.steps == STEPS  # same names and assumptions
    assert c.support == support
    # 0.7 and 4 (where sin p < 0); the deterministic law also at a negative frequency
    values = [0.7, 4.0, -1.3] if law == "deterministic" else [0.7, 4.0]
    points = [{p: sp.Float(v, 30), STEPS: k, THETA: sp.Float(0.3, 30)}
              for v in values for k in (1, 3)]  # fmt: skip
    if law == "deterministic":
        assert c.density == density
    else:
        assert _agree(c.density, density, points)
    assert _agree(c.mean_cos, e_cos, points) and _agree(c.mean_sin, e_sin, points)
    assert _agree(c.value, phi, points) and _agree(c.closed_form, phi, points)
    assert c.matches_closed_form is True and c.symmetric is symmetric
    assert _agree(c.sum_cos, sum_cos, points) and _agree(c.sum_sin, sum_sin, points)
    assert _agree(c.modulus, modulus, points)
    assert c.unit_modulus is unit
    assert c.summary().splitlines()[1] == f"  law: {law}"


# ----------------------------------------------------------------------------------------------
# ln|sin f / f| and ln|φ|
# ----------------------------------------------------------------------------------------------


def test_log_sinc_against_60_digit_mpmath():
    f = np.array([[0.0, 1e-6, 0.3], [-4.0, 7.5, 100.0]])
    ref = np.vectorize(mp_log_abs_sinc)(f)
    got = tr.log_sinc(f)
    assert got.shape == (2, 3) and got.dtype == np.float64
    np.testing.assert_allclose(got, ref, rtol=4e-16, atol=0)  # a few ulp: 40-digit evaluation
    assert tr.log_sinc(0.0) == 0.0 and type(tr.log_sinc(0.5)) is float
    assert tr.log_sinc(1.0) == pytest.approx(math.log(math.sin(1.0)), rel=1e-15)


@pytest.mark.parametrize("f", [1e-30, 1e-21, 1e-20])
def test_log_sinc_of_tiny_frequencies_is_minus_f2_over_6_to_working_precision(f):
    # ln(sin f / f) = -f²/6 + O(f⁴); 40-digit (136-bit) arithmetic resolves 1 - sinc to 2^-136
    assert abs(tr.log_sinc(f) + f * f / 6) <= 2.0**-130


@pytest.mark.parametrize(
    ("law", "param", "reference"),
    [
        ("uniform", [0.0, 1e-4, 0.5, 4.0, 7.0], mp_log_abs_sinc),
        ("uniform_positive", [0.0, 1e-4, 0.5, 4.0, 7.0], mp_log_abs_sinc),
        ("normal", [0.0, 1e-5, 0.5, 3.0], lambda s: -s * s / 2),
        ("deterministic", [-3.0, 0.0, 2.0, 10.0], lambda f: 0.0),
    ],
)
def test_log_characteristic_modulus_against_closed_forms(law, param, reference):
    # ln|sin a / a| (uniform laws), -σ²/2 (normal), 0 (deterministic: |e^{if}| = 1)
    ref = [reference(x) for x in param]
    got = tr.log_characteristic_modulus(law, param)
    assert got.shape == (len(param),)
    np.testing.assert_allclose(got, ref, rtol=4e-16, atol=0)
    assert tr.log_characteristic_modulus(law, param[-1]) == pytest.approx(ref[-1], rel=4e-16)


# ----------------------------------------------------------------------------------------------
# φ and the phase moments
# ----------------------------------------------------------------------------------------------


def _phi(law: str, p: float) -> complex:
    """φ typed in: sin a/a, e^{-σ²/2}, e^{if} sin f/f, e^{if} (sin x/x = 1 at x = 0)."""
    sinc = math.sin(p) / p if p else 1.0
    return {"uniform": sinc, "normal": math.exp(-p * p / 2),
            "uniform_positive": complex(math.cos(p), math.sin(p)) * sinc,
            "deterministic": complex(math.cos(p), math.sin(p))}[law]  # fmt: skip


_PARAMS = {"uniform": [0.0, 0.5, 2.0, 4.0, 7.0], "normal": [0.0, 0.5, 2.0],
           "uniform_positive": [0.0, 0.5, 2.0, 4.0, 7.0],
           "deterministic": [-2.5, 0.0, 0.5, 4.0, 10.0]}  # fmt: skip


@pytest.mark.parametrize("law", list(_PARAMS))
def test_characteristic_value_against_closed_forms(law):
    param = np.array(_PARAMS[law])
    got = tr.characteristic_value(law, param.reshape(1, -1))
    assert got.shape == (1, param.size) and got.dtype == np.complex128
    ref = np.array([_phi(law, p) for p in param])
    np.testing.assert_allclose(got[0], ref, rtol=0, atol=1e-15)  # |φ| ≤ 1: a few ulp of 1
    assert tr.characteristic_value(law, param[1]) == pytest.approx(ref[1], abs=1e-15)


@pytest.mark.parametrize("law", list(_PARAMS))
@pytest.mark.parametrize("steps", [1, 2, 7])
def test_phase_moments_are_powers_of_phi(law, steps):
    param = np.array(_PARAMS[law])
    c, s = tr.phase_moments(law, param, steps)
    ref = np.array([_phi(law, p) ** steps for p in param])  # E e^{iΣθ} = φ^L (independence)
    np.testing.assert_allclose(c, ref.real, rtol=0, atol=1e-14)  # L·|arg| ≤ 70: 1e-14
    np.testing.assert_allclose(s, ref.imag, rtol=0, atol=1e-14)


def test_phase_moments_of_zero_steps_are_one_and_zero():
    c, s = tr.phase_moments("normal", [[0.5, 1.0, 2.0]], 0)
    np.testing.assert_array_equal(c, np.ones((1, 3)))
    np.testing.assert_array_equal(s, np.zeros((1, 3)))
    assert tr.phase_moments("deterministic", 1.0, 0.0) == (1.0, 0.0)


# ----------------------------------------------------------------------------------------------
# RoPE phases and the trained range (AT16)
# ----------------------------------------------------------------------------------------------


def test_rope_phase_against_60_digit_reduction():
    f = np.array([[0.0, 1e-4, 1.0], [0.5, 2.0, 6.5]])
    for d in (0, 1, 7, 10**6, 2**40):
        got = tr.rope_phase(d, f)
        ref = np.vectorize(mp_mod_two_pi)(d, f)
        assert got.shape == (2, 3)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-15)  # one ulp of 2π
        assert np.all((got >= 0) & (got < 2 * math.pi))
    assert tr.rope_phase(3, 1.0) == pytest.approx(3.0, abs=1e-15)


def _unwrapped(f: float, length: int) -> bool:
    # L·f < 2π decided with exact rationals: π lies in (p/q ± 1e-40) for the 45-digit p/q
    pi = sp.Rational(str(sp.pi.evalf(45)))
    return sp.Rational(f) * length < 2 * pi


def _outside(f: float, length: int, d: int) -> bool:
    return _unwrapped(f, length) and mp_mod_two_pi(d, f) > length * f


_FREQ = np.array([0.0, 1e-3, 0.01, 0.0122, 0.0123, 0.1, 0.5, 1.0, 3.0])


@pytest.mark.parametrize("length", [1, 2, 512])
def test_rope_unwrapped_blocks_is_the_rational_test_of_l_f_below_2_pi(length):
    got = tr.rope_unwrapped_blocks(_FREQ.reshape(3, 3), length)
    assert got.dtype == bool and got.shape == (3, 3)
    np.testing.assert_array_equal(got.ravel(), [_unwrapped(float(f), length) for f in _FREQ])
    # the boundary: one ulp either side of 2π/L
    edge = 2 * math.pi / length
    below, above = np.nextafter(edge, 0), np.nextafter(edge, 4)
    assert tr.rope_unwrapped_blocks([below, above], length).tolist() == [
        _unwrapped(float(below), length), _unwrapped(float(above), length)]  # fmt: skip


@pytest.mark.parametrize(("length", "d"), [(1, 0), (1, 5), (512, 511), (512, 512), (512, 513),
                                           (512, 1024), (512, 8191), (64, 10**9)])  # fmt: skip
def test_rope_blocks_outside_training_by_brute_force(length, d):
    got = tr.rope_blocks_outside_training(_FREQ.reshape(3, 3), length, d)
    assert got.dtype == bool and got.shape == (3, 3)
    np.testing.assert_array_equal(got.ravel(), [_outside(float(f), length, d) for f in _FREQ])


def test_rope_distance_equal_to_training_length_is_on_the_arc_not_outside():
    # D = L_train: D f mod 2π = L_train f for unwrapped blocks, the arc's end, still seen
    f = np.array([1e-3, 0.01])
    np.testing.assert_array_equal(tr.rope_phase(512, f), 512 * f)
    assert not tr.rope_blocks_outside_training(f, 512, 512).any()
    assert tr.rope_blocks_outside_training(f, 512, 513).all()


def test_rope_flags_of_no_frequencies_are_an_empty_bool_array():
    for out in (tr.rope_unwrapped_blocks([], 8), tr.rope_blocks_outside_training([], 8, 9)):
        assert out.dtype == bool and out.shape == (0,)


# ----------------------------------------------------------------------------------------------
# argument checks: exact messages
# ----------------------------------------------------------------------------------------------

_LAWS = "('uniform', 'normal', 'uniform_positive', 'deterministic')"
_ERRORS = [
    (lambda: tr.angle_characteristic(3), TypeError,
     f"law must be a string, one of {_LAWS}; got int"),
    (lambda: tr.angle_characteristic("cauchy"), ValueError,
     f"law must be one of {_LAWS}; got 'cauchy'"),
    (lambda: tr.characteristic_value("Uniform", 1.0), ValueError,
     f"law must be one of {_LAWS}; got 'Uniform'"),
    (lambda: tr.log_characteristic_modulus(None, 1.0), TypeError,
     f"law must be a string, one of {_LAWS}; got NoneType"),
    (lambda: tr.phase_moments("gauss", 1.0, 1), ValueError,
     f"law must be one of {_LAWS}; got 'gauss'"),
    (lambda: tr.log_sinc(np.inf), ValueError, f"f must be finite; got {F}(inf)"),
    (lambda: tr.characteristic_value("uniform", [1.0, -0.5]), ValueError,
     f"param must be >= 0; got {F}(-0.5) at index 1"),
    (lambda: tr.log_characteristic_modulus("normal", -1.0), ValueError,
     f"param must be >= 0; got {F}(-1.0)"),
    (lambda: tr.log_characteristic_modulus("uniform_positive", -1.0), ValueError,
     f"param must be >= 0; got {F}(-1.0)"),
    (lambda: tr.characteristic_value("deterministic", np.nan), ValueError,
     f"param must not be NaN; got {F}(nan)"),
    (lambda: tr.phase_moments("uniform", 1.0, -1), ValueError,
     "L must be an integer >= 0; got np.int64(-1)"),
    (lambda: tr.phase_moments("uniform", 1.0, 1.5), ValueError,
     f"L must be integer-valued; got {F}(1.5)"),
    (lambda: tr.rope_phase(-1, 1.0), ValueError,
     "distance must be an integer >= 0; got np.int64(-1)"),
    (lambda: tr.rope_phase(1, -0.5), ValueError, f"f must be >= 0; got {F}(-0.5)"),
    (lambda: tr.rope_unwrapped_blocks([-1.0], 8), ValueError,
     f"frequencies must be >= 0; got {F}(-1.0) at index 0"),
    (lambda: tr.rope_unwrapped_blocks([1.0], 0), ValueError,
     "L_train must be an integer >= 1; got np.int64(0)"),
    (lambda: tr.rope_blocks_outside_training([-1.0], 8, 1), ValueError,
     f"frequencies must be >= 0; got {F}(-1.0) at index 0"),
    (lambda: tr.rope_blocks_outside_training([1.0], 0, 1), ValueError,
     "L_train must be an integer >= 1; got np.int64(0)"),
    (lambda: tr.rope_blocks_outside_training([1.0], 8, -1), ValueError,
     "distance must be an integer >= 0; got np.int64(-1)"),
]


@pytest.mark.parametrize(("call", "error", "message"), _ERRORS)
def test_angle_argument_errors_are_exact(call, error, message):
    with pytest.raises(error) as info:
        call()
    assert str(info.value) == message


def test_smallest_valid_arguments_are_accepted():
    assert tr.characteristic_value("uniform", 0.0) == 1.0
    assert tr.rope_phase(0, 0.0) == 0.0
    assert tr.rope_unwrapped_blocks([0.0], 1).tolist() == [True]
    assert tr.rope_blocks_outside_training([0.0], 1, 0).tolist() == [False]


@pytest.mark.parametrize("f", [1e-21, -1e-18, 1e-15, 3e-9, 9.9e-5, 1e-4, 0.3])
def test_log_sinc_keeps_full_accuracy_for_tiny_angles(f):
    """ln(sin f/f) against 80-digit mpmath with the working precision far beyond 1 − sinc f
    (the series branch below 1e-4 and the mpmath branch above it): relative error ≤ 4 ulp."""
    with mpmath.workdps(80):
        x = mpmath.mpf(f)
        want = float(mpmath.log(mpmath.sin(x) / x))
    assert float(tr.log_sinc(f)) == pytest.approx(want, rel=4 * 2.0**-52, abs=0)
