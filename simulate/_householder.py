r"""PaTH transport at chunked speed: route scores and attention outputs of Householder steps
(paper [B], claim AT18), by a compact-WY / UT-transform recurrence over chunks of C steps and
dense D × D transports across superblocks of G chunks.

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
(I + B tril(G, −1)) L = B with G = W Wᵀ. No division by β (β = 0 is allowed). L is never
formed: its two products L tril(W Kᵀ, −1) and L W come from one batched solve over all chunks,
(I + A) [L tril(W Kᵀ, −1) | L W] = B [tril(W Kᵀ, −1) | W] with A = B tril(G, −1) (forward
substitution where a triangular solve exists, torch and NumPy through SciPy; LU otherwise; the
system is well conditioned, see Rounding). As the diagonal blocks of the inverse of a
block-triangular matrix are the inverses of its diagonal blocks, the product of any sub-range
a′ … e′ of the chunk is I − Wᵀ L W restricted to those rows and columns. Hence, with local
indices and masks tril (s ≤ i) and tril(·, −1) (r > j):

.. math::

    S^{\text{intra}} = Q K^\top - \mathrm{tril}(Q W^\top)\, L\, \mathrm{tril}(W K^\top, -1),
    \qquad \tilde Q = Q - \mathrm{tril}(Q W^\top)\, L\, W,
    \qquad \hat K = K - \mathrm{tril}(W K^\top, -1)^\top L^\top W,

where row i of Q̃ is q_iᵀ H_i ⋯ H_a (the query carried to the chunk start) and row j of K̂ is
(H_e ⋯ H_{j+1} k_j)ᵀ (the key carried to the chunk end); in S^intra the sum runs over
j < r ≤ s ≤ i, exactly the steps of the route. The chunk transport P_m = I − W_mᵀ L_m W_m is
formed as a dense D × D matrix (C·D² multiply-adds).

**Inter-chunk terms (queries carried across chunk boundaries).** For a query in chunk c and a
key in chunk c − ℓ, ℓ ≥ 1, P_{j→i} = (H_i ⋯ H_{cC}) P_{c−1} ⋯ P_{c−ℓ+1} (H_{(c−ℓ+1)C−1} ⋯
H_{j+1}), so

.. math::

    S_{c,\,c-\ell} = X^{(\ell)}_c \hat K_{c-\ell}^\top, \qquad X^{(1)}_c = \tilde Q_c, \qquad
    X^{(\ell+1)}_c = X^{(\ell)}_c P_{c-\ell},

both from one product X^{(ℓ)}_c [K̂_{c−ℓ}ᵀ | P_{c−ℓ}] (C × (C + D) columns). All query chunks
advance one lag at a time together (one batched product per lag).

**Superblocks.** Chunks are grouped G at a time into superblocks of S = G·C steps (G ≤ 8 chunks,
S ≈ 256 steps, balanced so that the padding stays below one superblock). Within each superblock
the lags ℓ < G run as above (batched over all superblocks); the same loop leaves every query
carried to its superblock's first step (Q̄, the last carry of each chunk), and the suffix
products F_c = P_{e} ⋯ P_{c+1} of the superblock carry every key to its last step
(K̄_c = K̂_c F_cᵀ) and give the superblock transport Π = F_first P_first (D × D). Across
superblocks the same recurrence runs with S × S blocks:
S_{A, A−λ} = X̄^{(λ)}_A K̄_{A−λ}ᵀ, X̄^{(λ+1)}_A = X̄^{(λ)}_A Π_{A−λ}, from one product
X̄ [K̄ᵀ | Π] of S × (S + D) columns. :func:`path_attention` folds each block into an online
(max-shifted, base-2) softmax with the values, so it never forms a T × T array;
:func:`householder_route_scores` writes every block once into the preallocated T × T result;
:func:`path_score_rows` writes the rows start … m − 1 only (the query-chunked evaluation of the
training code's ``Path`` scheme), without validation, in the inputs' dtype, differentiable.

**Cost** (N = ⌈T/C⌉ chunks, M = ⌈N/G⌉ superblocks, T padded to M·S with identity steps β = 0).
UT transform and local terms O(T·C·(C + D)); chunk transports and their suffix products
O(T·D² + N·D³); within superblocks ≈ T·S·D·(C + D)/(2C); across superblocks
≈ T²·D·(S + D)/(2S) multiply-adds (1.25·T²·D/2 at S = 256, D = 64, against 3·T²·D/2 for the
factored carry X − (X Wᵀ)(L W) of chunk pairs). Sequential depth G + M lags (+ the C steps of
the batched solve), against T for the per-query sweep. Memory: the scores return T × T (written
in place, no second T × T array); :func:`path_attention` needs O(T·(S + D + D_v)) beyond its
inputs (the bias, when given, is the caller's T × T).

**Rounding.** Expanding H_s X H_r with X = H_{s−1} ⋯ H_{r+1} shows that the only w_s w_rᵀ term
is β_s β_r (w_sᵀ X w_r) w_s w_rᵀ, so L_ss = β_s and L_sr = −β_s β_r w_sᵀ H_{s−1} ⋯ H_{r+1} w_r
(s > r): as ‖H‖₂ ≤ 1, |L_sr| ≤ β_s β_r ≤ 4 and |((I + A)⁻¹)_sr| ≤ 2; with |A_sr| ≤ 2 the
triangular system has κ∞ ≤ (2C − 1)² and is well conditioned for every input (parallel w and
D < C included). Along any route each of the
≤ N chunk transports enters once, through one D-term product (a carry X P, a suffix product
F P or a superblock carry X̄ Π) of factors of norm ≤ 1, each built from D-term and C-term sums
with O(1) coefficients: error ≲ (N + 1)·(2D + 4C²)·u·‖q‖‖k‖ to first order (the bound AT18
uses), about 1e-15 relative in practice. The softmax of :func:`path_attention` works in base 2
(σ·log₂e folded into the queries, exp2 where the backend has it): the same rounding as exp.
"""

