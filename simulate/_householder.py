r"""PaTH transport at chunked speed: route scores and attention outputs of Householder steps
(paper [B], claim AT18), by a compact-WY / UT-transform recurrence over chunks of C steps.

Re-exported by :mod:`posflow.simulate.transport`, whose docstring states the route conventions.
Steps H_s = I − β_s w_s w_sᵀ with ‖w_s‖ = 1 and β_s ∈ [0, 2] (symmetric, ‖H_s‖₂ ≤ 1; orthogonal
only at β ∈ {0, 2}). Route ``"path"``: P_{j→i} = H_i ⋯ H_{j+1}; route ``"from_source"``:
P_{j→i} = H_{i−1} ⋯ H_j, which is the path route of the shifted steps H'_t = H_{t−1} (H'_0 = I,
i.e. w'_0 = 0, β'_0 = 0), so one algorithm serves both. The scores are s_ij = q_iᵀ P_{j→i} k_j.

**Compact WY form of a chunk (the UT transform).** For steps a … e (rows w_a … w_e of W, C × D;
B = diag β) the product with the later step on the left is

.. math::

    H_e \cdots H_a = I - W^\top L W, \qquad
    L = (I + B\,\mathrm{tril}(W W^\top, -1))^{-1} B,

L lower triangular. Proof by induction: H_m (I − W'ᵀL'W') = I − W'ᵀL'W' − β_m w_m w_mᵀ +
β_m w_m (w_mᵀW'ᵀ) L'W', so row m of L is β_m e_m − β_m Σ_{s<m} (w_m·w_s) L_s, i.e.
(I + B tril(G, −1)) L = B with G = W Wᵀ. No division by β (β = 0 is allowed). The inverse of the
unit lower-triangular matrix is formed by recursive doubling of its diagonal blocks
(X_21 = −X_22 A_21 X_11 on 1, 2, 4, … blocks; matrix products only, log₂ C levels). As the
diagonal blocks of the inverse of a block-triangular matrix are the inverses of its diagonal
blocks, the product of any sub-range a′ … e′ of the chunk is I − Wᵀ L W restricted to those
rows and columns. Hence, with local indices and masks tril (s ≤ i) and tril(·, −1) (r > j):

.. math::

    S^{\text{intra}} = Q K^\top - \mathrm{tril}(Q W^\top)\, L\, \mathrm{tril}(W K^\top, -1),
    \qquad \tilde Q = Q - \mathrm{tril}(Q W^\top)\, L\, W,
    \qquad \hat K = K - \mathrm{tril}(W K^\top, -1)^\top L^\top W,

where row i of Q̃ is q_iᵀ H_i ⋯ H_a (the query carried to the chunk start) and row j of K̂ is
(H_e ⋯ H_{j+1} k_j)ᵀ (the key carried to the chunk end); in S^intra the sum runs over
j < r ≤ s ≤ i, exactly the steps of the route.

**Inter-chunk terms (queries carried across chunk boundaries).** For a query in chunk c and a
key in chunk c − ℓ, ℓ ≥ 1, P_{j→i} = (H_i ⋯ H_{cC}) P_{c−1} ⋯ P_{c−ℓ+1} (H_{(c−ℓ+1)C−1} ⋯
H_{j+1}) with P_m = I − W_mᵀ L_m W_m, so

.. math::

    S_{c,\,c-\ell} = X^{(\ell)}_c \hat K_{c-\ell}^\top, \qquad X^{(1)}_c = \tilde Q_c, \qquad
    X^{(\ell+1)}_c = X^{(\ell)}_c P_{c-\ell}
                   = X^{(\ell)}_c - (X^{(\ell)}_c W_{c-\ell}^\top)(L_{c-\ell} W_{c-\ell}).

All query chunks advance one lag at a time together (one batched product per lag).
:func:`path_attention` folds each lag's block into an online (max-shifted) softmax with the
values, so it never forms a T × T array.

**Cost** (N = ⌈T/C⌉ chunks, T padded to N·C with identity steps β = 0). UT transform and local
terms O(T·C·(C + D)); inter-chunk carry ≈ 3·C²·D per block pair, N(N − 1)/2 pairs, ≈ 1.5·T²·D
multiply-adds. Total O(T²·D + T·C·(C + D)) flops (attention adds O(T²·D_v)); sequential depth N
lags (+ log₂ C levels of the UT inversion), against T for the per-query sweep. Memory: the
scores return T × T (a block array of the same size is built to assemble it);
:func:`path_attention` needs O(T·(C + D + D_v)) beyond its inputs (the bias, when given, is the
caller's T × T).

**Rounding.** Expanding H_s X H_r with X = H_{s−1} ⋯ H_{r+1} shows that the only w_s w_rᵀ term
is β_s β_r (w_sᵀ X w_r) w_s w_rᵀ, so L_ss = β_s and L_sr = −β_s β_r w_sᵀ H_{s−1} ⋯ H_{r+1} w_r
(s > r): as ‖H‖₂ ≤ 1, |L_sr| ≤ β_s β_r ≤ 4 and |((I + A)⁻¹)_sr| ≤ 2 — the triangular system is
well conditioned for every input (parallel w and D < C included). Each score is then a chain of
≤ N carries by norm-≤ 1 factors, each built from D-term and C-term sums with O(1)
coefficients: error ≲ (N + 1)·(2D + 4C²)·u·‖q‖‖k‖ to first order (the bound AT18 uses), about
1e-15 relative in practice.
"""

