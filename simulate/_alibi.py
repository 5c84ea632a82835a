"""ALiBi + diagonal-content causal kernels (claims PB8, PB9, PB14); re-exported by
:mod:`posflow.simulate.kernels`.

For head h with slope m_h, content c_h and weight ω_h,

.. math::
    A^h_{ij} = \\frac{\\exp(c_h [i=j] - m_h (i-j))}{Z^h_i},\\qquad
    Z^h_i = e^{c_h} + \\sum_{k=1}^{i} e^{-m_h k},\\qquad A = \\sum_h \\omega_h A^h .

Every table is a ratio of terms of Z, computed from g_i = log Σ_{k=0}^{i-1} e^{-|m| k} ∈ [0, log i]
(closed geometric sum) with ``logaddexp``, so each is at most 1 and no exponential of c, m or m·i
is formed: exact and finite for every finite content and slope (−1e308 included):

* diagonal     A^h_ii      = 1 / (1 + e^{log S_i − c}),  S_i = Σ_{k=1}^{i} e^{-m k};
* m ≥ 0        w_h(i)      = e^{-m}/Z_i = exp(−logaddexp(c + m, g_i)),
               A^h_ij      = w_h(i) e^{-m (i-j-1)} (j < i): the suffix recurrence
               G(j) = p_j w(j) + e^{-m} G(j+1), (pA^h)_j = p_j A^h_jj + G(j+1);
* m = −a < 0   e^{a i}/Z_i = exp(−logaddexp(c − a i, g_i)),  A^h_ij = e^{a i}/Z_i · e^{-a j}:
               a reversed cumulative sum per head.

The positive heads run through the numba recurrence (``posflow.simulate._alibi_nb``) on the
NumPy backend — it is faster there than the array-API scan (``benchmarks/backend.py``) — and
through the chunked scan of :mod:`posflow.simulate._scan` on every other backend; the negative
heads and everything else are the same array-API code on every backend.
"""

from __future__ import annotations

import functools

import numpy as np

from posflow.simulate import _scan
from posflow.simulate._alibi_nb import alibi_step
from posflow.simulate._kernel import Kernel, check_n
from posflow.simulate._validate import as_vector, ensure_fits
from posflow.simulate.backend import host

__all__ = ["AlibiKernel", "alibi_slopes"]

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


class AlibiKernel(Kernel):
    """Head average of causal softmax kernels with ALiBi bias and diagonal content.

    See the module docstring for the formulas; stable (no overflow, no NaN) for any finite
    content and slopes. Memory O(n·H) at most; rows beyond ``45 / min(m)`` are stationary and
    share one table row. Attributes ``slopes``, ``content``, ``head_weights`` (host arrays,
    shape (H,)) and ``num_heads``.
    """

    def __init__(self, n, slopes, content=0.0, head_weights=None, backend=None, device=None):
        self.n = check_n(n)
        self._place(backend, device, slopes, content, head_weights)
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
        self.slopes = np.broadcast_to(m, (H,)).copy()
        self.content = np.broadcast_to(c, (H,)).copy()
        if head_weights is None:
            w = np.full(H, 1.0 / H)
        else:
            w = as_vector(host(head_weights), "head_weights", size=H)
            if (w < 0).any() or w.sum() <= 0:
                raise ValueError("head_weights must be nonnegative with a positive sum")
            w = w / w.sum()
        self.head_weights = w
        self.num_heads = H
        self._pos = np.flatnonzero(self.slopes >= 0)
        self._neg = np.flatnonzero(self.slopes < 0)
        self._use_numba = self.backend == "numpy"  # the CPU fast path of the positive heads
        self._build_tables()

    def _table_rows(self) -> int:
        m = self.slopes
        if (m <= _SAT / self.n).any():  # some head is not yet stationary at row n - 1
            return self.n
        return int(min(self.n, np.ceil(_SAT / m.min()) + 2))

    def _terms(self, i: np.ndarray, heads=slice(None)) -> tuple[np.ndarray, np.ndarray]:
        """(log w_h(i), A^h_ii) for rows i ≥ 1 and the selected heads, each (rows, H).

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

    def _build_tables(self) -> None:
        nt = self._table_rows()
        log_w, head_diag = self._terms(np.arange(1, nt))  # (nt - 1, H)
        dtab = np.ones(nt)
        dtab[1:] = head_diag @ self.head_weights
        diag = np.empty(self.n)
        diag[:nt], diag[nt:] = dtab, dtab[-1]
        self._diag = self._put(diag)
        w = np.zeros((nt, self.num_heads))  # row 0 draws only from itself: unused, 0
        w[1:] = np.exp(log_w)
        self._w_off = np.ascontiguousarray(w[:, self._pos])
        self._r = np.exp(-self.slopes[self._pos])
        self._hw = self.head_weights[self._pos].copy()
        self._neg_tables = []
        for h in self._neg:  # nt = n here (a negative head is never stationary)
            # Σ_{i>j} p_i e^{a(i-j)}/Z_i = e^{-a j} Σ_{i>j} p_i (e^{a i}/Z_i)
            with np.errstate(over="ignore"):
                scale = self.head_weights[h] * np.exp(self.slopes[h] * np.arange(self.n))
            self._neg_tables.append((self._put(w[:, h]), self._put(scale)))

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
            out = np.empty_like(p)
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
