"""Argument handling of the array functions: one namespace for all inputs, float64, checks.

Every array function of :mod:`posflow.simulate.transport` and :mod:`posflow.simulate.orthogonal`
takes NumPy arrays, array_like, or the arrays of one other backend (torch, CuPy,
array_api_strict). :func:`namespace_of` picks the namespace once per call — the backend of the
first non-NumPy array, NumPy otherwise — and :func:`as_float` brings each input onto it, so the
same lines run on every backend and NumPy callers get NumPy arrays back.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

from posflow.simulate.backend import asarray, backend_of, namespace, resolve_backend, to_numpy

__all__ = [
    "NUMPY",
    "Place",
    "as_float",
    "check_int",
    "namespace_of",
    "positions",
    "worst_above",
    "wrap",
]


class Place:
    """A namespace ``xp`` with its backend name and device (what :func:`namespace_of` returns)."""

    __slots__ = ("backend", "device", "xp")

    def __init__(self, backend: str, device):
        self.backend, self.device = backend, device
        self.xp = namespace(backend)


NUMPY = Place("numpy", None)


def namespace_of(*arrays) -> Place:
    """The :class:`Place` of the arrays: the backend of the first non-NumPy one, else NumPy."""
    if all(backend_of(a) in (None, "numpy") for a in arrays):
        return NUMPY
    return Place(*resolve_backend(None, None, *arrays))


def as_float(at: Place, x, name: str, ndim: int | None = None, *, finite: bool = True):
    """``x`` as a float64 array of ``at`` (moved there if needed); checks ndim and finiteness."""
    xp = at.xp
    if at.backend == "numpy":
        try:
            x = np.asarray(x, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be an array of numbers") from exc
    elif backend_of(x) == at.backend:
        x = x if x.dtype == xp.float64 else xp.astype(x, xp.float64)
    else:
        x = asarray(x, at.backend, at.device)
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array; got shape {tuple(x.shape)}")
    if finite and not bool(xp.all(xp.isfinite(x))):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def check_int(value, name: str, minimum: int) -> int:
    """``value`` as an int ≥ ``minimum``; TypeError for non-integers (bool included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def positions(at: Place, q_pos, n_q: int, n: int):
    """Query positions as int64 on ``at``; default (None) the last n_q positions.

    ``q_pos`` may live on any backend; it is validated on the host (n_q integers in [0, n)).
    """
    xp = at.xp
    if q_pos is None:
        if n_q > n:
            raise ValueError(f"q_pos is required when there are more queries ({n_q}) than keys")
        return xp.arange(n - n_q, n, dtype=xp.int64, device=at.device)
    h = np.asarray(to_numpy(q_pos))
    if h.shape != (n_q,) or not np.issubdtype(h.dtype, np.integer):
        raise ValueError(f"q_pos must be {n_q} integers; got shape {h.shape}, {h.dtype}")
    if n_q and (h.min() < 0 or h.max() >= n):
        raise ValueError(f"q_pos must lie in [0, {n - 1}]")
    if at.backend == "numpy":
        return h.astype(np.int64, copy=False)
    return xp.asarray(np.ascontiguousarray(h, dtype=np.int64), device=at.device)


def worst_above(xp, err, limit: float) -> int | None:
    """Index of the largest entry of the 1-d array ``err`` if it exceeds ``limit``, else None."""
    i = int(xp.argmax(err))
    return i if float(err[i]) > limit else None


def wrap(xp, x):
    """Angles wrapped to (−π, π]: π − ((π − x) mod 2π)."""
    return math.pi - xp.remainder(math.pi - x, 2.0 * math.pi)