from __future__ import annotations

import math
import numbers

import array_api_compat as aac

from posflow.simulate._arrays import Place, as_float, check_int, namespace_of
from posflow.simulate._routes import check_route

__all__ = ["householder_route_scores", "path_attention"]


def _check(q, k, w, beta, route: str, chunk: int, v=None):
    """Validated float64 arrays on one namespace: (at, q, k, w, β (…, T), v, shift, chunk)."""
    shift = check_route(route)
    chunk = check_int(chunk, "chunk", 1)
    at = namespace_of(q, k, w, beta, *(() if v is None else (v,)))
    xp = at.xp
    q, k, w = (as_float(at, x, name) for x, name in ((q, "q"), (k, "k"), (w, "w")))
    if q.ndim < 2 or q.shape[-2] < 1 or q.shape[-1] < 1:
        raise ValueError(f"q must have shape (..., T, D) with T, D >= 1; got {tuple(q.shape)}")
    if tuple(k.shape) != tuple(q.shape) or tuple(w.shape) != tuple(q.shape):
        raise ValueError(
            f"q, k and w must have the same shape (..., T, D); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(w.shape)}"
        )
    err = xp.abs(xp.sqrt(xp.sum(w * w, axis=-1)) - 1.0)
    worst = float(xp.max(err))
    if worst > 1e-12:
        raise ValueError(
            f"w rows must be unit vectors (tolerance 1e-12); worst |‖w‖ − 1| = {worst}"
        )
    beta = as_float(at, beta, "beta")
    try:
        beta = xp.broadcast_to(beta, tuple(q.shape[:-1]))
    except (ValueError, RuntimeError) as exc:
        raise ValueError(
            f"beta must be a scalar or broadcast to {tuple(q.shape[:-1])}; got {tuple(beta.shape)}"
        ) from exc
    if not bool(xp.all((beta >= 0.0) & (beta <= 2.0))):
        raise ValueError(
            f"beta must lie in [0, 2]; got values in [{float(xp.min(beta))}, {float(xp.max(beta))}]"
        )
    if v is not None:
        v = as_float(at, v, "v")
        if v.ndim != q.ndim or tuple(v.shape[:-1]) != tuple(q.shape[:-1]):
            raise ValueError(
                f"v must have shape {tuple(q.shape[:-1])} + (D_v,); got {tuple(v.shape)}"
            )
    return at, q, k, w, beta, v, shift, chunk


def _pad_rows(xp, x, rows: int, axis: int):
    """x with ``rows`` zero rows appended along ``axis`` (a negative axis)."""
    if rows == 0:
        return x
    shape = list(x.shape)
    shape[axis] = rows
    return xp.concat([x, xp.zeros(tuple(shape), dtype=x.dtype, device=aac.device(x))], axis=axis)


def _chunks(xp, x, n: int, c: int):
    """(..., T, D) → (..., N, C, D), zero rows appended up to N·C."""
    x = _pad_rows(xp, x, n * c - x.shape[-2], -2)
    return xp.reshape(x, (*x.shape[:-2], n, c, x.shape[-1]))