from __future__ import annotations

import math
import numbers
import sys
from typing import NamedTuple

import array_api_compat as aac
import numpy as np
import scipy.linalg.blas

from posflow.simulate._arrays import Place, as_float, check_int, namespace_of
from posflow.simulate._routes import check_route
from posflow.simulate.backend import backend_of

__all__ = ["householder_route_scores", "path_attention", "path_score_rows"]

_LOG2E = 1.0 / math.log(2.0)
_SPAN = 256  # target superblock length S = G·C
_GROUP = 8  # at most G chunks per superblock


def _as_finite(at: Place, x, name: str):
    """``as_float(at, x, name)`` in one pass: a finite Σ x proves every entry finite (NaN and
    ±inf propagate); only a non-finite sum (non-finite entries, or overflow) runs the full test.
    NumPy's overflow warning for such a sum is silenced: finite entries are valid input.
    """
    x = as_float(at, x, name, finite=False)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflowing sum is a question
        total = at.xp.sum(x)
    if not bool(at.xp.isfinite(total)) and not bool(at.xp.all(at.xp.isfinite(x))):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def _check(q, k, w, beta, route: str, chunk: int, v=None, bias=None):
    """Validated float64 arrays on one namespace: (at, q, k, w, β (…, T), v, shift, chunk).

    The namespace and device are those of all array arguments, the values and the bias too
    (one argument off NumPy takes the call there); the bias is checked by the caller."""
    shift = check_route(route)
    chunk = check_int(chunk, "chunk", 1)
    at = namespace_of(q, k, w, beta, *(x for x in (v, bias) if x is not None))
    xp = at.xp
    q, k, w = (_as_finite(at, x, name) for x, name in ((q, "q"), (k, "k"), (w, "w")))
    if q.ndim < 2 or min(q.shape) < 1:
        raise ValueError(
            f"q must have shape (..., T, D) with every dimension >= 1; got {tuple(q.shape)}"
        )
    if tuple(k.shape) != tuple(q.shape) or tuple(w.shape) != tuple(q.shape):
        raise ValueError(
            f"q, k and w must have the same shape (..., T, D); got {tuple(q.shape)}, "
            f"{tuple(k.shape)}, {tuple(w.shape)}"
        )
    wd = w.detach() if hasattr(w, "detach") else w  # a check, outside any autograd graph
    worst = float(xp.max(xp.abs(xp.sqrt(xp.sum(wd * wd, axis=-1)) - 1.0)))
    if worst > 1e-12:
        raise ValueError(
            f"w rows must be unit vectors (tolerance 1e-12); worst |‖w‖ − 1| = {worst}"
        )
    beta = _as_finite(at, beta, "beta")
    try:
        beta = xp.broadcast_to(beta, tuple(q.shape[:-1]))
    except (ValueError, RuntimeError) as exc:
        raise ValueError(
            f"beta must be a scalar or broadcast to {tuple(q.shape[:-1])}; got {tuple(beta.shape)}"
        ) from exc
    if not bool(xp.all((beta >= 0.0) & (beta <= 2.0))):
        bd = beta.detach() if hasattr(beta, "detach") else beta
        raise ValueError(
            f"beta must lie in [0, 2]; got values in [{float(xp.min(bd))}, {float(xp.max(bd))}]"
        )
    if v is not None:
        v = _as_finite(at, v, "v")
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


