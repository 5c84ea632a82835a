"""Argument checks shared by the exact (sympy) modules of :mod:`theory`.

Exact inputs are ints, :class:`fractions.Fraction`, sympy Rationals and strings such as
``"1/3"`` or ``"0.25"`` (read as exact decimals). Floats are binary approximations, so they are
accepted only when the caller says how to read them (``exact="rational"`` for the exact binary
value, ``exact="nsimplify"`` for the simplest nearby rational).
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np
import sympy as sp

__all__ = ["as_count", "as_exact_lambdas", "to_fraction"]

_EXACT_MODES = (None, "rational", "nsimplify")


def as_count(n, name: str, *, minimum: int = 1) -> int:
    """Return ``n`` as a Python int ``>= minimum`` (bools and non-integers are refused)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {n!r}")
    n = int(n)
    if n < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {n}")
    return n


def _float_to_fraction(x: float, name: str, exact: str | None) -> Fraction:
    if not math.isfinite(x):
        raise ValueError(f"{name} must be finite; got {x}")
    if exact is None:
        raise TypeError(
            f"{name} must be exact (int, Fraction, sympy Rational or a string like '1/3'); "
            f"got the float {x!r}; pass exact='rational' (its exact binary value) or "
            "exact='nsimplify' (the simplest nearby rational) to accept floats"
        )
    if exact == "rational":
        return Fraction(x)
    r = sp.nsimplify(x, rational=True)
    return Fraction(int(r.p), int(r.q))


def to_fraction(x, name: str, exact: str | None = None) -> Fraction:
    """Convert one exact number (or a float, following ``exact``) to a Fraction."""
    if exact not in _EXACT_MODES:
        raise ValueError(f"exact must be None, 'rational' or 'nsimplify'; got {exact!r}")
    if isinstance(x, bool):
        raise TypeError(f"{name} must be a number; got the bool {x!r}")
    if isinstance(x, numbers.Integral):
        return Fraction(int(x))
    if isinstance(x, Fraction):
        return x
    if isinstance(x, str):
        try:
            return Fraction(x.strip())
        except (ValueError, ZeroDivisionError) as exc:
            msg = f"{name} must be a number such as '1/3'; got the string {x!r}"
            raise ValueError(msg) from exc
    if isinstance(x, sp.Basic):
        if isinstance(x, sp.Rational):
            return Fraction(int(x.p), int(x.q))
        if isinstance(x, sp.Float):
            return _float_to_fraction(float(x), name, exact)
        raise TypeError(f"{name} must be a rational number; got the sympy expression {x}")
    if isinstance(x, float | np.floating):
        return _float_to_fraction(float(x), name, exact)
    raise TypeError(f"{name} must be a number; got {x!r}")


def as_exact_lambdas(lambdas, *, exact: str | None = None, name: str = "lambdas") -> list[Fraction]:
    """Validate a mixing schedule given exactly; return a list of Fractions in [0, 1]."""
    if isinstance(lambdas, str | bytes) or not hasattr(lambdas, "__iter__"):
        raise TypeError(f"{name} must be a sequence with one value per layer; got {lambdas!r}")
    out = []
    for t, lam in enumerate(lambdas):
        f = to_fraction(lam, f"{name}[{t}]", exact)
        if not 0 <= f <= 1:
            raise ValueError(f"{name} must lie in [0, 1]; got {f} at index {t}")
        out.append(f)
    return out


def fractions_to_sympy(values) -> list[sp.Rational]:
    """Convert Fractions to sympy Rationals (exact)."""
    return [sp.Rational(v.numerator, v.denominator) for v in values]
