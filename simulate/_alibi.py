"""ALiBi + diagonal-content causal kernels (claims PB8, PB9, PB14); re-exported by
:mod:`posflow.simulate.kernels`.

For head h with slope m_h, content c_h and weight ω_h,

.. math::
    A^h_{ij} = \\frac{\\exp(c_h [i=j] - m_h (i-j))}{Z^h_i},\\qquad
    Z^h_i = e^{c_h} + \\sum_{k=1}^{i} e^{-m_h k},\\qquad A = \\sum_h \\omega_h A^h .

Every table entry is a ratio of terms of Z evaluated from factors in [0, 1] (an exponential
e^{±(c+m)} that overflows is never multiplied into a result), so the tables are exact to a few
ulp and finite for every finite content and slope (±1e308 included).

* m ≥ 0 (positive heads): with E_i = Σ_{k=0}^{i-1} e^{-m k} = expm1(−m i)/expm1(−m) ∈ [1, i]
  and ℓ = c + m, Z_i = e^{-m}(e^{ℓ} + E_i), so

  w_h(i) = e^{-m}/Z_i = 1/(e^{ℓ} + E_i),   A^h_ii = e^{ℓ}/(e^{ℓ} + E_i),

  evaluated as Q/(1 + Q E_i) and 1/(1 + Q E_i) where Q E_i = e^{ℓ − log E_i} ≤ 1 (Q = e^{−ℓ}),
  else as R/(1 + P R) and P R/(1 + P R) with P = e^{ℓ}, R = 1/E_i (``_alibi_nb.content_tables``).
  E and R depend on the slopes only and P, Q on one number per head and layer, so the tables
  of many layers (:func:`alibi_kernels`) cost one division per entry and share everything
  slope-dependent. Off the diagonal A^h_ij = w_h(i) e^{-m (i-j-1)} (j < i): the suffix
  recurrence G(j) = p_j w(j) + e^{-m} G(j+1), (pA^h)_j = p_j A^h_jj + G(j+1).
* m = −a < 0 (negative heads), with g_i = log Σ_{k=0}^{i-1} e^{-a k} ∈ [0, log i] and
  ℓ = c − a i: e^{a i}/Z_i = exp(−logaddexp(ℓ, g_i)), A^h_ij = e^{a i}/Z_i · e^{-a j}: a
  reversed cumulative sum per head; A^h_ii = exp(−logaddexp(0, g_i − ℓ)).

The positive heads run through the numba recurrence (``posflow.simulate._alibi_nb``) on the
NumPy backend — it is faster there than the array-API scan (``benchmarks/backend.py``) — and
through the chunked scan of :mod:`posflow.simulate._scan` on every other backend; the negative
heads and everything else are the same array-API code on every backend.
"""

from __future__ import annotations

import functools

import numpy as np

from posflow.simulate import _scan
from posflow.simulate._alibi_nb import alibi_step, content_tables, rows_out
from posflow.simulate._kernel import Kernel, check_n
from posflow.simulate._validate import as_vector, ensure_fits, ensure_memory
from posflow.simulate.backend import host, namespace, resolve_backend

__all__ = ["AlibiKernel", "alibi_kernels", "alibi_slopes"]

