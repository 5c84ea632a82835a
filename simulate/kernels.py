"""Causal attention kernels: uniform, ALiBi + diagonal content, and measured (dense) ones.

A kernel is a lower-triangular, row-stochastic ``n x n`` matrix ``A`` with ``A[i, j]`` the weight
token ``i`` draws from token ``j`` (claims PB1–PB14). Kernels are objects so that a rollout can
apply them to a row vector without forming the matrix:

* ``K.n`` — the number of tokens;
* ``K.dense()`` — the matrix, shape (n, n) (refused when it would not fit in memory);
* ``K.apply_left(p)`` — the row vector ``p A`` (``p`` of shape (n,) or a batch (k, n));
* ``K.diagonal()`` — ``diag(A)``, shape (n,).

Constructors take ``backend=`` (``"numpy"`` by default, ``"torch"``, ``"cupy"``,
``"array_api_strict"``; inferred from array arguments when None) and ``device=``. A kernel on
another backend keeps its tables on that device, and ``dense``, ``diagonal``, ``apply_left`` and
the rollouts of :mod:`posflow.simulate.rollout` return that backend's arrays (generic code in
``posflow.simulate._kernels_xp``: chunked scans instead of the numba recurrence of the NumPy
backend).
"""

from __future__ import annotations

import numpy as np

from posflow.simulate import _kernels_xp as _kxp
from posflow.simulate._alibi_nb import alibi_step as _alibi_step
from posflow.simulate._monotone import is_stochastically_monotone, monotonicity_deficit
from posflow.simulate._validate import as_vector, ensure_fits

__all__ = [
    "AlibiKernel",
    "DenseKernel",
    "Kernel",
    "UniformKernel",
    "alibi_kernel",
    "alibi_slopes",
    "dense_kernel",
    "is_stochastically_monotone",
    "monotonicity_deficit",
    "uniform_kernel",
]

# Beyond distance j_sat = _SAT / m every row quantity of a head of slope m > 0 is constant to
# machine precision (it changes by e^{-m j} < e^{-45} relative), so tables stop there.
_SAT = 45.0


class Kernel:
    """Base class of causal attention kernels (see the module docstring for the interface)."""

    n: int
    backend: str = "numpy"
    device = None
    _dev: dict | None = None  # tables on the device (backends other than NumPy)

    def _place(self, backend, device, *arrays) -> None:
        """Set ``backend``/``device``; None infers them from the array arguments."""
        from posflow.simulate.backend import resolve_backend

        self.backend, self.device = resolve_backend(backend, device, *arrays)

    def _dev_copy(self, name: str):
        return _kxp.namespace_of(self).asarray(self._dev[name], copy=True)

    def dense(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def diagonal(self) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _apply_left(self, p: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def _residual_step(self, p: np.ndarray, lam: float) -> np.ndarray:
        """``(1 - lam) p + lam p A`` for validated rows ``p`` of shape (k, n)."""
        if self._dev is not None:
            return _kxp.residual_step(self, p, lam)
        if lam == 0.0:
            return p.copy()
        return (1.0 - lam) * p + lam * self._apply_left(p)

    def apply_left(self, p) -> np.ndarray:
        """Row vector(s) times the kernel, ``q = p A``.

        Parameters
        ----------
        p : array_like, shape (n,) or (k, n)

        Returns
        -------
        q : array of the kernel's backend, same shape as ``p``;
            ``q[..., j] = sum_i p[..., i] A[i, j]``.
        """
        if self._dev is not None:
            return _kxp.apply_left(self, p)
        arr = np.asarray(p, dtype=np.float64)
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.n:
            raise ValueError(f"p must have shape (n,) or (k, n) with n={self.n}; got {arr.shape}")
        if not np.isfinite(arr).all():
            raise ValueError("p must be finite")
        out = self._apply_left(np.ascontiguousarray(arr.reshape(-1, self.n)))
        return out.reshape(arr.shape)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n})"


def _check_n(n) -> int:
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"n must be an integer; got {n!r}")
    if n < 1:
        raise ValueError(f"n must be at least 1; got {n}")
    return int(n)


# --------------------------------------------------------------------------------------------
# Uniform (Cesàro) kernel


