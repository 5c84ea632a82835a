"""Drift terms of the four forces of position bias, derived with sympy (claim PB9).

The backward chain of the rollout moves from token i to token j with probability ``R_t[i, j]``;
its expected one-step displacement is ``-λ_t μ_t(i)`` with the attention drift

    μ(i) = Σ_{j ≤ i} A[i, j] (i - j) ≥ 0.

Closed forms are derived here by symbolic summation and limits (not typed in):

* causal mask, uniform kernel: ``μ(i) = i/2``;
* ALiBi, one head with slope m > 0 and diagonal content c:
  ``A[i, i-k] = e^{-mk} / (e^c + Σ_{k'=1}^{i} e^{-mk'})`` for 1 ≤ k ≤ i and
  ``A[i, i] = e^c / (…)``; as i → ∞,
  ``μ_∞(m, c) = e^{-m} / [(1-e^{-m})(e^c (1-e^{-m}) + e^{-m})]`` (``1/(e^m-1)`` at c = 0) and
  ``∂μ_∞/∂c < 0``;
* the background b of the logits has no effect (softmax shift invariance);
* the residual scales the drift by λ.

Re-exported from :mod:`posflow.theory.rollout`.
"""

from __future__ import annotations

import functools
import math
import numbers
from typing import NamedTuple

import mpmath
import numpy as np
import sympy as sp

from posflow.theory._exact import as_count
from posflow.theory._symbolic import symbolic_kernel

__all__ = [
    "DriftDerivative",
    "alibi_drift",
    "alibi_drift_expr",
    "alibi_drift_limit",
    "alibi_drift_limit_dc",
    "alibi_drift_limit_expr",
    "background_shift_residual",
    "drift",
    "residual_drift_residual",
    "uniform_drift",
]

# Default symbols (users may pass their own; results are re-expressed in them).
_I = sp.Symbol("i", integer=True, nonnegative=True)
_M = sp.Symbol("m", positive=True)
_C = sp.Symbol("c", real=True)
_K = sp.Symbol("k", integer=True, positive=True)
_Q = sp.Symbol("q", positive=True)


def drift(A) -> list[sp.Expr]:
    """Attention drift of every row of a causal kernel (claim PB9).

    .. math:: μ(i) = \\sum_{j \\le i} A_{ij} (i - j)

    Parameters
    ----------
    A : sympy Matrix or nested sequence, shape (n, n)
        Lower-triangular kernel; entries may be symbolic.

    Returns
    -------
    list of n sympy expressions (not simplified). Cost O(n²).
    """
    A = sp.Matrix(A)
    if A.rows != A.cols:
        raise ValueError(f"A must be square; got shape {A.shape}")
    return [sp.Add(*[A[i, j] * (i - j) for j in range(i + 1)]) for i in range(A.rows)]


def uniform_drift(i: sp.Symbol | None = None) -> sp.Expr:
    """Drift of the uniform causal kernel ``A[i, j] = 1/(i+1)``, by symbolic summation.

    .. math:: μ(i) = \\sum_{j=0}^{i} \\frac{i-j}{i+1} = \\frac{i}{2}

    The drift toward token 0 is proportional to the position (primacy; claim PB9).
    Returns a sympy expression in ``i`` (default ``Symbol('i', integer=True, nonnegative=True)``).
    """
    j = sp.Symbol("j", integer=True, nonnegative=True)
    mu = sp.simplify(sp.summation((_I - j) / (_I + 1), (j, 0, _I)))
    return mu if i is None else mu.xreplace({_I: i})


def _generic_branch(expr: sp.Expr) -> sp.Expr:
    """The q ≠ 1 branch of a geometric-sum Piecewise (q = e^{-m} ≠ 1 because m > 0)."""
    if not isinstance(expr, sp.Piecewise):
        return expr
    (_degenerate, cond), (gen, other) = expr.args
    if cond != sp.Eq(_Q, 1) or other != sp.true:  # pragma: no cover - sympy output changed
        raise RuntimeError(f"unexpected summation result {expr}")
    return gen


@functools.cache
def _alibi_drift_default() -> sp.Expr:
    num = _generic_branch(sp.summation(_K * _Q**_K, (_K, 1, _I)))  # Σ k e^{-mk}
    den = sp.exp(_C) + _generic_branch(sp.summation(_Q**_K, (_K, 1, _I)))  # e^c + Σ e^{-mk}
    return (num / den).subs(_Q, sp.exp(-_M))


