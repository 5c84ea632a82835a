"""Residual-aware attention rollout through depth (paper [A]).

.. math::
    R_t = (1 - \\lambda_t) I + \\lambda_t A_t,\\qquad P = R_{T-1} \\cdots R_0,\\qquad
    p = e_{n-1}^\\top P .

The influence profile ``p`` is computed as a vector chain (T row-vector–kernel products), never as
a matrix–matrix product: O(T·n·H) for ALiBi kernels, O(T·n) for the uniform kernel, O(T·n²) for
dense ones. Claims PB1–PB14.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from simulate._validate import as_lambdas, ensure_fits
from simulate.kernels import Kernel

__all__ = [
    "constant",
    "diagonal",
    "influence",
    "power_decay",
    "rollout_matrix",
    "rollout_summary",
    "total_mixing",
]


def _layers(kernels, lambdas) -> tuple[list[Kernel], np.ndarray]:
    """Validate (kernels, lambdas) and return one kernel per layer and the schedule."""
    lam = as_lambdas(lambdas)
    T = lam.size
    if isinstance(kernels, Kernel):
        return [kernels] * T, lam
    if isinstance(kernels, str | bytes) or not isinstance(kernels, Sequence):
        raise TypeError(
            f"kernels must be a Kernel or a sequence of Kernel; got {type(kernels).__name__}"
        )
    ks = list(kernels)
    if len(ks) != T:
        raise ValueError(
            f"kernels must have one kernel per layer: got {len(ks)} kernels for {T} lambdas"
        )
    for t, k in enumerate(ks):
        if not isinstance(k, Kernel):
            raise TypeError(f"kernels[{t}] must be a Kernel; got {type(k).__name__}")
    if ks and any(k.n != ks[0].n for k in ks):
        sizes = sorted({k.n for k in ks})
        raise ValueError(f"kernels must all have the same n; got sizes {sizes}")
    return ks, lam


def _chain(ks: list[Kernel], lam: np.ndarray, rows: np.ndarray) -> np.ndarray:
    # rows (k, n) ↦ rows R_{T-1} ⋯ R_0, applying R_{T-1} first.
    for t in range(lam.size - 1, -1, -1):
        rows = ks[t]._residual_step(rows, float(lam[t]))
    return rows


def influence(kernels, lambdas, n: int | None = None) -> np.ndarray:
    """Influence of every input token on the last token after T residual-aware layers.

    .. math::
        p = e_{n-1}^\\top R_{T-1} \\cdots R_0,\\qquad R_t = (1 - \\lambda_t) I + \\lambda_t A_t

    (claims PB1–PB14). T = 0 gives ``e_{n-1}``.

    Parameters
    ----------
    kernels : Kernel or sequence of T Kernel
        Causal attention kernels, one for all layers or one per layer (``A_0`` first).
    lambdas : array_like, shape (T,)
        Mixing coefficients in [0, 1].
    n : int, optional
        Number of tokens; only needed when ``kernels`` is an empty sequence.

    Returns
    -------
    p : ndarray, shape (n,)
        A probability vector; ``p[0]`` is the first token.

    Cost O(T·n·H) for ALiBi kernels, O(T·n) for the uniform kernel, O(T·n²) for dense ones;
    memory O(n·H). Raises ValueError for λ outside [0, 1] or NaN, and for len(kernels) != T.
    """
    ks, lam = _layers(kernels, lambdas)
    size = ks[0].n if ks else (kernels.n if isinstance(kernels, Kernel) else n)
    if size is None:
        raise ValueError("n must be given when kernels is an empty sequence")
    row = np.zeros((1, size))
    row[0, -1] = 1.0
    return _chain(ks, lam, row)[0]


def rollout_matrix(kernels, lambdas, n: int | None = None) -> np.ndarray:
    """The full rollout ``P = R_{T-1} ⋯ R_0``, shape (n, n) (claims PB1, PB2, PB3).

    Each row is its own vector chain, so the cost is O(T·n²·H) for ALiBi kernels (O(T·n³) for
    dense ones). Refused with ValueError when an n×n array would not fit in memory.

    Parameters
    ----------
    kernels : Kernel or sequence of T Kernel
    lambdas : array_like, shape (T,)
    n : int, optional
        Only needed when ``kernels`` is an empty sequence.

    Returns
    -------
    P : ndarray, shape (n, n)
        Lower-triangular and row-stochastic for causal kernels; ``P[0, 0] = 1``.
    """
    ks, lam = _layers(kernels, lambdas)
    size = ks[0].n if ks else (kernels.n if isinstance(kernels, Kernel) else n)
    if size is None:
        raise ValueError("n must be given when kernels is an empty sequence")
    ensure_fits((size, size), "rollout_matrix", copies=3)
    return _chain(ks, lam, np.eye(size))


def diagonal(kernels, lambdas, log: bool = False) -> np.ndarray:
    """Diagonal of the rollout by the exact product formula (claims PB2, PB3, PB4).

    .. math::
        P_{ii} = \\prod_t \\big(1 - \\lambda_t (1 - A_t[i, i])\\big)

    valid for causal (lower-triangular) kernels, whose products multiply their diagonals.

    Parameters
    ----------
    kernels : Kernel or sequence of T Kernel
    lambdas : array_like, shape (T,)
    log : bool
        Return ``log P_ii`` (summed with ``log1p``), which stays finite where ``P_ii``
        underflows at depth; ``-inf`` only where a factor is exactly zero.

    Returns
    -------
    ndarray, shape (n,)
    """
    ks, lam = _layers(kernels, lambdas)
    if not ks:
        if isinstance(kernels, Kernel):
            return np.zeros(kernels.n) if log else np.ones(kernels.n)
        raise ValueError("diagonal needs at least one layer (or a single Kernel)")
    n = ks[0].n
    shared = isinstance(kernels, Kernel)
    dg = kernels.diagonal() if shared else None
    # Σ_t log1p(-λ_t (1 - A_t[i,i])) summed pairwise in blocks of layers (error O(log T)·eps)
    block = max(1, min(lam.size, 2**22 // n))
    out = np.zeros(n)
    for s in range(0, lam.size, block):
        lt = lam[s : s + block]
        if shared:
            a = np.broadcast_to(dg[:, None], (n, lt.size))
        else:
            a = np.stack([k.diagonal() for k in ks[s : s + block]], axis=1)
        loss = (1.0 - a) * lt[None, :]  # λ_t (1 - A_t[i,i])
        keep = (1.0 - lt)[None, :] + a * lt[None, :]  # 1 - loss without cancellation
        with np.errstate(divide="ignore"):
            out += np.where(loss < 0.5, np.log1p(-loss), np.log(keep)).sum(axis=1)
    return out if log else np.exp(out)


def total_mixing(kernels, lambdas) -> float:
    """The control quantity ``Σ_t λ_t δ_t`` with ``δ_t = max_i (1 - A_t[i, i])`` (PB3, PB4)."""
    ks, lam = _layers(kernels, lambdas)
    if isinstance(kernels, Kernel):
        return float(lam.sum() * np.max(1.0 - kernels.diagonal()))
    return float(sum(lt * np.max(1.0 - k.diagonal()) for k, lt in zip(ks, lam, strict=True)))


def rollout_summary(kernels, lambdas) -> dict:
    """Headline numbers of a rollout: p(0), p(n-1), argmin p, min_i P_ii, Σλ_tδ_t, Σλ_t.

    Returns
    -------
    dict with keys ``n``, ``T``, ``p_first``, ``p_last``, ``argmin``, ``p_min``,
    ``min_diag``, ``log_min_diag``, ``sum_lambda_delta``, ``sum_lambda`` and ``profile``
    (the influence vector, shape (n,)).
    """
    _, lam = _layers(kernels, lambdas)
    p = influence(kernels, lam)
    logd = diagonal(kernels, lam, log=True) if lam.size else np.zeros(p.size)
    return {
        "n": int(p.size),
        "T": int(lam.size),
        "p_first": float(p[0]),
        "p_last": float(p[-1]),
        "argmin": int(np.argmin(p)),
        "p_min": float(p.min()),
        "min_diag": float(np.exp(logd.min())),
        "log_min_diag": float(logd.min()),
        "sum_lambda_delta": total_mixing(kernels, lam) if lam.size else 0.0,
        "sum_lambda": float(lam.sum()),
        "profile": p,
    }


def _check_depth(T) -> int:
    if isinstance(T, bool) or not isinstance(T, int | np.integer):
        raise TypeError(f"T must be an integer; got {T!r}")
    if T < 0:
        raise ValueError(f"T must be nonnegative; got {T}")
    return int(T)


def constant(lam: float, T: int) -> np.ndarray:
    """Constant schedule ``λ_t = lam``, t = 0..T-1, shape (T,) (claims PB5, PB6)."""
    T = _check_depth(T)
    if not (isinstance(lam, int | float | np.integer | np.floating)) or not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be a number in [0, 1]; got {lam!r}")
    return np.full(T, float(lam))


def power_decay(lam0: float, beta: float, T: int) -> np.ndarray:
    """Power-decay schedule ``λ_t = λ0/(t+1)^β``, t = 0..T-1, shape (T,) (claims PB4–PB6).

    ``Σ λ_t`` diverges iff ``β <= 1`` (collapse onto token 0), converges iff ``β > 1``.
    """
    T = _check_depth(T)
    if not (isinstance(lam0, int | float | np.integer | np.floating)) or not 0.0 <= lam0 <= 1.0:
        raise ValueError(f"lam0 must be a number in [0, 1]; got {lam0!r}")
    if not (isinstance(beta, int | float | np.integer | np.floating)) or not np.isfinite(beta):
        raise ValueError(f"beta must be a finite number; got {beta!r}")
    if beta < 0:
        raise ValueError(f"beta must be nonnegative (so that λ_t <= λ0 <= 1); got {beta}")
    return float(lam0) / (np.arange(1, T + 1, dtype=np.float64) ** float(beta))