class UniformKernel(Kernel):
    """Uniform causal attention ``A[i, j] = 1/(i+1)`` for ``j <= i`` (no positional encoding)."""

    def __init__(self, n: int, backend=None, device=None):
        self.n = _check_n(n)
        self._place(backend, device)
        if self.backend != "numpy":
            self._dev = _kxp.uniform_tables(self)

    def dense(self) -> np.ndarray:
        ensure_fits((self.n, self.n), "dense()")
        if self._dev is not None:
            return _kxp.uniform_dense(self)
        i = np.arange(self.n)
        return np.tril(np.ones((self.n, self.n))) / (i[:, None] + 1.0)

    def diagonal(self) -> np.ndarray:
        if self._dev is not None:
            return self._dev_copy("diag")
        return 1.0 / np.arange(1, self.n + 1, dtype=np.float64)

    def _apply_left(self, p: np.ndarray) -> np.ndarray:
        # q_j = sum_{i >= j} p_i / (i + 1): a reversed cumulative sum, O(n).
        w = p / np.arange(1, self.n + 1, dtype=np.float64)
        return np.cumsum(w[:, ::-1], axis=1)[:, ::-1]


def uniform_kernel(n: int, *, backend=None, device=None) -> UniformKernel:
    """Uniform causal kernel ``A[i, j] = 1/(i+1)``, ``j <= i`` (claims PB9, PB12).

    Parameters
    ----------
    n : int
        Number of tokens, ``n >= 1``.
    backend, device : str, optional
        Array backend (``"numpy"`` default, ``"torch"``, ``"cupy"``) and its device.

    Returns
    -------
    UniformKernel
        ``apply_left`` costs O(n) (a reversed cumulative sum).
    """
    return UniformKernel(n, backend, device)


# --------------------------------------------------------------------------------------------
# ALiBi + diagonal content


def alibi_slopes(num_heads: int) -> np.ndarray:
    """Textbook ALiBi slopes ``m_h = 2^{-8(h+1)/H}``, h = 0..H-1, shape (H,) (claim PB14)."""
    num_heads = _check_n(num_heads)
    h = np.arange(num_heads, dtype=np.float64)
    return 2.0 ** (-8.0 * (h + 1.0) / num_heads)