# Beyond distance j_sat = _SAT / m every row quantity of a head of slope m > 0 is constant to
# machine precision (it changes by e^{-m j} < e^{-45} relative), so tables stop there.
_SAT = 45.0


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Textbook ALiBi slopes ``m_h = 2^{-8(h+1)/H}``, h = 0..H-1, shape (H,) (claim PB14)."""
    num_heads = check_n(num_heads, "num_heads")
    h = np.arange(num_heads, dtype=np.float64)
    return 2.0 ** (-8.0 * (h + 1.0) / num_heads)


def _log_partial(a: np.ndarray, i: np.ndarray) -> np.ndarray:
    """g[r, h] = log Σ_{k=0}^{i_r - 1} e^{-a_h k} for a ≥ 0 and i_r ≥ 1, shape (rows, H); in
    [0, log i_r]: log(1 − e^{-a i}) − log(1 − e^{-a}) for a > 0, log i for a = 0."""
    a = np.asarray(a, dtype=np.float64)[None, :]
    i = np.asarray(i, dtype=np.float64)[:, None]
    safe = np.where(a > 0, a, 1.0)
    with np.errstate(over="ignore", under="ignore"):
        core = np.log(-np.expm1(-safe * i)) - np.log(-np.expm1(-safe))
    if (a > 0).all():
        return core
    return np.where(a > 0, core, np.log(np.broadcast_to(i, core.shape)))


def _partial_sums(a: np.ndarray, i: np.ndarray) -> np.ndarray:
    """E[r, h] = Σ_{k=0}^{i_r - 1} e^{-a_h k} ∈ [1, i_r] for a ≥ 0, i_r ≥ 1, shape (rows, H).

    expm1(−a i)/expm1(−a) (each factor within 1 ulp, so E within 1.5 ulp); where a·i_max <
    2^-60 the sum is i to within 2^-61 relative and is returned as i (a subnormal a·i would
    lose digits)."""
    a = np.asarray(a, dtype=np.float64)[None, :]
    i = np.asarray(i, dtype=np.float64)[:, None]
    flat = a < 2.0**-60 / i.max(initial=1.0)
    safe = np.where(flat, 1.0, a)
    with np.errstate(over="ignore", under="ignore"):
        core = np.expm1(-safe * i) / np.expm1(-safe)
    return np.where(flat, i, core)


def _heads(slopes, content, head_weights) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validated (slopes (H,), content (H,), normalised head weights (H,))."""
    m = as_vector(host(slopes), "slopes")
    c = as_vector(host(content), "content")
    for name, v in (("slopes", m), ("content", c)):
        if v.size == 0:
            raise ValueError(f"{name} must have at least one value (one per head); got none")
    if m.size != c.size and 1 not in (m.size, c.size):
        raise ValueError(
            f"slopes and content must be scalars or have one value per head; "
            f"got {m.size} slopes and {c.size} content values"
        )
    H = max(m.size, c.size)
    m, c = np.broadcast_to(m, (H,)).copy(), np.broadcast_to(c, (H,)).copy()
    return m, c, _weights(head_weights, H)


def _weights(head_weights, H: int) -> np.ndarray:
    if head_weights is None:
        return np.full(H, 1.0 / H)
    w = as_vector(host(head_weights), "head_weights", size=H)
    if (w < 0).any():
        raise ValueError("head_weights must be nonnegative")
    total = w.sum()
    if not abs(total - 1.0) <= _WEIGHT_ATOL:
        raise ValueError(
            f"head_weights must sum to 1 (within {_WEIGHT_ATOL:g}); got a sum of {float(total)!r}"
        )
    return w / total  # removes the rounding of the sum


# Head weights must sum to 1 within the row tolerance of dense kernels: the rounding of weights
# computed in float64 (H u ≈ 1e-14 for H ≤ 100) passes; weights in other units are refused.
_WEIGHT_ATOL = 1e-9


def _ensure_tables_fit(n: int, m: np.ndarray, layers: int, what: str) -> None:
    """Refuse (naming n) tables that would not fit in memory, before allocating them: the
    slope tables E, R (nt, H+), per layer the weights (nt, H+), the diagonal (n) and its row
    pieces, and for negative heads about six (n, H−) arrays per layer."""
    nt = _table_rows(n, m)
    pos = int(np.count_nonzero(m >= 0))
    neg = m.size - pos
    floats = 2.0 * nt * pos + layers * (nt * (pos + 1.0) + 2.0 * n + 6.0 * n * neg)
    ensure_memory(8.0 * floats, f"n = {n}", f"{what} (its tables)")


def _table_rows(n: int, m: np.ndarray) -> int:
    """Rows of the tables: n, or 45/min m + 2 when every head is stationary before row n − 1."""
    if (m <= _SAT / n).any():  # some head is not yet stationary at row n - 1
        return n
    return int(min(n, np.ceil(_SAT / m.min()) + 2))


class _SlopeTables:
    """Everything of the tables that depends on (n, slopes) only, shared by every layer.

    ``nt`` table rows; ``pos``/``neg`` head indices; for the positive heads E and R = 1/E,
    shape (nt − 1, H+) (rows 1..nt−1) and r = e^{-m}; for the negative heads g, shape
    (n − 1, H−)."""

    def __init__(self, n: int, m: np.ndarray):
        self.n, self.m = n, m
        self.nt = _table_rows(n, m)
        self.pos = np.flatnonzero(m >= 0)
        self.neg = np.flatnonzero(m < 0)
        rows = np.arange(1, self.nt)
        self.E = np.ascontiguousarray(_partial_sums(m[self.pos], rows))
        self.R = 1.0 / self.E
        self.r = np.exp(-m[self.pos])
        self.g = _log_partial(-m[self.neg], rows) if self.neg.size else None