def _unit_lower_inverse(xp, a):
    """(I + A)⁻¹ for strictly lower-triangular A (..., C, C), by recursive doubling."""
    c = a.shape[-1]
    c2 = 1 << (c - 1).bit_length()
    a = _pad_rows(xp, _pad_rows(xp, a, c2 - c, -1), c2 - c, -2)
    lead = tuple(a.shape[:-2])
    dev = aac.device(a)
    x = xp.ones((*lead, c2, 1, 1), dtype=a.dtype, device=dev)  # inverses of 1×1 blocks
    b = 1
    while b < c2:
        m = c2 // (2 * b)
        # diagonal blocks of size 2b: (..., m, 2b, m, 2b) → take the (i, i) blocks
        blocks = xp.reshape(a, (*lead, m, 2 * b, m, 2 * b))
        blocks = xp.permute_dims(
            blocks, (*range(len(lead)), len(lead), len(lead) + 2, len(lead) + 1, len(lead) + 3)
        )
        blocks = xp.reshape(blocks, (*lead, m * m, 2 * b, 2 * b))
        idx = xp.arange(0, m * m, m + 1, device=dev)
        a21 = xp.take(blocks, idx, axis=len(lead))[..., b:, :b]
        x11, x22 = x[..., 0::2, :, :], x[..., 1::2, :, :]
        x21 = -(x22 @ (a21 @ x11))
        zero = xp.zeros(tuple(x11.shape), dtype=a.dtype, device=dev)
        x = xp.concat([xp.concat([x11, zero], axis=-1), xp.concat([x21, x22], axis=-1)], axis=-2)
        b *= 2
    return x[..., 0, :c, :c]


def _ut_transform(xp, w, beta):
    """L with H_e ⋯ H_a = I − Wᵀ L W per chunk: w (..., N, C, D), β (..., N, C) → (..., N, C, C).

    L = (I + B tril(W Wᵀ, −1))⁻¹ B (lower triangular).
    """
    a = beta[..., :, None] * xp.tril(w @ xp.matrix_transpose(w), k=-1)
    return _unit_lower_inverse(xp, a) * beta[..., None, :]


def _carry(xp, x, w, lw):
    """Queries x (rows) carried back through a chunk: x P = x − (x Wᵀ)(L W)."""
    return x - (x @ xp.matrix_transpose(w)) @ lw


