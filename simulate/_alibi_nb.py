"""numba kernels of the ALiBi + content residual step (the CPU fast path of simulate.kernels).

For rows ``P`` (k, n) the step computes ``out = (1 - lam) P + lam P A`` for the head average A of
causal ALiBi + diagonal-content softmax kernels, through the backward suffix recurrence per head

.. math::
    G_h(j) = p_j w_h(j) + r_h G_h(j+1),\\qquad
    (pA)_j = p_j\\,\\mathrm{diag}_j + \\sum_h \\omega_h G_h(j+1),

with ``w_h(j) = e^{-m_h}/Z^h_j`` (rows beyond ``nt - 1`` share the table's last row),
``r_h = e^{-m_h}`` and head weights ``ω_h``. Every factor is at most 1, so nothing overflows.
O(k·n·H).
"""

from __future__ import annotations

import numpy as np
from numba import config as _numba_config
from numba import njit

from posflow.simulate._paths import numba_cache_dir

# cache=True writes compiled code to disk: send it to the per-user cache, never beside the
# source files of the installed package (unless the user chose a folder with NUMBA_CACHE_DIR).
if not _numba_config.CACHE_DIR:
    _numba_config.CACHE_DIR = str(numba_cache_dir())

__all__ = ["alibi_step"]


@njit(cache=True, nogil=True, fastmath={"contract"})
def _step_heads(P, diag, w_off, r, hw, lam, out):  # pragma: no cover - compiled
    # any number of heads: the inner loop over heads gives the CPU independent chains
    k, n = P.shape
    H = r.shape[0]
    nt = w_off.shape[0]
    G = np.empty(H)
    for b in range(k):
        for h in range(H):
            G[h] = 0.0
        for j in range(n - 1, -1, -1):
            pj = P[b, j]
            jj = j if j < nt else nt - 1
            acc = 0.0
            for h in range(H):
                g = G[h]
                acc += hw[h] * g
                G[h] = pj * w_off[jj, h] + r[h] * g
            out[b, j] = (1.0 - lam) * pj + lam * (pj * diag[j] + acc)


@njit(cache=True, nogil=True, fastmath={"contract"})
def _step_one_head(P, diag, w_off, r, hw, lam, out):  # pragma: no cover - compiled
    # one head: the recurrence state stays in a register, and the stationary rows (j >= nt - 1,
    # constant weights) run without table look-ups
    k, n = P.shape
    nt = w_off.shape[0]
    r0 = r[0]
    c0 = lam * hw[0]
    a = 1.0 - lam
    w_last = w_off[nt - 1, 0]
    d_last = a + lam * diag[n - 1]
    for b in range(k):
        G = 0.0
        j = n - 1
        while j >= nt - 1 and j >= 0:
            pj = P[b, j]
            out[b, j] = d_last * pj + c0 * G
            G = pj * w_last + r0 * G
            j -= 1
        while j >= 0:
            pj = P[b, j]
            out[b, j] = (a + lam * diag[j]) * pj + c0 * G
            G = pj * w_off[j, 0] + r0 * G
            j -= 1


def alibi_step(P, diag, w_off, r, hw, lam, out):
    """Write ``(1 - lam) P + lam P A`` into ``out`` (shapes: P, out (k, n); diag (n,);
    w_off (nt, H); r, hw (H,)); dispatches to the one-head kernel when H = 1."""
    if r.shape[0] == 1:
        _step_one_head(P, diag, w_off, r, hw, lam, out)
    else:
        _step_heads(P, diag, w_off, r, hw, lam, out)
