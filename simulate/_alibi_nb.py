"""numba kernels of the ALiBi + content kernels (the CPU fast path of simulate.kernels).

Three routines: the residual step (below, :func:`alibi_step`), the content tables of many
layers in one pass (:func:`content_tables`) and the compensated row sums of the rollout's mass
projection (:func:`row_sums`, :func:`mass_update`).

For rows ``P`` (k, n) the step computes ``out = (1 - lam) P + lam P A`` for the head average A of
causal ALiBi + diagonal-content softmax kernels, through the backward suffix recurrence per head

.. math::
    G_h(j) = p_j w_h(j) + r_h G_h(j+1),\\qquad
    (pA)_j = p_j\\,\\mathrm{diag}_j + \\sum_h \\omega_h G_h(j+1),

with ``w_h(j) = e^{-m_h}/Z^h_j`` (rows beyond ``nt - 1`` share the table's last row),
``r_h = e^{-m_h}`` and head weights ``ω_h``. Every factor is at most 1, so nothing overflows.
O(k·n·H).

Speed (``benchmarks/limits.py``, section ``alibi``): one pass over the rows per layer, with the
row masses of the rollout's projection summed (compensated) while the rows are written, not in a
second pass (:func:`mass_update` takes them); the work buffers live per thread and are reused
by every layer, and a chain of steps writes into two row arrays in turn (:func:`rows_out`).
One head: the stationary rows (all but the first nt − 1) on the state F = G/w, four rows per
multiply-add on the carried state, the loop writing only the states (:func:`_stationary_states`),
the outputs d p + cw F formed from them in a vectorised pass (:func:`_outputs`) and their
masses added four blocks per pass over the lanes (:func:`_lanes_add4`): 0.58–0.60 ns per row
and layer on the benchmark's CPU, against 0.82–0.85 for the two-row loop that formed the
outputs itself (held to one multiply-add latency per two rows and to its products). Several heads:
four rows per pass over the heads and the head sum Σ_h ω_h G_h in vector lanes, reassociated
within the bound (*) below; the stationary rows on the states F_h = G_h/w_h as for one head,
F_h ← p_j + r_h F_h (one fused multiply-add per head and row instead of a product and one) with
the sum Σ_h (ω_h w_h) F_h (bound (**) below): 5.2 against 8.7 ns per row and step at 32 heads,
2.4 against 3.7 at 2 (benchmarks/limits.py's Intel host, normal rows). A block of zero
entries behind zero states is written as zeros without the per-head work (:func:`_zero_block`):
the 32-head influence of ``benchmarks/limits.py`` (n = 10⁶, T = 64, 80.6 % of its final
profile exact zeros) takes 0.16 against 0.34 s, the same bits. Nothing here runs on more than
one thread, and no result depends on the thread count.

Subnormal numbers: the step of several heads computes in a domain scaled by 2^960 (above
:func:`_step_heads`), so no product of it has a subnormal operand or result, and rounds each
output once to the subnormal grid; the one-head kernel keeps IEEE gradual underflow.
Flush-to-zero, a per-thread CPU mode, is not used: it would also change what NumPy, BLAS and
torch compute in the same thread, and the tails would then differ from the dense and exact
references the claims compare with. Before the scaled domain, the recurrence G ← r G stalled in
gradual underflow: for r > 1/2, r·2^-1074 rounds back to 2^-1074, so states that should decay
to 0 stayed at the smallest subnormals and every later row's products ran on them. That left
81.5 % of ``benchmarks/limits.py``'s 32-head profile (n = 10⁶, T = 64) at subnormal floors
(≈ 1e-320) where the exact values lie far below 2^-1074, now 0 (80.6 % exact zeros, 0.9 %
subnormals), and Intel cores, which multiply subnormals in microcode (9 against 0.9 ns per
vectorised product), ran that rollout in 51 s instead of 0.71 s (AMD cores: 1.6×).
"""

from __future__ import annotations

import sys
import threading
import weakref

import numpy as np
from llvmlite import ir
from numba import config as _numba_config
from numba import njit, types
from numba.extending import intrinsic

from posflow.simulate._paths import numba_cache_dir

# cache=True writes compiled code to disk: send it to the per-user cache, never beside the
# source files of the installed package (unless the user chose a folder with NUMBA_CACHE_DIR).
if not _numba_config.CACHE_DIR:
    _numba_config.CACHE_DIR = str(numba_cache_dir())

__all__ = ["alibi_step", "content_tables", "mass_update", "row_sums", "rows_out"]


