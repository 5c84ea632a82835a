"""Residual-aware attention rollout through depth (paper [A]).

.. math::
    R_t = (1 - \\lambda_t) I + \\lambda_t A_t,\\qquad P = R_{T-1} \\cdots R_0,\\qquad
    p = e_{n-1}^\\top P .

The influence profile ``p`` is computed as a vector chain (T row-vector–kernel products), never as
a matrix–matrix product: O(T·n·H) for ALiBi kernels, O(T·n) for the uniform kernel, O(T·n²) for
dense ones. Claims PB1–PB14.

Every function is one array-API code path: it runs on the backend and device the kernels were
built on (``backend="torch"``, ``"cupy"``, … in :mod:`posflow.simulate.kernels`; NumPy by default)
and returns that backend's arrays; all kernels of one rollout must share the backend and device.
Quantities that underflow at depth are available in log space (``diagonal(..., log=True)``,
``rollout_summary(...)["log_min_diag"]``).

Mass conservation. A row-stochastic kernel gives Σ_j (p R_t)_j = Σ_j p_j exactly in exact
arithmetic, so the mass of every row of the chain is an invariant. In floating point each step
moves it by a rounding defect: the partial sums of the structured steps (a suffix recurrence or
a cumulative sum over up to n positions) and the rounded ratio e^{-m} behind the geometric sums
give |Σ p R_t − Σ p| ≤ (8 + 8 λ_t (n + H)) u Σ p (u = 2^-53, H heads; measured: 20–60 ulp after
T = 32–64 steps at n = 256–1024 without projection). The chain therefore projects onto the
invariant: after every step with λ_t > 0 it takes the compensated row sums S_t (TwoSum,
``_alibi_nb.mass_update``: the exact sum within u + O(n u²)) and, when the kernel is row-stochastic
by construction (uniform, ALiBi, and dense matrices whose row sums are within 8 n u of 1 —
``Kernel._row_stochastic``) and the step's defect |S_t − S_{t+1}| is within that rounding
budget, counts it as rounding; at the end every row is rescaled by (initial mass)/S_0 once
(the steps are linear, so one rescaling equals rescaling after every step). A defect beyond the
budget — a leaking step, a kernel that is not stochastic — is real and is kept: the target mass
follows it (``target ← target · S_t/S_{t+1}``), so nothing real is hidden (a leak of 1e-6 λ per
step is 10⁶ times the budget below n ≈ 10⁹). Rounding argument: the rescaling factor differs
from 1 by the rounding drift of the unprojected chain (≤ Σ_t budget_t, in practice ≤ 1e-13),
so each entry moves by at most that relative amount — no more than rounding already moved it —
and the result has |Σp − mass| ≤ 3u·mass + O(n u²) (one division, one product per entry, the
compensated sum) on NumPy; off NumPy the sums are the backend's float64 reductions (error
≤ ⌈log2 n⌉ u with pairwise/tree sums). Chains of kernels none of which is row-stochastic
(e.g. a measured dense matrix with float32 row sums) are returned unprojected, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from posflow.simulate._alibi_nb import mass_update, row_sums
from posflow.simulate._kernel import Kernel, check_n
from posflow.simulate._validate import as_lambdas, ensure_fits, ensure_memory
from posflow.simulate.backend import host

__all__ = [
    "constant",
    "diagonal",
    "influence",
    "power_decay",
    "rollout_matrix",
    "rollout_summary",
    "stationary_profiles",
    "total_mixing",
]

_TINY = float(np.finfo(np.float64).tiny)  # smallest normal float64, 2.2e-308
_U = 2.0**-53  # unit roundoff of float64


def _layers(kernels, lambdas) -> tuple[list[Kernel], np.ndarray]:
    """Validate (kernels, lambdas) and return one kernel per layer and the schedule."""
    lam = as_lambdas(host(lambdas))
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
    if ks and any((k.backend, str(k.device)) != (ks[0].backend, str(ks[0].device)) for k in ks):
        places = sorted({f"{k.backend} on {k.device}" for k in ks})
        raise ValueError(f"kernels must all share one backend and device; got {places}")
    return ks, lam


def _size(kernels, ks, n) -> int:
    """The number of tokens of a rollout: the kernels' ``n``, or the ``n`` argument (an integer
    ≥ 1, needed when ``kernels`` is an empty sequence and otherwise equal to the kernels' n)."""
    if n is not None:
        n = check_n(n)
    k0 = ks[0] if ks else (kernels if isinstance(kernels, Kernel) else None)
    if k0 is None:
        if n is None:
            raise ValueError("n must be given when kernels is an empty sequence")
        return n
    if n is not None and n != k0.n:
        raise ValueError(
            f"n must equal the kernels' size: got n={n} for kernels of n={k0.n} "
            "(omit n; it is only needed when kernels is an empty sequence)"
        )
    return k0.n


