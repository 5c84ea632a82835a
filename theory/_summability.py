"""Symbolic summability of mixing schedules: does ``Σ_{t≥0} λ_t`` diverge? (claims PB5, PB6)

Collapse onto the first token happens iff the total mixing diverges (given δ_t ≥ δ > 0 and
ε-reachability). :func:`collapses` decides the divergence with its own comparison tests, each
of which is a theorem for nonnegative terms:

* term test: ``lim λ_t > 0`` ⇒ divergence;
* logarithmic-scale (p-series / Bertrand) tests: with ``L_0 = t``, ``L_1 = log t``,
  ``L_2 = log log t``, … (up to ``L_4``) and
  ``e_k = lim log(L_0⋯L_{k-1}·λ_t) / log(L_k)`` (so ``e_0 = lim log λ_t / log t``):
  ``e_k < -1`` ⇒ convergence (comparison with ``1/(L_0⋯L_{k-1} L_k^p)``, p > 1),
  ``e_k > -1`` ⇒ divergence, ``e_k = -1`` ⇒ go one scale finer;
* ratio test: ``lim λ_{t+1}/λ_t < 1`` ⇒ convergence, ``> 1`` ⇒ divergence.

For parameter-free schedules sympy's ``Sum.is_convergent`` is asked too, and a disagreement
turns the answer into None.

Only limits that sympy returns as definite extended-real values are used; anything else leaves
the answer undecided (None), so an answer is never guessed. Re-exported from
:mod:`posflow.theory.rollout`.
"""

from __future__ import annotations

import functools
import numbers
from fractions import Fraction

import sympy as sp

__all__ = ["collapses", "power_decay_collapses"]

_SAMPLE_POINTS = (*range(33), 100, 1000)


def _truth(rel) -> bool | None:
    if rel is sp.true or rel is True:
        return True
    if rel is sp.false or rel is False:
        return False
    return None


def _definite(value) -> bool:
    """A limit value we may reason with: extended real, no unevaluated limits or bounds."""
    if value is None or not isinstance(value, sp.Expr):
        return False
    if value.has(sp.Limit, sp.AccumBounds, sp.nan, sp.zoo, sp.Piecewise):
        return False
    return value.is_extended_real is True


def _limit(expr: sp.Expr, x: sp.Symbol):
    try:
        value = sp.limit(expr, x, sp.oo)
    except (NotImplementedError, ValueError, TypeError, AttributeError, RecursionError):
        return None
    return value if _definite(value) else None


def _check_range(schedule: sp.Expr, t: sp.Symbol) -> None:
    """Raise ValueError when the schedule is provably outside [0, 1] or undefined somewhere."""
    tt = sp.Dummy("t", integer=True, nonnegative=True)
    generic = schedule.xreplace({t: tt})
    if generic.is_negative or (generic - 1).is_positive or generic.is_extended_real is False:
        raise ValueError(f"schedule must lie in [0, 1] for t = 0, 1, 2, ...; got {schedule}")
    for k in _SAMPLE_POINTS:
        v = schedule.subs(t, k)
        if v.has(sp.zoo, sp.nan) or v.is_finite is False:
            raise ValueError(f"schedule must be finite at every t >= 0; got {v} at t = {k}")
        if v.is_extended_real is False:
            raise ValueError(f"schedule must be real; got {v} at t = {k}")
        if _truth(v < 0) or _truth(v > 1):
            raise ValueError(f"schedule must lie in [0, 1]; got {v} at t = {k}")
        if not v.free_symbols:
            continue
        if v.is_negative or (v - 1).is_positive:
            raise ValueError(f"schedule must lie in [0, 1]; got {v} at t = {k}")


def _decide_positive(g: sp.Expr, x: sp.Symbol) -> bool | None:
    """Convergence (False) or divergence (True) of Σ g(t) for g > 0; None when undecided."""
    lim = _limit(g, x)
    if lim is not None and _truth(lim > 0):
        return True
    scales = [x]
    for _ in range(4):
        scales.append(sp.log(scales[-1]))
    weight = sp.S.One  # t · L_1 ⋯ L_{k-1}
    for k in range(len(scales) - 1):
        e = _limit(sp.log(weight * g) / sp.log(scales[k]), x)
        if e is None:
            break
        if _truth(e < -1):
            return False
        if _truth(e > -1):
            return True
        if not _truth(sp.Eq(e, -1)):
            break  # e depends on parameters in an undecidable way
        weight = weight * scales[k]
    ratio = _limit(sp.simplify(g.subs(x, x + 1) / g), x)
    if ratio is not None:
        if _truth(ratio < 1):
            return False
        if _truth(ratio > 1):
            return True
    return None


def _sympy_opinion(schedule: sp.Expr, t: sp.Symbol) -> bool | None:
    """sympy's own ``Sum.is_convergent`` (True = diverges), or None if it raises/undecided."""
    try:
        conv = sp.Sum(schedule, (t, 0, sp.oo)).is_convergent()
    except (NotImplementedError, ValueError, TypeError, AttributeError, RecursionError):
        return None
    truth = _truth(conv)
    return None if truth is None else not truth