# The head sum of the step of several heads, y_j = p_j d_j + Σ_h ω_h G_h(j+1) (d_j the
# diagonal), is reassociated: the loop over heads runs in the compiler's vector lanes (several
# partial sums, then a tree), not as one serial chain. Rounding bound, for any order the
# compiler picks: each of the H + 1 products meets at most H + 1 roundings on its way into the
# result (one for the product or the fused multiply-add that forms it, one per addition with
# another nonzero partial sum; additions of the zeros that start empty lanes are exact), so
# with γ_k = k u/(1 − k u), u = 2^-53,
#
#     |ŷ_j − y_j| ≤ γ_{H+1} (|p_j| d_j + Σ_h ω_h |G_h(j+1)|)                        (*)
#
# (Higham, *Accuracy and Stability of Numerical Algorithms*, §4.2: the bound of recursive
# summation holds for any order). The one serial chain it replaces satisfies (*) as well, so
# the two differ by at most 2 γ_{H+1} (p_j d_j + Σ_h ω_h G_h(j+1)) for p ≥ 0; the blend
# (1 − λ) p_j + λ ŷ_j is then rounded as before. The order is fixed by the compiled code: the
# same bits on every call and for any thread count on a given CPU (a CPU with other vector
# widths may round differently, within (*)). The flag is set on the routines of several heads
# only (``_step_heads``, ``_heads1``): their only chains of additions are these sums (a
# recurrence G ← p w + r G has one addition per row, nothing to reassociate; products are not
# distributed, which needs more than reassociation); the compensated mass sums
# (``_lanes_add``, ``_lanes_total``) and the one-head kernel are compiled without it, and an
# inlined routine keeps its own flags (they belong to each instruction).
#
# Stationary rows (j ≥ nt − 1: weights w_h = w_off[nt − 1, h] for every row) run on F_h = G_h/w_h,
# F_h(j) = p_j + r_h F_h(j+1), and form the head sum as Σ_h c_h F_h(j+1) with c_h = fl(ω_h w_h)
# computed once per row of P: each term meets one more rounding (that of c_h), so there
#
#     |ŷ_j − y_j| ≤ γ_{H+2} (|p_j| d_j + Σ_h ω_h |G_h(j+1)|)                        (**)
#
# with G_h = w_h F_h, and the recurrence rounds once per row on either route (F ← p + r F or
# G ← p w + r G in one fused multiply-add, after the product p w on the G route). Leaving the
# stationary rows, G_h = fl(w_h F_h) (one more rounding of the state). |F_h| ≤ Σ_i |p_i| as
# |G_h| is, so the route is taken only in the scaled domain below, whose rows satisfy that
# bound within 2^1023; rows done unscaled keep the G route.


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _heads1(G, hw, r, w, i1, p1):  # pragma: no cover - compiled
    """One row j of the head recurrences, in place on G (H,): returns Σ_h hw_h G_h(j+1)
    (reassociated, bound (*)) and G ← G(j); i1 is row j's table row in w (nt, H)."""
    acc = 0.0
    for h in range(G.shape[0]):
        g = G[h]
        acc += hw[h] * g
        G[h] = p1 * w[i1, h] + r[h] * g
    return acc


# The row masses Σ_j out[b, j] are summed while the rows are written: each block of L = 256
# rows, still in the L1 cache, is added into L lanes by TwoSum, elementwise (a loop the
# compiler vectorises), s_l + v = t_l + e exactly with t_l the new lane sum and e added into
# the lane's correction; at the end the lanes and the rows left over are added by TwoSum in
# turn and the corrections added plainly. Every TwoSum is error-free, so the result is the
# cascaded summation of _sum2 in another order, with its bound: within u·|sum| + γ²_{n} Σ|x|.
LANES = 256


@njit(cache=True, nogil=True, fastmath={"contract"})
def _lanes_add(x, S, E):  # pragma: no cover - compiled
    """S, E ← TwoSum(S, x) elementwise (shapes (L,)): S_l + E_l + x_l is kept exactly."""
    for i in range(x.shape[0]):
        v = x[i]
        s = S[i]
        t = s + v
        z = t - s
        E[i] += (s - (t - z)) + (v - z)
        S[i] = t