def _unit_lower_solve(xp, a, b):
    """(I + A)⁻¹ B for strictly lower-triangular A (..., C, C) and B (..., C, K), by one solve
    per matrix: forward substitution on torch (batched) and on NumPy (BLAS ``trsm``, see
    below), LU elsewhere (the array API has no triangular solve; LU costs 2–5× more). Forward
    substitution keeps B's exact zeros: rows above a column's first nonzero entry stay 0.

    On NumPy ``b`` is overwritten with the result (callers pass a fresh array): a row-major
    X = (I + A)⁻¹ B is the column-major Xᵀ = Bᵀ (I + A)⁻ᵀ, which BLAS solves from the right in
    place on the same memory, with (I + A)ᵀ read from A's memory as a unit upper-triangular
    matrix. No copy and no new array per matrix: SciPy's batched ``solve_triangular`` copies
    each right-hand side into column order and returns a new array per matrix (0.45 against
    0.24 ms for 16 chunks of C = 64 with K = 128 columns)."""
    if aac.is_torch_namespace(xp):
        return xp.linalg.solve_triangular(a, b, upper=False, unitriangular=True)
    if isinstance(a, np.ndarray):
        b = np.ascontiguousarray(b)  # (a fresh array of the caller's is already)
        c = a.shape[-1]
        mats = np.ascontiguousarray(a, dtype=b.dtype).reshape(-1, c, c)
        trsm = scipy.linalg.blas.get_blas_funcs("trsm", (mats, b))
        for m, r in zip(mats, b.reshape(-1, *b.shape[-2:]), strict=True):  # views of b
            trsm(1.0, m.T, r.T, side=1, lower=0, trans_a=0, diag=1, overwrite_b=1)
        return b
    eye = xp.eye(a.shape[-1], dtype=a.dtype, device=aac.device(a))
    return xp.linalg.solve(eye + a, b)


def _ut_products(xp, w, beta, k):
    """L tril(W Kᵀ, −1) and L W of the UT transform (L of the module docstring, never formed):
    w, k (..., N, C, D), β (..., N, C) → (..., N, C, C) and (..., N, C, D).

    One solve (I + A) X = B [tril(W Kᵀ, −1) | W], A = B tril(W Wᵀ, −1), B = diag β.
    """
    c = w.shape[-2]
    tr = xp.matrix_transpose
    a = beta[..., :, None] * xp.tril(w @ tr(w), k=-1)
    rhs = beta[..., :, None] * xp.concat([xp.tril(w @ tr(k), k=-1), w], axis=-1)
    x = _unit_lower_solve(xp, a, rhs)
    return x[..., :c], x[..., c:]


def _transport(xp, w, lw):
    """The chunk transports P = I − Wᵀ (L W), (..., D, D), from w (..., C, D) and L W."""
    eye = xp.eye(w.shape[-1], dtype=w.dtype, device=aac.device(w))
    return eye - xp.matrix_transpose(w) @ lw


def _exp2(xp, x):
    """2^x: ``exp2`` where the namespace has it (NumPy, torch, CuPy), else exp(x·ln 2)."""
    f = getattr(xp, "exp2", None)
    return f(x) if f is not None else xp.exp(x * math.log(2.0))


def _shifted_exp2(xp, z, shift):
    """2^(z − shift[..., None]) for logits ``z`` that nothing reads again, with as few new
    T-sized arrays as the backend allows: NumPy and torch shift and exponentiate in place
    (``out=``; ``sub_``, ``exp2_``), other backends and torch under autograd (whose saved
    tensors must not change) form new arrays. On NumPy the same bits on every route; on torch
    ``exp2_`` on a strided view takes another code path than on a contiguous array, so the
    last bit may differ from the new-array route (within exp2's own rounding: outputs within
    2.5e-16 relative, 92 of 432 compared cases not bitwise equal), for 5 % less time at
    T = 4096."""
    if isinstance(z, np.ndarray):
        z -= shift[..., None]
        return np.exp2(z, out=z)
    if _eager_torch(z, shift) is not None:
        return z.sub_(shift[..., None]).exp2_()
    p = z - shift[..., None]  # a new array: in place from here on (torch under autograd too)
    return p.exp2_() if hasattr(p, "exp2_") else _exp2(xp, p)


