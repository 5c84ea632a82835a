"""Value-side incoherence of [B] for SO(2) value rotations (private; claim AT14).

Re-exported by :mod:`posflow.theory.transport`. Far values transported by independent random
rotations add up incoherently: the expected squared norm of the far residual is of the order of
Σ a_j² ‖v_j‖² instead of (Σ a_j)² ‖v̄‖².

Convention: the value at distance n_j from the query is rotated by P_j = R(φ_j) with
φ_j = θ_1 + … + θ_{n_j}, the sum of the n_j i.i.d. route angles nearest the query (route
tokens j..i-1). Planar vectors are identified with complex numbers, R(φ) v ↔ e^{iφ} z.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import sympy as sp

from ._transport_angles import angle_characteristic
from ._transport_common import DerivationSummary, int_array, real_array


@dataclass(frozen=True)
class ValueSideDerivation(DerivationSummary):
    """The facts behind the value-side bound (claim AT14), derived by sympy.

    ``rotation_split``: R(ψ) = cos ψ I + sin ψ J (J the quarter turn), hence for a route of
    m i.i.d. angles E R(ψ) = Re(φ^m) I + Im(φ^m) J and, for symmetric laws, c^m I with
    ``cross_term`` = E cos(θ_1 + … + θ_m) from :func:`angle_characteristic`. ``two_sided_sum``
    is Σ_{m∈ℤ} r^{|m|}, which bounds every row sum of the Toeplitz matrix r^{|n_j - n_k|}.
    """

    rotation_split: bool
    cross_term: sp.Expr
    cross_term_is_power: bool
    two_sided_sum: sp.Expr
    factor: sp.Expr
    factor_matches: bool


@functools.cache
def value_side_derivation() -> ValueSideDerivation:
    """Derive E‖Σ_j a_j P_j v_j‖² ≤ (1+|c|)/(1-|c|) Σ_j a_j² ‖v_j‖² (claim AT14).

    .. math::

        \\mathbb E\\,\\langle P_j v_j, P_k v_k\\rangle = c^{|n_j - n_k|}\\langle v_j, v_k\\rangle,
        \\qquad
        \\sum_{j,k} |a_j||a_k|\\, r^{|n_j-n_k|}\\|v_j\\|\\|v_k\\|
        \\le \\Big(\\sum_{m\\in\\mathbb Z} r^{|m|}\\Big)\\sum_j a_j^2\\|v_j\\|^2
        = \\frac{1+r}{1-r}\\sum_j a_j^2 \\|v_j\\|^2

    with r = |c| < 1 (Schur test: the Toeplitz matrix r^{|n_j - n_k|} on distinct integers has
    row sums at most Σ_m r^{|m|}). The route angles of P_j beyond those of P_k are independent
    of P_k, which gives the first identity (uniform law shown; any symmetric law alike). Cached.
    """
    psi = sp.Symbol("psi", real=True)
    rot = sp.Matrix([[sp.cos(psi), -sp.sin(psi)], [sp.sin(psi), sp.cos(psi)]])
    quarter = sp.Matrix([[0, -1], [1, 0]])
    split = sp.simplify(rot - (sp.cos(psi) * sp.eye(2) + sp.sin(psi) * quarter)) == sp.zeros(2)

    uniform = angle_characteristic("uniform")
    c = uniform.mean_cos
    m = sp.Symbol("m", integer=True, positive=True)
    cross = uniform.sum_cos.subs(uniform.steps, m)
    r = sp.Symbol("r", positive=True)
    k = sp.Symbol("k", integer=True)
    one_sided = sp.summation(r**k, (k, 1, sp.oo))
    if isinstance(one_sided, sp.Piecewise):
        if one_sided.args[0][1] != (r < 1):
            raise RuntimeError(f"unexpected geometric-series branches: {one_sided}")
        one_sided = one_sided.args[0][0]
    two_sided = sp.simplify(1 + 2 * one_sided)
    factor = (1 + r) / (1 - r)
    return ValueSideDerivation(
        rotation_split=bool(split),
        cross_term=cross,
        cross_term_is_power=sp.simplify(cross - c**m) == 0,
        two_sided_sum=two_sided,
        factor=factor,
        factor_matches=sp.simplify(two_sided - factor) == 0,
    )


def _values_and_chi(values, chi, name_chi: str, strict: bool):
    """Validate values (M, 2) or (M, B, 2) and a characteristic value per block."""
    v = real_array("values", values)
    if v.ndim == 2:
        v = v[:, None, :]
    if v.ndim != 3 or v.shape[-1] != 2 or v.shape[0] < 1 or v.shape[1] < 1:
        raise ValueError(
            f"values must have shape (M, 2) or (M, B, 2) with M, B >= 1; got {np.shape(values)}"
        )
    c = np.asarray(chi)
    if c.dtype.kind not in "iufc" or isinstance(chi, bool):
        raise TypeError(f"{name_chi} must be a real or complex number or array; got {c.dtype}")
    c = c.astype(np.complex128)
    if not np.isfinite(c).all():
        raise ValueError(f"{name_chi} must be finite; got {chi!r}")
    if c.ndim > 1 or (c.ndim == 1 and c.shape[0] not in (1, v.shape[1])):
        raise ValueError(f"{name_chi} must be a scalar or have shape (B,) = ({v.shape[1]},)")
    c = np.broadcast_to(c, (v.shape[1],))
    mod = np.abs(c)
    bad = mod >= 1.0 if strict else mod > 1.0 + 1e-12
    if bad.any():
        rule = "|c| < 1" if strict else "|chi| <= 1"
        raise ValueError(f"{name_chi} must satisfy {rule}; got modulus {mod[bad][0]!r}")
    return v, c


def _weights(weights, m: int) -> np.ndarray:
    a = real_array("weights", weights)
    if a.shape != (m,):
        raise ValueError(f"weights must have shape (M,) = ({m},); got {a.shape}")
    return a


@dataclass(frozen=True)
class ValueSideBound:
    """Result of :func:`value_side_bound` (claim AT14).

    ``bound`` = Σ_b (1+|c_b|)/(1-|c_b|) Σ_j a_j² ‖v_{j,b}‖²; ``diagonal`` = Σ_j a_j² ‖v_j‖²
    (the incoherent scale); ``coherent`` = ‖Σ_j a_j v_j‖² = (Σ a_j)² ‖v̄‖², the far residual
    without value rotation; ``factor`` = (1+|c_b|)/(1-|c_b|) per block, shape (B,).
    """

    bound: float
    diagonal: float
    coherent: float
    factor: np.ndarray


def value_side_bound(weights, values, c) -> ValueSideBound:
    """Upper bound on the expected far residual with random SO(2) value rotations (AT14).

    .. math:: \\mathbb E\\Big\\|\\sum_j a_j P_j v_j\\Big\\|^2
              \\le \\frac{1+|c|}{1-|c|}\\sum_j a_j^2\\|v_j\\|^2
              \\quad\\text{vs.}\\quad \\Big\\|\\sum_j a_j v_j\\Big\\|^2 = (\\textstyle\\sum_j a_j)^2
              \\|\\bar v\\|^2

    valid for distinct distances, weights independent of the value angles and any angle law
    with |E e^{iθ}| = |c| < 1 (:func:`value_side_derivation`). Blocks are independent and
    mutually orthogonal, so with several blocks the bound is the sum of per-block bounds.

    Parameters
    ----------
    weights : array_like, shape (M,)
        Far attention weights a_j (finite reals).
    values : array_like, shape (M, 2) or (M, B, 2)
        Planar value blocks v_j (finite).
    c : float, complex or array_like, shape (B,)
        Characteristic value per block, |c| < 1 (e.g. sin f_b / f_b).

    Returns
    -------
    ValueSideBound — cost O(M·B).
    """
    v, c_arr = _values_and_chi(values, c, "c", strict=True)
    a = _weights(weights, v.shape[0])
    r = np.abs(c_arr)
    factor = (1.0 + r) / (1.0 - r)
    per_block = np.einsum("j,jb->b", a * a, np.sum(v * v, axis=-1))
    coherent = float(np.sum(np.einsum("j,jbk->bk", a, v) ** 2))
    return ValueSideBound(
        bound=float(np.sum(factor * per_block)),
        diagonal=float(np.sum(per_block)),
        coherent=coherent,
        factor=factor,
    )


def value_side_expectation(weights, values, distances, chi) -> float:
    """Exact E‖Σ_j a_j P_j v_j‖² for planar values under i.i.d. route angles (claim AT14).

    With z_j = v_j as a complex number and χ = E e^{iθ}:

    .. math:: \\mathbb E\\Big\\|\\sum_j a_j e^{i\\varphi_j} z_j\\Big\\|^2
              = \\sum_j a_j^2 |z_j|^2
              + 2\\,\\mathrm{Re}\\sum_{n_j > n_k} a_j a_k\\, \\chi^{\\,n_j - n_k} z_j \\bar z_k

    because φ_j - φ_k is a sum of n_j - n_k fresh angles when n_j > n_k. For a symmetric law
    (χ = c real) this is Σ_{j,k} a_j a_k c^{|n_j - n_k|} ⟨v_j, v_k⟩. Blocks add up.

    Parameters
    ----------
    weights : array_like, shape (M,)
    values : array_like, shape (M, 2) or (M, B, 2)
    distances : array_like of int, shape (M,)
        Distinct route lengths n_j ≥ 0.
    chi : float, complex or array_like, shape (B,)
        Characteristic value per block, |χ| ≤ 1 (χ = e^{if} for RoPE).

    Returns
    -------
    float — cost O(M log M + M·B) via the running sum h_p = χ^{n_p - n_{p-1}}(h_{p-1} + x̄_{p-1}).
    """
    v, chi_arr = _values_and_chi(values, chi, "chi", strict=False)
    a = _weights(weights, v.shape[0])
    n = int_array("distances", distances, lo=0)
    if n.shape != (v.shape[0],):
        raise ValueError(f"distances must have shape (M,) = ({v.shape[0]},); got {n.shape}")
    order = np.argsort(n, kind="stable")
    n_sorted = n[order]
    if (np.diff(n_sorted) == 0).any():
        raise ValueError("distances must be distinct (one value per route length)")
    x = a[order, None] * (v[order, :, 0] + 1j * v[order, :, 1])  # shape (M, B)
    total = float(np.sum(np.abs(x) ** 2))
    h = np.zeros(v.shape[1], dtype=np.complex128)
    cross = np.zeros(v.shape[1], dtype=np.complex128)
    for p in range(1, x.shape[0]):
        h = chi_arr ** int(n_sorted[p] - n_sorted[p - 1]) * (h + np.conj(x[p - 1]))
        cross += x[p] * h
    return total + 2.0 * float(np.sum(cross.real))
