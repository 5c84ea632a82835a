"""The ALiBi suffix recurrence as a chunked scan in array-API code (any backend).

The off-diagonal part of p A for one ALiBi head of slope m ≥ 0 is G(j+1), where
``G(j) = x_j + r·G(j+1)``, r = e^{-m}, x_j = p_j w(j) (:mod:`posflow.simulate._alibi`). Off the
NumPy backend (and on it when numba is switched off) this is solved without a loop over
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
contexts instead of O(n·H·B). Claims PB1–PB14.
"""

from __future__ import annotations

import numpy as np
from array_api_compat import device as _device_of

__all__ = ["BLOCK", "ELEMENTS", "MAX_SLOPE", "heads_apply", "scan_tables", "suffix_scan"]

BLOCK = 32  # block length B of the chunked suffix scan
ELEMENTS = 2**27  # working-set budget (numbers per temporary) of one head group
# e^{-m} = 0 in float64 for m > 745: larger slopes give the same powers r^k (k ≥ 1) and keep
# m·B^level finite in the recursion, so the scan clips slopes there.
MAX_SLOPE = 1000.0


def suffix_scan(xp, x, m, block: int = BLOCK):
    """y_j = Σ_{i ≥ j} e^{-m_h (i-j)} x_{h,i} along the last axis, for every head h.

    x: (..., H, n) float64; m: (H,) slopes in [0, MAX_SLOPE] on the same backend; block B ≥ 2.
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


def scan_tables(put, n: int, w_off: np.ndarray, m: np.ndarray, hw: np.ndarray) -> dict:
    """Device tables of :func:`heads_apply` from the host tables of the positive heads.

    put: host array → device array; w_off: (nt, H) off-diagonal weights w_h(j) (rows ≥ nt − 1
    repeat the last); m: (H,) slopes ≥ 0; hw: (H,) head weights.
    """
    m = np.minimum(m, MAX_SLOPE)
    nt, B = w_off.shape[0], BLOCK
    s0 = min(n, -(-nt // B) * B)  # rows from s0 on are stationary: w_h(j) = w_h(nt - 1)
    t = {"w": put(w_off.T), "m": put(m), "hw": put(hw), "s0": s0}
    if s0 < n and m.size:
        # stationary blocks: one B×B matrix for all heads, and per-head block-start sums
        w_inf = w_off[-1]
        k = np.arange(B, dtype=np.float64)
        d = k[:, None] - k[None, :]
        with np.errstate(under="ignore"):
            pw = np.exp(-m[:, None, None] * np.maximum(d, 0.0)) * (d >= 0)  # (H, B, B)
            t["M_stat"] = put(np.einsum("h,hij->ij", hw * w_inf, pw))
            t["S_stat"] = put(w_inf * np.exp(-np.outer(k, m)))  # (B, H)
            t["C_stat"] = put(hw[:, None] * np.exp(-np.outer(m, B - k)))  # (H, B)
            t["carry"] = put(np.exp(-np.outer(m, s0 - np.arange(s0))))  # (H, s0)
    return t


def _stationary(xp, t, p):
    """Σ_h ω_h G_h on the stationary rows p (k, L) and G_h at their first row, (k, H)."""
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


def heads_apply(xp, t, p):
    """Σ_h ω_h G_h(j) for rows p of shape (k, n): the positive heads by the chunked scan.

    Rows j ≥ s0 have stationary weights w_h(j) = w_h(nt − 1): there one matmul with a B×B
    matrix summed over heads gives the within-block sums, and only the n/B block starts are
    scanned per head. Rows j < s0 are scanned per head (in groups of at most ELEMENTS numbers)
    and receive the carry G_h(s0)·e^{-m_h (s0 − j)}. Returns (k, n); the kernel's off-diagonal
    part at column j is the value at j + 1.
    """
    k, n = p.shape
    H, s0 = t["m"].shape[0], t["s0"]
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
        head = head + xp.sum(t["hw"][h0:h1][None, :, None] * G, axis=1)
    return xp.concat([head, tail], axis=1) if carry is not None else head
