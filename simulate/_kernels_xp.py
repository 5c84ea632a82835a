"""Generic (array API) kernel tables and rollout steps for the non-NumPy backends.

Used by :mod:`posflow.simulate.kernels` and :mod:`posflow.simulate.rollout` when a kernel was built
with ``backend="torch"``, ``"cupy"`` or ``"array_api_strict"``; the NumPy backend keeps its numba
recurrence (``posflow.simulate._alibi_nb``), which these functions match to rounding.

The ALiBi suffix recurrence ``G(j) = x_j + r·G(j+1)``, r = e^{-m}, is solved without a loop over
positions by a chunked scan (:func:`suffix_scan`): positions are cut into blocks of length B;
inside a block ``G_local = x_block · M`` with the B×B matrix ``M[i, j] = r^{i-j}`` (i ≥ j), one
batched matmul for every block and head; the values at the block starts obey the same
recurrence with ratio ``r^B`` over n/B blocks, solved recursively (depth ⌈log_B n⌉); finally
``G = G_local + r^{B-k}·G(start of next block)``. Every factor is a power r^k ≤ 1, so nothing
overflows and small terms underflow exactly where the sequential recurrence underflows.
Cost O(n·B) per head, memory O(n) per head; heads are processed in groups that keep the working
set under ``ELEMENTS`` numbers.

Rows beyond the ALiBi table (j ≥ s0 ≈ 45/min m) have stationary weights, so there the
within-block sums of all heads collapse into one matmul of the rows of p with a single B×B
matrix, and only the n/B block starts are scanned per head: cost O(n·(B + 2H)) for long
contexts instead of O(n·H·B). Claims PB1–PB14 (the rollouts of :mod:`posflow.simulate.rollout`).
"""

from __future__ import annotations

import numpy as np
from array_api_compat import device as _device_of

__all__ = [
    "BLOCK",
    "ELEMENTS",
    "alibi_dense",
    "alibi_tables",
    "apply_left",
    "dense_tables",
    "diagonal",
    "host",
    "namespace_of",
    "residual_step",
    "suffix_scan",
    "uniform_dense",
    "uniform_tables",
]

BLOCK = 32  # block length B of the chunked suffix scan
ELEMENTS = 2**27  # working-set budget (numbers per temporary) of one head group


def namespace_of(kernel):
    """The array-api-compat namespace of a kernel's backend."""
    from posflow.simulate.backend import namespace

    return namespace(kernel.backend)


def _put(xp, kernel, a):
    return xp.asarray(np.ascontiguousarray(a, dtype=np.float64), device=kernel.device)