def _layer_tables(st: _SlopeTables, C: np.ndarray, hw: np.ndarray):
    """Tables of L layers at once from content C (L, H) and head weights hw (H,).

    Returns (diag (L, n), w_pos (L, nt, H+), w_neg (L, n, H−) or None); row 0 of the weights
    is 0 (row 0 draws only from itself)."""
    L, n, nt = C.shape[0], st.n, st.nt
    pos, neg = st.pos, st.neg
    w_pos = np.empty((L, nt, pos.size))
    w_pos[:, 0, :] = 0.0
    d = np.empty((L, nt - 1))
    with np.errstate(over="ignore", under="ignore"):  # ℓ, e^{±ℓ} = ±inf or 0 are exact here
        lead = C[:, pos] + st.m[pos]  # ℓ = c + m
        P, Q = np.exp(lead), np.exp(-lead)
    content_tables(st.E, st.R, P, Q, hw[pos], w_pos, d)
    w_neg = None
    if neg.size:  # nt = n here (a negative head is never stationary)
        ix = np.arange(1, n, dtype=np.float64)
        with np.errstate(over="ignore"):  # ℓ = ±inf is exact here: w = 0 or A_ii = 0
            lead = C[:, None, neg] + st.m[neg] * ix[:, None]  # ℓ = c − a i, (L, n − 1, H−)
        u = st.g - lead
        t = np.log1p(np.exp(-np.abs(u)))
        w_neg = np.zeros((L, n, neg.size))
        w_neg[:, 1:] = np.exp(-(np.maximum(lead, st.g) + t))
        head_diag = np.exp(-(np.maximum(u, 0.0) + t))
        for k, h in enumerate(neg):  # elementwise, in head order: the same bits for any L
            d = d + hw[h] * head_diag[:, :, k]
    diag = np.empty((L, n))
    diag[:, 0] = 1.0
    diag[:, 1:nt] = d
    diag[:, nt:] = d[:, -1:] if nt > 1 else 1.0
    return diag, w_pos, w_neg