def _log_geometric(m: np.ndarray, i: np.ndarray) -> np.ndarray:
    """log S with S[r, h] = sum_{k=1}^{i_r} e^{-m_h k} for i_r >= 1, shape (rows, H).

    Closed geometric sums, stable for every finite slope (no e^{m i} is formed for m > 0, and
    the dominant term is factored out for m < 0).
    """
    m = np.asarray(m, dtype=np.float64)[None, :]
    i = np.asarray(i, dtype=np.float64)[:, None]
    a = np.abs(m)
    safe = np.where(a > 0, a, 1.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # log(1 - e^{-a i}) - log(1 - e^{-a}) is finite for every a > 0 and i >= 1
        core = np.log(-np.expm1(-safe * i)) - np.log(-np.expm1(-safe))
        pos = core - safe  # m = a > 0:  S = e^{-a} (1 - e^{-a i}) / (1 - e^{-a})
        neg = core + safe * i  # m = -a < 0:  S = e^{a i} (1 - e^{-a i}) / (1 - e^{-a})
    zero = np.log(np.broadcast_to(i, pos.shape))
    return np.where(m > 0, pos, np.where(m < 0, neg, zero))


class AlibiKernel(Kernel):
    """Head average of causal softmax kernels with ALiBi bias and diagonal content.

    For head h with slope ``m_h`` and content ``c_h``:

    .. math::
        A^h_{ij} = \\frac{\\exp(c_h [i=j] - m_h (i-j))}{Z^h_i},\\quad
        Z^h_i = e^{c_h} + \\sum_{k=1}^{i} e^{-m_h k},\\qquad A = \\sum_h w_h A^h .

    ``log Z`` uses the closed geometric sum, so no exponential of ``c`` or ``m i`` is formed:
    stable (no overflow, no NaN) for any finite content and slopes. Memory O(n·H) at most; rows
    beyond ``45 / min(m)`` are stationary and share one table row.
    """

    def __init__(self, n, slopes, content=0.0, head_weights=None, backend=None, device=None):
        self.n = _check_n(n)
        self._place(backend, device, slopes, content, head_weights)
        slopes, content, head_weights = map(_kxp.host, (slopes, content, head_weights))
        m = as_vector(slopes, "slopes")
        c = as_vector(content, "content")
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
            w = as_vector(head_weights, "head_weights", size=H)
            if (w < 0).any() or w.sum() <= 0:
                raise ValueError("head_weights must be nonnegative with a positive sum")
            w = w / w.sum()
        self.head_weights = w
        self.num_heads = H
        pos = self.slopes >= 0
        self._pos = np.flatnonzero(pos)
        self._neg = np.flatnonzero(~pos)
        self._build_tables()
        if self.backend != "numpy":
            self._dev = _kxp.alibi_tables(self)

    def _table_rows(self) -> int:
        m = self.slopes
        if (m * self.n <= _SAT).any():  # some head is not yet stationary at row n - 1
            return self.n
        return int(min(self.n, np.ceil(_SAT / m.min()) + 2))

    def _log_z(self, i: np.ndarray, heads=slice(None)) -> np.ndarray:
        """log Z^h_i for rows i >= 1, shape (rows, H) (or the selected heads)."""
        return np.logaddexp(self.content[heads][None, :], _log_geometric(self.slopes[heads], i))

    def _build_tables(self) -> None:
        nt = self._table_rows()
        logz = self._log_z(np.arange(1, nt))  # (nt - 1, H)
        w_off = np.zeros((nt, self.num_heads))  # row 0 draws only from itself: unused, 0
        w_off[1:] = np.exp(-logz)
        dtab = np.ones(nt)
        dtab[1:] = np.exp(self.content[None, :] - logz) @ self.head_weights
        diag = np.empty(self.n)
        diag[:nt] = dtab
        diag[nt:] = dtab[-1]
        self._diag = diag
        self._w_off = np.ascontiguousarray(w_off[:, self._pos])
        self._r = np.exp(-self.slopes[self._pos])
        self._hw = self.head_weights[self._pos].copy()

    def diagonal(self) -> np.ndarray:
        if self._dev is not None:
            return self._dev_copy("diag")
        return self._diag.copy()

    def head_dense(self, h: int) -> np.ndarray:
        """The kernel of head ``h`` alone, shape (n, n)."""
        ensure_fits((self.n, self.n), "head_dense()", copies=2)
        i = np.arange(self.n, dtype=np.float64)
        d = i[:, None] - i[None, :]
        logz = np.empty(self.n)
        logz[0] = self.content[h]
        logz[1:] = self._log_z(i[1:], [h])[:, 0]
        with np.errstate(over="ignore"):
            s = np.where(d > 0, -self.slopes[h] * d, self.content[h]) - logz[:, None]
        return np.where(d >= 0, np.exp(np.minimum(s, 0.0)), 0.0)

    def dense(self) -> np.ndarray:
        if self._dev is not None:
            return _kxp.alibi_dense(self)
        ensure_fits((self.n, self.n), "dense()", copies=3)
        A = np.zeros((self.n, self.n))
        for h in range(self.num_heads):
            A += self.head_weights[h] * self.head_dense(h)
        return A

    def _residual_step(self, p: np.ndarray, lam: float) -> np.ndarray:
        if self._neg.size or self._dev is not None:
            return super()._residual_step(p, lam)
        out = np.empty_like(p)
        _alibi_step(p, self._diag, self._w_off, self._r, self._hw, float(lam), out)
        return out

    def _apply_left(self, p: np.ndarray) -> np.ndarray:
        out = np.empty_like(p)
        _alibi_step(p, self._diag, self._w_off, self._r, self._hw, 1.0, out)
        for h in self._neg:
            # slope m < 0: sum_{i>j} p_i e^{a(i-j)}/Z_i = e^{-a j} sum_{i>j} p_i e^{a i - log Z_i}
            a = -self.slopes[h]
            i = np.arange(1, self.n, dtype=np.float64)
            what = np.zeros(self.n)
            what[1:] = np.exp(a * i - self._log_z(i, [h])[:, 0])
            suffix = np.cumsum((p * what)[:, ::-1], axis=1)[:, ::-1]
            tail = np.zeros_like(p)
            tail[:, :-1] = suffix[:, 1:]
            out += self.head_weights[h] * np.exp(-a * np.arange(self.n)) * tail
        return out

    def __repr__(self) -> str:
        return f"AlibiKernel(n={self.n}, heads={self.num_heads})"


def alibi_kernel(
    n, slopes, content=0.0, head_weights=None, *, backend=None, device=None
) -> AlibiKernel:
    """Head-averaged ALiBi + diagonal-content causal kernel (claims PB8, PB9, PB14).

    .. math::
        A_{ij} = \\sum_h w_h\\,\\mathrm{softmax}_{j \\le i}\\big(c_h [i=j] - m_h (i-j)\\big)

    Parameters
    ----------
    n : int
        Number of tokens, ``n >= 1``.
    slopes : float or array_like, shape (H,)
        ALiBi slopes ``m_h`` (finite; negative slopes are allowed, e.g. for counterexamples).
    content : float or array_like, shape (H,)
        Diagonal content offsets ``c_h`` (finite). A background ``b`` added to every logit of a
        row has no effect and is therefore not a parameter.
    head_weights : array_like, shape (H,), optional
        Nonnegative head weights, normalised to sum 1; uniform ``1/H`` by default.
    backend, device : str, optional
        Array backend (``"numpy"`` default, ``"torch"``, ``"cupy"``) and its device; inferred
        from array arguments when None. Off NumPy, ``apply_left`` runs a chunked scan with
        blocks of B = ``posflow.simulate._kernels_xp.BLOCK``: O(n·H·B) over the first 45/min m rows,
        O(n·(B + 2H)) over the stationary rows beyond.

    Returns
    -------
    AlibiKernel
        ``apply_left`` costs O(n·H) through a first-order suffix recurrence per head; memory
        O(min(n, 45/min m)·H).
    """
    return AlibiKernel(n, slopes, content, head_weights, backend, device)


# --------------------------------------------------------------------------------------------
# Dense (measured) kernels


class DenseKernel(Kernel):
    """A kernel given as an explicit matrix (validated on construction)."""

    def __init__(self, A, causal: bool = True, atol: float = 1e-9, backend=None, device=None):
        self._place(backend, device, A)
        if self.backend != "numpy":  # validated on the device, same rules and messages
            self._dev = _kxp.dense_tables(self, A, causal, atol)
            self.n, self.causal = int(self._dev["A"].shape[0]), causal
            return
        A = _kxp.host(A)
        try:
            M = np.array(A, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError("A must be a two-dimensional array of numbers") from exc
        if M.ndim != 2 or M.shape[0] != M.shape[1]:
            raise ValueError(f"A must be a square matrix; got shape {M.shape}")
        if M.shape[0] < 1:
            raise ValueError("A must have n >= 1 rows")
        if not np.isfinite(M).all():
            raise ValueError("A must be finite (no NaN or inf entries)")
        if (M < -1e-12).any():
            i, j = np.argwhere(M < -1e-12)[0]
            raise ValueError(f"A must be nonnegative; A[{i}, {j}] = {M[i, j]}")
        if causal:
            upper = np.triu(M, 1)
            if (np.abs(upper) > 1e-12).any():
                i, j = np.argwhere(np.abs(upper) > 1e-12)[0]
                raise ValueError(
                    f"A must be causal (lower-triangular); A[{i}, {j}] = {M[i, j]} with j > i"
                )
            M = np.tril(M)
        dev = np.abs(M.sum(axis=1) - 1.0)
        if (dev > atol).any():
            i = int(np.argmax(dev))
            raise ValueError(
                f"A must be row-stochastic (rows sum to 1 within {atol:g}); "
                f"row {i} sums to {M[i].sum()!r}"
            )
        self.n = M.shape[0]
        self.causal = causal
        self._A = M

    def dense(self) -> np.ndarray:
        return self._dev_copy("A") if self._dev is not None else self._A.copy()

    def diagonal(self) -> np.ndarray:
        return self._dev_copy("diag") if self._dev is not None else np.diag(self._A).copy()

    def _apply_left(self, p: np.ndarray) -> np.ndarray:
        return p @ self._A


def dense_kernel(A, causal: bool = True, *, backend=None, device=None) -> DenseKernel:
    """Wrap a measured attention matrix as a kernel (claims PB14, PB15).

    Parameters
    ----------
    A : array_like, shape (n, n)
        Finite, nonnegative, row-stochastic (rows within 1e-9 of 1) and, unless
        ``causal=False``, lower-triangular (entries above the diagonal at most 1e-12).
    causal : bool
        Require causality. ``False`` admits full attention, e.g. to show what breaks without it.
    backend, device : str, optional
        Array backend and device; None takes those of ``A`` (NumPy for array_like). Off NumPy
        the checks run on the device.

    Returns
    -------
    DenseKernel
        ``apply_left`` is one BLAS matrix-vector product, O(n²).
    """
    return DenseKernel(A, causal=causal, backend=backend, device=device)
