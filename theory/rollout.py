"""Exact mathematics of residual-aware attention rollout (paper [A], claims PB1–PB12).

Conventions: tokens are 0-indexed; ``A_t[i, j]`` is the weight token i draws from token j
(lower-triangular, row-stochastic); ``R_t = (1-λ_t) I + λ_t A_t``; ``P = R_{T-1}⋯R_0``; the
influence profile is the last row of P.

This module holds the symbolic rollout (closure, the diagonal identity and its bound chain) and
re-exports the rest of the exact theory:

* the symbolic causal kernel (from :mod:`posflow.theory._symbolic`, claims PB1, PB2);
* drift terms of the four forces (from :mod:`posflow.theory._drift`, claim PB9);
* the Hausdorff closed form of the uniform-kernel rollout and its n → ∞ limit law
  (from :mod:`posflow.theory._hausdorff`, claim PB12);
* summability of λ schedules, which decides collapse (from :mod:`posflow.theory._summability`,
  claims PB5/PB6).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import NamedTuple

import sympy as sp

from posflow.theory._continuum import (
    continuum_correction,
    continuum_law_density,
    continuum_moment_derivation,
    continuum_moments,
    continuum_profile,
    continuum_profile_quadrature,
    profile_from_moments,
)
from posflow.theory._drift import (
    DriftDerivative,
    alibi_drift,
    alibi_drift_expr,
    alibi_drift_limit,
    alibi_drift_limit_dc,
    alibi_drift_limit_expr,
    background_shift_residual,
    drift,
    residual_drift_residual,
    uniform_drift,
)
from posflow.theory._exact import as_count, as_exact_lambdas, to_fraction
from posflow.theory._hausdorff import LimitLaw, hausdorff_moments, influence_exact, limit_law
from posflow.theory._summability import collapses, power_decay_collapses
from posflow.theory._symbolic import symbolic_kernel

__all__ = [
    "BoundCertificate",
    "DiagonalBound",
    "DriftDerivative",
    "LimitLaw",
    "RowSumResiduals",
    "SymbolicRollout",
    "alibi_drift",
    "alibi_drift_expr",
    "alibi_drift_limit",
    "alibi_drift_limit_dc",
    "alibi_drift_limit_expr",
    "background_shift_residual",
    "collapses",
    "continuum_correction",
    "continuum_law_density",
    "continuum_moment_derivation",
    "continuum_moments",
    "continuum_profile",
    "continuum_profile_quadrature",
    "diagonal_bound",
    "diagonal_bound_certificate",
    "diagonal_identity_residual",
    "drift",
    "hausdorff_moments",
    "influence_exact",
    "limit_law",
    "power_decay_collapses",
    "profile_from_moments",
    "residual_drift_residual",
    "row_sum_residual",
    "symbolic_kernel",
    "symbolic_rollout",
    "uniform_drift",
]


@dataclass(frozen=True)
class SymbolicRollout:
    """Symbolic ``P = R_{T-1}⋯R_0`` with ``R_t = (1-λ_t) I + λ_t A_t`` (claims PB1, PB2).

    Attributes: ``kernels`` (T Matrices A_t), ``lambdas`` (T symbols λ_t, nonnegative),
    ``R`` (T Matrices), ``P`` (Matrix, shape (n, n), entries expanded), ``entries`` (all free
    kernel symbols).
    """

    kernels: tuple
    lambdas: tuple
    R: tuple
    P: sp.Matrix
    entries: tuple


def symbolic_rollout(n: int, T: int, *, stochastic: bool = False) -> SymbolicRollout:
    """Build the symbolic residual-aware rollout for small n and T (claims PB1, PB2).

    .. math:: P = R_{T-1} \\cdots R_0,\\qquad R_t = (1-λ_t) I + λ_t A_t

    Layer t uses :func:`symbolic_kernel` ``(n, f"a{t}", stochastic=stochastic)`` and the
    symbol ``lambda_t``. Cost grows fast: polynomial entries of degree up to 2T in
    O(n²·T) symbols; n ≤ 4, T ≤ 3 takes well under a second.
    """
    n = as_count(n, "n")
    T = as_count(T, "T", minimum=0)
    kernels, lambdas, Rs, entries = [], [], [], []
    P = sp.eye(n)
    for t in range(T):
        A, syms = symbolic_kernel(n, f"a{t}", stochastic=stochastic)
        lam = sp.Symbol(f"lambda_{t}", nonnegative=True)
        R = (1 - lam) * sp.eye(n) + lam * A
        P = (R * P).applyfunc(sp.expand)
        kernels.append(A)
        lambdas.append(lam)
        Rs.append(R)
        entries.extend(syms)
    return SymbolicRollout(tuple(kernels), tuple(lambdas), tuple(Rs), P, tuple(entries))


def diagonal_identity_residual(n: int, T: int) -> list[sp.Expr]:
    """Residuals of the diagonal identity for symbolic kernels (claim PB2).

    .. math:: P_{ii} - \\prod_{t=0}^{T-1} \\big(1 - λ_t (1 - A_t[i, i])\\big),\\quad i = 0..n-1

    for general symbolic lower-triangular kernels (row sums are not needed: products of
    lower-triangular matrices multiply their diagonals). Returns n expanded expressions; all are
    0, which proves PB2 for this n and T.
    """
    ro = symbolic_rollout(n, T)
    out = []
    for i in range(ro.P.rows):
        layers = zip(ro.kernels, ro.lambdas, strict=True)
        prod = sp.Mul(*[1 - lam * (1 - A[i, i]) for A, lam in layers])
        out.append(sp.expand(ro.P[i, i] - prod))
    return out


class RowSumResiduals(NamedTuple):
    """Row sums minus 1 of each ``R_t`` (``R[t][i]``) and of ``P`` (``P[i]``); all zero."""

    R: tuple
    P: tuple


def row_sum_residual(n: int, T: int) -> RowSumResiduals:
    """Row-stochastic closure for symbolic row-stochastic kernels (claim PB1).

    .. math:: \\sum_j R_t[i, j] - 1 = 0,\\qquad \\sum_j P[i, j] - 1 = 0

    with kernels from ``symbolic_kernel(..., stochastic=True)``. Returns the expanded residuals;
    all are 0. ``P`` is lower-triangular by construction and ``P[0, 0] = 1``.
    """
    ro = symbolic_rollout(n, T, stochastic=True)
    r_res = tuple(tuple(sp.expand(sum(R.row(i)) - 1) for i in range(R.rows)) for R in ro.R)
    p_res = tuple(sp.expand(sum(ro.P.row(i)) - 1) for i in range(ro.P.rows))
    return RowSumResiduals(r_res, p_res)


class DiagonalBound(NamedTuple):
    """The three sides of ``min_i P_ii ≥ ∏(1-λ_tδ_t) ≥ ∏(1-λ_t)`` (exact)."""

    min_diagonal: sp.Rational
    argmin: int
    middle: sp.Rational
    lower: sp.Rational


def diagonal_bound(diagonals, lambdas, *, exact: str | None = None) -> DiagonalBound:
    """Exact diagonal positivity chain from the kernels' diagonals (claims PB2, PB3).

    .. math:: \\min_i P_{ii} = \\min_i \\prod_t (1 - λ_t(1 - A_t[i,i]))
              \\ \\ge\\ \\prod_t (1 - λ_t δ_t)\\ \\ge\\ \\prod_t (1 - λ_t),
              \\qquad δ_t = \\max_i (1 - A_t[i, i])

    Parameters
    ----------
    diagonals : sequence of T sequences of n exact numbers in [0, 1]
        ``diagonals[t][i] = A_t[i, i]``.
    lambdas : sequence of T exact numbers in [0, 1]
    exact : {None, "rational", "nsimplify"}
        How floats are read (refused by default), as in :func:`influence_exact`.

    Returns
    -------
    DiagonalBound with exact Rationals; ``argmin`` is the smallest i attaining the minimum.
    Cost O(T·n) exact operations.
    """
    lams = as_exact_lambdas(lambdas, exact=exact)
    if isinstance(diagonals, str | bytes) or not hasattr(diagonals, "__len__"):
        raise TypeError("diagonals must be a sequence of T sequences (one per layer)")
    if len(diagonals) != len(lams):
        raise ValueError(
            f"diagonals must have one row per layer: len(diagonals) = {len(diagonals)}, "
            f"len(lambdas) = {len(lams)}"
        )
    rows: list[list[Fraction]] = []
    for t, row in enumerate(diagonals):
        vals = [to_fraction(v, f"diagonals[{t}][{i}]", exact) for i, v in enumerate(row)]
        for i, v in enumerate(vals):
            if not 0 <= v <= 1:
                raise ValueError(f"diagonals must lie in [0, 1]; got {v} at index [{t}][{i}]")
        if rows and len(vals) != len(rows[0]):
            raise ValueError(
                f"diagonals rows must all have length {len(rows[0])}; row {t} has {len(vals)}"
            )
        rows.append(vals)
    n = len(rows[0]) if rows else 1
    if n == 0:
        raise ValueError("diagonals rows must be non-empty (n >= 1)")
    pii = [Fraction(1)] * n
    middle = lower = Fraction(1)
    for lam, row in zip(lams, rows, strict=True):
        delta = max(1 - a for a in row)
        pii = [p * (1 - lam * (1 - a)) for p, a in zip(pii, row, strict=True)]
        middle *= 1 - lam * delta
        lower *= 1 - lam
    k = min(range(n), key=lambda i: pii[i])
    q = lambda f: sp.Rational(f.numerator, f.denominator)  # noqa: E731
    return DiagonalBound(q(pii[k]), k, q(middle), q(lower))


@dataclass(frozen=True)
class BoundCertificate:
    """A symbolic proof of ``∏(1-λ_t d_t) ≥ ∏(1-λ_tδ_t) ≥ ∏(1-λ_t)`` for T layers (PB3).

    Variables are nonnegative slacks: ``rho_t = 1-λ_t``, ``g_t = 1-δ_t``, ``h_t = δ_t - d_t``
    (``d_t = 1 - A_t[i,i]``), together with ``lambda_t``; then ``1 = rho_t + lambda_t`` and the
    factors are ``rho_t + lambda_t(g_t + h_t)``, ``rho_t + lambda_t g_t`` and ``rho_t``.
    ``upper_terms``/``lower_terms`` are the telescoping terms whose sums equal the two
    differences; ``holds`` is True when sympy verified both sums and the nonnegativity of
    every term.
    """

    diagonal: sp.Expr
    middle: sp.Expr
    lower: sp.Expr
    upper_terms: tuple
    lower_terms: tuple
    holds: bool


def diagonal_bound_certificate(T: int) -> BoundCertificate:
    """Prove the bound chain of claim PB3 for T layers by a telescoping identity.

    .. math:: \\prod_t a_t - \\prod_t b_t = \\sum_k \\Big(\\prod_{t<k} a_t\\Big)(a_k - b_k)
              \\Big(\\prod_{t>k} b_t\\Big)

    with ``a_k - b_k = λ_k h_k ≥ 0`` (diagonal vs middle) and ``λ_k g_k ≥ 0`` (middle vs
    lower); every term is a product of nonnegative symbols. Cost O(T²) expansions.
    """
    T = as_count(T, "T", minimum=0)
    nn = {"nonnegative": True}
    lam = sp.symbols(f"lambda_0:{T}", **nn) if T else ()
    rho = sp.symbols(f"rho_0:{T}", **nn) if T else ()
    g = sp.symbols(f"g_0:{T}", **nn) if T else ()
    h = sp.symbols(f"h_0:{T}", **nn) if T else ()
    diag = [rho[t] + lam[t] * (g[t] + h[t]) for t in range(T)]
    mid = [rho[t] + lam[t] * g[t] for t in range(T)]
    low = list(rho)

    def telescope(a, b):
        return tuple(
            sp.Mul(*a[:k]) * (sp.expand(a[k] - b[k])) * sp.Mul(*b[k + 1 :]) for k in range(T)
        )

    up_terms, low_terms = telescope(diag, mid), telescope(mid, low)
    P_d, P_m, P_l = sp.Mul(*diag), sp.Mul(*mid), sp.Mul(*low)
    ok = (
        sp.expand(P_d - P_m - sp.Add(*up_terms)) == 0
        and sp.expand(P_m - P_l - sp.Add(*low_terms)) == 0
        and all(term.is_nonnegative for term in up_terms + low_terms)
    )
    return BoundCertificate(P_d, P_m, P_l, up_terms, low_terms, bool(ok))
