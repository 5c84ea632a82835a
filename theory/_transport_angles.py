"""Angle laws of [B]: characteristic functions and phase moments (private).

Re-exported by :mod:`posflow.theory.transport`. Claims AT1 (SO(2) characteristic decay), AT16 (RoPE
has no decay and leaves its trained phase range), AT17 (positive-mean angles drift).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import mpmath
import numpy as np
import sympy as sp

from ._transport_common import (
    DerivationSummary,
    int_scalar,
    real_array,
    scalar_or_array,
)

ANGLE_LAWS = ("uniform", "normal", "uniform_positive", "deterministic")
"""Supported angle laws: Unif[-a, a]; N(0, σ²); Unif[0, 2f]; the constant f (RoPE)."""

_PRECISION_DIGITS = 40


def _check_law(law: object) -> str:
    if not isinstance(law, str):
        raise TypeError(f"law must be a string, one of {ANGLE_LAWS}; got {type(law).__name__}")
    if law not in ANGLE_LAWS:
        raise ValueError(f"law must be one of {ANGLE_LAWS}; got {law!r}")
    return law


@dataclass(frozen=True)
class AngleCharacteristic(DerivationSummary):
    """φ = E e^{iθ} of one angle law, derived by sympy integration (claims AT1, AT16, AT17).

    ``mean_cos`` and ``mean_sin`` are integrals against ``density`` over ``support``;
    ``closed_form`` is the textbook value it is compared with. ``sum_cos``/``sum_sin`` are
    E cos Σ_{l=1}^{L} θ_l = Re φ^L and E sin Σθ_l = Im φ^L for i.i.d. angles (symbol ``steps``).
    """

    law: str
    parameter: sp.Symbol
    density: sp.Expr
    support: tuple[sp.Expr, sp.Expr]
    mean_cos: sp.Expr
    mean_sin: sp.Expr
    value: sp.Expr
    closed_form: sp.Expr
    matches_closed_form: bool
    symmetric: bool
    steps: sp.Symbol
    sum_cos: sp.Expr
    sum_sin: sp.Expr
    modulus: sp.Expr
    unit_modulus: bool


@functools.cache
def angle_characteristic(law: str) -> AngleCharacteristic:
    """Derive the characteristic value φ = E e^{iθ} of an angle law by integration (AT1, AT17).

    ============== ========================== ===============================
    law            θ                          φ (closed form checked)
    ============== ========================== ===============================
    uniform        Unif[-a, a]                sin(a)/a
    normal         N(0, σ²)                   e^{-σ²/2}
    uniform_pos.   Unif[0, 2f]                e^{if} sin(f)/f
    deterministic  θ ≡ f (RoPE)               e^{if}, |φ^L| = 1 (no decay, AT16)
    ============== ========================== ===============================

    E cos θ and E sin θ are computed by ``sympy.integrate`` against the density (a Dirac delta
    for the deterministic law); the sum moments follow from independence,
    E e^{iΣθ} = φ^L, so E cos Σθ = Re φ^L and E sin Σθ = Im φ^L (0 for symmetric laws).
    Cached; about a second for the normal law.
    """
    law = _check_law(law)
    theta = sp.Symbol("theta", real=True)
    steps = sp.Symbol("L", integer=True, nonnegative=True)
    if law == "uniform":
        p = sp.Symbol("a", positive=True)
        density, support, closed = 1 / (2 * p), (-p, p), sp.sin(p) / p
    elif law == "normal":
        p = sp.Symbol("sigma", positive=True)
        density = sp.exp(-(theta**2) / (2 * p**2)) / sp.sqrt(2 * sp.pi * p**2)
        support, closed = (-sp.oo, sp.oo), sp.exp(-(p**2) / 2)
    elif law == "uniform_positive":
        p = sp.Symbol("f", positive=True)
        density, support, closed = 1 / (2 * p), (0, 2 * p), sp.exp(sp.I * p) * sp.sin(p) / p
    else:
        p = sp.Symbol("f", real=True)
        density, support, closed = sp.DiracDelta(theta - p), (-sp.oo, sp.oo), sp.exp(sp.I * p)
    mean_cos = sp.simplify(sp.integrate(sp.cos(theta) * density, (theta, *support)))
    mean_sin = sp.simplify(sp.integrate(sp.sin(theta) * density, (theta, *support)))
    value = mean_cos + sp.I * mean_sin
    matches = sp.simplify(sp.expand((value - closed).rewrite(sp.exp))) == 0
    # φ^L is taken on the closed form, which ``matches`` has just shown equal to the integral.
    power = closed**steps if matches else value**steps
    modulus = sp.simplify(sp.Abs(closed if matches else value))
    return AngleCharacteristic(
        law=law,
        parameter=p,
        density=density,
        support=support,
        mean_cos=mean_cos,
        mean_sin=mean_sin,
        value=value,
        closed_form=closed,
        matches_closed_form=matches,
        symmetric=mean_sin == 0,
        steps=steps,
        sum_cos=sp.simplify(sp.re(power)),
        sum_sin=sp.simplify(sp.im(power)),
        modulus=modulus,
        unit_modulus=sp.simplify(sp.Abs(power)) == 1,
    )


@functools.partial(np.vectorize, otypes=[np.float64])
def _log_abs_sinc_scalar(f: float) -> float:
    if f == 0.0:
        return 0.0
    if abs(f) < 1e-4:  # the series: its next term f⁶/2835 is below 2e-19 of the sum
        f2 = f * f
        return -f2 / 6.0 - f2 * f2 / 180.0
    with mpmath.workdps(_PRECISION_DIGITS):  # 1 − sinc f resolved to 1e-41 ≪ f²/6 here
        x = mpmath.mpf(f)
        value = mpmath.sin(x) / x
        if value == 0:
            return -math.inf
        return float(mpmath.log(abs(value)))


def log_sinc(f) -> float | np.ndarray:
    """ln|sin f / f| to full float64 accuracy, also where sin f/f is within 1e-9 of 1 (AT1, AT6).

    .. math:: \\ln\\Big|\\frac{\\sin f}{f}\\Big| = -\\frac{f^2}{6} - \\frac{f^4}{180} - \\cdots

    Evaluated with mpmath at 40 significant digits, so there is no cancellation for the small
    RoPE frequencies (f ≈ 1e-4 gives ≈ -1.7e-9). Returns 0 at f = 0.

    Parameters
    ----------
    f : float or array_like
        Finite reals.

    Returns
    -------
    float or ndarray (shape of ``f``)
        Cost O(1) mpmath evaluations per entry (~10 µs).
    """
    arr = real_array("f", f)
    return scalar_or_array(np.asarray(_log_abs_sinc_scalar(arr), dtype=np.float64))


def _polar(law: str, param: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ln|φ|, arg φ) of the law, with exact arguments and no cancellation."""
    if law == "normal":
        return -0.5 * param * param, np.zeros_like(param)
    if law == "deterministic":
        return np.zeros_like(param), param.copy()
    log_mod = np.asarray(log_sinc(param), dtype=np.float64)
    sign_flip = np.where(np.sin(param) / np.where(param == 0.0, 1.0, param) < 0.0, np.pi, 0.0)
    if law == "uniform":
        return log_mod, sign_flip
    return log_mod, param + sign_flip