def _product_into(a, b, out):
    """``a @ b`` written into ``out`` (a preallocated array of the product's shape) on NumPy,
    and on torch outside autograd, so that a loop reuses its arrays instead of allocating one
    per step; a new array elsewhere (the array API has no ``out=``) and when ``out`` is None.
    The same values."""
    if out is None:
        return a @ b
    if isinstance(out, np.ndarray):
        return np.matmul(a, b, out=out)
    torch = _eager_torch(out, a, b)
    return a @ b if torch is None else torch.matmul(a, b, out=out)


def _work_array(xp, shape, like):
    """A new uninitialised array of ``shape`` with the dtype and device of ``like``, for work
    that stays inside one call.

    On torch on the CPU outside autograd the memory is NumPy's, viewed as a tensor
    (``torch.from_numpy``, no copy): NumPy asks the kernel for transparent huge pages for
    arrays of 4 MiB and more, torch's CPU allocator does not (unless ``THP_MEM_ALLOC_ENABLE``
    is set), so a fresh 10 MiB work array costs torch 2,560 page faults and NumPy 5
    (path_attention at T = 4096, the first calls of a process, ``getrusage``: 11,600 faults a
    call on torch and 8,200 on NumPy before, 9,500 and 7,400 with these arrays and the in-place
    value sums). Everywhere else ``xp.empty``.
    """
    torch = _eager_torch(like)
    if torch is not None and like.device.type == "cpu":
        dtype = torch.empty((), dtype=like.dtype).numpy().dtype
        return torch.from_numpy(np.empty(shape, dtype=dtype))
    return xp.empty(shape, dtype=like.dtype, device=aac.device(like))


def _rescaled_plus_product(acc, alpha, a, b, buf):
    """``alpha * acc + a @ b`` (the online softmax's running value sums rescaled to a new
    maximum plus a block's): in place into ``acc``, the product into ``buf`` (a preallocated
    array of its shape), on NumPy and on torch outside autograd; new arrays elsewhere and when
    ``buf`` is None (autograd keeps ``acc`` for the gradient of ``alpha``). The same operations
    on the same operands, so the same values, bit for bit, on every route."""
    if buf is None:
        return alpha * acc + a @ b
    if isinstance(acc, np.ndarray):
        acc *= alpha
        acc += np.matmul(a, b, out=buf)
        return acc
    torch = _eager_torch(acc, alpha, a, b)
    if torch is None:
        return alpha * acc + a @ b
    return acc.mul_(alpha).add_(torch.matmul(a, b, out=buf))


