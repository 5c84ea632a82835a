"""The base class of causal attention kernels (a leaf: kernels, _monotone and rollout import it).

A kernel resolves its backend once, when it is built (:meth:`Kernel._place`), and keeps the
array-api-compat namespace ``xp`` and the device; every method then computes with ``xp`` on
that device, so one code path serves NumPy, torch, CuPy and array_api_strict. Subclasses set
``n`` and the diagonal table ``_diag`` (shape (n,), on the device) and implement
``_apply(p)`` = p A for validated rows p of shape (k, n) and ``dense()``. Claims PB1–PB14.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate.backend import asarray, namespace, resolve_backend, to_numpy

__all__ = ["Kernel", "check_n"]


def check_n(n, name: str = "n") -> int:
    """``n`` as an int ≥ 1; TypeError for non-integers (bool included)."""
    if isinstance(n, bool) or not isinstance(n, int | np.integer):
        raise TypeError(f"{name} must be an integer; got {n!r}")
    if n < 1:
        raise ValueError(f"{name} must be at least 1; got {n}")
    return int(n)


class Kernel:
    """Base class of causal attention kernels (interface: :mod:`posflow.simulate.kernels`).

    Attributes: ``n`` (tokens), ``backend`` and ``device`` (where the tables live), ``xp`` (the
    namespace of ``backend``).
    """

    n: int
    backend: str = "numpy"
    device = None
    xp = None
    _diag = None  # diag(A), shape (n,), on the device
    # row-stochastic by construction (rows sum to 1 up to rounding): the rollout may project
    # its row masses back onto their invariant (posflow.simulate.rollout, module docstring)
    _row_stochastic = False

    def _place(self, backend, device, *arrays) -> None:
        """Resolve ``backend``/``device`` once (None infers them from the array arguments)."""
        self.backend, self.device = resolve_backend(backend, device, *arrays)
        self.xp = namespace(self.backend)

    def _put(self, a):
        """A host array as float64 on the kernel's device (NumPy: contiguous, no copy)."""
        a = np.ascontiguousarray(a, dtype=np.float64)
        return a if self.backend == "numpy" else self.xp.asarray(a, device=self.device)

    def _rows(self, eye: bool = False):
        """e_{n-1} as one row, shape (1, n), or the identity (n, n), on the device."""
        xp = self.xp
        if eye:
            return xp.eye(self.n, dtype=xp.float64, device=self.device)
        zeros = xp.zeros((1, self.n - 1), dtype=xp.float64, device=self.device)
        return xp.concat([zeros, xp.ones((1, 1), dtype=xp.float64, device=self.device)], axis=1)

    def dense(self):  # pragma: no cover - abstract
        raise NotImplementedError

    def _apply(self, p):  # pragma: no cover - abstract
        """p A for validated rows p of shape (k, n) on the device."""
        raise NotImplementedError

    def diagonal(self):
        """diag(A), shape (n,), an array of the kernel's backend (a copy)."""
        return self.xp.asarray(self._diag, copy=True)

    def _residual_step(self, p, lam: float):
        """``(1 - lam) p + lam p A`` for validated rows ``p`` of shape (k, n)."""
        if lam == 0.0:
            return self.xp.asarray(p, copy=True)
        return (1.0 - lam) * p + lam * self._apply(p)

    def apply_left(self, p):
        """Row vector(s) times the kernel, ``q = p A``.

        Parameters
        ----------
        p : array_like, shape (n,) or (k, n)
            NumPy, array_like, or an array of the kernel's backend (moved to its device).

        Returns
        -------
        q : array of the kernel's backend, same shape as ``p``;
            ``q[..., j] = sum_i p[..., i] A[i, j]``.
        """
        xp = self.xp
        arr = asarray(p, self.backend, self.device)
        if arr.ndim not in (1, 2) or arr.shape[-1] != self.n:
            raise ValueError(
                f"p must have shape (n,) or (k, n) with n={self.n}; got {tuple(arr.shape)}"
            )
        if not bool(xp.all(xp.isfinite(arr))):
            raise ValueError("p must be finite")
        out = self._apply(xp.reshape(arr, (-1, self.n)))
        return xp.reshape(out, arr.shape)

    def __array__(self, dtype=None, copy=None):
        """``np.asarray(K)``: the dense (n, n) matrix as a NumPy array (NumPy's array protocol).

        Built by :meth:`dense`, so the same memory guard refuses an n whose n² floats do not
        fit; a new array every time, hence ``copy=False`` is refused (there is nothing to share).
        """
        if copy is False:
            raise ValueError("np.asarray(kernel, copy=False): a kernel stores no (n, n) array to "
                             "share; use copy=None or True")  # fmt: skip
        A = to_numpy(self.dense())
        return A if dtype is None else A.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n})"
