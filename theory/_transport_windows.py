"""Mixing windows and random Householder steps of [B] (private).

Re-exported by :mod:`posflow.theory.transport`. Claims AT4 (Householder mean and spectrum), AT5 (the
mixing window depends on the step law only), AT6 (per-block windows for RoPE frequencies). The RoPE
frequencies are the one definition of :func:`posflow.conventions.rope_frequencies`.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import mpmath
import numpy as np
import sympy as sp

from posflow.conventions import rope_frequencies

from ._transport_angles import angle_characteristic, log_sinc
from ._transport_common import (
    DerivationSummary,
    int_array,
    int_scalar,
    real_array,
    real_scalar,
    scalar_or_array,
)

_TIE = 1e-12  # relative slack: a window ratio within 1e-12 of an integer counts as that integer


def _ceil_ratio(ratio: np.ndarray) -> np.ndarray:
    return np.maximum(np.ceil(ratio * (1.0 - _TIE)), 1.0).astype(np.int64)


def mixing_window(gamma, eps) -> int | np.ndarray:
    """Mixing window W(γ, ε): the number of steps after which the mean transport is below ε (AT5).

    .. math:: W(\\gamma, \\varepsilon)
              = \\Big\\lceil \\frac{\\ln(1/\\varepsilon)}{\\ln(1/\\gamma)} \\Big\\rceil
              = \\min\\{n \\ge 1 : \\gamma^n \\le \\varepsilon\\}

    where γ = ‖E M_t‖_op is the spectral-gap constant of the step law. It involves the step
    law only, never the context length L. γ = 0 (Haar steps: one step mixes) gives W = 1.
    Ratios within a relative 1e-12 of an integer are rounded to it (float ties). The argument
    order (γ, ε) is that of :func:`posflow.simulate.transport.mixing_window`, the numeric side.

    Parameters
    ----------
    gamma : float or array_like
        Mean-operator norm in [0, 1).
    eps : float or array_like
        Target level in (0, 1). Broadcasts with ``gamma``.

    Returns
    -------
    int or ndarray of int64
    """
    g = real_array("gamma", gamma, lo=0.0, hi=1.0, hi_open=True)
    e = real_array("eps", eps, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
    e, g = np.broadcast_arrays(e, g)
    positive = g > 0.0
    ratio = np.log(e) / np.log(np.where(positive, g, 0.5))
    return scalar_or_array(np.where(positive, _ceil_ratio(ratio), 1))


@dataclass(frozen=True)
class BlockWindows:
    """Per-block mixing windows for angles θ_b ~ Unif[-f_b, f_b] (claim AT6).

    All arrays have shape (d/2,): ``frequencies`` f_b; ``gamma`` γ_b = sin f_b / f_b;
    ``log_gamma`` ln γ_b (accurate to float64 even when γ_b ≈ 1 - 1e-9); ``ratio`` the real
    window ln(1/ε)/ln(1/γ_b); ``window`` its ceiling; ``approx`` 6 ln(1/ε)/f_b².
    """

    eps: float
    frequencies: np.ndarray
    gamma: np.ndarray
    log_gamma: np.ndarray
    ratio: np.ndarray
    window: np.ndarray
    approx: np.ndarray


def block_mixing_windows(d, eps, base=10000.0) -> BlockWindows:
    """Mixing window of every RoPE-frequency block with uniform random angles (claim AT6).

    .. math:: \\gamma_b = \\frac{\\sin f_b}{f_b},\\quad
              W_b = \\Big\\lceil\\frac{\\ln(1/\\varepsilon)}{-\\ln\\gamma_b}\\Big\\rceil
              \\approx \\frac{6\\ln(1/\\varepsilon)}{f_b^2}

    (from ln(sin f/f) = -f²/6 - f⁴/180 - …, see :func:`window_approximation_derivation`; the
    approximation over-estimates by a factor 1 + f²/30 + …). At d = 96, base 10⁴,
    ε = 0.01: ratio ≈ 26.7, 39.6, 58.6 for b = 0, 1, 2 and ≈ 1.88e9 for the last block.

    Parameters
    ----------
    d : int
        Even head dimension ≥ 2.
    eps : float
        Level in (0, 1).
    base : float, optional
        RoPE base > 1.

    Returns
    -------
    BlockWindows — cost O(d) mpmath evaluations.
    """
    e = real_scalar("eps", eps, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
    f = rope_frequencies(d, base)
    log_gamma = np.asarray(log_sinc(f), dtype=np.float64)
    ratio = np.log(1.0 / e) / -log_gamma
    return BlockWindows(
        eps=e,
        frequencies=f,
        gamma=np.sin(f) / f,
        log_gamma=log_gamma,
        ratio=ratio,
        window=_ceil_ratio(ratio),
        approx=6.0 * np.log(1.0 / e) / (f * f),
    )


def blocks_mixed(d, base, eps, n) -> int | np.ndarray:
    """Number of RoPE-frequency blocks mixed below ε after n uniform random steps (claim AT6).

    .. math:: \\#\\{b : \\gamma_b^{\\,n} < \\varepsilon\\},\\qquad
              \\gamma_b = \\frac{\\sin f_b}{f_b},\\ f_b = \\text{base}^{-2b/d}

    decided in 40-digit arithmetic (n ln γ_b < ln ε). At d = 96, base 10⁴, ε = 0.1 the counts
    are 10, 17, 23 for n = 512, 8192, 65536 (of 48 blocks): most low-frequency blocks never mix.

    Parameters
    ----------
    d : int
        Even head dimension ≥ 2.
    base : float
        RoPE base > 1.
    eps : float
        Level in (0, 1).
    n : int or array_like of int
        Route lengths ≥ 0.

    Returns
    -------
    int or ndarray of int64 (shape of ``n``)
    """
    dim = int_scalar("d", d, lo=2)
    rope_frequencies(dim, base)  # validates d (even) and base
    b = real_scalar("base", base)
    e = real_scalar("eps", eps, lo=0.0, lo_open=True, hi=1.0, hi_open=True)
    steps = int_array("n", n, lo=0)
    with mpmath.workdps(40):
        logs = []
        for k in range(dim // 2):
            f = mpmath.power(mpmath.mpf(b), -mpmath.mpf(2 * k) / dim)
            logs.append(mpmath.log(abs(mpmath.sin(f) / f)))
        log_eps = mpmath.log(mpmath.mpf(e))
        counts = [sum(1 for lg in logs if int(s) * lg < log_eps) for s in steps.ravel()]
    return scalar_or_array(np.asarray(counts, dtype=np.int64).reshape(steps.shape))


@dataclass(frozen=True)
class WindowApproximationDerivation(DerivationSummary):
    """Series facts behind W_b ≈ 6 ln(1/ε)/f² (claim AT6), computed by sympy."""

    gamma: sp.Expr
    gamma_from_integration: bool
    log_gamma_series: sp.Expr
    leading_term: sp.Expr
    window_exact: sp.Expr
    window_approx: sp.Expr
    approx_ratio_series: sp.Expr
    approx_overestimates: bool


@functools.cache
def window_approximation_derivation() -> WindowApproximationDerivation:
    """Derive W(ε) ≈ 6 ln(1/ε)/f² for θ ~ Unif[-f, f] (claims AT5, AT6).

    γ = E cos θ = sin f / f is taken from :func:`angle_characteristic` (integration); then
    ln γ = -f²/6 - f⁴/180 + O(f⁶), and W_exact/W_approx = 1 - f²/30 + O(f⁴) < 1, so the
    approximation slightly over-estimates the window. Cached.
    """
    uniform = angle_characteristic("uniform")
    f = sp.Symbol("f", positive=True)
    eps = sp.Symbol("epsilon", positive=True)
    gamma = uniform.mean_cos.subs(uniform.parameter, f)
    series = sp.series(sp.log(gamma), f, 0, 8)
    leading = series.removeO().as_ordered_terms()
    leading_term = sorted(leading, key=lambda t: sp.degree(t, f))[0]
    exact = sp.log(1 / eps) / -sp.log(gamma)
    approx = sp.log(1 / eps) / -leading_term
    ratio_series = sp.series(sp.simplify(exact / approx), f, 0, 6)
    coeff = ratio_series.removeO().coeff(f, 2)
    return WindowApproximationDerivation(
        gamma=gamma,
        gamma_from_integration=sp.simplify(gamma - sp.sin(f) / f) == 0,
        log_gamma_series=series,
        leading_term=leading_term,
        window_exact=exact,
        window_approx=sp.simplify(approx),
        approx_ratio_series=ratio_series,
        approx_overestimates=bool(coeff.is_negative),
    )


# ---------------------------------------------------------------------------------------------
# AT4: random Householder steps
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HouseholderDerivation(DerivationSummary):
    """Facts about H = I - β w wᵀ with w uniform on S^{d-1} (claim AT4), proven by sympy.

    ``second_moment_by_symmetry`` solves the linear constraints of sign-flip and permutation
    invariance plus trace 1 for a symbolic d×d matrix; ``second_moment_d2``/``_d3`` integrate
    w wᵀ over the circle and the sphere. ``gram_defect`` is t in HᵀH - I = t w wᵀ (unit w).
    """

    d: int
    second_moment_by_symmetry: sp.Matrix
    second_moment_d2: sp.Matrix
    second_moment_d3: sp.Matrix
    isotropic: bool
    mean_factor: sp.Expr
    mean_matrix: sp.Matrix
    gram_defect: sp.Expr
    gram_defect_rank_one: bool
    orthogonal_betas: sp.Set
    characteristic_polynomial: sp.Expr
    eigenvalues: dict


def _symmetric_second_moment(d: int) -> sp.Matrix:
    """Solve S = D S D (sign flips), S = Π S Πᵀ (transpositions), tr S = 1 for S = E w wᵀ."""
    entries = sp.symbols(f"s0:{d * d}")
    s_mat = sp.Matrix(d, d, entries)
    equations = [s_mat.trace() - 1]
    for i in range(d):
        flip = sp.diag(*[-1 if k == i else 1 for k in range(d)])
        equations.extend(s_mat - flip * s_mat * flip)
    for i, j in itertools.combinations(range(d), 2):
        perm = sp.eye(d).elementary_row_op("n<->m", row1=i, row2=j)
        equations.extend(s_mat - perm * s_mat * perm.T)
    solution = sp.solve(equations, entries, dict=True)
    if len(solution) != 1:
        raise RuntimeError(f"symmetry constraints not uniquely solvable: {solution}")
    return s_mat.subs(solution[0])


@functools.cache
def householder_derivation(d: int = 3) -> HouseholderDerivation:
    """Derive E H, orthogonality and the spectrum of H = I - β w wᵀ (claim AT4).

    * E[w wᵀ] = I/d: sign-flip invariance kills off-diagonal entries, permutation invariance
      equalises the diagonal, and tr = E‖w‖² = 1 (solved symbolically for this d, and checked
      by integration for d = 2 and 3). Hence E H = (1 - β/d) I and γ = |1 - β/d|.
    * HᵀH - I = β(β‖w‖² - 2) w wᵀ, so for unit w, H is orthogonal iff β ∈ {0, 2}.
    * det(H - xI) = (1 - x)^{d-1} (1 - β - x): eigenvalues 1 (× d-1) and 1 - β.

    Parameters
    ----------
    d : int, optional
        Dimension for the matrix computations, 2 ≤ d ≤ 6 (symbolic cost grows quickly).

    Returns
    -------
    HouseholderDerivation — cached per d.
    """
    dim = int_scalar("d", d, lo=2)
    if dim > 6:
        raise ValueError(f"d must be at most 6 for the symbolic derivation; got {dim}")
    beta = sp.Symbol("beta", real=True)
    t, th, ph = sp.symbols("t theta phi", real=True)
    circle = sp.Matrix([sp.cos(t), sp.sin(t)])
    m2 = (circle * circle.T).applyfunc(lambda e: sp.integrate(e, (t, 0, 2 * sp.pi)) / (2 * sp.pi))
    sphere = sp.Matrix([sp.sin(ph) * sp.cos(th), sp.sin(ph) * sp.sin(th), sp.cos(ph)])
    m3 = (sphere * sphere.T).applyfunc(
        lambda e: sp.integrate(e * sp.sin(ph), (th, 0, 2 * sp.pi), (ph, 0, sp.pi)) / (4 * sp.pi)
    )
    sym = _symmetric_second_moment(dim)
    isotropic = (
        sym == sp.eye(dim) / dim
        and m2 == sp.eye(2) / 2
        and m3 == sp.eye(3) / 3
        and _symmetric_second_moment(2) == m2
        and _symmetric_second_moment(3) == m3
    )
    d_sym = sp.Symbol("d", positive=True, integer=True)
    mean_matrix = sp.eye(dim) - beta * sym

    ws = sp.symbols(f"w1:{dim + 1}", real=True)
    w = sp.Matrix(ws)
    h = sp.eye(dim) - beta * w * w.T
    defect = (h.T * h - sp.eye(dim)).expand()
    norm2 = sum(x**2 for x in ws)
    unit = {ws[-1] ** 2: 1 - sum(x**2 for x in ws[:-1])}
    coeff = sp.factor(defect.trace() / norm2)
    rank_one = sp.simplify(defect - coeff * w * w.T) == sp.zeros(dim, dim)
    coeff_unit = sp.factor(sp.expand(coeff).subs(unit))
    x = sp.Symbol("x")
    charpoly = sp.factor(sp.expand((h - x * sp.eye(dim)).det()).subs(unit))
    return HouseholderDerivation(
        d=dim,
        second_moment_by_symmetry=sym,
        second_moment_d2=m2,
        second_moment_d3=m3,
        isotropic=bool(isotropic),
        mean_factor=1 - beta / d_sym,
        mean_matrix=mean_matrix,
        gram_defect=coeff_unit,
        gram_defect_rank_one=bool(rank_one),
        orthogonal_betas=sp.solveset(coeff_unit, beta, sp.S.Reals),
        characteristic_polynomial=charpoly,
        eigenvalues=sp.roots(sp.Poly(charpoly, x)),
    )


def householder_mean_factor(beta, d) -> float | np.ndarray:
    """Mean of a random Householder step: E[I - β w wᵀ] = (1 - β/d) I (claim AT4).

    The spectral-gap constant is γ = ‖E H‖_op = |1 - β/d|, so the mixing window is
    ``mixing_window(abs(factor), eps)`` ≈ d ln(1/ε)/β for small β/d.

    Parameters
    ----------
    beta : float or array_like
        Finite reals (PaTH uses β ∈ (0, 2); only β ∈ {0, 2} gives an orthogonal step).
    d : int
        Dimension ≥ 1.

    Returns
    -------
    float or ndarray (shape of ``beta``)
    """
    b = real_array("beta", beta)
    dim = int_scalar("d", d, lo=1)
    return scalar_or_array(1.0 - b / dim)