def _start(kernels, ks, n: int, eye: bool = False):
    """e_{n-1} (shape (1, n)) or the identity (n, n) on the kernels' backend (NumPy if none);
    ``n`` from :func:`_size`."""
    k0 = ks[0] if ks else (kernels if isinstance(kernels, Kernel) else None)
    if k0 is not None:
        return k0._rows(eye)
    return np.eye(n) if eye else np.eye(1, n, n - 1)


def _mass_budget(k: Kernel, lam: float) -> float:
    """Relative rounding budget of one step of a row-stochastic kernel (module docstring)."""
    return _U * (8.0 + 8.0 * lam * (k.n + getattr(k, "num_heads", 1)))


class _Mass:
    """The mass bookkeeping of one chain: S (the rows' current masses) and target (what they
    must have), shape (k,); compiled on NumPy, array-API code elsewhere."""

    def __init__(self, k0: Kernel, rows):
        self.numpy = k0.backend == "numpy"
        self.xp = k0.xp
        if self.numpy:
            self.S = np.empty(rows.shape[0])
            row_sums(np.ascontiguousarray(rows, dtype=np.float64), self.S)
        else:
            self.S = self.xp.sum(rows, axis=1)
        self.target = self.xp.asarray(self.S, copy=True)

    def step(self, k: Kernel, rows, lam: float) -> None:
        budget, trusted = _mass_budget(k, lam), bool(k._row_stochastic)
        if self.numpy:
            mass_update(np.ascontiguousarray(rows, dtype=np.float64), self.S, self.target,
                        budget, trusted)  # fmt: skip
            return
        xp, S = self.xp, self.S
        S_new = xp.sum(rows, axis=1)
        keep = (S <= 0.0) | (xp.abs(S_new - S) <= budget * S) if trusted else S <= 0.0
        self.target = xp.where(keep, self.target, self.target * (S_new / xp.where(keep, 1.0, S)))
        self.S = S_new

    def project(self, rows):
        xp, S = self.xp, self.S
        scale = xp.where(S > 0.0, self.target / xp.where(S > 0.0, S, 1.0), 1.0)
        return rows * xp.astype(scale, rows.dtype)[:, None]