def characteristic_value(law: str, param) -> complex | np.ndarray:
    """Numeric φ = E e^{iθ} of an angle law (claims AT1, AT14, AT17).

    uniform: sin(a)/a;  normal: e^{-σ²/2};  uniform_positive: e^{if} sin(f)/f;
    deterministic: e^{if}.

    Parameters
    ----------
    law : str
        One of ``ANGLE_LAWS``.
    param : float or array_like
        a, σ or f (≥ 0 for the random laws, any finite real for ``deterministic``).

    Returns
    -------
    complex or ndarray of complex128 (shape of ``param``); real part only for symmetric laws.
    """
    log_mod, arg = _polar(_check_law(law), _law_param(law, param))
    return scalar_or_array(np.exp(log_mod) * np.exp(1j * arg))


def _law_param(law: str, param) -> np.ndarray:
    if law == "deterministic":
        return real_array("param", param)
    return real_array("param", param, lo=0.0)


def log_characteristic_modulus(law: str, param) -> float | np.ndarray:
    """ln|φ| of an angle law, accurate when |φ| is within 1e-9 of 1 (claims AT5, AT6).

    The mixing rate of one SO(2) block is γ = |φ|; the window needs ln(1/γ) = -ln|φ|.
    Arguments as in :func:`characteristic_value`; returns float or ndarray (≤ 0, -inf at zeros).
    """
    log_mod, _ = _polar(_check_law(law), _law_param(law, param))
    return scalar_or_array(log_mod)