def suffix_scan(xp, x, m, block: int = BLOCK):
    """y_j = Σ_{i ≥ j} e^{-m_h (i-j)} x_{h,i} along the last axis, for every head h.

    x: (..., H, n) float64; m: (H,) slopes ≥ 0 on the same backend; block B ≥ 2.
    Returns (..., H, n).
    Chunked scan of the module docstring: cost O(n·H·B), recursion depth ⌈log_B n⌉.
    """
    *lead, H, n = x.shape
    B = min(max(2, int(block)), n)  # B ≥ 2 so that every level shrinks
    nb = -(-n // B)
    dev = _device_of(x)
    if nb * B != n:
        pad = xp.zeros((*lead, H, nb * B - n), dtype=x.dtype, device=dev)
        x = xp.concat([x, pad], axis=-1)
    xb = xp.reshape(x, (*lead, H, nb, B))
    k = xp.arange(B, dtype=x.dtype, device=dev)
    diff = k[:, None] - k[None, :]  # i - j, rows i, columns j
    with np.errstate(under="ignore", over="ignore"):
        M = xp.where(diff >= 0, xp.exp(-m[:, None, None] * xp.clip(diff, 0.0, None)), 0.0)
        local = xb @ M  # (..., H, nb, B)
        if nb > 1:
            starts = suffix_scan(xp, local[..., 0], m * B, block)  # G at block starts
            nxt = xp.concat([starts[..., 1:], xp.zeros_like(starts[..., :1])], axis=-1)
            tail = xp.exp(-m[:, None] * (B - k)[None, :])  # r^{B-k}, shape (H, B)
            local = local + nxt[..., None] * tail[:, None, :]
    return xp.reshape(local, (*lead, H, nb * B))[..., :n]


# ------------------------------------------------------------------------------------------
# tables on the device


def uniform_tables(kernel) -> dict:
    """1/(i+1), i = 0 … n−1, on the device: the diagonal and the weights of the uniform kernel."""
    xp = namespace_of(kernel)
    inv = 1.0 / xp.arange(1, kernel.n + 1, dtype=xp.float64, device=kernel.device)
    return {"diag": inv, "inv": inv}


def alibi_tables(kernel) -> dict:
    """Device copies of an AlibiKernel's tables (positive heads) and negative-slope factors."""
    xp = namespace_of(kernel)
    n, pos, neg = kernel.n, kernel._pos, kernel._neg
    dtab = kernel._diag[: kernel._w_off.shape[0]]
    diag = _put(xp, kernel, dtab)
    if dtab.size < n:
        fill = xp.full((n - dtab.size,), float(dtab[-1]), dtype=xp.float64, device=kernel.device)
        diag = xp.concat([diag, fill])
    m, c = kernel.slopes[pos], kernel.head_weights[pos] * np.exp(-kernel.slopes[pos])
    nt, B = kernel._w_off.shape[0], BLOCK
    s0 = min(n, -(-nt // B) * B)  # rows from s0 on are stationary: w_h(j) = w_h(nt - 1)
    t = {
        "diag": diag,
        "w": _put(xp, kernel, kernel._w_off.T),  # (H+, nt)
        "m": _put(xp, kernel, m),
        "hw_r": _put(xp, kernel, c),
        "s0": s0,
        "neg": [],
    }
    if s0 < n and pos.size:
        # stationary blocks: one B×B matrix for all heads, and per-head block-start sums
        w_inf = kernel._w_off[-1]
        k = np.arange(B, dtype=np.float64)
        d = k[:, None] - k[None, :]
        pw = np.exp(-m[:, None, None] * np.maximum(d, 0.0)) * (d >= 0)  # (H, B, B)
        t["M_stat"] = _put(xp, kernel, np.einsum("h,hij->ij", c * w_inf, pw))
        t["S_stat"] = _put(xp, kernel, (w_inf * np.exp(-np.outer(k, m))))  # (B, H)
        t["C_stat"] = _put(xp, kernel, c[:, None] * np.exp(-np.outer(m, B - k)))  # (H, B)
        t["carry"] = _put(xp, kernel, np.exp(-np.outer(m, s0 - np.arange(s0))))  # (H, s0)
    for h in neg:
        # slope -a < 0: Σ_{i>j} p_i e^{a(i-j)}/Z_i = e^{-a j} Σ_{i>j} p_i e^{a i - log Z_i}
        a = -kernel.slopes[h]
        i = np.arange(1, n, dtype=np.float64)
        what = np.zeros(n)
        what[1:] = np.exp(a * i - kernel._log_z(i, [h])[:, 0])
        scale = kernel.head_weights[h] * np.exp(-a * np.arange(n))
        t["neg"].append((_put(xp, kernel, what), _put(xp, kernel, scale)))
    return t


def dense_tables(kernel, A, causal: bool, atol: float) -> dict:
    """Validate a device matrix with the rules of DenseKernel and keep it on the device."""
    from posflow.simulate.backend import asarray

    A = asarray(A, kernel.backend, kernel.device)
    xp = namespace_of(kernel)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix; got shape {tuple(A.shape)}")
    if A.shape[0] < 1:
        raise ValueError("A must have n >= 1 rows")
    if not bool(xp.all(xp.isfinite(A))):
        raise ValueError("A must be finite (no NaN or inf entries)")

    def first(mask, rule):
        if bool(xp.any(mask)):
            from posflow.simulate.backend import to_numpy

            i, j = np.argwhere(to_numpy(mask))[0]
            raise ValueError(rule.format(i=i, j=j, v=float(A[int(i), int(j)])))

    first(A < -1e-12, "A must be nonnegative; A[{i}, {j}] = {v}")
    if causal:
        first(
            xp.abs(xp.triu(A, k=1)) > 1e-12,
            "A must be causal (lower-triangular); A[{i}, {j}] = {v} with j > i",
        )
        A = xp.tril(A)
    sums = xp.sum(A, axis=1)
    dev = xp.abs(sums - 1.0)
    if bool(xp.any(dev > atol)):
        i = int(xp.argmax(dev))
        raise ValueError(
            f"A must be row-stochastic (rows sum to 1 within {atol:g}); "
            f"row {i} sums to {float(sums[i])!r}"
        )
    n = A.shape[0]
    idx = xp.arange(0, n * n, n + 1, device=kernel.device)
    return {"A": A, "diag": xp.take(xp.reshape(A, (-1,)), idx)}


def alibi_dense(kernel):
    """The ALiBi kernel as a device matrix, shape (n, n), built head by head on the device."""
    xp = namespace_of(kernel)
    n, dev = kernel.n, kernel.device
    i = np.arange(n, dtype=np.float64)
    logz = np.empty((n, kernel.num_heads))
    logz[0] = kernel.content
    logz[1:] = kernel._log_z(i[1:])
    logz = _put(xp, kernel, logz)
    ix = xp.arange(n, dtype=xp.float64, device=dev)
    d = ix[:, None] - ix[None, :]
    A = xp.zeros((n, n), dtype=xp.float64, device=dev)
    with np.errstate(over="ignore", under="ignore"):
        for h in range(kernel.num_heads):
            m, c = float(kernel.slopes[h]), float(kernel.content[h])
            s = xp.where(d > 0, -m * d, c) - logz[:, h : h + 1]
            A = A + float(kernel.head_weights[h]) * xp.where(
                d >= 0, xp.exp(xp.clip(s, None, 0.0)), 0.0
            )
    return A


# ------------------------------------------------------------------------------------------
# steps


def _stationary(xp, t, p):
    """Σ_h c_h G_h on the stationary rows p (k, L) and G_h at their first row, (k, H)."""
    k, L = p.shape
    B = t["M_stat"].shape[0]
    nb = -(-L // B)
    if nb * B != L:
        p = xp.concat([p, xp.zeros((k, nb * B - L), dtype=p.dtype, device=_device_of(p))], axis=1)
    pb = xp.reshape(p, (k, nb, B))
    starts = xp.permute_dims(pb @ t["S_stat"], (0, 2, 1))  # (k, H, nb): block sums per head
    G = suffix_scan(xp, starts, t["m"] * B)  # G_h at every block start
    nxt = xp.concat([G[..., 1:], xp.zeros_like(G[..., :1])], axis=-1)
    acc = pb @ t["M_stat"] + xp.permute_dims(nxt, (0, 2, 1)) @ t["C_stat"]
    return xp.reshape(acc, (k, nb * B))[:, :L], G[..., 0]


def _alibi_apply(xp, t, p):
    """p A for rows p of shape (k, n): positive heads by the chunked scan, then negative ones.

    Rows j ≥ s0 have stationary weights w_h(j) = w_h(nt − 1): there one matmul with a B×B
    matrix summed over heads gives the within-block sums, and only the n/B block starts are
    scanned per head. Rows j < s0 are scanned per head (in groups of at most ELEMENTS numbers)
    and receive the carry G_h(s0)·e^{-m_h (s0 − j)}.
    """
    k, n = p.shape
    H, s0 = t["m"].shape[0], t["s0"]
    acc = xp.zeros_like(p)
    if H:
        carry = None
        if s0 < n:
            tail, carry = _stationary(xp, t, p[:, s0:])
        head = xp.zeros((k, s0), dtype=p.dtype, device=_device_of(p))
        group = max(1, ELEMENTS // max(1, k * s0))
        nt = t["w"].shape[1]
        for h0 in range(0, H, group):
            h1 = min(H, h0 + group)
            w = t["w"][h0:h1, :]
            if nt < s0:  # rows beyond the table repeat its last row
                w = xp.concat([w, xp.broadcast_to(w[:, nt - 1 : nt], (h1 - h0, s0 - nt))], axis=1)
            G = suffix_scan(xp, p[:, None, :s0] * w[None, :, :s0], t["m"][h0:h1])
            if carry is not None:
                G = G + carry[:, h0:h1, None] * t["carry"][None, h0:h1, :]
            head = head + xp.sum(t["hw_r"][h0:h1][None, :, None] * G, axis=1)
        acc = xp.concat([head, tail], axis=1) if carry is not None else head
    out = p * t["diag"] + xp.concat([acc[:, 1:], xp.zeros_like(acc[:, :1])], axis=1)
    for what, scale in t["neg"]:
        x = xp.flip(p * what, axis=1)
        suffix = xp.flip(xp.cumulative_sum(x, axis=1), axis=1)
        out = out + scale * xp.concat([suffix[:, 1:], xp.zeros_like(suffix[:, :1])], axis=1)
    return out


def _apply(kernel, xp, p):
    t = kernel._dev
    kind = type(kernel).__name__
    if kind == "AlibiKernel":
        return _alibi_apply(xp, t, p)
    if kind == "UniformKernel":  # q_j = Σ_{i ≥ j} p_i / (i + 1): a reversed cumulative sum
        return xp.flip(xp.cumulative_sum(xp.flip(p * t["inv"], axis=1), axis=1), axis=1)
    return p @ t["A"]


def residual_step(kernel, p, lam: float):
    """(1 − λ) p + λ p A for rows p (k, n) on the kernel's backend."""
    xp = namespace_of(kernel)
    if lam == 0.0:
        return xp.asarray(p, copy=True)
    return (1.0 - lam) * p + lam * _apply(kernel, xp, p)


def apply_left(kernel, p):
    """Kernel.apply_left for a device kernel: ``p`` of shape (n,) or (k, n), same backend."""
    from posflow.simulate.backend import asarray

    xp = namespace_of(kernel)
    arr = asarray(p, kernel.backend, kernel.device)
    if arr.ndim not in (1, 2) or arr.shape[-1] != kernel.n:
        raise ValueError(
            f"p must have shape (n,) or (k, n) with n={kernel.n}; got {tuple(arr.shape)}"
        )
    if not bool(xp.all(xp.isfinite(arr))):
        raise ValueError("p must be finite")
    out = _apply(kernel, xp, xp.reshape(arr, (-1, kernel.n)))
    return xp.reshape(out, arr.shape)


def diagonal(ks, lam: np.ndarray, log: bool, shared: bool):
    """log P_ii = Σ_t log(1 − λ_t (1 − A_t[i,i])) on the kernels' backend (see rollout.diagonal)."""
    xp = namespace_of(ks[0])
    n, dev = ks[0].n, ks[0].device
    out = xp.zeros((n,), dtype=xp.float64, device=dev)
    block = max(1, min(lam.size, 2**22 // n))
    dg = ks[0].diagonal() if shared else None
    with np.errstate(divide="ignore"):
        for s in range(0, lam.size, block):
            lt = xp.asarray(lam[s : s + block], dtype=xp.float64, device=dev)
            if shared:
                a = xp.broadcast_to(dg[:, None], (n, lt.shape[0]))
            else:
                a = xp.stack([k.diagonal() for k in ks[s : s + block]], axis=1)
            loss = (1.0 - a) * lt[None, :]
            keep = (1.0 - lt)[None, :] + a * lt[None, :]
            safe = xp.where(loss < 0.5, loss, 0.0)
            term = xp.where(loss < 0.5, xp.log1p(-safe), xp.log(keep))
            out = out + xp.sum(term, axis=1)
    return out if log else xp.exp(out)


def host(x):
    """A device array of any backend as NumPy; everything else unchanged."""
    from posflow.simulate.backend import backend_of, to_numpy

    return to_numpy(x) if backend_of(x) not in (None, "numpy") else x


def uniform_dense(kernel):
    """The uniform kernel A[i, j] = 1/(i+1), j ≤ i, as a device matrix (n, n)."""
    xp = namespace_of(kernel)
    i = xp.arange(kernel.n, dtype=xp.float64, device=kernel.device)
    return xp.where(i[:, None] >= i[None, :], 1.0 / (i[:, None] + 1.0), 0.0)