def _eager_torch(*arrays):
    """The torch module when the first array is a torch tensor and none of them requires a
    gradient (in-place writes and ``out=`` are then allowed: no saved tensor can change), else
    None. The others may be of any kind (a NumPy bias, None): only tensors require gradients."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(arrays[0], torch.Tensor):
        return None
    if torch.is_grad_enabled() and any(getattr(a, "requires_grad", False) for a in arrays):
        return None
    return torch


def _layout(t: int, chunk: int) -> tuple[int, int, int]:
    """(C, G, M): chunk length, chunks per superblock and superblocks; M·G·C ≥ T > (M − 1)·G·C.

    C = min(chunk, T); G ≤ 8 chunks with G·C ≈ 256, balanced over the N = ⌈T/C⌉ chunks so that
    fewer than G·C padded steps are added.
    """
    c = min(chunk, t)
    n = -(-t // c)
    per = max(1, min(_GROUP, -(-_SPAN // c)))
    g = -(-n // -(-n // per))
    return c, g, -(-n // g)


class _Route(NamedTuple):
    """The pieces of the route scores, per superblock of S steps (M superblocks)."""

    span: int  # S = G·C
    m: int  # M
    intra: object  # (..., M, S, S): scores within each superblock (entries j > i: the fill)
    q_start: object  # (..., M, S, D): queries carried to their superblock's first step
    k_end: object  # (..., M, S, D): keys carried to their superblock's last step
    hop: object  # (..., M, D, D): Π, the product of all steps of each superblock


def _route(xp, q, k, w, beta, shift: int, chunk: int, fill: float) -> _Route:
    """Chunk and superblock pieces of the route scores (no validation; keeps the dtype).

    q, k, w (..., T, D); β (..., T). Inside each superblock: the UT transform, the local terms
    and the lag loop over its G chunks (fused carry X [K̂ᵀ | P]), entries j > i set to ``fill``;
    then the queries carried to the superblock start, the keys carried to its end and its
    transport Π (None when M = 1).
    """
    t, d = q.shape[-2], q.shape[-1]
    lead = tuple(q.shape[:-2])
    dev = aac.device(q)
    if shift == 0:  # from_source: H'_t = H_{t−1}, H'_0 = I
        w = xp.concat([xp.zeros_like(w[..., :1, :]), w[..., :-1, :]], axis=-2)
        beta = xp.concat([xp.zeros_like(beta[..., :1]), beta[..., :-1]], axis=-1)
    c, g, m = _layout(t, chunk)
    span = g * c
    pad = m * span - t
    qc, kc, wc = (
        xp.reshape(_pad_rows(xp, x, pad, -2), (*lead, m, g, c, d)) for x in (q, k, w)
    )
    bc = xp.reshape(_pad_rows(xp, beta, pad, -1), (*lead, m, g, c))
    tr = xp.matrix_transpose
    lwk, lw = _ut_products(xp, wc, bc, kc)  # L tril(W Kᵀ, −1), L W
    qw = xp.tril(qc @ tr(wc))
    pos = xp.arange(c, device=dev)
    intra = xp.where(pos[None, :] <= pos[:, None], qc @ tr(kc) - qw @ lwk, fill)  # M, G, C, C
    x = qc - qw @ lw  # Q̃: queries at their chunk's first step
    k_hat = kc - tr(lwk) @ wc  # K̂: keys at their chunk's last step
    eye = xp.eye(d, dtype=q.dtype, device=dev)
    hops = _transport(xp, wc, lw)  # P = I − Wᵀ L W per chunk, (..., M, G, D, D)
    if g == 1:
        blocks = intra[..., 0, :, :]
        starts = [x[..., 0, :, :]]
    else:
        # the lag loop runs chunk-major, (..., G, M, ·, ·): it slices only the leading chunk
        # axis, so that each product's batch stays one strided run (torch copies it otherwise)
        nl = len(lead)
        axes = (*range(nl), nl + 1, nl, nl + 2, nl + 3)
        kp = xp.concat([tr(xp.permute_dims(k_hat, axes)), xp.permute_dims(hops, axes)], axis=-1)
        x = xp.reshape(xp.reshape(xp.permute_dims(x, axes), (-1,)), (*lead, g, m, c, d))
        blocks = xp.full((*lead, m, g, c, g, c), fill, dtype=q.dtype, device=dev)
        for i in range(g):
            blocks[..., i, :, i, :] = intra[..., i, :, :]
        starts = [x[..., 0, :, :, :]]
        x = x[..., 1:, :, :, :]
        for lag in range(1, g):
            y = x @ kp[..., : g - lag, :, :, :]  # S(i + lag, i) | X carried one chunk back
            for i in range(g - lag):
                blocks[..., lag + i, :, i, :] = y[..., i, :, :, :c]
            starts.append(y[..., 0, :, :, c:])  # chunk `lag` has reached the superblock start
            x = y[..., 1:, :, :, c:]
        blocks = xp.reshape(blocks, (*lead, m, span, span))
    if m == 1:
        return _Route(span, 1, blocks, None, None, None)
    # suffix products F_i = P_{G−1} ⋯ P_{i+1} carry the keys to the superblock end
    f = [xp.broadcast_to(eye, (*hops.shape[:-3], d, d))]
    for i in range(g - 1, 0, -1):
        f.append(f[-1] @ hops[..., i, :, :])
    hop = f[-1] @ hops[..., 0, :, :]
    k_end = k_hat @ tr(xp.stack(f[::-1], axis=-3))
    q_start = xp.stack(starts, axis=-3)
    return _Route(
        span,
        m,
        blocks,
        xp.reshape(q_start, (*lead, m, span, d)),
        xp.reshape(k_end, (*lead, m, span, d)),
        hop,
    )


def _put(out, rows: slice, cols: slice, block) -> None:
    """``out[..., rows, cols] = block``: the only writes into a score result."""
    out[..., rows, cols] = block


def _fill_rows(xp, r: _Route, out, row0: int, fill: float) -> None:
    """Scores of query rows row0 … T − 1 into ``out`` (..., T − row0, T), each entry written once.

    Row band by row band (the rows of superblock A ≥ ⌊row0/S⌋): its diagonal block (inside it
    the route already holds ``fill`` for j > i), ``fill`` right of it in one slice, then the
    blocks S_{A,B}, B = A − 1 … 0, with the band's queries carried back one superblock at a
    time (fused carry X̄ [K̄ᵀ | Π], the same products as a lag-by-lag loop batched over the
    bands). So every band of ``out`` is written completely while it is fresh in cache after its
    first touch, instead of being revisited once per lag.

    On NumPy the blocks S_{A,B} of a full band (S rows) are not formed apart and copied: the
    product X̄ K̄ᵀ writes into its place in ``out`` (``np.matmul(..., out=)``, a strided view
    that BLAS writes directly), and X̄ Π carries the band on: the same dot products over D as
    the fused product, split by columns (the same bits in all 1,008 cases compared).
    The array API has no ``out=``: other backends, and the partial bands (first and last),
    keep the fused product and :func:`_put`.
    """
    t, s = out.shape[-1], r.span
    numpy = isinstance(out, np.ndarray)
    kp = kt = None
    if r.m > 1:
        kt = xp.matrix_transpose(r.k_end)
        kp = xp.concat([kt, r.hop], axis=-1)
    for a in range(row0 // s, r.m):
        lo, hi = max(a * s, row0), min((a + 1) * s, t)
        ro, rb = slice(lo - row0, hi - row0), slice(lo - a * s, hi - a * s)
        _put(out, ro, slice(a * s, hi), r.intra[..., a, rb, : hi - a * s])
        if hi < t:
            _put(out, ro, slice(hi, t), fill)
        if numpy and hi - lo == s:
            x = r.q_start[..., a, :, :] if a else None
            for b in range(a - 1, -1, -1):
                np.matmul(x, kt[..., b, :, :], out=out[..., ro, b * s : (b + 1) * s])
                x = x @ r.hop[..., b, :, :] if b else None
            continue
        # a batch of one superblock, (..., 1, S, ·): each product runs as one item of the
        # batched product a lag loop would make (torch picks its kernel per batched call)
        x = r.q_start[..., a : a + 1, :, :] if a else None  # superblock 0: no blocks left of it
        for b in range(a - 1, -1, -1):
            y = x @ kp[..., b : b + 1, :, :]  # S(A, B) | X̄ carried to superblock B's start
            _put(out, ro, slice(b * s, (b + 1) * s), y[..., 0, rb, :s])
            x = y[..., s:]


def householder_route_scores(q, k, w, beta, route: str = "path", chunk: int = 64, out=None):
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
    out : array, shape (..., T, T), optional
        Where to write the result: a writable float64 array of the inputs' backend and device
        (on torch, one that needs no gradient), e.g. one reused across calls. Every entry is
        overwritten; the inputs are read in full before the first write, so ``out`` may even
        share memory with them. By default a new array is allocated.

    Returns
    -------
    s : array, shape (..., T, T)
        Float64 on the inputs' backend (``out`` itself when given); entries above the diagonal
        (j > i) are −inf.

    Cost O(T²·D + T·C·(C + D) + T·D²) flops, sequential depth G + ⌈T/(G·C)⌉ lags; memory the
    T × T result, written in place row band by row band (no second T × T array). A fresh
    result's pages are cleared by the operating system when first written (at T = 4096,
    128 MiB: about a fifth of the call on one core); passing a reused ``out`` saves that.
    Raises ValueError for mismatched shapes, non-unit w (tolerance 1e-12), β outside [0, 2],
    non-finite input, an unknown route, an ``out`` of the wrong shape, device or writability;
    TypeError for a non-integer chunk or an ``out`` that is not a float64 array of the inputs'
    backend.
    """
    at, q, k, w, beta, _, shift, chunk = _check(q, k, w, beta, route, chunk)
    xp = at.xp
    t = q.shape[-2]
    shape = (*q.shape[:-2], t, t)
    if out is None:
        out = xp.empty(shape, dtype=q.dtype, device=at.device)
    else:
        _check_out(at, out, shape)
    _fill_rows(xp, _route(xp, q, k, w, beta, shift, chunk, -math.inf), out, 0, -math.inf)
    return out


