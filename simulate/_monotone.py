"""Stochastic monotonicity of causal kernels (claim PB8); re-exported by
:mod:`posflow.simulate.kernels`.

Row ``i'`` first-order dominates row ``i`` when the CDF of row ``i'`` never exceeds that of row
``i``; a kernel is stochastically monotone when this holds for every ``i < i'``.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate._kernel import Kernel
from posflow.simulate.backend import host

__all__ = ["is_stochastically_monotone", "monotonicity_deficit"]


def _as_matrix(K) -> np.ndarray:
    if isinstance(K, Kernel):
        return np.asarray(host(K.dense()), dtype=np.float64)
    if isinstance(K, str | bytes):
        raise TypeError("K must be a Kernel or a square matrix of numbers; got a string")
    try:
        M = np.asarray(host(K), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"K must be a Kernel or a square matrix of numbers; got {K!r}") from exc
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"K must be a Kernel or a square matrix; got shape {M.shape}")
    if not np.isfinite(M).all():
        raise ValueError("K must be finite")
    return M


def monotonicity_deficit(K) -> float:
    """Largest CDF deficit between ordered rows (claim PB8).

    .. math::
        \\max_{i < i'} \\max_k \\big(F_{i'}(k) - F_i(k)\\big)_+,
        \\qquad F_i(k) = \\sum_{j\\le k} K_{ij}

    Zero exactly when ``K`` is stochastically monotone (row ``i'`` first-order dominates row
    ``i`` whenever ``i < i'``).

    Parameters
    ----------
    K : Kernel or array_like, shape (n, n)

    Returns
    -------
    float
        The deficit, >= 0. Cost O(n²) time and memory (a running minimum of the CDFs).
    """
    F = np.cumsum(_as_matrix(K), axis=1)
    if F.shape[0] < 2:
        return 0.0
    prev_min = np.minimum.accumulate(F[:-1], axis=0)  # min over rows i < i'
    return float(max(0.0, (F[1:] - prev_min).max()))


def is_stochastically_monotone(K, tol: float = 1e-12) -> bool:
    """True when ``monotonicity_deficit(K) <= tol`` (claim PB8)."""
    if isinstance(tol, bool) or not isinstance(tol, int | float | np.integer | np.floating):
        raise TypeError(f"tol must be a number; got {tol!r}")
    if not (tol >= 0):
        raise ValueError(f"tol must be nonnegative; got {tol}")
    return monotonicity_deficit(K) <= tol
