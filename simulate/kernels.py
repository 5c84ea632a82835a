"""Causal attention kernels: uniform, ALiBi + diagonal content, and measured (dense) ones.

A kernel is a lower-triangular, row-stochastic ``n x n`` matrix ``A`` with ``A[i, j]`` the weight
token ``i`` draws from token ``j`` (claims PB1–PB14). Kernels are objects so that a rollout can
apply them to a row vector without forming the matrix:

* ``K.n`` — the number of tokens;
* ``K.dense()`` — the matrix, shape (n, n) (refused when it would not fit in memory);
* ``K.apply_left(p)`` — the row vector ``p A`` (``p`` of shape (n,) or a batch (k, n));
* ``K.diagonal()`` — ``diag(A)``, shape (n,).

``alibi_kernels(n, slopes, content)`` builds the ALiBi kernels of L layers (content (L, H)) in
one pass that shares the slope-only tables (the per-layer kernels of the measured models).

Constructors take ``backend=`` (``"numpy"`` by default, ``"torch"``, ``"cupy"``,
``"array_api_strict"``; inferred from array arguments when None) and ``device=``, resolved once
when the kernel is built (:class:`posflow.simulate._kernel.Kernel`). The kernel keeps its tables
on that device, and ``dense``, ``diagonal``, ``apply_left`` and the rollouts of
:mod:`posflow.simulate.rollout` return that backend's arrays. One array-API code path serves
every backend; the one exception is the ALiBi suffix recurrence, which on NumPy runs compiled by
numba (faster there than the array-API scan, see ``benchmarks/backend.py`` and
:mod:`posflow.simulate._alibi`).
"""

from __future__ import annotations

import numpy as np

from posflow.simulate._alibi import AlibiKernel, alibi_kernels, alibi_slopes
from posflow.simulate._arrays import worst_above
from posflow.simulate._kernel import Kernel, check_n
from posflow.simulate._monotone import is_stochastically_monotone, monotonicity_deficit
from posflow.simulate._validate import (
    CAUSAL_TOL,
    NEG_TOL,
    dense_checked_copy,
    ensure_fits,
    ensure_memory,
)
from posflow.simulate.backend import asarray, to_numpy

__all__ = [
    "AlibiKernel",
    "DenseKernel",
    "Kernel",
    "UniformKernel",
    "alibi_kernel",
    "alibi_kernels",
    "alibi_slopes",
    "dense_kernel",
    "is_stochastically_monotone",
    "monotonicity_deficit",
    "uniform_kernel",
]

# --------------------------------------------------------------------------------------------
# Uniform (Cesàro) kernel


class UniformKernel(Kernel):
    """Uniform causal attention ``A[i, j] = 1/(i+1)`` for ``j <= i`` (no positional encoding)."""

    _row_stochastic = True

    def __init__(self, n: int, backend=None, device=None):
        self.n = check_n(n)
        what = "uniform_kernel (two float64 vectors of length n)"
        ensure_memory(16.0 * self.n, f"n = {self.n}", what)
        self._place(backend, device)
        xp = self.xp
        self._diag = 1.0 / xp.arange(1, self.n + 1, dtype=xp.float64, device=self.device)

    def dense(self):
        ensure_fits((self.n, self.n), "dense()")
        xp = self.xp
        i = xp.arange(self.n, dtype=xp.float64, device=self.device)
        return xp.where(i[:, None] >= i[None, :], 1.0 / (i[:, None] + 1.0), 0.0)

    def _apply(self, p):
        # q_j = sum_{i >= j} p_i / (i + 1): a reversed cumulative sum, O(n).
        xp = self.xp
        return xp.flip(xp.cumulative_sum(xp.flip(p * self._diag, axis=1), axis=1), axis=1)


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

    Raises TypeError for a non-integer ``n`` and ValueError for ``n`` < 1 or (before
    allocating) an ``n`` whose tables would not fit in memory.
    """
    return UniformKernel(n, backend, device)


# --------------------------------------------------------------------------------------------
# ALiBi + diagonal content


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
    slopes : float or array_like, shape (H,), H ≥ 1
        ALiBi slopes ``m_h`` (finite; negative slopes are allowed, e.g. for counterexamples;
        any finite magnitude, down to −1e308, gives exact finite weights).
    content : float or array_like, shape (H,)
        Diagonal content offsets ``c_h`` (finite). A background ``b`` added to every logit of a
        row has no effect and is therefore not a parameter.
    head_weights : array_like, shape (H,), optional
        Nonnegative head weights that sum to 1 (within 1e-9, the tolerance of
        :func:`dense_kernel` rows: the rounding of weights computed in float64, not weights in
        other units, which are refused rather than rescaled); uniform ``1/H`` by default.
    backend, device : str, optional
        Array backend (``"numpy"`` default, ``"torch"``, ``"cupy"``) and its device; inferred
        from array arguments when None. Off NumPy, ``apply_left`` runs a chunked scan with
        blocks of B = ``posflow.simulate._scan.BLOCK``: O(n·H·B) over the first 45/min m rows,
        O(n·(B + 2H)) over the stationary rows beyond.

    Returns
    -------
    AlibiKernel
        ``apply_left`` costs O(n·H) through a first-order suffix recurrence per head; memory
        O(min(n, 45/min m)·H).

    Raises ValueError naming ``slopes``/``content``/``head_weights`` when one is empty, not
    finite, or of a length that is neither 1 nor H, for negative head weights or weights that
    do not sum to 1, and (before allocating) naming ``n`` when the tables would not fit in
    memory.
    """
    return AlibiKernel(n, slopes, content, head_weights, backend, device)