@functools.cache
def _alibi_limit_default() -> sp.Expr:
    return sp.simplify(sp.limit(_alibi_drift_default(), _I, sp.oo))


def _rename(expr: sp.Expr, i=None, m=None, c=None) -> sp.Expr:
    mapping = {old: new for old, new in ((_I, i), (_M, m), (_C, c)) if new is not None}
    return expr.xreplace(mapping) if mapping else expr


def alibi_drift_expr(i=None, m=None, c=None) -> sp.Expr:
    """Closed form of the ALiBi + diagonal-content drift at finite i, by symbolic summation.

    .. math:: μ(i) = \\frac{\\sum_{k=1}^{i} k e^{-mk}}{e^{c} + \\sum_{k=1}^{i} e^{-mk}}
              = \\frac{q(1 - (i+1)q^i + i q^{i+1})/(1-q)^2}{e^c + q(1-q^i)/(1-q)},\\quad q = e^{-m}

    for the kernel ``A[i, i-k] ∝ e^{-mk}`` (k ≥ 1), ``A[i, i] ∝ e^c`` (claim PB9). Valid for
    m > 0 (the sums are taken in their q ≠ 1 branch). Symbols default to ``i`` (nonnegative
    integer), ``m`` (positive), ``c`` (real); pass others to rename them.
    """
    return _rename(_alibi_drift_default(), i, m, c)


def alibi_drift_limit_expr(m=None, c=None) -> sp.Expr:
    """``μ_∞(m, c) = lim_{i→∞} μ(i)`` derived with ``sympy.limit`` from :func:`alibi_drift_expr`.

    .. math:: μ_∞(m, c) = \\frac{e^{-m}}{(1-e^{-m})\\,(e^{c}(1-e^{-m}) + e^{-m})},
              \\qquad μ_∞(m, 0) = \\frac{1}{e^{m}-1}

    ALiBi turns the position-proportional drift of the causal mask into a bounded local one
    (recency); content c > 0 shrinks it (claim PB9). Returns a sympy expression.
    """
    return _rename(_alibi_limit_default(), None, m, c)


class DriftDerivative(NamedTuple):
    """``∂μ_∞/∂c`` and whether sympy proved it negative for all m > 0 and real c."""

    derivative: sp.Expr
    negative: bool | None


def alibi_drift_limit_dc(m=None, c=None) -> DriftDerivative:
    """Sign of the content effect: ``∂μ_∞/∂c < 0`` for every m > 0 and real c (claim PB9).

    .. math:: \frac{∂μ_∞}{∂c} = -\frac{e^{c} e^{m}}{(e^{c}(e^{m}-1) + 1)^2}

    is derived by differentiating :func:`alibi_drift_limit_expr`. With ``s = e^m - 1 > 0`` it
    factors as ``-(1+s) e^c / (1 + s e^c)^2``, which sympy's assumption system proves negative.
    ``negative`` is True when proven, None otherwise. c > 0 shrinks the drift (acts like extra
    residual, recency), c < 0 enlarges it (primacy).
    """
    d = sp.diff(_alibi_limit_default(), _C)
    s = sp.Symbol("s", positive=True)
    d_s = sp.factor(sp.expand(d.subs(_M, sp.log(1 + s))))
    return DriftDerivative(_rename(sp.factor(sp.simplify(d)), None, m, c), d_s.is_negative)


def background_shift_residual(n: int) -> sp.Matrix:
    """Softmax shift invariance: the background b of the logits leaves the kernel unchanged.

    Returns the simplified difference between the causal softmax of
    ``b + c·[i=j] - m(i-j)`` and that of ``c·[i=j] - m(i-j)``, an (n, n) sympy Matrix that is
    zero (claim PB9: only the diagonal content c matters). b, c, m are symbols. Cost O(n²)
    simplifications.
    """
    n = as_count(n, "n")
    b = sp.Symbol("b", real=True)

    def kernel(shift: sp.Expr) -> sp.Matrix:
        logits = [
            [shift + (_C if j == i else 0) - _M * (i - j) for j in range(i + 1)] for i in range(n)
        ]
        out = sp.zeros(n, n)
        for i, row in enumerate(logits):
            z = sp.Add(*[sp.exp(v) for v in row])
            for j, v in enumerate(row):
                out[i, j] = sp.exp(v) / z
        return out

    return (kernel(b) - kernel(sp.S.Zero)).applyfunc(sp.simplify)