@njit(cache=True, nogil=True, fastmath={"contract"})
def _lanes_add4(x, S, E):  # pragma: no cover - compiled
    """_lanes_add of the four blocks of x (4 L,), the last block first, as four calls in that
    order would do (the same TwoSums in the same order per lane: the same bits), with each
    lane's S, E loaded and stored once instead of four times. Written out four times: with a
    loop over the blocks inside the lane loop the compiler does not vectorise over the lanes
    (measured: the whole one-head step took 2.2× as long)."""
    L = S.shape[0]
    for i in range(L):
        s = S[i]
        e = E[i]
        v = x[3 * L + i]
        t = s + v
        z = t - s
        e += (s - (t - z)) + (v - z)
        s = t
        v = x[2 * L + i]
        t = s + v
        z = t - s
        e += (s - (t - z)) + (v - z)
        s = t
        v = x[L + i]
        t = s + v
        z = t - s
        e += (s - (t - z)) + (v - z)
        s = t
        v = x[i]
        t = s + v
        z = t - s
        e += (s - (t - z)) + (v - z)
        S[i] = t
        E[i] = e


@njit(cache=True, nogil=True, fastmath={"contract"})
def _two_sum(s, e, v):  # pragma: no cover - compiled
    """(t, e') with t + e' = s + e + v up to the rounding of e' (TwoSum of s and v)."""
    t = s + v
    z = t - s
    return t, e + ((s - (t - z)) + (v - z))


@njit(cache=True, nogil=True, fastmath={"contract"})
def _lanes_total(S, E, row, hi):  # pragma: no cover - compiled
    """Σ of the lanes (S, E) and of row[0..hi] (the rows below the last full block)."""
    s = 0.0
    e = 0.0
    for i in range(hi + 1):
        s, e = _two_sum(s, e, row[i])
    for i in range(S.shape[0]):
        s, e = _two_sum(s, e, S[i])
        e += E[i]
    return s + e


# Several heads compute in a scaled domain: every input p_j is read as p̃_j = 2^960 p_j and every
# output leaves as 2^-960 ỹ_j, so a profile whose tail lies below 2^-1022 (most of it in deep
# rollouts) is carried in normal numbers. Cores that multiply subnormal operands or produce
# subnormal products in microcode (Intel x86: 9 against 0.9 ns per vectorised product) then run at
# their normal rate. Scaling by a power of two is exact in both directions while nothing leaves the
# normal range. No overflow: every factor (w, r, ω, diag, λ) is at most 1, so |G_h(j)| ≤ Σ_i |p_i|
# and |y_j| ≤ |p_j| + Σ_i |p_i|; a row whose entries all lie within 2^62/n has Σ_i |p_i| ≤ 2^62 and
# every scaled value below 2^1023 (a rollout's rows are at most 1), and any other row (larger
# entries, inf, NaN) is done again unscaled, as before. No underflow: an input down to 2^-1074
# becomes 2^-114, and stays normal while the factors that multiply it stay above 2^-908. So the
# scaling changes no bit where the unscaled arithmetic of the same route stays normal, and where it
# did not, each output is the scaled result rounded once to the subnormal grid (round to nearest
# even, as one IEEE multiplication by 2^-960 would do) instead of carrying the roundings of every
# subnormal operation: at most 2^-1075 from the exact value of the scaled arithmetic, which obeys
# bound (*) or (**). Subnormal inputs and outputs pass through their bit patterns (an integer m ≤
# 2^52 is the bit pattern of m·2^-1074), never through a floating-point multiplication with a
# subnormal operand or result. At the end of every block of L rows a state with |G̃_h| < 2^-700
# (true value below 2^-1660; F̃ ≥ G̃, so the same for F) is set to 0: whatever it would still add to
# a later output is below 2^-1660, far under that output's rounding (2^-1075), and a block moves a
# state by at most 2^-L = 2^-256 for r_h > 1/2 (the stalling case), so no state reaches the scaled
# domain's own subnormals (2^-1022) before it is dropped; for r_h ≤ 1/2 it decays to 0 within a few
# dozen rows anyway.
_UP = 2.0**960  # normal p: p̃ = p·2^960
_DOWN = 2.0**-960  # ỹ ≥ 2^-62: y = ỹ·2^-960, normal
_SUB_UP = 2.0**-114  # subnormal p = m·2^-1074: p̃ = m·2^-114
_SUB_DOWN = 2.0**114  # ỹ < 2^-62: y = rint(ỹ·2^114)·2^-1074 on the subnormal grid
_SUB_TOP = 2.0**-62  # 2^-1022 scaled: the smallest normal output
_G_FLOOR = 2.0**-700  # scaled states below it (true value < 2^-1660) are set to 0
_FIT = 2.0**62  # rows with every |p_j| ≤ 2^62/n: scaled values stay below 2^1023
_MANTISSA = (1 << 52) - 1
_SIGN = -(1 << 63)


