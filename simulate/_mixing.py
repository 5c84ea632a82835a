"""Mixing windows, exact and Monte Carlo (paper [B], claims AT5, AT6, AT16).

Re-exported by :mod:`posflow.simulate.transport`.
"""

from __future__ import annotations

import math

import numpy as np

from posflow.simulate.orthogonal import SO2BlockLaw, _check_int, _rng

__all__ = ["empirical_mixing_window", "empirical_route_mean", "mixing_window"]


def mixing_window(gamma, eps: float):
    """Mixing window W(ε) = smallest n ≥ 1 with γⁿ ≤ ε, i.e. ⌈ln(1/ε)/ln(1/γ)⌉ (claims AT5, AT6).

    gamma: scalar or array in [0, ∞) (e.g. ``law.gamma`` or the per-block |c_b| of an
    SO2BlockLaw); eps in (0, 1). γ ≥ 1 gives inf (no mixing); γ = 0 gives 1. Returns an int
    (or math.inf) for a scalar, a float array otherwise.
    """
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must lie in (0, 1); got {eps}")
    g = np.asarray(gamma, dtype=float)
    if not (np.isfinite(g) & (g >= 0)).all():
        raise ValueError("gamma must be finite and >= 0")
    out = np.full(g.shape, np.inf)
    ok = g < 1.0
    with np.errstate(divide="ignore"):
        n = np.ceil(np.log(eps) / np.log(np.where(ok & (g > 0), g, 0.5)))
    n = np.where(g == 0, 1.0, np.maximum(n, 1.0))
    n = np.where(ok & (g**n > eps), n + 1, n)  # guard rounding at the boundary
    n = np.where(ok & (n > 1) & (g ** (n - 1) <= eps), n - 1, n)
    out[ok] = n[ok]
    if out.ndim == 0:
        return math.inf if np.isinf(out) else int(out)
    return out


def empirical_route_mean(
    law,
    max_distance: int,
    n_routes: int = 1000,
    seed=None,
    *,
    statistic: str = "norm",
    per_block: bool = False,
) -> np.ndarray:
    """Monte Carlo decorrelation of route products P_n (n i.i.d. steps), n = 0 … max_distance.

    ``statistic="norm"``: ‖Ê P_n‖_op (per block |Ê e^{iψ_b}| for SO2BlockLaw with ``per_block``);
    ``statistic="cos"``: |(1/d) tr Ê P_n| (per block |Ê cos ψ_b|). Exact value for SO(2)-uniform
    laws: (sin a/a)ⁿ. A Monte Carlo floor of about √(d/n_routes) (√(π/(4·n_routes)) per block)
    remains for mixed laws. Returns (max_distance + 1,) or (max_distance + 1, d/2). Cost
    O(max_distance·n_routes·d) for SO(2) blocks, O(max_distance·n_routes·d³) otherwise. AT5, AT6.
    """
    if statistic not in ("norm", "cos"):
        raise ValueError(f"statistic must be 'norm' or 'cos'; got {statistic!r}")
    m = _check_int(max_distance, "max_distance", 0)
    n_routes = _check_int(n_routes, "n_routes", 1)
    rng = _rng(seed)
    if isinstance(law, SO2BlockLaw):
        psi = np.zeros((n_routes, law.d // 2))
        z = np.empty((m + 1, law.d // 2), dtype=complex)  # Ê e^{iψ_b} per distance and block
        for n in range(m + 1):
            if n:
                psi += law.sample_angles(n_routes, seed=rng)
            z[n] = np.exp(1j * psi).mean(axis=0)
        if statistic == "norm":
            return np.abs(z) if per_block else np.abs(z).max(axis=1)
        return np.abs(z.real) if per_block else np.abs(z.real.mean(axis=1))
    if per_block:
        raise ValueError("per_block requires an SO2BlockLaw")
    d = int(law.d)
    p = np.broadcast_to(np.eye(d), (n_routes, d, d)).copy()
    out = np.empty(m + 1)
    for n in range(m + 1):
        if n:
            p = np.asarray(law.sample(n_routes, seed=rng), dtype=float) @ p
        mean = p.mean(axis=0)
        out[n] = (
            np.linalg.svd(mean, compute_uv=False)[0]
            if statistic == "norm"
            else abs(np.trace(mean)) / d
        )
    return out


def empirical_mixing_window(values, eps: float):
    """Smallest n with values[n] ≤ ε (per column for 2-d input); inf where none (claim AT5).

    values: output of :func:`empirical_route_mean`, shape (m + 1,) or (m + 1, B).
    """
    if not 0.0 < eps < 1.0:
        raise ValueError(f"eps must lie in (0, 1); got {eps}")
    v = np.asarray(values, dtype=float)
    if v.ndim not in (1, 2) or not np.isfinite(v).all():
        raise ValueError("values must be a finite 1-d or 2-d array")
    below = v <= eps
    idx = np.where(below.any(axis=0), below.argmax(axis=0).astype(float), np.inf)
    if v.ndim == 1:
        return math.inf if np.isinf(idx) else int(idx)
    return idx