def _prepare(at: Place, q, k, w, beta, shift: int, chunk: int):
    """Chunked pieces: (N, C, W, L·W, intra scores, Q̃, K̂), all (..., N, C, ·)."""
    xp = at.xp
    t = q.shape[-2]
    if shift == 0:  # from_source: H'_t = H_{t−1}, H'_0 = I
        w = xp.concat([xp.zeros_like(w[..., :1, :]), w[..., :-1, :]], axis=-2)
        beta = xp.concat([xp.zeros_like(beta[..., :1]), beta[..., :-1]], axis=-1)
    c = min(chunk, t)
    n = -(-t // c)
    qc, kc, wc = (_chunks(xp, x, n, c) for x in (q, k, w))
    bc = xp.reshape(_pad_rows(xp, beta, n * c - t, -1), (*beta.shape[:-1], n, c))
    lc = _ut_transform(xp, wc, bc)
    wk_lower = xp.tril(wc @ xp.matrix_transpose(kc), k=-1)
    u = xp.tril(qc @ xp.matrix_transpose(wc)) @ lc
    intra = qc @ xp.matrix_transpose(kc) - u @ wk_lower
    q_start = qc - u @ wc
    k_end = kc - xp.matrix_transpose(wk_lower) @ (xp.matrix_transpose(lc) @ wc)
    return n, c, wc, lc @ wc, intra, q_start, k_end


def householder_route_scores(q, k, w, beta, route: str = "path", chunk: int = 64):
    r"""All route scores s_ij = q_iᵀ P_{j→i} k_j (j ≤ i) of Householder steps I − β_s w_s w_sᵀ.

    .. math::

        s_{ij} = q_i^\top P_{j\to i} k_j, \qquad
        P_{j\to i} = H_i \cdots H_{j+1}\ (\text{path}), \quad
        H_{i-1} \cdots H_j\ (\text{from\_source})

    by the chunked compact-WY / UT-transform recurrence of :mod:`posflow.simulate._householder`
    (claim AT18). Same numbers as :func:`posflow.simulate.transport.householder_scores` for every
    query at once.

    Parameters
    ----------
    q, k, w : array, shape (..., T, D)
        Queries, keys and unit step vectors (any backend; leading dims are batch, e.g. heads).
    beta : scalar or array broadcastable to (..., T)
        Step strengths in [0, 2].
    route : {"path", "from_source"}
    chunk : int ≥ 1
        Chunk length C (``min(C, T)`` is used); 64 by default.

    Returns
    -------
    s : array, shape (..., T, T)
        Float64 on the inputs' backend; entries above the diagonal (j > i) are −inf.

    Cost O(T²·D + T·C·(C + D)) flops, sequential depth ⌈T/C⌉; memory O(T²) for the result.
    Raises ValueError for mismatched shapes, non-unit w (tolerance 1e-12), β outside [0, 2],
    non-finite input, an unknown route; TypeError for a non-integer chunk.
    """
    at, q, k, w, beta, _, shift, chunk = _check(q, k, w, beta, route, chunk)
    xp = at.xp
    t = q.shape[-2]
    n, c, wc, lw, intra, x, k_end = _prepare(at, q, k, w, beta, shift, chunk)
    diag = [intra]  # diag[ℓ][..., c', :, :] = S(c' + ℓ, c')
    x = x[..., 1:, :, :]
    for lag in range(1, n):
        diag.append(x @ xp.matrix_transpose(k_end[..., : n - lag, :, :]))
        x = _carry(xp, x[..., 1:, :, :], wc[..., 1 : n - lag, :, :], lw[..., 1 : n - lag, :, :])
    # E[ℓ, c'] = S(c' + ℓ, c') (zero blocks for c' ≥ N − ℓ); gather S(c, c') = E[c − c', c']
    e = xp.stack([_pad_rows(xp, d, lag, -3) if lag else d for lag, d in enumerate(diag)], axis=-4)
    e = xp.reshape(e, (*e.shape[:-4], n * n, c, c))
    i = xp.arange(n, device=at.device)
    ii, jj = i[:, None], i[None, :]
    idx = xp.where(jj <= ii, (ii - jj) * n + jj, (n - 1) * n + jj)
    blocks = xp.take(e, xp.reshape(idx, (n * n,)), axis=e.ndim - 3)
    lead = tuple(blocks.shape[:-3])
    blocks = xp.reshape(blocks, (*lead, n, n, c, c))
    r = len(lead)
    blocks = xp.permute_dims(blocks, (*range(r), r, r + 2, r + 1, r + 3))
    s = xp.reshape(blocks, (*lead, n * c, n * c))[..., :t, :t]
    pos = xp.arange(t, device=at.device)
    return xp.where(pos[None, :] <= pos[:, None], s, -math.inf)


def _bias_blocks(at: Place, bias, t: int, n: int, c: int, lead):
    """The bias as (..., N·N, C, C) blocks, flat index c·N + c' (None stays None)."""
    if bias is None:
        return None
    xp = at.xp
    bias = as_float(at, bias, "bias")
    ok = bias.ndim >= 2 and tuple(bias.shape[-2:]) == (t, t) and bias.ndim - 2 <= len(lead)
    if ok:
        tail = lead[len(lead) - (bias.ndim - 2) :]
        ok = all(b in (1, a) for a, b in zip(tail, bias.shape[:-2], strict=True))
    if not ok:
        raise ValueError(
            f"bias must have shape (..., {t}, {t}) broadcasting to {tuple(lead)} + ({t}, {t}); "
            f"got {tuple(bias.shape)}"
        )
    p = n * c - t
    bias = _pad_rows(xp, _pad_rows(xp, bias, p, -1), p, -2)
    b_lead = tuple(bias.shape[:-2])
    r = len(b_lead)
    bias = xp.reshape(bias, (*b_lead, n, c, n, c))
    bias = xp.permute_dims(bias, (*range(r), r, r + 2, r + 1, r + 3))
    return xp.reshape(bias, (*b_lead, n * n, c, c))


def path_attention(
    q, k, v, w, beta, route: str = "path", chunk: int = 64, bias=None, scale: float | None = None
):
    r"""PaTH attention outputs o_i = Σ_{j ≤ i} a_ij v_j with a_i = softmax_j(scale·s_ij + b_ij).

    .. math::

        o_i = \sum_{j \le i} \frac{\exp(\sigma s_{ij} + b_{ij})}
              {\sum_{j' \le i} \exp(\sigma s_{ij'} + b_{ij'})}\, v_j,
        \qquad s_{ij} = q_i^\top P_{j\to i} k_j,\quad \sigma = 1/\sqrt{D}

    with the route scores of :func:`householder_route_scores`, folded lag by lag into an online
    (max-shifted) softmax, so no T × T array is formed (claim AT18, the PaTH scheme of AT20).

    Parameters
    ----------
    q, k, w : array, shape (..., T, D)
        Queries, keys and unit step vectors (any backend; leading dims are batch, e.g. heads).
    v : array, shape (..., T, D_v)
        Values.
    beta : scalar or array broadcastable to (..., T)
        Step strengths in [0, 2].
    route : {"path", "from_source"}
    chunk : int ≥ 1
        Chunk length C (``min(C, T)`` is used); 64 by default.
    bias : array, shape (..., T, T), optional
        Finite additive logits b_ij (e.g. ALiBi), broadcasting over the leading dims; the causal
        mask j ≤ i is applied on top.
    scale : float, optional
        σ; 1/√D by default.

    Returns
    -------
    o : array, shape (..., T, D_v)
        Float64 on the inputs' backend.

    Cost O(T²·(D + D_v) + T·C·(C + D)) flops, sequential depth ⌈T/C⌉; memory O(T·(C + D + D_v))
    beyond the inputs. Raises ValueError for mismatched shapes, non-unit w (tolerance 1e-12),
    β outside [0, 2], non-finite input or scale, an unknown route; TypeError for a non-integer
    chunk.
    """
    at, q, k, w, beta, v, shift, chunk = _check(q, k, w, beta, route, chunk, v)
    xp = at.xp
    t, d = q.shape[-2], q.shape[-1]
    sigma = 1.0 / math.sqrt(d) if scale is None else scale
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real) or not math.isfinite(sigma):
        raise ValueError(f"scale must be a finite number; got {scale!r}")
    n, c, wc, lw, intra, x, k_end = _prepare(at, q, k, w, beta, shift, chunk)
    vc = _chunks(xp, v, n, c)
    bb = _bias_blocks(at, bias, t, n, c, tuple(q.shape[:-2]))
    dev = at.device

    def logits(s, lag):
        s = sigma * s
        if bb is None:
            return s
        idx = xp.arange(lag, n, device=dev) * (n + 1) - lag  # c·N + (c − ℓ)
        return s + xp.take(bb, idx, axis=bb.ndim - 3)

    pos = xp.arange(c, device=dev)
    s0 = xp.where(pos[None, :] <= pos[:, None], logits(intra, 0), -math.inf)
    m = xp.max(s0, axis=-1)
    p = xp.exp(s0 - m[..., None])
    den, acc = xp.sum(p, axis=-1), p @ vc
    done = []
    x = x[..., 1:, :, :]
    for lag in range(1, n):
        done.append(acc[..., :1, :, :] / den[..., :1, :, None])
        m, den, acc = m[..., 1:, :], den[..., 1:, :], acc[..., 1:, :, :]
        s = logits(x @ xp.matrix_transpose(k_end[..., : n - lag, :, :]), lag)
        m_new = xp.maximum(m, xp.max(s, axis=-1))
        alpha = xp.exp(m - m_new)
        p = xp.exp(s - m_new[..., None])
        den = alpha * den + xp.sum(p, axis=-1)
        acc = alpha[..., None] * acc + p @ vc[..., : n - lag, :, :]
        m = m_new
        x = _carry(xp, x[..., 1:, :, :], wc[..., 1 : n - lag, :, :], lw[..., 1 : n - lag, :, :])
    done.append(acc / den[..., None])
    o = xp.concat(done, axis=-3)
    return xp.reshape(o, (*o.shape[:-3], n * c, o.shape[-1]))[..., :t, :]