def _check_out(at: Place, out, shape: tuple) -> None:
    """``out`` must be a writable float64 array of ``at``'s backend and device, of ``shape``."""
    if backend_of(out) != at.backend:
        raise TypeError(
            f"out must be a float64 array of the inputs' backend ({at.backend}); "
            f"got {type(out).__name__}"
        )
    if out.dtype != at.xp.float64:
        raise TypeError(f"out must have dtype float64; got {out.dtype}")
    if tuple(out.shape) != shape:
        raise ValueError(f"out must have shape {shape}; got {tuple(out.shape)}")
    if at.device is not None and aac.device(out) != at.device:
        raise ValueError(f"out must be on the inputs' device {at.device}; got {aac.device(out)}")
    if isinstance(out, np.ndarray) and not out.flags.writeable:
        raise ValueError("out must be writable")
    if getattr(out, "requires_grad", False):
        raise ValueError("out must not require a gradient (the result is written in place)")


def path_score_rows(q, k, w, beta, start: int = 0, chunk: int = 64):
    r"""Route-``path`` scores of the queries at positions start … m − 1 against keys 0 … m − 1.

    .. math::

        s_{ij} = q_i^\top H_i \cdots H_{j+1} k_j, \qquad H_t = I - \beta_t w_t w_t^\top

    by the chunked algorithm of :func:`householder_route_scores`, for training code (claims
    AT18, AT20): no validation, the inputs' dtype and backend kept, differentiable (torch
    autograd) in q, k, w and β.

    Parameters
    ----------
    q : array, shape (..., c, D)
        Queries at positions start … start + c − 1.
    k, w : array, shape (..., m, D), m = start + c
        Keys and unit step vectors at positions 0 … m − 1.
    beta : array, shape (..., m)
        Step strengths in [0, 2].
    start : int ≥ 0
    chunk : int ≥ 1
        Chunk length C.

    Returns
    -------
    s : array, shape (..., c, m)
        Row r holds position start + r; entries with j > i are 0.

    Cost O(c·m·D + m·(C + S)·D + m·D²), S ≈ 256 the superblock length; memory the result plus
    O(m·(S + D)).
    """
    xp = namespace_of(q, k, w, beta).xp
    rows, m = q.shape[-2], k.shape[-2]
    if start:
        q = xp.concat([xp.zeros((*q.shape[:-2], start, q.shape[-1]), dtype=q.dtype,
                                device=aac.device(q)), q], axis=-2)  # fmt: skip
    out = xp.empty((*q.shape[:-2], rows, m), dtype=q.dtype, device=aac.device(q))
    _fill_rows(xp, _route(xp, q, k, w, beta, 1, chunk, 0.0), out, start, 0.0)
    return out