@intrinsic
def _bits(typingctx, x):
    """The bit pattern of a float64 as an int64 (a register move, no arithmetic)."""
    if x != types.float64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


@intrinsic
def _from_bits(typingctx, m):
    """The float64 whose bit pattern is the int64 ``m``."""
    if m != types.int64:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@njit(cache=True, nogil=True)
def _up(x, on=True):  # pragma: no cover - compiled
    """2^960 x, exactly, without an operation on a subnormal operand (x itself when not ``on``)."""
    if not on:
        return x
    bits = _bits(x)
    if (bits >> 52) & 0x7FF == 0:  # zero or subnormal: m·2^-1074, m the mantissa field
        v = float(bits & _MANTISSA) * _SUB_UP
        return -v if bits < 0 else v
    return x * _UP


@njit(cache=True, nogil=True)
def _down(y, on=True):  # pragma: no cover - compiled
    """2^-960 y rounded to nearest even like an IEEE product; a subnormal (or zero) result is
    formed from its bit pattern, without a subnormal operation (y itself when not ``on``)."""
    if not on:
        return y
    a = abs(y)
    if a < _SUB_TOP:
        m = np.int64(np.rint(a * _SUB_DOWN))  # ≤ 2^52: 2^52 is the bits of 2^-1022
        return _from_bits(m | _SIGN if y < 0 else m)
    return y * _DOWN


@njit(cache=True, nogil=True, inline="always")
def _read4(P, b, j, on, fit):  # pragma: no cover - compiled
    """Entries j, j − 1, j − 2, j − 3 of row b through :func:`_up`, and whether all four lie
    within ``fit`` (False for NaN too). Inlined in numba's IR: as an LLVM call returning a
    tuple it cost 0.4–0.7 ns per entry and step (measured at 2 and 32 heads)."""
    x1, x2, x3, x4 = P[b, j], P[b, j - 1], P[b, j - 2], P[b, j - 3]
    ok = abs(x1) <= fit and abs(x2) <= fit and abs(x3) <= fit and abs(x4) <= fit
    return _up(x1, on), _up(x2, on), _up(x3, on), _up(x4, on), ok


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _step_heads(P, diag, w_off, r, hw, lam, out, sums, G, C, S, E, skip=True):  # pragma: no cover
    # Row by row: in the scaled domain above while every entry of the row lies within
    # _FIT / n (then no scaled value reaches 2^1023), else (entries beyond 2^62/n, inf or NaN)
    # the row is done again unscaled, with IEEE gradual underflow, as before the scaled domain.
    # ``skip``: blocks of zeros behind zero states are written as zeros (_zero_block).
    n = P.shape[1]
    fit = _FIT / n
    for b in range(P.shape[0]):
        if not _heads_row(P, b, diag, w_off, r, hw, lam, out, sums, G, C, S, E, True, fit, skip):
            _heads_row(P, b, diag, w_off, r, hw, lam, out, sums, G, C, S, E, False, np.inf, skip)


# Zero blocks. Entry j of the step depends only on p_j and the states G_h(j+1), which carry the
# entries i > j: when every state is 0 and the entries lo..j are 0, the block's outputs are
# a·0 + λ(0·d + Σ_h ω_h·0) = 0 and its states stay 0 (0 + r·0), whatever the weights, so the
# block is written as zeros without its H products per entry (its mass lanes still add them:
# the same lanes, bit for bit). A rollout from the last token leaves most of a long profile at
# exact 0 (the scaled domain drops states below the output grid), e.g. 80.6 % of
# benchmarks/limits.py's 32-head profile at n = 10⁶, T = 64, and every layer before it more.
# A zero written here is +0, where the full arithmetic could give −0 for a −0 input; the two
# compare equal, and nothing else differs.
@njit(cache=True, nogil=True, inline="always")
def _zero_block(P, b, G, lo, j):  # pragma: no cover - compiled
    """Whether every state G_h and every entry P[b, lo..j] is zero (scanned from j down)."""
    for h in range(G.shape[0]):
        if G[h] != 0.0:
            return False
    for i in range(j, lo - 1, -1):
        if P[b, i] != 0.0:
            return False
    return True


