"""Far-mass bounds of [B] (private; re-exported by :mod:`posflow.theory.transport`).

* AT10: with K near and M far logits in [-λ, λ], the far mass ρ_D ≥ M/(M + K e^{2λ}), attained.
* AT13: with an ALiBi bias -m·n at distance n, the far mass beyond a near window of W tokens is
  bounded by a quantity that does not depend on the context length L.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import sympy as sp
from scipy.special import expit, logsumexp

from ._transport_common import (
    DerivationSummary,
    int_array,
    int_scalar,
    real_array,
    real_scalar,
    scalar_or_array,
)

_LOG_MAX = float(np.log(np.finfo(np.float64).max))  # ln of the largest float64, 709.78…

# ---------------------------------------------------------------------------------------------
# AT10: far-mass lower bound
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FarMassDerivation(DerivationSummary):
    """The facts behind ``ρ_D ≥ M/(M + K e^{2λ})`` (claim AT10), proven by sympy.

    ``rho`` writes ρ_D = Σ_far e^{s} / (Σ_far e^{s} + Σ_near e^{s}) through one far logit ``x``,
    one near logit ``y`` and the sums ``A ≥ 0`` (other far terms) and ``B ≥ 0`` (other near
    terms), so its partial derivatives are those with respect to any single logit.
    """

    rho: sp.Expr
    d_rho_d_far: sp.Expr
    d_rho_d_near: sp.Expr
    far_derivative_positive: bool
    near_derivative_negative: bool
    corner_value: sp.Expr
    bound: sp.Expr
    corner_equals_bound: bool
    limit_m_to_infinity: sp.Expr
    limit_is_one: bool
    increasing_in_m: bool
    decreasing_in_lambda: bool

    @property
    def proven(self) -> bool:
        """True when every sign, the corner identity and the limit were established."""
        return all(
            (
                self.far_derivative_positive,
                self.near_derivative_negative,
                self.corner_equals_bound,
                self.limit_is_one,
                self.increasing_in_m,
                self.decreasing_in_lambda,
            )
        )


@functools.cache
def far_mass_derivation() -> FarMassDerivation:
    """Derive the far-mass lower bound symbolically (claim AT10).

    .. math::

        \\rho_D = \\frac{\\sum_{far} e^{s_j}}{\\sum_{far} e^{s_j} + \\sum_{near} e^{s_k}},\\quad
        \\partial \\rho_D/\\partial s_{far} > 0,\\quad \\partial \\rho_D/\\partial s_{near} < 0,

    so on the box [-λ, λ]^{K+M} the minimum sits at the corner (far = -λ, near = +λ) and equals
    M e^{-λ}/(M e^{-λ} + K e^{λ}) = M/(M + K e^{2λ}); it is attained, increases in M, decreases
    in λ and tends to 1 as M → ∞. Every sign is decided by sympy from symbol assumptions (real
    logits, nonnegative partial sums, positive M, K), not asserted. The result is cached.

    Returns
    -------
    FarMassDerivation
        Expressions and booleans; ``.proven`` combines the booleans, ``.summary()`` prints them.
    """
    x, y = sp.symbols("x y", real=True)
    a_rest, b_rest = sp.symbols("A B", nonnegative=True)
    m_far, k_near = sp.symbols("M K", positive=True)
    lam = sp.Symbol("lambda", nonnegative=True)
    j = sp.Symbol("j", integer=True, positive=True)

    far = sp.exp(x) + a_rest
    rho = far / (far + sp.exp(y) + b_rest)
    d_far = sp.factor(sp.diff(rho, x))
    d_near = sp.factor(sp.diff(rho, y))

    far_corner = sp.Sum(sp.exp(-lam), (j, 1, m_far)).doit()
    near_corner = sp.Sum(sp.exp(lam), (j, 1, k_near)).doit()
    corner = far_corner / (far_corner + near_corner)
    bound = m_far / (m_far + k_near * sp.exp(2 * lam))
    limit = sp.limit(bound, m_far, sp.oo)
    return FarMassDerivation(
        rho=rho,
        d_rho_d_far=d_far,
        d_rho_d_near=d_near,
        far_derivative_positive=bool(d_far.is_positive),
        near_derivative_negative=bool(d_near.is_negative),
        corner_value=corner,
        bound=bound,
        corner_equals_bound=sp.simplify(corner - bound) == 0,
        limit_m_to_infinity=limit,
        limit_is_one=limit == 1,
        increasing_in_m=bool(sp.simplify(sp.diff(bound, m_far)).is_positive),
        decreasing_in_lambda=bool(sp.simplify(sp.diff(bound, lam)).is_negative),
    )


def far_mass(near_logits, far_logits) -> float | np.ndarray:
    """Attention mass on the far set, from the logits of the near and the far tokens (AT10).

    .. math:: \\rho_D = \\frac{\\sum_j e^{f_j}}{\\sum_j e^{f_j} + \\sum_k e^{n_k}}
              = \\operatorname{expit}(\\operatorname{lse}(f) - \\operatorname{lse}(n))

    Parameters
    ----------
    near_logits : array_like, shape (..., K)
    far_logits : array_like, shape (..., M)
        Finite logits; leading dimensions broadcast against each other. K, M ≥ 1.

    Returns
    -------
    rho : float or ndarray, shape (...)
        Computed in log space (no overflow for logits in the thousands). Cost O(K + M) each.
    """
    near = real_array("near_logits", near_logits)
    far = real_array("far_logits", far_logits)
    if near.ndim == 0 or near.shape[-1] < 1:
        raise ValueError("near_logits must have a last axis of length K >= 1")
    if far.ndim == 0 or far.shape[-1] < 1:
        raise ValueError("far_logits must have a last axis of length M >= 1")
    try:
        np.broadcast_shapes(near.shape[:-1], far.shape[:-1])
    except ValueError:
        raise ValueError(
            "near_logits and far_logits must have broadcastable leading shapes; got "
            f"{near.shape} and {far.shape}"
        ) from None
    out = expit(logsumexp(far, axis=-1) - logsumexp(near, axis=-1))
    return scalar_or_array(np.asarray(out))


def far_mass_lower_bound(M, K, lam) -> float | np.ndarray:
    """Smallest far mass possible with K near and M far logits in [-λ, λ] (claim AT10).

    .. math:: \\min \\rho_D = \\frac{M}{M + K e^{2\\lambda}}
              = \\operatorname{expit}(\\ln M - \\ln K - 2\\lambda)

    attained at far logits -λ and near logits +λ (see :func:`far_mass_derivation`); it tends
    to 1 as M → ∞, so the near-signal coefficient 1 - ρ_D tends to 0 for every rotation law.

    Parameters
    ----------
    M, K : float or array_like
        Number of far and near tokens, each ≥ 1 (real values allowed for plotting in M).
    lam : float or array_like
        Logit bound λ ≥ 0, finite. The three arguments broadcast.

    Returns
    -------
    float or ndarray
        In (0, 1); computed as an expit, so no overflow for large λ. Cost O(1) per entry.
    """
    m_arr = real_array("M", M, lo=1.0)
    k_arr = real_array("K", K, lo=1.0)
    lam_arr = real_array("lam", lam, lo=0.0)
    return scalar_or_array(np.asarray(expit(np.log(m_arr) - np.log(k_arr) - 2.0 * lam_arr)))


def near_signal_upper_bound(M, K, lam) -> float | np.ndarray:
    """Largest near mass 1 - ρ_D possible with logits in [-λ, λ] (claims AT10, AT12).

    .. math:: 1 - \\rho_D \\le \\frac{K e^{2\\lambda}}{M + K e^{2\\lambda}} \\to 0 \\ (M\\to\\infty)

    Same arguments, broadcasting and errors as :func:`far_mass_lower_bound`.
    """
    m_arr = real_array("M", M, lo=1.0)
    k_arr = real_array("K", K, lo=1.0)
    lam_arr = real_array("lam", lam, lo=0.0)
    return scalar_or_array(np.asarray(expit(np.log(k_arr) + 2.0 * lam_arr - np.log(m_arr))))


def far_mass_minimiser(M: int, K: int, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """The corner of [-λ, λ]^{K+M} where ρ_D is smallest (claim AT10).

    Returns
    -------
    near_logits : ndarray, shape (K,)
        All equal to +λ.
    far_logits : ndarray, shape (M,)
        All equal to -λ; ``far_mass(near, far) == far_mass_lower_bound(M, K, lam)``.
    """
    m_int = int_scalar("M", M, lo=1)
    k_int = int_scalar("K", K, lo=1)
    lam_f = real_scalar("lam", lam, lo=0.0)
    return np.full(k_int, lam_f), np.full(m_int, -lam_f)


# ---------------------------------------------------------------------------------------------
# AT13: ALiBi far mass
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AlibiFarMassDerivation(DerivationSummary):
    """The facts behind the context-free ALiBi far-mass bound (claim AT13), proven by sympy.

    Setting: a query sees distances n = 0..L-1 with logits s_n - m·n, |s_n| ≤ λ, m > 0; the
    near window is n < W and the far set W ≤ n ≤ L-1. With a = e^{2λ}, E = e^{mW} - 1 and
    s = 1 - e^{-m(L-W)} ∈ [0, 1) the worst-case far mass is a·s/(a·s + E).
    """

    near_sum: sp.Expr
    far_sum: sp.Expr
    sup_far_mass: sp.Expr
    reparametrised: sp.Expr
    reparametrisation_exact: bool
    increasing_in_s: bool
    s_increasing_in_l: bool
    s_limit: sp.Expr
    limit_l_to_infinity: sp.Expr
    limit_closed_form: sp.Expr
    limit_matches: bool
    limit_free_of_l: bool
    ratio_bound: sp.Expr
    ratio_bound_dominates: bool

    @property
    def bounded_in_l(self) -> bool:
        """True when sup ρ_far(L) increases in L towards an L-free limit < 1 (hence is bounded)."""
        return all(
            (
                self.reparametrisation_exact,
                self.increasing_in_s,
                self.s_increasing_in_l,
                self.s_limit == 1,
                self.limit_matches,
                self.limit_free_of_l,
            )
        )


def _geometric(expr: sp.Expr, n: sp.Symbol, lo: sp.Expr, hi: sp.Expr, ratio: sp.Expr) -> sp.Expr:
    """Σ_{n=lo}^{hi} expr by sympy, keeping the branch for ratio ≠ 1 (ratio = e^{-m}, m > 0)."""
    total = sp.summation(expr, (n, lo, hi))
    if isinstance(total, sp.Piecewise):
        first_cond = total.args[0][1]
        if first_cond != sp.Eq(ratio, 1) or total.args[-1][1] is not sp.true:
            raise RuntimeError(f"unexpected geometric-sum branches: {total}")
        total = total.args[-1][0]
    return total


@functools.cache
def alibi_far_mass_derivation() -> AlibiFarMassDerivation:
    """Derive the ALiBi far-mass bound and its independence of L symbolically (claim AT13).

    .. math::

        \\sup_{|s_n|\\le\\lambda} \\rho_{far}(L)
          = \\frac{e^{\\lambda} G_{far}}{e^{\\lambda} G_{far} + e^{-\\lambda} G_{near}},\\quad
        G_{near} = \\sum_{n=0}^{W-1} e^{-mn},\\ G_{far} = \\sum_{n=W}^{L-1} e^{-mn},

    (the far mass rises with far logits and falls with near ones, as in AT10). With
    a = e^{2λ}, E = e^{mW} - 1, s = 1 - e^{-m(L-W)} this equals a s/(a s + E); sympy shows it
    increases in s, that s increases in L with limit 1, hence the supremum increases in L to

    .. math:: \\rho_\\infty = \\frac{e^{2\\lambda}}{e^{2\\lambda} + e^{mW} - 1}
              \\le \\frac{e^{2\\lambda}}{e^{mW} - 1},

    which does not involve L (the right side is the ratio bound F/N of the digest). Cached.
    """
    m, lam = sp.symbols("m lambda", positive=True)
    big_l, big_w = sp.symbols("L W", positive=True)
    n = sp.Symbol("n", integer=True, nonnegative=True)
    a, e_sym = sp.symbols("a E", positive=True)
    s = sp.Symbol("s", nonnegative=True)

    term = sp.exp(-m * n)
    near_sum = _geometric(term, n, 0, big_w - 1, sp.exp(-m))
    far_sum = _geometric(term, n, big_w, big_l - 1, sp.exp(-m))
    sup = sp.exp(lam) * far_sum / (sp.exp(lam) * far_sum + sp.exp(-lam) * near_sum)

    reparam = a * s / (a * s + e_sym)
    s_of_l = 1 - sp.exp(-m * (big_l - big_w))
    substituted = reparam.subs({a: sp.exp(2 * lam), e_sym: sp.exp(m * big_w) - 1, s: s_of_l})
    limit = sp.simplify(sp.limit(sp.simplify(sup), big_l, sp.oo))
    closed = sp.exp(2 * lam) / (sp.exp(2 * lam) + sp.exp(m * big_w) - 1)
    ratio_bound = sp.exp(2 * lam) / (sp.exp(m * big_w) - 1)
    gap = sp.factor(sp.simplify((a / e_sym) - a / (a + e_sym)))
    return AlibiFarMassDerivation(
        near_sum=near_sum,
        far_sum=far_sum,
        sup_far_mass=sup,
        reparametrised=reparam,
        reparametrisation_exact=sp.simplify(sup - substituted) == 0,
        increasing_in_s=bool(sp.simplify(sp.diff(reparam, s)).is_positive),
        s_increasing_in_l=bool(sp.diff(s_of_l, big_l).is_positive),
        s_limit=sp.limit(s_of_l, big_l, sp.oo),
        limit_l_to_infinity=limit,
        limit_closed_form=closed,
        limit_matches=sp.simplify(limit - closed) == 0,
        limit_free_of_l=big_l not in limit.free_symbols,
        ratio_bound=ratio_bound,
        ratio_bound_dominates=bool(gap.is_positive),
    )


def alibi_far_mass(content_logits, m, W) -> float | np.ndarray:
    """Far mass of one ALiBi attention row, from the content logits by distance (claim AT13).

    .. math:: \\rho_{far} = \\frac{\\sum_{n=W}^{L-1} e^{s_n - mn}}{\\sum_{n=0}^{L-1} e^{s_n - mn}}

    Parameters
    ----------
    content_logits : array_like, shape (..., L)
        s_n for distances n = 0..L-1 (index 0 is the query itself); finite; L ≥ 1.
    m : float
        ALiBi slope, ≥ 0 and finite.
    W : int
        Near-window size ≥ 1; the far set is n ≥ W (empty, giving 0, when L ≤ W).

    Returns
    -------
    float or ndarray, shape (...)
        Computed in log space; cost O(L) per row.
    """
    s = real_array("content_logits", content_logits)
    slope = real_scalar("m", m, lo=0.0)
    w = int_scalar("W", W, lo=1)
    if s.ndim == 0 or s.shape[-1] < 1:
        raise ValueError("content_logits must have a last axis of length L >= 1")
    length = s.shape[-1]
    if length <= w:
        return scalar_or_array(np.zeros(s.shape[:-1]))
    z = s - slope * np.arange(length, dtype=np.float64)
    out = np.exp(logsumexp(z[..., w:], axis=-1) - logsumexp(z, axis=-1))
    return scalar_or_array(np.asarray(out))


def alibi_far_mass_bound(m, W, lam, L=None) -> float | np.ndarray:
    """Largest far mass of an ALiBi row with content logits in [-λ, λ] (claim AT13).

    .. math::

        \\sup \\rho_{far}(L) = \\operatorname{expit}(2\\lambda + \\ln r_L),\\quad
        r_L = \\frac{e^{-mW}\\,(1 - e^{-m(L-W)})}{1 - e^{-mW}},\\quad
        r_\\infty = \\frac{1}{e^{mW} - 1}

    exact and attained (far content logits +λ, near ones -λ) for finite L; ``L=None`` gives the
    L → ∞ limit e^{2λ}/(e^{2λ} + e^{mW} - 1), an upper bound for every L
    (:func:`alibi_far_mass_derivation`).

    Parameters
    ----------
    m : float
        Slope > 0, finite.
    W : int
        Near-window size ≥ 1 (distances 0..W-1 are near).
    lam : float
        Content-logit bound λ ≥ 0, finite.
    L : int or array_like of int, optional
        Number of visible tokens (distances 0..L-1), each ≥ 1; 0 is returned where L ≤ W.

    Returns
    -------
    float or ndarray (shape of ``L``)
        Cost O(1) per entry; log-space, no overflow.
    """
    slope = real_scalar("m", m, lo=0.0, lo_open=True)
    w = int_scalar("W", W, lo=1)
    lam_f = real_scalar("lam", lam, lo=0.0)
    log_near = -slope * w - np.log(-np.expm1(-slope * w))  # ln r_∞ = -ln(e^{mW} - 1)
    if L is None:
        return float(expit(2.0 * lam_f + log_near))
    length = int_array("L", L, lo=1)
    tail = np.maximum(length - w, 1).astype(np.float64)
    log_r = np.log(-np.expm1(-slope * tail)) + log_near
    out = np.where(length > w, expit(2.0 * lam_f + log_r), 0.0)
    return scalar_or_array(np.asarray(out, dtype=np.float64))


def alibi_far_mass_ratio_bound(m, W, lam) -> float:
    """The simpler L-free ALiBi bound far/near ≤ e^{2λ}/(e^{mW} - 1) (claim AT13, digest form).

    .. math:: \\rho_{far} \\le \\frac{e^{2\\lambda}\\sum_{n\\ge W} e^{-mn}}{\\sum_{n<W} e^{-mn}}
              = \\frac{e^{2\\lambda}}{e^{mW} - 1}

    It dominates :func:`alibi_far_mass_bound` and may exceed 1. Arguments as there; returns
    ``inf`` only if the true value overflows float64.
    """
    slope = real_scalar("m", m, lo=0.0, lo_open=True)
    w = int_scalar("W", W, lo=1)
    lam_f = real_scalar("lam", lam, lo=0.0)
    log_value = 2.0 * lam_f - slope * w - np.log(-np.expm1(-slope * w))
    return float(np.exp(log_value)) if log_value <= _LOG_MAX else float("inf")