class AlibiKernel(Kernel):
    """Head average of causal softmax kernels with ALiBi bias and diagonal content.

    See the module docstring for the formulas; stable (no overflow, no NaN) for any finite
    content and slopes. Memory O(n·H) at most; rows beyond ``45 / min(m)`` are stationary and
    share one table row. Attributes ``slopes``, ``content``, ``head_weights`` (host arrays,
    shape (H,)) and ``num_heads``. :func:`alibi_kernels` builds the kernels of many layers
    with the same slopes in one pass.
    """

    _row_stochastic = True

    def __init__(self, n, slopes, content=0.0, head_weights=None, backend=None, device=None):
        self.n = check_n(n)
        self._place(backend, device, slopes, content, head_weights)
        m, c, w = _heads(slopes, content, head_weights)
        _ensure_tables_fit(self.n, m, 1, "alibi_kernel")
        st = _SlopeTables(self.n, m)
        diag, w_pos, w_neg = _layer_tables(st, c[None, :], w)
        self._install(st, c, w, diag[0], w_pos[0], None if w_neg is None else w_neg[0])

    @classmethod
    def _from_tables(cls, backend, device, st, c, hw, diag, w_pos, w_neg) -> AlibiKernel:
        """A kernel from prebuilt tables (validated inputs; :func:`alibi_kernels`)."""
        self = cls.__new__(cls)
        self.n = st.n
        self.backend, self.device = backend, device
        self.xp = namespace(backend)
        self._install(st, c, hw, diag, w_pos, w_neg)
        return self

    def _install(self, st, c, hw, diag, w_pos, w_neg) -> None:
        self.slopes, self.content, self.head_weights = st.m.copy(), c, hw.copy()
        self.num_heads = st.m.size
        self._pos, self._neg = st.pos, st.neg
        self._use_numba = self.backend == "numpy"  # the CPU fast path of the positive heads
        self._diag = self._put(diag)
        self._w_off = np.ascontiguousarray(w_pos)
        self._r = st.r
        self._hw = hw[st.pos].copy()
        self._neg_tables = []
        for k, h in enumerate(st.neg):
            # Σ_{i>j} p_i e^{a(i-j)}/Z_i = e^{-a j} Σ_{i>j} p_i (e^{a i}/Z_i)
            with np.errstate(over="ignore"):
                scale = hw[h] * np.exp(st.m[h] * np.arange(self.n))
            self._neg_tables.append((self._put(w_neg[:, k]), self._put(scale)))

    def _terms(self, i: np.ndarray, heads=slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """(log w_h(i), A^h_ii) for rows i ≥ 1 and the selected heads, each (rows, H), in log
        space (the formulas of the negative heads for every head; used by :meth:`head_dense`,
        an evaluation independent of the tables of :meth:`apply_left`).

        w_h(i) = e^{-m}/Z_i (m ≥ 0) or e^{a i}/Z_i (m = −a < 0) is exp(−logaddexp(ℓ, g_i)) and
        A^h_ii = exp(−logaddexp(0, g_i − ℓ)) with ℓ = c + m or c − a i; both logaddexp share
        log1p(e^{−|g_i − ℓ|}).
        """
        m, c = self.slopes[heads], self.content[heads]
        g = _log_partial(np.abs(m), i)
        with np.errstate(over="ignore"):  # ℓ = ±inf is exact here: w = 0 or A_ii = 0
            lead = np.where(m >= 0, c + m, c + m * np.asarray(i, dtype=np.float64)[:, None])
        u = g - lead
        t = np.log1p(np.exp(-np.abs(u)))
        return -(np.maximum(lead, g) + t), np.exp(-(np.maximum(u, 0.0) + t))

    @functools.cached_property
    def _scan_tables(self) -> dict:
        """Device tables of the chunked scan (built on first use)."""
        m = self.slopes[self._pos]
        return _scan.scan_tables(self._put, self.n, self._w_off, m, self._hw)

    def head_dense(self, h: int):
        """The kernel of head ``h`` alone, shape (n, n), an array of the kernel's backend."""
        ensure_fits((self.n, self.n), "head_dense()", copies=3)
        xp, n = self.xp, self.n
        m = float(self.slopes[h])
        lw, dg = np.zeros(n), np.ones(n)
        lw[1:], dg[1:] = (x[:, 0] for x in self._terms(np.arange(1, n), [h]))
        ix = xp.arange(n, dtype=xp.float64, device=self.device)
        d = ix[:, None] - ix[None, :]
        with np.errstate(over="ignore", under="ignore"):
            if m >= 0:  # w(i) e^{-m (i-j-1)}
                s = self._put(lw)[:, None] - m * xp.clip(d - 1.0, 0.0, None)
            else:  # (e^{a i}/Z_i) e^{-a j}
                s = self._put(lw)[:, None] + m * ix[None, :]
            off = xp.where(d > 0, xp.exp(xp.clip(s, None, 0.0)), 0.0)
        return off + xp.where(d == 0, self._put(dg)[:, None], 0.0)

    def dense(self):
        ensure_fits((self.n, self.n), "dense()", copies=4)
        A = self.xp.zeros((self.n, self.n), dtype=self.xp.float64, device=self.device)
        for h in range(self.num_heads):
            A = A + float(self.head_weights[h]) * self.head_dense(h)
        return A

    def _positive(self, p, lam: float):
        """(1 − λ) p + λ (p diag + positive heads) for rows p (k, n)."""
        if self._use_numba:
            p = np.ascontiguousarray(p)
            out = rows_out(p)
            alibi_step(p, self._diag, self._w_off, self._r, self._hw, float(lam), out)
            return out
        xp = self.xp
        out = p * self._diag
        if self._pos.size:
            acc = _scan.heads_apply(xp, self._scan_tables, p)
            out = out + xp.concat([acc[:, 1:], xp.zeros_like(acc[:, :1])], axis=1)
        return out if lam == 1.0 else (1.0 - lam) * p + lam * out

    def _negative(self, p):
        """The negative heads' off-diagonal part of p A for rows p (k, n) (zeros if none)."""
        xp = self.xp
        out = None
        for what, scale in self._neg_tables:
            suffix = xp.flip(xp.cumulative_sum(xp.flip(p * what, axis=1), axis=1), axis=1)
            term = scale * xp.concat([suffix[:, 1:], xp.zeros_like(suffix[:, :1])], axis=1)
            out = term if out is None else out + term
        return out

    def _apply(self, p):
        out = self._positive(p, 1.0)
        return out if not self._neg.size else out + self._negative(p)

    def _residual_step(self, p, lam: float):
        if lam == 0.0 or self._neg.size:
            return super()._residual_step(p, lam)
        return self._positive(p, lam)

    def __repr__(self) -> str:
        return f"AlibiKernel(n={self.n}, heads={self.num_heads})"


def _content_matrix(content) -> np.ndarray:
    """content as a finite two-dimensional float64 array (L, H')."""
    if isinstance(content, str | bytes):
        raise TypeError("content must be an array of numbers of shape (L, H); got a string")
    try:
        C = np.asarray(host(content), dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"content must be an array of numbers of shape (L, H); got {content!r}"
        ) from exc
    if C.ndim != 2 or C.shape[1] == 0:
        raise ValueError(
            f"content must have shape (L, H) (one row per layer, one value per head); "
            f"got shape {C.shape}"
        )
    bad = ~np.isfinite(C)
    if bad.any():
        layer, h = np.argwhere(bad)[0]
        raise ValueError(f"content must be finite; got {C[layer, h]} at [{layer}, {h}]")
    return C


def alibi_kernels(n, slopes, content, head_weights=None, *, backend=None, device=None):
    """The ALiBi + content kernels of L layers that share their slopes, built in one pass.

    Layer l is ``alibi_kernel(n, slopes, content[l], head_weights)`` (claims PB8, PB9, PB14),
    bit for bit: the slope-only parts of the tables (the partial sums E_i, their reciprocals,
    the saturation row count) are computed once, and one compiled pass over (L, rows, H)
    writes every layer's weights and diagonal with one division per entry and no per-entry
    exponential (module docstring).

    Parameters
    ----------
    n : int
        Number of tokens, ``n >= 1``.
    slopes : float or array_like, shape (H,)
        ALiBi slopes ``m_h`` shared by every layer (finite; negative slopes allowed).
    content : array_like, shape (L, H) or (L, 1)
        Diagonal content offsets, one row per layer (finite; a column (L, 1) gives every head
        of a layer the same value). L = 0 gives an empty list.
    head_weights : array_like, shape (H,), optional
        Nonnegative head weights shared by every layer, summing to 1 (within 1e-9); uniform by
        default.
    backend, device : str, optional
        As for :func:`posflow.simulate.kernels.alibi_kernel`.

    Returns
    -------
    list of L AlibiKernel
        Cost O(L·min(n, 45/min m)·H) time and memory: the tables of L separate builds without
        their per-layer slope work, exponentials and logarithms.

    Raises ValueError naming ``n``/``slopes``/``content``/``head_weights`` when one is empty,
    not finite or of the wrong shape, for negative head weights or weights that do not sum to
    1, and naming ``n`` when the tables would not fit in memory; TypeError for non-numbers.
    """
    n = check_n(n)
    backend, device = resolve_backend(backend, device, slopes, content, head_weights)
    m = as_vector(host(slopes), "slopes")
    if m.size == 0:
        raise ValueError("slopes must have at least one value (one per head); got none")
    C = _content_matrix(content)
    H = max(m.size, C.shape[1])
    if m.size not in (1, H) or C.shape[1] not in (1, H):
        raise ValueError(
            f"slopes and content must agree on the number of heads H: got {m.size} slopes "
            f"and content of shape {C.shape} (its columns must be 1 or H)"
        )
    m = np.broadcast_to(m, (H,)).copy()
    C = np.ascontiguousarray(np.broadcast_to(C, (C.shape[0], H)))
    hw = _weights(head_weights, H)
    _ensure_tables_fit(n, m, C.shape[0], "alibi_kernels")
    st = _SlopeTables(n, m)
    diag, w_pos, w_neg = _layer_tables(st, C, hw)
    return [
        AlibiKernel._from_tables(
            backend,
            device,
            st,
            C[layer].copy(),
            hw,
            diag[layer],
            w_pos[layer],
            None if w_neg is None else w_neg[layer],
        )
        for layer in range(C.shape[0])
    ]
