"""Mixing windows, exact and Monte Carlo (paper [B], claims AT5, AT6, AT16).

Re-exported by :mod:`posflow.simulate.transport`. The Monte Carlo route means run on any backend
(``backend=``, ``device=``, ``host=`` as for :func:`posflow.simulate.backend.random_source`).
"""

from __future__ import annotations

import math

import numpy as np

from posflow.simulate._arrays import check_int
from posflow.simulate.backend import random_source, to_numpy
from posflow.simulate.orthogonal import SO2BlockLaw

__all__ = ["empirical_mixing_window", "empirical_route_mean", "mixing_window"]


def mixing_window(gamma, eps: float):
    """Mixing window W(γ, ε) = smallest n ≥ 1 with γⁿ ≤ ε, i.e. ⌈ln(1/ε)/ln(1/γ)⌉ (AT5, AT6).

    gamma: scalar or array in [0, ∞) (e.g. ``law.gamma`` or the per-block |c_b| of an
    SO2BlockLaw); eps in (0, 1). γ ≥ 1 gives inf (no mixing); γ = 0 gives 1. Returns an int
    (or math.inf) for a scalar, a float array otherwise. The numeric side of AT5: it finds n by
    testing the powers γⁿ, independently of the closed form
    :func:`posflow.theory.transport.mixing_window` (same argument order (γ, ε)).
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


def _law_angles(src, law: SO2BlockLaw, shape):
    """Angles of ``law`` drawn by ``src`` (on the host: the numbers of ``law.sample_angles``)."""
    s = law.scale
    if law.law == "uniform":
        return src.uniform(-s, s, shape)
    if law.law == "normal":
        return src.normal(0.0, s, shape)
    if law.law == "positive_uniform":
        return src.uniform(0.0, 2.0 * s, shape)
    xp = src.xp
    return xp.broadcast_to(xp.asarray(s, dtype=xp.float64, device=src.device), shape)


def _so2_route_mean(src, law: SO2BlockLaw, m: int, n_routes: int, statistic: str, per_block: bool):
    """|Ê e^{iψ_b(n)}| or |Ê cos ψ_b(n)|, n = 0 … m: ψ accumulated step by step (angles drawn
    for a chunk of distances at once)."""
    xp, dev, nb = src.xp, src.device, law.d // 2
    psi = xp.zeros((n_routes, nb), dtype=xp.float64, device=dev)
    cos_rows = [xp.ones((nb,), dtype=xp.float64, device=dev)]
    sin_rows = [xp.zeros((nb,), dtype=xp.float64, device=dev)]
    chunk = max(1, 2**22 // (n_routes * nb))
    for start in range(1, m + 1, chunk):
        steps = _law_angles(src, law, (min(chunk, m + 1 - start), n_routes, nb))
        for t in range(steps.shape[0]):
            psi = psi + steps[t, ...]
            cos_rows.append(xp.mean(xp.cos(psi), axis=0))
            if statistic == "norm":
                sin_rows.append(xp.mean(xp.sin(psi), axis=0))
    zc = xp.stack(cos_rows, axis=0)
    if statistic == "cos":
        return xp.abs(zc) if per_block else xp.abs(xp.mean(zc, axis=1))
    zs = xp.stack(sin_rows, axis=0)
    mag = xp.sqrt(zc * zc + zs * zs)
    return mag if per_block else xp.max(mag, axis=1)


def _matrix_route_mean(src, law, m: int, n_routes: int, statistic: str):
    """‖Ê P_n‖_op or |(1/d) tr Ê P_n| for general step laws, drawn on the host."""
    xp, d = src.xp, int(law.d)
    p = xp.broadcast_to(xp.eye(d, dtype=xp.float64, device=src.device), (n_routes, d, d))
    out = np.empty(m + 1)
    for n in range(m + 1):
        if n:
            step = law.sample(n_routes, seed=src.generator)
            p = xp.asarray(np.ascontiguousarray(step, dtype=np.float64), device=src.device) @ p
        mean = np.asarray(to_numpy(xp.mean(p, axis=0)))
        out[n] = (
            np.linalg.svd(mean, compute_uv=False)[0]
            if statistic == "norm"
            else abs(np.trace(mean)) / d
        )
    return out if src.backend == "numpy" else xp.asarray(out, device=src.device)


def empirical_route_mean(
    law,
    max_distance: int,
    n_routes: int = 1000,
    seed=None,
    *,
    statistic: str = "norm",
    per_block: bool = False,
    backend: str = "numpy",
    device=None,
    host: bool = False,
):
    """Monte Carlo decorrelation of route products P_n (n i.i.d. steps), n = 0 … max_distance.

    ``statistic="norm"``: ‖Ê P_n‖_op (per block |Ê e^{iψ_b}| for SO2BlockLaw with ``per_block``);
    ``statistic="cos"``: |(1/d) tr Ê P_n| (per block |Ê cos ψ_b|). Exact value for SO(2)-uniform
    laws: (sin a/a)ⁿ. A Monte Carlo floor of about √(d/n_routes) (√(π/(4·n_routes)) per block)
    remains for mixed laws. Claims AT5, AT6.

    SO(2) block laws: ψ_b(n) = Σ_{s<n} θ_{s,b} by cumulative sums over chunks of distances, on
    ``backend``/``device`` with the draws of :func:`posflow.simulate.backend.random_source`
    (``seed``, ``host``); on NumPy (or with ``host=True``) the angles are those of
    ``law.sample_angles`` called once per distance with the same Generator. Other step laws
    (Haar, Householder) sample d×d matrices on the host; the products run on ``backend``.

    Returns (max_distance + 1,) or (max_distance + 1, d/2), an array of ``backend``. Cost
    O(max_distance·n_routes·d) for SO(2) blocks, O(max_distance·n_routes·d³) otherwise; memory
    O(n_routes·d) per chunk of distances.
    """
    if not (hasattr(law, "d") and callable(getattr(law, "sample", None))):
        raise TypeError(f"law must be a step law with .d and .sample; got {type(law).__name__}")
    if statistic not in ("norm", "cos"):
        raise ValueError(f"statistic must be 'norm' or 'cos'; got {statistic!r}")
    m = check_int(max_distance, "max_distance", 0)
    n_routes = check_int(n_routes, "n_routes", 1)
    if isinstance(law, SO2BlockLaw):
        src = random_source(seed, backend, device, host=host)
        return _so2_route_mean(src, law, m, n_routes, statistic, per_block)
    if per_block:
        raise ValueError("per_block requires an SO2BlockLaw")
    src = random_source(seed, backend, device, host=True)
    return _matrix_route_mean(src, law, m, n_routes, statistic)


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