def collapses(schedule, t: sp.Symbol, *, cross_check: bool = True) -> bool | None:
    """Decide whether ``Σ_{t≥0} λ_t = ∞`` (collapse onto token 0) for a symbolic schedule.

    .. math:: \\text{collapse} \\iff \\sum_{t \\ge 0} λ_t = \\infty
              \\qquad (\\text{claims PB5, PB6; given } δ_t \\ge δ > 0 \\text{ and }
              A_t[i, 0] \\ge ε)

    Parameters
    ----------
    schedule : sympy expression or number
        ``λ_t`` as an expression in ``t`` (t = 0, 1, 2, …). Other free symbols are parameters;
        their sympy assumptions (``positive=True`` …) are used.
    t : sympy Symbol
        The layer index.
    cross_check : bool
        When the schedule has no parameter besides t, also ask sympy's
        ``Sum(...).is_convergent()`` and return None if it contradicts the comparison tests
        (sympy alone is never trusted: it has quirks with extra symbols and edge cases).

    Returns
    -------
    True if the sum provably diverges (collapse), False if it provably converges (no collapse),
    None if undecided. Every decision rests on a comparison test for nonnegative terms applied
    to sympy limits (see the module docstring), so for a valid schedule (values in [0, 1] for
    every t, which is checked wherever sympy can tell) a wrong answer would need a wrong sympy
    limit. A positive
    parameter factor is split off first: ``λ0·g(t)`` with unknown-sign ``λ0`` can still be
    declared convergent, but divergence needs ``λ0 > 0`` known.

    Examples: ``λ0/(t+1)**β`` with numeric β gives True for β ≤ 1 and False for β > 1;
    with a symbolic positive β it gives None; ``1/((t+1)*log(t+2))`` gives True;
    ``2**-t`` gives False.

    Raises
    ------
    TypeError
        If t is not a sympy Symbol or the schedule is not a sympy expression or a number.
    ValueError
        If the schedule is provably negative, larger than 1, non-real or undefined at some
        t ≥ 0 (checked symbolically and at t = 0..32, 100, 1000).

    Cost: a handful of ``sympy.limit`` calls, typically 0.05–1 s.
    """
    if not isinstance(t, sp.Symbol):
        raise TypeError(f"t must be a sympy Symbol; got {t!r}")
    if isinstance(schedule, bool) or isinstance(schedule, str | bytes):
        raise TypeError(f"schedule must be a sympy expression or a number; got {schedule!r}")
    if isinstance(schedule, Fraction):
        schedule = sp.Rational(schedule.numerator, schedule.denominator)
    elif isinstance(schedule, numbers.Number):
        schedule = sp.sympify(schedule)
    if not isinstance(schedule, sp.Expr):
        raise TypeError(f"schedule must be a sympy expression or a number; got {schedule!r}")
    twins = sorted(str(s) for s in schedule.free_symbols if s != t and str(s) == str(t))
    if twins:
        raise ValueError(
            f"schedule contains a symbol named {twins[0]!r} that is not t (different sympy "
            "assumptions); build the schedule with the same Symbol you pass as t"
        )
    _check_range(schedule, t)

    coeff, g = schedule.as_independent(t, as_Add=False)
    if coeff.is_zero or schedule.is_zero:
        return False
    if t not in g.free_symbols:  # constant schedule
        pos = schedule.is_positive
        return True if pos else None
    x = sp.Dummy("t", positive=True)
    g_x = g.xreplace({t: x})
    verdict = _decide_positive(g_x, x)
    if verdict is True and coeff.is_positive is not True:
        return None  # λ0 might be 0
    if verdict is not None and cross_check and schedule.free_symbols == {t}:
        opinion = _sympy_opinion(schedule, t)
        if opinion is not None and opinion != verdict:
            return None
    return verdict


@functools.cache
def power_decay_collapses(lam0: str, beta: str | None = None) -> bool | None:
    """:func:`collapses` for ``λ_t = lam0`` (``beta`` None) or ``λ_t = lam0/(t+1)^beta``.

    ``lam0`` and ``beta`` are exact rationals written as strings (``"1/2"``, ``"3/2"``), ``t`` a
    nonnegative integer symbol. Memoised per process (posflow's mutant runner clears the memo).

    Examples: ``power_decay_collapses("1/5")`` is True (a constant schedule),
    ``power_decay_collapses("1/2", "1")`` True (harmonic), ``power_decay_collapses("1/2", "2")``
    False.
    """
    t = sp.Symbol("t", integer=True, nonnegative=True)
    sched = sp.Rational(lam0) if beta is None else sp.Rational(lam0) / (t + 1) ** sp.Rational(beta)
    return collapses(sched, t)