@njit(cache=True, nogil=True, fastmath={"contract", "reassoc"})
def _heads_row(P, b, diag, w_off, r, hw, lam, out, sums, G, C, S, E, on, fit,  # pragma: no cover
               skip):
    # Row b of several heads, block by block from the last entry: L entries, then their mass
    # into the lanes (_lanes_add); the n mod L entries at the start of the row last. Four
    # entries per pass over the heads (the states G and the per-head constants loaded once for
    # four), the heads in vector lanes: the sums p_j d_j + Σ_h ω_h G_h(j+1) are reassociated
    # (bound (*)). The diagonal is read as diag[min(j, nt − 1)] like the weights (the
    # stationary entries share the table's last row: the same values), so it is not a third
    # stream over n entries. With ``on``, p, G and y live in the scaled domain above (_up,
    # _down), and the stationary entries (groups of four at j − 3 ≥ nt − 1) run on F = G/w_l
    # with C = ω w_l (bound (**); C: a work buffer (H,)); returns False when an entry of the row
    # is not within ``fit`` (the caller then does the row again without ``on``).
    n = P.shape[1]
    H = G.shape[0]
    L = S.shape[0]
    a = 1.0 - lam
    last = w_off.shape[0] - 1
    rest = n % L
    fits = True
    G[:] = 0.0
    S[:] = 0.0
    E[:] = 0.0
    row = out[b]
    wl = w_off[last]
    dl = diag[last]
    for h in range(H):
        C[h] = hw[h] * wl[h]
    onf = on  # G holds F = G/w_l while the entries are stationary (scaled rows only)
    j = n - 1
    while j >= 0:
        lo = j - L + 1 if j >= rest else 0  # the block of entries lo..j
        if skip and _zero_block(P, b, G, lo, j):  # outputs 0, states stay 0 (above)
            row[lo : j + 1] = 0.0
            if lo > 0 or rest == 0:
                _lanes_add(row[lo : lo + L], S, E)
            j = lo - 1
            continue
        while onf and j - 3 >= lo and j - 3 >= last:
            p1, p2, p3, p4, ok = _read4(P, b, j, on, fit)
            fits = fits and ok
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            a4 = 0.0
            for h in range(H):
                c = C[h]
                rr = r[h]
                g = G[h]
                a1 += c * g
                g = p1 + rr * g
                a2 += c * g
                g = p2 + rr * g
                a3 += c * g
                g = p3 + rr * g
                a4 += c * g
                G[h] = p4 + rr * g
            row[j] = _down(a * p1 + lam * (p1 * dl + a1), on)
            row[j - 1] = _down(a * p2 + lam * (p2 * dl + a2), on)
            row[j - 2] = _down(a * p3 + lam * (p3 * dl + a3), on)
            row[j - 3] = _down(a * p4 + lam * (p4 * dl + a4), on)
            j -= 4
        if onf and j >= lo:  # leaving the stationary entries: G = w_l F
            onf = False
            for h in range(H):
                G[h] = wl[h] * G[h]
        while j - 3 >= lo:
            p1, p2, p3, p4, ok = _read4(P, b, j, on, fit)
            fits = fits and ok
            i1, i2, i3, i4 = min(j, last), min(j - 1, last), min(j - 2, last), min(j - 3, last)
            a1 = 0.0
            a2 = 0.0
            a3 = 0.0
            a4 = 0.0
            for h in range(H):
                c = hw[h]
                rr = r[h]
                g = G[h]
                a1 += c * g
                g = p1 * w_off[i1, h] + rr * g
                a2 += c * g
                g = p2 * w_off[i2, h] + rr * g
                a3 += c * g
                g = p3 * w_off[i3, h] + rr * g
                a4 += c * g
                G[h] = p4 * w_off[i4, h] + rr * g
            row[j] = _down(a * p1 + lam * (p1 * diag[i1] + a1), on)
            row[j - 1] = _down(a * p2 + lam * (p2 * diag[i2] + a2), on)
            row[j - 2] = _down(a * p3 + lam * (p3 * diag[i3] + a3), on)
            row[j - 3] = _down(a * p4 + lam * (p4 * diag[i4] + a4), on)
            j -= 4
        while j >= lo:
            x1 = P[b, j]
            if not abs(x1) <= fit:
                fits = False
            p1 = _up(x1, on)
            i1 = min(j, last)
            y = a * p1 + lam * (p1 * diag[i1] + _heads1(G, hw, r, w_off, i1, p1))
            row[j] = _down(y, on)
            j -= 1
        if lo > 0 or rest == 0:
            _lanes_add(row[lo : lo + L], S, E)
        if on:
            for h in range(H):  # states that can no longer reach the output grid (above)
                if abs(G[h]) < _G_FLOOR:
                    G[h] = 0.0
    sums[b] = _lanes_total(S, E, row, rest - 1)
    return fits