# --------------------------------------------------------------------------------------------
# Dense (measured) kernels


class DenseKernel(Kernel):
    """A kernel given as an explicit matrix (validated on construction, on its device).

    On NumPy the checks and the copy are one pass over the matrix (16 n² bytes of memory
    traffic, two matrix–vector products' worth; :func:`_validated_numpy`); other backends run
    the array-API check :func:`_validated`. Both raise the same messages.
    """

    def __init__(self, A, causal: bool = True, atol: float = 1e-9, backend=None, device=None):
        self._place(backend, device, A)
        if self.backend == "numpy":
            M, sums = _validated_numpy(A, causal, atol, self.device)
        else:
            M = _as_matrix(A, self.backend, self.device)
            M = _validated(self.xp, self.xp.asarray(M, copy=True), causal, atol)
            sums = self.xp.sum(M, axis=1)
        self.n, self.causal, self._A = int(M.shape[0]), causal, M
        idx = self.xp.arange(0, self.n * self.n, self.n + 1, device=self.device)
        self._diag = self.xp.take(self.xp.reshape(M, (-1,)), idx)
        # rows within 8 n u of 1 (u = 2^-53): stochastic up to the rounding of building them,
        # so the rollout may project its mass (a larger defect is the matrix's own and is kept)
        defect = float(self.xp.max(self.xp.abs(sums - 1.0)))
        self._row_stochastic = defect <= 8.0 * self.n * 2.0**-53

    def dense(self):
        return self.xp.asarray(self._A, copy=True)

    def _apply(self, p):
        return p @ self._A


def _as_matrix(A, backend, device):
    """``A`` as a float64 array of ``backend`` on ``device`` (TypeError for ragged input)."""
    try:
        return asarray(A, backend, device)
    except (TypeError, ValueError) as exc:
        raise TypeError("A must be a two-dimensional array of numbers") from exc


def _validated_numpy(A, causal: bool, atol: float, device=None):
    """:func:`_validated` on NumPy in one pass: (the checked copy, its row sums).

    :func:`posflow.simulate._validate.dense_checked_copy` copies ``A`` (as float64, into a
    C-ordered array) and checks its entries in one pass, 16 n² bytes of memory traffic; its row
    sums are NumPy's pairwise sums, bit for bit those :func:`_validated` computes on a C-ordered
    copy, so the verdict and the stored matrix are the same. A matrix that NumPy converted into
    a new C-ordered array (``A`` a list or tuple, or an ndarray of another dtype) is checked in
    place, with no second copy. When any rule fails, :func:`_validated` runs on a C-ordered copy
    of ``A`` and raises its message (should it find nothing, its result is used: it is the
    reference).
    """
    M = _as_matrix(A, "numpy", device)
    if M.ndim == 2 and M.shape[0] == M.shape[1] and M.shape[0] >= 1:
        fresh = isinstance(A, list | tuple) or (type(A) is np.ndarray and A.dtype != np.float64)
        out = M if fresh and M.flags.c_contiguous and M.flags.writeable else np.empty(M.shape)
        sums = dense_checked_copy(M, bool(causal), out)
        if sums is not None and float(np.max(np.abs(sums - 1.0))) <= atol:
            return out, sums
    M = np.array(_as_matrix(A, "numpy", device), order="C", copy=True)  # the same row sums
    M = _validated(np, M, causal, atol)
    return M, np.sum(M, axis=1)


def _validated(xp, A, causal: bool, atol: float):
    """A checked to be square, n ≥ 1, finite, nonnegative (−1e-12), causal (1e-12; then the
    upper triangle is zeroed) and row-stochastic within ``atol``; ValueError naming the rule.

    The array-API check (every backend; the reference of :func:`_validated_numpy`): about ten
    full passes over (n, n) arrays and their temporaries.
    """
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ValueError(f"A must be a square matrix; got shape {tuple(A.shape)}")
    if A.shape[0] < 1:
        raise ValueError("A must have n >= 1 rows")
    if not bool(xp.all(xp.isfinite(A))):
        raise ValueError("A must be finite (no NaN or inf entries)")

    def first(mask, rule):
        if bool(xp.any(mask)):
            i, j = np.argwhere(to_numpy(mask))[0]
            raise ValueError(rule.format(i=i, j=j, v=float(A[int(i), int(j)])))

    first(A < -NEG_TOL, "A must be nonnegative; A[{i}, {j}] = {v}")
    if causal:
        first(
            xp.abs(xp.triu(A, k=1)) > CAUSAL_TOL,
            "A must be causal (lower-triangular); A[{i}, {j}] = {v} with j > i",
        )
        A = xp.tril(A)
    sums = xp.sum(A, axis=1)
    i = worst_above(xp, xp.abs(sums - 1.0), atol)
    if i is not None:
        raise ValueError(
            f"A must be row-stochastic (rows sum to 1 within {atol:g}); "
            f"row {i} sums to {float(sums[i])!r}"
        )
    return A


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
        Array backend and device; None takes those of ``A`` (NumPy for array_like). The checks
        run on the device.

    Returns
    -------
    DenseKernel
        ``apply_left`` is one BLAS matrix-vector product, O(n²). Building it on NumPy checks
        and copies ``A`` in one pass (``A`` read once, the kernel's copy written once: two
        matrix-vector products of memory traffic).

    Raises TypeError for ragged input and ValueError naming the first rule broken: shape,
    n ≥ 1, finite, nonnegative (the first entry in row-major order), causal (likewise), or
    row-stochastic (the worst row).
    """
    return DenseKernel(A, causal=causal, backend=backend, device=device)