def _bias_blocks(at: Place, bias, t: int, span: int, m: int, lead):
    """The bias in base-2 units as S × S blocks: lag ℓ ↦ blocks (A, A − ℓ), (..., M − ℓ, S, S).

    Returns None for no bias. Blocks of the last superblock are padded with zeros to S × S.
    """
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
    bias = _LOG2E * bias

    def block(a, b):
        x = bias[..., a * span : min((a + 1) * span, t), b * span : min((b + 1) * span, t)]
        x = _pad_rows(xp, x, span - x.shape[-2], -2)
        return _pad_rows(xp, x, span - x.shape[-1], -1)

    return lambda lag: xp.stack([block(a, a - lag) for a in range(lag, m)], axis=-3)


def path_attention(
    q, k, v, w, beta, route: str = "path", chunk: int = 64, bias=None, scale: float | None = None
):
    r"""PaTH attention outputs o_i = Σ_{j ≤ i} a_ij v_j with a_i = softmax_j(scale·s_ij + b_ij).

    .. math::

        o_i = \sum_{j \le i} \frac{\exp(\sigma s_{ij} + b_{ij})}
              {\sum_{j' \le i} \exp(\sigma s_{ij'} + b_{ij'})}\, v_j,
        \qquad s_{ij} = q_i^\top P_{j\to i} k_j,\quad \sigma = 1/\sqrt{D}

    with the route scores of :func:`householder_route_scores`, folded block by block into an
    online (max-shifted) softmax, so no T × T array is formed (claim AT18, the PaTH scheme of
    AT20).

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
        mask j ≤ i is applied on top. Its backend and device count as the other arguments'.
    scale : float, optional
        σ; 1/√D by default.

    Returns
    -------
    o : array, shape (..., T, D_v)
        Float64 on the inputs' backend.

    Cost O(T²·(D + D_v) + T·C·(C + D) + T·D²) flops, sequential depth G + ⌈T/(G·C)⌉ lags;
    memory O(T·(S + D + D_v)) beyond the inputs, S ≈ 256 the superblock length. Raises
    ValueError for mismatched shapes, non-unit w (tolerance 1e-12), β outside [0, 2],
    non-finite input or scale, an unknown route; TypeError for a non-integer chunk.
    """
    at, q, k, w, beta, v, shift, chunk = _check(q, k, w, beta, route, chunk, v, bias)
    xp = at.xp
    t, d = q.shape[-2], q.shape[-1]
    sigma = 1.0 / math.sqrt(d) if scale is None else scale
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real) or not math.isfinite(sigma):
        raise ValueError(f"scale must be a finite number; got {scale!r}")
    lead = tuple(q.shape[:-2])
    _, g, m = _layout(t, chunk)
    span = g * min(chunk, t)
    bb = _bias_blocks(at, bias, t, span, m, lead)
    # logits in base 2: σ·log₂e·s_ij (+ log₂e·b_ij), and 2^(z − max) for e^(σ s + b − max)
    r = _route(xp, (sigma * _LOG2E) * q, k, w, beta, shift, chunk, -math.inf)
    tr = xp.matrix_transpose
    # values and their running sums transposed, (..., M, D_v, S): the products V̄ᵀ Pᵀ take
    # both operands row-major, which BLAS runs fastest (flattening a transposed view copies it)
    vt = xp.reshape(_pad_rows(xp, v, m * span - t, -2), (*lead, m, span, v.shape[-1]))
    vt = xp.reshape(xp.reshape(tr(vt), (-1,)), (*lead, m, v.shape[-1], span))
    # the logits z are fresh arrays read once (_shifted_exp2 may overwrite them)
    z = r.intra if bb is None else r.intra + bb(0)  # −inf for j > i (the causal mask)
    mx = xp.max(z, axis=-1)
    p = _shifted_exp2(xp, z, mx)
    den, acc = xp.sum(p, axis=-1), vt @ tr(p)
    o = xp.empty((*lead, m, span, v.shape[-1]), dtype=q.dtype, device=at.device)
    if m > 1:
        kp = xp.concat([tr(r.k_end), r.hop], axis=-1)  # (..., M, D, S + D)
        x = r.q_start[..., 1:, :, :]
        # the products of the lags go to two arrays in turn (x, read by a product, is a view
        # of the other one): no new (M − ℓ) × S × (S + D) array per lag where out= exists
        # (NumPy, torch outside autograd: the carries need no gradient, and the value sums
        # none either, which also take the bias's); elsewhere the products form new arrays,
        # and work arrays would only hold memory
        numpy = isinstance(q, np.ndarray)
        ys, buf = [None, None], None
        if numpy or _eager_torch(q, k, w, beta) is not None:
            ys = [_work_array(xp, (*lead, m - 1, span, span + d), q) for _ in range(2)]
        if numpy or _eager_torch(q, k, v, w, beta, bias) is not None:
            buf = _work_array(xp, (*lead, m - 1, v.shape[-1], span), q)  # the value sums
    for lag in range(1, m):
        o[..., lag - 1, :, :] = tr(acc[..., 0, :, :] / den[..., 0, None, :])  # superblock done
        mx, den, acc = mx[..., 1:, :], den[..., 1:, :], acc[..., 1:, :, :]
        # S(A, A − lag) | X̄ carried one superblock back
        out = None if ys[lag % 2] is None else ys[lag % 2][..., : m - lag, :, :]
        y = _product_into(x, kp[..., : m - lag, :, :], out)
        z = y[..., :span] if bb is None else y[..., :span] + bb(lag)  # read only here
        m_new = xp.maximum(mx, xp.max(z, axis=-1))
        alpha = _exp2(xp, mx - m_new)
        p = _shifted_exp2(xp, z, m_new)
        den = alpha * den + xp.sum(p, axis=-1)
        part = None if buf is None else buf[..., : m - lag, :, :]
        acc = _rescaled_plus_product(
            acc, alpha[..., None, :], vt[..., : m - lag, :, :], tr(p), part
        )
        mx = m_new
        x = y[..., 1:, :, span:]
    o[..., m - 1, :, :] = tr(acc[..., 0, :, :] / den[..., 0, None, :])
    return xp.reshape(o, (*lead, m * span, v.shape[-1]))[..., :t, :]