@njit(cache=True, nogil=True, fastmath={"contract"})
def _one_head_rows(P, b, row, hi, lo, diag, w_off, r0, c0, lam, G):  # pragma: no cover
    """Rows hi, …, lo of the step of one head into ``row``; returns the state G after row lo
    (G enters as the state after row hi + 1).

    The state stays in a register. The stationary rows (j ≥ nt − 1, constant weight w) advance
    two rows per fused multiply-add on the carried state,

        G(j−1) = w (p_{j−1} + r p_j) + r² G(j+1),

    with G(j) = p_j w + r G(j+1) formed beside it for row j − 1's output, so the loop is not
    held to one multiply-add latency per row. Rounding: a term of G meets two roundings per
    two rows on either route (r² rounded, then the multiply-add; or two multiply-adds), and a
    p_j three (multiply-add, product, multiply-add), as in the row-by-row recurrence: the same
    bound (rollout module docstring), other bits."""
    n = row.shape[0]
    nt = w_off.shape[0]
    a = 1.0 - lam
    r2 = r0 * r0
    w_last = w_off[nt - 1, 0]
    d_last = a + lam * diag[n - 1]
    j = hi
    while j - 1 >= lo and j >= nt:  # rows j and j − 1, both stationary (j − 1 ≥ nt − 1)
        p1 = P[b, j]
        p2 = P[b, j - 1]
        row[j] = d_last * p1 + c0 * G
        row[j - 1] = d_last * p2 + c0 * (p1 * w_last + r0 * G)
        G = w_last * (p2 + r0 * p1) + r2 * G
        j -= 2
    while j >= lo and j >= nt - 1:
        pj = P[b, j]
        row[j] = d_last * pj + c0 * G
        G = pj * w_last + r0 * G
        j -= 1
    while j >= lo:
        pj = P[b, j]
        row[j] = (a + lam * diag[j]) * pj + c0 * G
        G = pj * w_off[j, 0] + r0 * G
        j -= 1
    return G


_U1 = np.uint64(1)
_U2 = np.uint64(2)
_U3 = np.uint64(3)


