"""numba kernels of the ALiBi + content kernels (the CPU fast path of simulate.kernels).

Three routines: the residual step (below), the content tables of many layers in one pass
(:func:`content_tables`) and the compensated row sums of the rollout's mass projection
(:func:`row_sums`, :func:`mass_update`).

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

__all__ = ["alibi_step", "content_tables", "mass_update", "row_sums"]


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


@njit(cache=True, nogil=True)
def content_tables(E, R, P, Q, hw, w_out, d_out):  # pragma: no cover - compiled
    """Off-diagonal weights and head-averaged diagonal of L layers of positive ALiBi heads.

    Shapes: E, R (rows, H) with E[i, h] = Σ_{k=0}^{i} e^{-m_h k} ≥ 1 (table row i + 1) and
    R = 1/E, shared by every layer; P, Q (L, H) with P = e^{ℓ}, Q = e^{-ℓ}, ℓ = c + m per layer
    and head; hw (H,). Writes w_out[l, i + 1, h] = w_h(i + 1) = e^{-m}/Z and
    d_out[l, i] = Σ_h hw_h A^h_{i+1,i+1} (heads summed in order). With x = ℓ − log E:

    x ≥ 0 (Q·E ≤ 1):  e = e^{-x} = Q·E,  A_ii = 1/(1 + e),  w = Q/(1 + e);
    x < 0:            e = e^{x}  = P·R,  A_ii = e/(1 + e),  w = R/(1 + e);

    every factor lies in [0, 1] (P = inf only where Q·E ≤ 1, Q = inf only where P·R = 0), so
    nothing overflows and no NaN is formed; no exponential is evaluated per entry.
    """
    L, H = P.shape
    rows = E.shape[0]
    for layer in range(L):
        for i in range(rows):
            acc = 0.0
            for h in range(H):
                q = Q[layer, h]
                e = q * E[i, h]
                if e <= 1.0:
                    s = 1.0 / (1.0 + e)
                    d = s
                    w = q * s
                else:
                    e = P[layer, h] * R[i, h]
                    s = 1.0 / (1.0 + e)
                    d = e * s
                    w = R[i, h] * s
                w_out[layer, i + 1, h] = w
                acc += hw[h] * d
            d_out[layer, i] = acc


@njit(cache=True, nogil=True)
def _sum2(P, b):  # pragma: no cover - compiled
    """Σ_j P[b, j], compensated: TwoSum on four lanes, lanes and corrections combined by TwoSum.

    The result is the exact sum rounded with relative error at most u + O(n u²) for
    nonnegative terms (cascaded summation, Ogita–Rump–Oishi Sum2; Higham, *Accuracy and
    Stability of Numerical Algorithms*, §4.3), u = 2^-53.
    """
    n = P.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    c0 = c1 = c2 = c3 = 0.0
    j = 0
    while j + 4 <= n:
        x = P[b, j]
        t = s0 + x
        z = t - s0
        c0 += (s0 - (t - z)) + (x - z)
        s0 = t
        x = P[b, j + 1]
        t = s1 + x
        z = t - s1
        c1 += (s1 - (t - z)) + (x - z)
        s1 = t
        x = P[b, j + 2]
        t = s2 + x
        z = t - s2
        c2 += (s2 - (t - z)) + (x - z)
        s2 = t
        x = P[b, j + 3]
        t = s3 + x
        z = t - s3
        c3 += (s3 - (t - z)) + (x - z)
        s3 = t
        j += 4
    while j < n:
        x = P[b, j]
        t = s0 + x
        z = t - s0
        c0 += (s0 - (t - z)) + (x - z)
        s0 = t
        j += 1
    s = 0.0
    c = (c0 + c1) + (c2 + c3)
    for x in (s0, s1, s2, s3):
        t = s + x
        z = t - s
        c += (s - (t - z)) + (x - z)
        s = t
    return s + c


@njit(cache=True, nogil=True)
def row_sums(P, out):  # pragma: no cover - compiled
    """out[b] = Σ_j P[b, j] for rows P (k, n), compensated (:func:`_sum2`)."""
    for b in range(P.shape[0]):
        out[b] = _sum2(P, b)


@njit(cache=True, nogil=True)
def mass_update(P, S, target, budget, trusted):  # pragma: no cover - compiled
    """One step of the rollout's mass bookkeeping, in place on S and target (shapes (k,)).

    S_new = Σ_j P[b, j] (compensated). A step of a row-stochastic kernel (``trusted``) whose
    defect |S_new − S| is within ``budget``·S is rounding and leaves ``target`` alone; any
    other change of mass is real and ``target`` follows it (target · S_new/S).
    """
    for b in range(P.shape[0]):
        s_new = _sum2(P, b)
        s = S[b]
        if s > 0.0 and not (trusted and abs(s_new - s) <= budget * s):
            target[b] *= s_new / s
        S[b] = s_new
