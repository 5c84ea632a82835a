"""Closed form of the uniform-kernel rollout (Hausdorff means) and its n → ∞ limit law.

The Cesàro kernel ``C[i, j] = 1/(i+1)`` (j ≤ i) is the Hausdorff mean matrix of the uniform law
on [0, 1]: its moments are ``1/(k+1)``. Mixing with the identity keeps that structure, so
``R_t = (1-λ_t) I + λ_t C`` is the Hausdorff matrix of the law of ``X_t`` (``X_t = 1`` with
probability ``1-λ_t``, ``Uniform(0, 1)`` otherwise) and the rollout ``P = R_{T-1}⋯R_0`` is the
Hausdorff matrix of ``X = ∏_t X_t``. Its last row is a binomial mixture:

    p(j) = C(n-1, j) E[X^j (1-X)^{n-1-j}]
         = C(n-1, j) Σ_r C(n-1-j, r) (-1)^r m_{j+r},   m_k = E[X^k] = ∏_t (1 - λ_t + λ_t/(k+1)).

Re-exported from :mod:`posflow.theory.rollout` (claim PB12).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np
import sympy as sp
from scipy import special

from posflow.theory._exact import as_count, as_exact_lambdas, to_fraction

__all__ = ["LimitLaw", "hausdorff_moments", "influence_exact", "limit_law"]


def hausdorff_moments(lambdas, kmax: int, *, exact: str | None = None) -> list[sp.Expr]:
    """Moments of ``X = ∏_t X_t``, the Hausdorff law of the uniform-kernel rollout.

    .. math:: m_k = E[X^k] = \\prod_{t} \\Big(1 - λ_t + \\frac{λ_t}{k+1}\\Big),
              \\qquad k = 0..k_{max}

    These are the moments of the Hausdorff mean matrix ``R_{T-1}⋯R_0`` (claim PB12).

    Parameters
    ----------
    lambdas : sequence of T exact numbers or sympy symbols
        Mixing coefficients. Numbers must be exact (int, Fraction, sympy Rational, string such
        as ``"1/3"``) and lie in [0, 1]; floats need ``exact`` (see :func:`influence_exact`).
        Sympy symbols or expressions are kept symbolic (no range check).
    kmax : int
        Largest moment order, ``>= 0``.
    exact : {None, "rational", "nsimplify"}
        How to read floats: refused (None), their exact binary value, or the simplest rational.

    Returns
    -------
    list of sympy expressions, length kmax + 1 (Rationals for numeric input); ``m_0 = 1``.

    Cost O(T·kmax) exact operations.
    """
    kmax = as_count(kmax, "kmax", minimum=0)
    if isinstance(lambdas, str | bytes) or not hasattr(lambdas, "__iter__"):
        raise TypeError(f"lambdas must be a sequence with one value per layer; got {lambdas!r}")
    lams: list[sp.Expr] = []
    for t, lam in enumerate(lambdas):
        if isinstance(lam, sp.Basic) and not lam.is_number:
            lams.append(lam)
            continue
        f = to_fraction(lam, f"lambdas[{t}]", exact)
        if not 0 <= f <= 1:
            raise ValueError(f"lambdas must lie in [0, 1]; got {f} at index {t}")
        lams.append(sp.Rational(f.numerator, f.denominator))
    return [sp.Mul(*[1 - lam + lam / (k + 1) for lam in lams]) for k in range(kmax + 1)]


def influence_exact(n: int, lambdas, *, exact: str | None = None) -> list[sp.Rational]:
    """Exact influence profile of the uniform-kernel residual rollout (claim PB12).

    .. math:: p(j) = \\binom{n-1}{j} \\sum_{r=0}^{n-1-j} \\binom{n-1-j}{r} (-1)^r m_{j+r}
              = \\binom{n-1}{j} E\\big[X^j (1-X)^{n-1-j}\\big]

    with ``m_k`` from :func:`hausdorff_moments`; this is the last row of
    ``P = R_{T-1}⋯R_0``, ``R_t = (1-λ_t) I + λ_t C``, ``C[i, j] = 1/(i+1)`` for j ≤ i.

    Parameters
    ----------
    n : int
        Number of tokens, ``>= 1``.
    lambdas : sequence of T exact numbers
        Mixing coefficients in [0, 1]: ints, Fractions, sympy Rationals or strings such as
        ``"1/3"`` (decimal strings like ``"0.1"`` are read exactly as 1/10). ``T = 0`` is allowed
        (then ``p = e_{n-1}``).
    exact : {None, "rational", "nsimplify"}
        Floats are refused by default because they are binary approximations. With
        ``"rational"`` a float is replaced by its exact binary value (``0.1`` becomes
        3602879701896397/36028797018963968); with ``"nsimplify"`` by the simplest rational that
        sympy finds near it (``0.1`` becomes 1/10).

    Returns
    -------
    list of n sympy Rationals summing to 1; entry j is the influence of token j.

    Cost O(n²) big-integer subtractions (a forward-difference table of the moments scaled to a
    common denominator of O(n·T) digits) plus O(n·T) multiplications; n = 400, T = 4 takes well
    under a second. Raises TypeError for floats without ``exact`` and ValueError for λ outside
    [0, 1] or n < 1.
    """
    n = as_count(n, "n")
    lams = as_exact_lambdas(lambdas, exact=exact)
    T = len(lams)
    # m_k = ∏_t ((k+1)(b_t - a_t) + a_t) / (b_t (k+1)) with λ_t = a_t / b_t.
    # Scale to the common denominator B·L, B = ∏ b_t, L = lcm(1..n)^T: M_k = m_k·B·L ∈ ℤ.
    big_l = math.lcm(*range(1, n + 1)) ** T
    big_b = math.prod(lam.denominator for lam in lams)
    moments = []
    for k in range(n):
        num = math.prod((k + 1) * (lam.denominator - lam.numerator) + lam.numerator for lam in lams)
        moments.append(num * (big_l // (k + 1) ** T))
    # Σ_r C(N, r)(-1)^r M_{j+r} = (-1)^N (Δ^N M)_j with N = n-1-j: the last entry of the
    # N-th forward-difference row.
    last = [0] * n
    row = moments
    for d in range(n):
        last[n - 1 - d] = row[-1] if d % 2 == 0 else -row[-1]
        row = [b - a for a, b in itertools.pairwise(row)]
    denom = big_b * big_l
    return [sp.Rational(math.comb(n - 1, j) * last[j], denom) for j in range(n)]


@dataclass(frozen=True)
class LimitLaw:
    """The n → ∞ law of ``j/(n-1)`` under the uniform-kernel influence profile (claim PB12).

    The law of ``X = ∏_t X_t``: an atom ``∏_t (1-λ_t)`` at 1 plus the density

    .. math:: f(x) = \\sum_{k \\ge 1} \\Pr(K = k) \\frac{(-\\ln x)^{k-1}}{(k-1)!},\\quad 0 < x < 1,

    where ``K`` (the number of non-lazy layers) is Poisson-binomial with success probabilities
    ``λ_t``; a product of k independent uniforms has density ``(-ln x)^{k-1}/(k-1)!``.

    Attributes
    ----------
    lambdas : tuple of sympy numbers, length T
    atom : sympy number
        ``Pr(X = 1) = Pr(K = 0) = ∏_t (1-λ_t)``.
    pmf : tuple of sympy numbers, length T + 1
        ``pmf[k] = Pr(K = k)``; exact Rationals for exact input.
    x : sympy Symbol
        The variable of :attr:`density` and :attr:`cdf_expr`.
    density : sympy expression
        ``f(x)`` on (0, 1) (the absolutely continuous part; integrates to ``1 - atom``).
    cdf_expr : sympy Piecewise
        ``Pr(X <= x)``: 0 for x ≤ 0, ``x Σ_k Pr(K=k) Σ_{l<k} (-ln x)^l / l!`` on (0, 1),
        1 for x ≥ 1.
    """

    lambdas: tuple
    atom: sp.Expr
    pmf: tuple
    x: sp.Symbol
    density: sp.Expr
    cdf_expr: sp.Expr
    _weights: np.ndarray = field(repr=False, compare=False)

    def moment(self, k: int) -> sp.Expr:
        """``E[X^k] = Σ_K Pr(K) (k+1)^{-K}``, equal to ``hausdorff_moments(lambdas, k)[k]``."""
        k = as_count(k, "k", minimum=0)
        return sp.Add(*[w * sp.Rational(1, k + 1) ** kk for kk, w in enumerate(self.pmf)])

    def pdf(self, x):
        """Density of the continuous part at x (array_like, float64); 0 outside (0, 1].

        ``f(0)`` is ``+inf`` when ``Pr(K >= 2) > 0`` (the ``(-ln x)^{k-1}`` singularity) and
        ``Pr(K = 1)`` otherwise. Cost O(T) per point.
        """
        xa = _as_points(x)
        out = np.zeros_like(xa)
        w = self._weights
        inside = (xa > 0) & (xa <= 1)
        y = -np.log(xa[inside])
        acc = np.zeros_like(y)
        for k in range(1, w.size):
            if w[k] > 0:
                acc += w[k] * np.exp(special.xlogy(k - 1, y) - special.gammaln(k))
        out[inside] = acc
        at0 = xa == 0
        out[at0] = np.inf if np.any(w[2:] > 0) else (w[1] if w.size > 1 else 0.0)
        return out[()] if np.ndim(x) == 0 else out

    def cdf(self, x):
        """``Pr(X <= x)`` at x (array_like, float64): ``Σ_k Pr(K=k) Q(k, -ln x)`` on (0, 1).

        ``Q`` is the regularised upper incomplete gamma function; the atom enters at x = 1.
        Cost O(T) per point.
        """
        xa = _as_points(x)
        out = np.where(xa >= 1, 1.0, 0.0)
        w = self._weights
        inside = (xa > 0) & (xa < 1)
        y = -np.log(xa[inside])
        acc = np.zeros_like(y)
        for k in range(1, w.size):
            if w[k] > 0:
                acc += w[k] * special.gammaincc(k, y)
        out[inside] = acc
        return out[()] if np.ndim(x) == 0 else out


def _as_points(x) -> np.ndarray:
    try:
        xa = np.array(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"x must be a number or an array of numbers; got {x!r}") from exc
    if np.isnan(xa).any():
        raise ValueError("x must not contain NaN")
    return xa


def _law_lambdas(lambdas, exact):
    """Fractions for exact input; floats (validated) when a float is present and exact is None."""
    try:
        return as_exact_lambdas(lambdas, exact=exact)
    except TypeError:
        if exact is not None or isinstance(lambdas, str | bytes):
            raise
        if not hasattr(lambdas, "__iter__"):
            raise
        vals = []
        for t, lam in enumerate(lambdas):
            if isinstance(lam, float | np.floating | sp.Float):
                v = float(lam)
            else:
                v = float(to_fraction(lam, f"lambdas[{t}]"))
            if not math.isfinite(v):
                raise ValueError(f"lambdas must be finite; got {v} at index {t}") from None
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"lambdas must lie in [0, 1]; got {v} at index {t}") from None
            vals.append(v)
        return vals


def _to_sympy(values) -> list:
    return [
        sp.Rational(v.numerator, v.denominator) if isinstance(v, Fraction) else sp.Float(v)
        for v in values
    ]


def limit_law(lambdas, *, exact: str | None = None) -> LimitLaw:
    """The n → ∞ limit law of the uniform-kernel influence profile on the scale j/(n-1).

    ``Σ_{j ≤ x(n-1)} p(j) → Pr(X ≤ x)`` with ``X = ∏_t X_t`` (claim PB12); see
    :class:`LimitLaw` for the atom ``∏(1-λ_t)`` at 1 and the density
    ``Σ_k Pr(K=k)(-ln x)^{k-1}/(k-1)!``.

    Parameters
    ----------
    lambdas : sequence of T numbers in [0, 1]
        Exact numbers (ints, Fractions, sympy Rationals, strings such as ``"1/3"``) give exact
        Rationals in ``pmf`` and ``atom``. If any entry is a float and ``exact`` is None, the
        whole law is computed in float64 and ``pmf``/``atom`` are sympy Floats (measured
        schedules); ``exact="rational"`` or ``"nsimplify"`` converts floats to Rationals first,
        as in :func:`influence_exact`.

    Returns
    -------
    LimitLaw

    Cost O(T²) exact operations for the Poisson-binomial pmf.
    """
    lams = _law_lambdas(lambdas, exact)
    one = Fraction(1) if all(isinstance(v, Fraction) for v in lams) else 1.0
    pmf = [one]
    for lam in lams:  # multiply the generating polynomial by (1-λ) + λ z
        new = [one * 0] * (len(pmf) + 1)
        for k, w in enumerate(pmf):
            new[k] += w * (1 - lam)
            new[k + 1] += w * lam
        pmf = new
    pmf_s = tuple(_to_sympy(pmf))
    x = sp.Symbol("x", real=True)
    y = -sp.log(x)
    density = sp.Add(*[w * y ** (k - 1) / sp.factorial(k - 1) for k, w in enumerate(pmf_s) if k])
    inner = x * sp.Add(
        *[w * sp.Add(*[y**m / sp.factorial(m) for m in range(k)]) for k, w in enumerate(pmf_s) if k]
    )
    cdf_expr = sp.Piecewise((0, x <= 0), (inner, x < 1), (1, True))
    weights = np.array([float(w) for w in pmf], dtype=np.float64)
    return LimitLaw(
        lambdas=tuple(_to_sympy(lams)),
        atom=pmf_s[0],
        pmf=pmf_s,
        x=x,
        density=density,
        cdf_expr=cdf_expr,
        _weights=weights,
    )