@njit(cache=True, nogil=True, fastmath={"contract"})
def _stationary_states(x, y, top, m, r, r2, r3, r4, F):  # pragma: no cover - compiled
    """The states F(i+1) of rows i = top, top − 1, …, top − m + 1 (m a multiple of 4, all
    stationary) into ``y``, from the input row ``x``; returns F after the last row.

    The state is F = G/w, F(j) = p_j + r F(j+1) (no product with w per row), advanced four
    rows per fused multiply-add on the carried state,

        F(j−3) = (p_{j−3} + r (p_{j−2} + r (p_{j−1} + r p_j))) + r⁴ F(j+1),

    with F(j), F(j−1), F(j−2) formed beside it from F(j+1): 7 operations per 4 rows, and the
    loop held neither to one multiply-add latency per row nor to the outputs' products, which
    :func:`_outputs` forms in vector lanes (out_i = d p_i + cw F(i+1)). Indices are
    unsigned (no negative-index wraparound code in the loop). Rounding: a term p_i of F(j+1)
    at distance D = i − j meets at most D + 4 roundings (three in the partial sums, and per
    four rows one carried multiply-add and three in r⁴ = fl(fl(r r)²)), the output three more
    (cw, the product, the multiply-add with d p_j): within the row-by-row recurrence's bound
    2 D + 3 for every D ≥ 1 (for D ≤ 3 the partial sums give at most D + 1 before the
    output), other bits. F is not scaled by w ≤ 1, so it can overflow where G does not (|p|
    near the float64 maximum): the caller checks the row's sum and repeats such a row on the
    G route."""
    t = np.uint64(top)
    for k in range(m // 4):
        i = t - np.uint64(4 * k)
        p1 = x[i]
        s2 = x[i - _U1] + r * p1
        s3 = x[i - _U2] + r * s2
        y[i] = F
        y[i - _U1] = p1 + r * F
        y[i - _U2] = s2 + r2 * F
        y[i - _U3] = s3 + r3 * F
        F = (x[i - _U3] + r * s3) + r4 * F
    return F


@njit(cache=True, nogil=True, fastmath={"contract"})
def _outputs(x, y, d, cw):  # pragma: no cover - compiled
    """y ← d x + cw y: the outputs of stationary rows from their states F(i+1) (one loop the
    compiler vectorises; with the mass lanes in the same loop it does not)."""
    for i in range(y.shape[0]):
        y[i] = d * x[i] + cw * y[i]


# Rows of stationary blocks handed to _stationary_states at once (a multiple of LANES): few
# enough calls, and the block still in the L2 cache when its masses are added.
CHUNK = 4 * LANES


@njit(cache=True, nogil=True, fastmath={"contract"})
def _g_route(P, b, row, hi, G, diag, w_off, r0, c0, lam, S, E):  # pragma: no cover
    """Rows hi, …, 0 of row b on the G route (_one_head_rows) from the state G after row
    hi + 1, in blocks of L down to n mod L (hi + 1 a multiple of L from the row's end), their
    masses added into the lanes (S, E); returns the row's mass."""
    n = row.shape[0]
    L = S.shape[0]
    rest = n % L
    while hi >= rest:
        G = _one_head_rows(P, b, row, hi, hi - L + 1, diag, w_off, r0, c0, lam, G)
        _lanes_add(row[hi - L + 1 : hi + 1], S, E)
        hi -= L
    _one_head_rows(P, b, row, rest - 1, 0, diag, w_off, r0, c0, lam, G)
    return _lanes_total(S, E, row, rest - 1)


@njit(cache=True, nogil=True, fastmath={"contract"})
def _step_one_head(P, diag, w_off, r, hw, lam, out, sums, S, E):  # pragma: no cover - compiled
    # One head, block by block from the last row as _step_heads: the stationary rows at the
    # top (j ≥ nt − 1) CHUNK at a time on the F route (_stationary_states, _outputs), the
    # rest on the G route (_one_head_rows) from G = w F. A row whose mass comes out infinite or NaN
    # (F overflowed, or the row's entries are that large) is done again on the G route alone.
    k, n = P.shape
    L = S.shape[0]
    nt = w_off.shape[0]
    r0 = r[0]
    c0 = lam * hw[0]
    w_last = w_off[nt - 1, 0]
    cw = c0 * w_last
    d_last = (1.0 - lam) + lam * diag[n - 1]
    r2 = r0 * r0
    r3 = r2 * r0
    r4 = r2 * r2
    rest = n % L
    for b in range(k):
        S[:] = 0.0
        E[:] = 0.0
        row = out[b]
        prow = P[b]
        F = 0.0
        hi = n - 1
        while hi - CHUNK + 1 >= max(nt - 1, rest):
            F = _stationary_states(prow, row, hi, CHUNK, r0, r2, r3, r4, F)
            _outputs(prow[hi - CHUNK + 1 : hi + 1], row[hi - CHUNK + 1 : hi + 1], d_last, cw)
            _lanes_add4(row[hi - CHUNK + 1 : hi + 1], S, E)
            hi -= CHUNK
        total = _g_route(P, b, row, hi, w_last * F, diag, w_off, r0, c0, lam, S, E)
        if hi < n - 1 and not np.isfinite(total):  # some rows went the F route
            S[:] = 0.0
            E[:] = 0.0
            total = _g_route(P, b, row, n - 1, 0.0, diag, w_off, r0, c0, lam, S, E)
        sums[b] = total


class _Work(threading.local):
    """Work buffers of the steps, one set per thread, grown when a larger one is needed and
    reused by every later step (no array is allocated per layer): the head states G (H,), the
    mass lanes S, E (LANES,), the row sums (k,) and the rows' last column (k,) as the step
    wrote it; ``written`` is a weak reference to the rows last written (None before any);
    ``spare`` the input rows of the last step, kept to be written over by a later step once
    nothing else refers to them (:func:`rows_out`)."""

    def __init__(self):
        self.G = np.empty(0)
        self.C = np.empty(0)
        self.S = np.empty(LANES)
        self.E = np.empty(LANES)
        self.sums = np.empty(0)
        self.last = np.empty(0)
        self.written = None
        self.spare = None

    def buffers(self, k: int, H: int) -> tuple[np.ndarray, np.ndarray]:
        if self.G.size < H:
            self.G, self.C = np.empty(H), np.empty(H)
        if self.sums.size < k:
            self.sums, self.last = np.empty(k), np.empty(k)
        return self.G[:H], self.sums[:k]

    def record(self, out) -> None:
        """Mark ``out`` as the rows whose sums ``sums[:k]`` hold."""
        np.copyto(self.last[: out.shape[0]], out[:, -1])
        self.written = weakref.ref(out)


_WORK = _Work()

# Input rows up to this size are kept as the thread's spare (one at most), so that a chain
# of steps writes into two arrays in turn instead of allocating (and first touching) a new
# one per layer; larger rows are not held beyond their step.
SPARE_BYTES = 1 << 26


def _lone_count() -> int | None:
    """``sys.getrefcount`` of an array held by nothing but a local name, taken the way
    :func:`rows_out` takes it (2 on CPython 3.11–3.13: the name and the call's argument);
    None where reference counts are not CPython's, and then no rows are reused."""
    if sys.implementation.name != "cpython":
        return None
    slot = [np.empty(1)]
    spare, slot[0] = slot[0], None
    return sys.getrefcount(spare)


_LONE = _lone_count()


def rows_out(P):
    """An array to write the step on rows ``P`` into: the thread's spare rows when they have
    P's shape and dtype and nothing but the spare slot refers to them (the rows two steps back
    in a chain, which the chain has let go), else a new array like P.

    The reference count is the test (as NumPy's own reuse of temporaries): the count of a
    lone array, measured at import the same way (``_LONE``), means no other name, container,
    view or exported buffer can see the rows, so writing over them is invisible."""
    w = _WORK
    spare, w.spare = w.spare, None
    if (spare is not None and _LONE is not None and spare.shape == P.shape
            and spare.dtype == P.dtype and sys.getrefcount(spare) == _LONE):
        return spare
    return np.empty_like(P)


def alibi_step(P, diag, w_off, r, hw, lam, out):
    """Write ``(1 - lam) P + lam P A`` into ``out`` (shapes: P, out (k, n) C-contiguous float64;
    diag (n,); w_off (nt, H); r, hw (H,)); dispatches to the one-head kernel when H = 1. The
    rows j ≥ nt − 1 are stationary: their weights are w_off[nt − 1] and their diagonal
    diag[nt − 1] (as the kernel's tables hold; diag beyond nt − 1 is not read).

    The compensated row sums Σ_j out[b, j] are formed while ``out`` is written (the lanes
    above: _sum2's bound), and :func:`mass_update` takes them instead of reading ``out`` again
    when it is handed this ``out`` (as the rollout does right after each step). The head sums
    of several heads are reassociated, within the bound (*) above."""
    w = _WORK
    G, sums = w.buffers(P.shape[0], r.shape[0])
    if r.shape[0] == 1:
        _step_one_head(P, diag, w_off, r, hw, lam, out, sums, w.S, w.E)
    else:
        _step_heads(P, diag, w_off, r, hw, lam, out, sums, G, w.C[: r.shape[0]], w.S, w.E)
    w.record(out)
    if P.base is None and P.flags.owndata and P.nbytes <= SPARE_BYTES:
        w.spare = P


def _folded_sums(P):
    """The row sums this thread's last step formed while writing ``P``, or None when ``P`` is
    not that step's output or its last column changed since (rows rescaled in place)."""
    w = _WORK
    if w.written is None or w.written() is not P:
        return None
    k = P.shape[0]
    if not np.array_equal(P[:, -1], w.last[:k]):
        return None
    return w.sums[:k]


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
def _mass_from_sums(sums, S, target, budget, trusted):  # pragma: no cover - compiled
    # the bookkeeping of mass_update for given compensated row sums
    for b in range(sums.shape[0]):
        s_new = sums[b]
        s = S[b]
        if s > 0.0 and not (trusted and abs(s_new - s) <= budget * s):
            target[b] *= s_new / s
        S[b] = s_new


@njit(cache=True, nogil=True)
def _mass_update_rows(P, S, target, budget, trusted):  # pragma: no cover - compiled
    sums = np.empty(P.shape[0])
    for b in range(P.shape[0]):
        sums[b] = _sum2(P, b)
    _mass_from_sums(sums, S, target, budget, trusted)


def mass_update(P, S, target, budget, trusted):
    """One step of the rollout's mass bookkeeping, in place on S and target (shapes (k,)).

    S_new = Σ_j P[b, j] (compensated): the sums :func:`alibi_step` formed while writing ``P``
    when ``P`` is its latest output, else :func:`_sum2` over the rows. A step of a
    row-stochastic kernel (``trusted``) whose defect |S_new − S| is within ``budget``·S is
    rounding and leaves ``target`` alone; any other change of mass is real and ``target``
    follows it (target · S_new/S).
    """
    sums = _folded_sums(P)
    if sums is None:
        _mass_update_rows(P, S, target, budget, bool(trusted))
    else:
        _mass_from_sums(sums, S, target, budget, bool(trusted))