def phase_moments(law: str, param, L) -> tuple[float | np.ndarray, float | np.ndarray]:
    """(E cos Σ_{l=1}^{L} θ_l, E sin Σ θ_l) = (Re φ^L, Im φ^L) for i.i.d. angles (AT1, AT17).

    .. math:: \\mathbb E\\, e^{i\\sum_{l\\le L}\\theta_l} = \\varphi^L
              = |\\varphi|^L e^{iL\\arg\\varphi}

    Computed in polar form (|φ|^L = exp(L ln|φ|)), so L = 65536 steps of near-1 moduli keep
    full accuracy. Positive-mean laws keep the phase L·f (drift, AT17); symmetric laws give 0
    for the sine; the deterministic law has modulus 1 for every L (AT16).

    Parameters
    ----------
    law, param
        As in :func:`characteristic_value`.
    L : int
        Number of steps, ≥ 0.

    Returns
    -------
    (mean_cos, mean_sin) : floats or ndarrays (shape of ``param``)
    """
    log_mod, arg = _polar(_check_law(law), _law_param(law, param))
    steps = int_scalar("L", L, lo=0)
    if steps == 0:
        ones = np.ones_like(log_mod)
        return scalar_or_array(ones), scalar_or_array(np.zeros_like(log_mod))
    mod = np.exp(steps * log_mod)
    phase = np.mod(steps * arg, 2.0 * np.pi)
    return scalar_or_array(mod * np.cos(phase)), scalar_or_array(mod * np.sin(phase))


# ---------------------------------------------------------------------------------------------
# AT16: RoPE phases and the trained range
# ---------------------------------------------------------------------------------------------


def rope_phase(distance, f) -> float | np.ndarray:
    """RoPE phase D·f mod 2π of a block with frequency f at distance D (claim AT16).

    Deterministic angles θ ≡ f give P_{j→i} = R((i-j) f) exactly: E P = P, ‖P‖ = 1, no decay.
    The reduction mod 2π is done with mpmath at 40 digits (exact for float inputs).

    Parameters
    ----------
    distance : int
        D ≥ 0.
    f : float or array_like
        Frequencies, finite, ≥ 0.

    Returns
    -------
    float or ndarray (shape of ``f``) in [0, 2π).
    """
    dist = int_scalar("distance", distance, lo=0)
    freq = real_array("f", f, lo=0.0)
    return scalar_or_array(np.asarray(_mod_two_pi(dist, freq), dtype=np.float64))


@functools.partial(np.vectorize, otypes=[np.float64])
def _mod_two_pi(dist: int, f: float) -> float:
    with mpmath.workdps(_PRECISION_DIGITS):
        return float(mpmath.fmod(dist * mpmath.mpf(f), 2 * mpmath.pi))


def rope_unwrapped_blocks(frequencies, L_train) -> np.ndarray:
    """Blocks whose trained phases do not wrap around the circle: L_train·f_b < 2π (AT16).

    In training a block sees the phases n·f_b for 0 ≤ n < L_train, inside the arc
    [0, L_train·f_b]. When that arc is shorter than 2π, phases outside it were never seen.

    Parameters
    ----------
    frequencies : array_like, shape (B,)
        f_b ≥ 0, finite (e.g. ``rope_frequencies(96)``).
    L_train : int
        Training context length ≥ 1.

    Returns
    -------
    ndarray of bool, shape (B,) — decided in 40-digit arithmetic.
    """
    freq = real_array("frequencies", frequencies, lo=0.0)
    length = int_scalar("L_train", L_train, lo=1)
    with mpmath.workdps(_PRECISION_DIGITS):
        two_pi = 2 * mpmath.pi
        flags = [length * mpmath.mpf(float(x)) < two_pi for x in freq.ravel()]
    return np.asarray(flags, dtype=bool).reshape(freq.shape)


def rope_blocks_outside_training(frequencies, L_train, distance) -> np.ndarray:
    """Blocks whose RoPE phase at ``distance`` lies outside the phases seen in training (AT16).

    Block b leaves the trained range at distance D when it is unwrapped in training
    (L_train·f_b < 2π, :func:`rope_unwrapped_blocks`) and

    .. math:: (D f_b \\bmod 2\\pi) > L_{train} f_b .

    The trained arc [0, L_train f_b] slightly over-covers the distances 0..L_train-1 that
    training shows, so a flagged phase was certainly never seen. Wrapped (high-frequency)
    blocks are never flagged: their trained phases cover the circle with gaps < f_b.

    Parameters
    ----------
    frequencies : array_like, shape (B,)
    L_train : int
        ≥ 1.
    distance : int
        D ≥ 0.

    Returns
    -------
    ndarray of bool, shape (B,) — 40-digit arithmetic.
    """
    freq = real_array("frequencies", frequencies, lo=0.0)
    length = int_scalar("L_train", L_train, lo=1)
    dist = int_scalar("distance", distance, lo=0)
    flags = []
    with mpmath.workdps(_PRECISION_DIGITS):
        two_pi = 2 * mpmath.pi
        for x in freq.ravel():
            f = mpmath.mpf(float(x))
            unwrapped = length * f < two_pi
            flags.append(bool(unwrapped and mpmath.fmod(dist * f, two_pi) > length * f))
    return np.asarray(flags, dtype=bool).reshape(freq.shape)