def residual_drift_residual(n: int) -> list[sp.Expr]:
    """The residual scales the drift: drift of ``R = (1-λ)I + λA`` minus ``λ μ_A(i)``.

    For a symbolic row-stochastic causal kernel A (n × n) returns the n expanded differences
    ``Σ_j R_ij (i-j) - λ Σ_j A_ij (i-j)``, all zero (claim PB9: the backward chain's drift is
    ``-λ μ(i)``; the lazy mass stays on the current token).
    """
    n = as_count(n, "n")
    A, _ = symbolic_kernel(n, "a", stochastic=True)
    lam = sp.Symbol("lambda", nonnegative=True)
    R = (1 - lam) * sp.eye(n) + lam * A
    return [sp.expand(r - lam * a) for r, a in zip(drift(R), drift(A), strict=True)]


def _check_real(x, name: str) -> float:
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {x!r}")
    v = float(x)
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite; got {v}")
    return v


def alibi_drift(i: int, m: float, c: float = 0.0) -> float:
    """Numeric ALiBi + content drift μ(i) from the closed form (claim PB9).

    .. math:: μ(i) = \\frac{\\sum_{k=1}^{i} k e^{-mk}}{e^{c} + \\sum_{k=1}^{i} e^{-mk}}

    evaluated with mpmath at a working precision that absorbs the cancellation of the closed
    form for small ``m·i``; m = 0 uses ``i(i+1)/2 / (e^c + i)``. Scalars only; cost O(1).

    Parameters
    ----------
    i : int, ``>= 0``
        Row (token position).
    m : float, ``>= 0``
        ALiBi slope.
    c : float
        Diagonal content score.
    """
    i = as_count(i, "i", minimum=0)
    m = _check_real(m, "m")
    c = _check_real(c, "c")
    if m < 0:
        raise ValueError(f"m must be >= 0; got {m}")
    lost = 0 if m == 0 else max(0, int(-2 * math.log10(m)))
    with mpmath.workdps(30 + lost + len(str(i))):
        mm, cc, ii = mpmath.mpf(m), mpmath.mpf(c), mpmath.mpf(i)
        ec = mpmath.exp(cc)
        if m == 0:
            val = ii * (ii + 1) / 2 / (ec + ii)
        else:
            q = mpmath.exp(-mm)
            one_q = -mpmath.expm1(-mm)
            qi = mpmath.exp(-mm * ii)
            num = q * (1 - (ii + 1) * qi + ii * qi * q) / one_q**2
            den = ec + q * (-mpmath.expm1(-mm * ii)) / one_q
            val = num / den
        return float(val)


def alibi_drift_limit(m, c=0.0):
    """Numeric ``μ_∞(m, c) = e^{-m}/[(1-e^{-m})(e^c(1-e^{-m}) + e^{-m})]`` (claim PB9).

    Evaluated without overflow for large |c| (the e^{±c} factor is moved to the side where it
    decays) and with ``expm1`` for small m.

    Parameters
    ----------
    m : array_like, all > 0
        ALiBi slopes.
    c : array_like, broadcastable with m
        Diagonal content scores.

    Returns
    -------
    float or ndarray of the broadcast shape (float64).
    """
    ma = np.asarray(m, dtype=np.float64)
    ca = np.asarray(c, dtype=np.float64)
    if not np.isfinite(ma).all():
        raise ValueError("m must be finite")
    if not np.isfinite(ca).all():
        raise ValueError("c must be finite")
    if (ma <= 0).any():
        raise ValueError(f"m must be > 0 (the limit is infinite at m = 0); got {ma.min()}")
    ma, ca = np.broadcast_arrays(ma, ca)
    q = np.exp(-ma)
    r = -np.expm1(-ma)  # 1 - e^{-m}
    e_neg = np.exp(-np.abs(ca))  # e^{-|c|} ≤ 1
    # c ≥ 0: divide numerator and denominator by e^c; c < 0: plain form with e^c ≤ 1.
    out = np.where(ca >= 0, q * e_neg / (r * (r + q * e_neg)), q / (r * (e_neg * r + q)))
    return float(out) if out.ndim == 0 else out