def _chain(ks: list[Kernel], lam: np.ndarray, rows: np.ndarray) -> np.ndarray:
    # rows (k, n) ↦ rows R_{T-1} ⋯ R_0, applying R_{T-1} first; the row masses projected back
    # onto their invariant where the steps are row-stochastic (module docstring).
    mass = _Mass(ks[0], rows) if any(k._row_stochastic for k in ks[: lam.size]) else None
    for t in range(lam.size - 1, -1, -1):
        rows = ks[t]._residual_step(rows, float(lam[t]))
        if mass is not None and lam[t] != 0.0:
            mass.step(ks[t], rows, float(lam[t]))
    return rows if mass is None else mass.project(rows)


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
        Number of tokens (≥ 1); only needed when ``kernels`` is an empty sequence, and refused
        when it differs from the kernels' ``n``.

    Returns
    -------
    p : ndarray, shape (n,)
        A probability vector; ``p[0]`` is the first token. An array of the kernels' backend
        (torch, CuPy, …) when they were built on one.

    Cost O(T·n·H) for ALiBi kernels, O(T·n) for the uniform kernel, O(T·n²) for dense ones;
    memory O(n·H) (O(n·H·B) off NumPy, B the scan block). Raises ValueError for λ outside
    [0, 1] or NaN, for len(kernels) != T, for kernels on different backends or devices, for
    ``n`` < 1 or not the kernels' size, and (before allocating) for an ``n`` whose vectors
    would not fit in memory; TypeError for a non-integer ``n``.
    Every step is a convex combination, so p stays finite and sums to 1 at any depth (within
    3 ulp on NumPy for row-stochastic kernels: the mass projection of the module docstring;
    a step that really loses mass keeps its loss); entries below 2.2e-308 (the smallest normal
    float64) are kept as subnormals, with fewer significant bits the smaller they are, and
    those below 4.9e-324 are 0 (for causal kernels p(n−1) = P_{n−1,n−1}, whose log
    ``diagonal(kernels, lambdas, log=True)[-1]`` stays exact); ALiBi kernels of several heads
    on NumPy round each step's subnormal entries once, from a scaled computation
    (``posflow.simulate._alibi_nb``).
    """
    ks, lam = _layers(kernels, lambdas)
    size = _size(kernels, ks, n)
    if not ks and not isinstance(kernels, Kernel):
        ensure_memory(8.0 * size, f"n = {size}", "influence (a float64 vector of length n)")
    return _chain(ks, lam, _start(kernels, ks, size))[0, ...]


def rollout_matrix(kernels, lambdas, n: int | None = None) -> np.ndarray:
    """The full rollout ``P = R_{T-1} ⋯ R_0``, shape (n, n) (claims PB1, PB2, PB3).

    Each row is its own vector chain, so the cost is O(T·n²·H) for ALiBi kernels (O(T·n³) for
    dense ones). Refused with ValueError when an n×n array would not fit in memory.

    Parameters
    ----------
    kernels : Kernel or sequence of T Kernel
    lambdas : array_like, shape (T,)
    n : int, optional
        Number of tokens (≥ 1); only needed when ``kernels`` is an empty sequence, and refused
        when it differs from the kernels' ``n``.

    Returns
    -------
    P : ndarray, shape (n, n)
        Lower-triangular and row-stochastic for causal kernels; ``P[0, 0] = 1``.
    """
    ks, lam = _layers(kernels, lambdas)
    size = _size(kernels, ks, n)
    ensure_fits((size, size), "rollout_matrix", copies=3)
    return _chain(ks, lam, _start(kernels, ks, size, eye=True))


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
        underflows at depth; ``-inf`` only where a factor is zero (or negative at rounding
        level: a diagonal entry that validation accepted as ≥ 0 within its tolerance, with
        λ_t = 1).

    Returns
    -------
    ndarray, shape (n,)

    Raises TypeError when ``log`` is not a bool (``log="yes"`` would otherwise be truthy).
    """
    if not isinstance(log, bool | np.bool_):
        raise TypeError(f"log must be a bool (True or False); got {log!r}")
    ks, lam = _layers(kernels, lambdas)
    if not ks:
        if isinstance(kernels, Kernel):
            zero = kernels.xp.zeros((kernels.n,), dtype=kernels.xp.float64, device=kernels.device)
            return zero if log else zero + 1.0
        raise ValueError("diagonal needs at least one layer (or a single Kernel)")
    k0 = ks[0]
    xp, n, dev = k0.xp, k0.n, k0.device
    shared = isinstance(kernels, Kernel)
    dg = k0.diagonal() if shared else None
    # Σ_t log1p(-λ_t (1 - A_t[i,i])) summed pairwise in blocks of layers (error O(log T)·eps)
    block = max(1, min(lam.size, 2**22 // n))
    out = xp.zeros((n,), dtype=xp.float64, device=dev)
    with np.errstate(divide="ignore", invalid="ignore"):  # the discarded branch of where
        for s in range(0, lam.size, block):
            lt = xp.asarray(lam[s : s + block], dtype=xp.float64, device=dev)
            if shared:
                a = xp.broadcast_to(dg[:, None], (n, lt.shape[0]))
            else:
                a = xp.stack([k.diagonal() for k in ks[s : s + block]], axis=1)
            loss = (1.0 - a) * lt[None, :]  # λ_t (1 - A_t[i,i])
            keep = (1.0 - lt)[None, :] + a * lt[None, :]  # 1 - loss without cancellation
            # a diagonal entry validated as ≥ 0 within rounding (e.g. −1e-13) with λ = 1 gives
            # keep < 0 at rounding level: the factor is 0, not a NaN logarithm
            keep = xp.where(keep > 0.0, keep, 0.0)
            term = xp.where(loss < 0.5, xp.log1p(-loss), xp.log(keep))
            out = out + xp.sum(term, axis=1)
    return out if log else xp.exp(out)


def _delta(k: Kernel) -> float:
    """δ = max_i (1 - A[i, i]) as a Python float, on any backend."""
    return float(k.xp.max(1.0 - k.diagonal()))


def total_mixing(kernels, lambdas) -> float:
    """The control quantity ``Σ_t λ_t δ_t`` with ``δ_t = max_i (1 - A_t[i, i])`` (PB3, PB4)."""
    ks, lam = _layers(kernels, lambdas)
    if isinstance(kernels, Kernel):
        return float(lam.sum() * _delta(kernels))
    return float(sum(lt * _delta(k) for k, lt in zip(ks, lam, strict=True)))


def rollout_summary(kernels, lambdas) -> dict:
    """Headline numbers of a rollout: p(0), p(n-1), argmin p, min_i P_ii, Σλ_tδ_t, Σλ_t.

    min_i P_ii comes from the log-space diagonal (:func:`diagonal` with ``log=True``), so it is
    exact at any depth: ``log_min_diag`` = min_i log P_ii stays finite where the plain value
    ``min_diag`` = exp(log_min_diag) underflows float64 (to 0 or a subnormal), and then
    ``min_diag_underflows`` is True and ``log_min_diag`` is the number to report. ``-inf`` only
    where a factor 1 − λ_t (1 − A_t[i,i]) is exactly 0 (λ_t = 1 and A_t[i,i] = 0). PB2–PB6.

    Returns
    -------
    dict with keys ``n``, ``T``, ``p_first``, ``p_last``, ``argmin``, ``p_min``,
    ``min_diag``, ``log_min_diag``, ``min_diag_underflows``, ``sum_lambda_delta``,
    ``sum_lambda`` (Python numbers and a bool) and ``profile`` (the influence vector, shape (n,),
    on the kernels' backend).
    """
    _, lam = _layers(kernels, lambdas)
    prof = influence(kernels, lam)
    p = np.asarray(host(prof))
    logd = np.asarray(host(diagonal(kernels, lam, log=True))) if lam.size else np.zeros(p.size)
    log_min = float(logd.min())
    with np.errstate(under="ignore"):
        min_diag = float(np.exp(log_min))
    return {
        "n": int(p.size),
        "T": int(lam.size),
        "p_first": float(p[0]),
        "p_last": float(p[-1]),
        "argmin": int(np.argmin(p)),
        "p_min": float(p.min()),
        "min_diag": min_diag,
        "log_min_diag": log_min,
        "min_diag_underflows": bool(np.isfinite(log_min) and min_diag < _TINY),
        "sum_lambda_delta": total_mixing(kernels, lam) if lam.size else 0.0,
        "sum_lambda": float(lam.sum()),
        "profile": prof,
    }


def stationary_profiles(kernel: Kernel, lam: float, depths) -> np.ndarray:
    """Influence profiles of one stationary layer at growing depth, from one chain.

    .. math::
        p^{(T)} = e_{n-1}^\\top R^T,\\qquad R = (1 - \\lambda) I + \\lambda A,

    for every ``T`` in ``depths`` (claims PB10, PB11). One chain of plain residual steps
    ``p ← (1 − λ) p + λ p A`` is extended from one depth to the next, so the cost is
    O(max(depths)·n·H) for ALiBi kernels (O(max(depths)·n²) for dense ones), not the sum over
    depths. Unlike :func:`influence`, the rows are not projected back onto mass 1: each step's
    rounding is kept as it is (what a check of monotonicity in depth must see).

    Parameters
    ----------
    kernel : Kernel
        One causal attention kernel ``A``, shared by every layer.
    lam : float
        The mixing coefficient λ in [0, 1] of every layer.
    depths : sequence of int, shape (D,)
        Strictly increasing depths ``T ≥ 1``.

    Returns
    -------
    profiles : ndarray, shape (D, n)
        ``profiles[d] = p^{(depths[d])}``; an array of the kernel's backend.

    Raises ValueError for λ outside [0, 1] and for depths that are not strictly increasing
    positive integers.
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"kernel must be a Kernel; got {type(kernel).__name__}")
    lam = float(lam)
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam must be in [0, 1]; got {lam!r}")
    Ts = [_check_depth(T) for T in depths]
    if not Ts or Ts[0] < 1 or bool(np.any(np.diff(Ts) <= 0)):
        raise ValueError(f"depths must be strictly increasing integers ≥ 1; got {Ts}")
    row, done, out = kernel._rows(), 0, []
    for T in Ts:  # extend the same chain: p^{(T)} for growing T
        for _ in range(T - done):
            row = kernel._residual_step(row, lam)
        done = T
        out.append(kernel.xp.asarray(row[0], copy=True))
    return kernel.xp.stack(out)


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
    ensure_memory(8.0 * T, f"T = {T}", "constant (a float64 vector of length T)")
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
    ensure_memory(16.0 * T, f"T = {T}", "power_decay (two float64 vectors of length T)")
    return float(lam0) / (np.arange(1, T + 1, dtype=np.float64) ** float(beta))
