"""Input validation and small shared pieces of :mod:`posflow.theory.transport` (private).

Every public function of :mod:`posflow.theory.transport` checks its arguments here, so that bad
input raises one ``ValueError``/``TypeError`` whose message names the argument and the rule it
broke.
"""

from __future__ import annotations

import dataclasses
import numbers

import numpy as np


def _where(arr: np.ndarray, mask: np.ndarray) -> str:
    """Describe the first offending entry of ``arr`` selected by ``mask``."""
    idx = tuple(int(i) for i in np.argwhere(mask)[0])
    value = arr[idx] if arr.ndim else arr[()]
    if arr.ndim == 0:
        return f"got {value!r}"
    at = idx[0] if len(idx) == 1 else idx
    return f"got {value!r} at index {at}"


def real_array(
    name: str,
    x: object,
    *,
    lo: float | None = None,
    lo_open: bool = False,
    hi: float | None = None,
    hi_open: bool = False,
    allow_inf: bool = False,
) -> np.ndarray:
    """Return ``x`` as a float64 array after checking type, NaN, infinity and range."""
    if isinstance(x, bool | np.bool_):
        raise TypeError(f"{name} must be a real number or array of real numbers; got a bool")
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must be a real number or array of real numbers; got dtype {arr.dtype}"
        )
    arr = arr.astype(np.float64)
    nan = np.isnan(arr)
    if nan.any():
        raise ValueError(f"{name} must not be NaN; {_where(arr, nan)}")
    if not allow_inf:
        inf = np.isinf(arr)
        if inf.any():
            raise ValueError(f"{name} must be finite; {_where(arr, inf)}")
    if lo is not None:
        bad = arr <= lo if lo_open else arr < lo
        if bad.any():
            rule = f"> {lo:g}" if lo_open else f">= {lo:g}"
            if hi is not None:
                rule = _interval(lo, lo_open, hi, hi_open)
            raise ValueError(f"{name} must be {rule}; {_where(arr, bad)}")
    if hi is not None:
        bad = arr >= hi if hi_open else arr > hi
        if bad.any():
            rule = f"< {hi:g}" if hi_open else f"<= {hi:g}"
            if lo is not None:
                rule = _interval(lo, lo_open, hi, hi_open)
            raise ValueError(f"{name} must be {rule}; {_where(arr, bad)}")
    return arr


def _interval(lo: float, lo_open: bool, hi: float, hi_open: bool) -> str:
    left = "(" if lo_open else "["
    right = ")" if hi_open else "]"
    return f"in {left}{lo:g}, {hi:g}{right}"


def real_scalar(name: str, x: object, **rules: object) -> float:
    """Return ``x`` as a Python float after the checks of :func:`real_array`; rejects arrays."""
    arr = real_array(name, x, **rules)  # type: ignore[arg-type]
    if arr.ndim != 0:
        raise TypeError(f"{name} must be a scalar; got an array of shape {arr.shape}")
    return float(arr)


def int_array(name: str, x: object, *, lo: int | None = None) -> np.ndarray:
    """Return ``x`` as an int64 array; integral floats are accepted, other values rejected."""
    if isinstance(x, bool | np.bool_):
        raise TypeError(f"{name} must be an integer or array of integers; got a bool")
    arr = np.asarray(x)
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if bad.any():
            raise ValueError(f"{name} must be integer-valued; {_where(arr, bad)}")
        huge = np.abs(arr) > 2.0**62
        if huge.any():
            raise ValueError(f"{name} must be below 2**62 in magnitude; {_where(arr, huge)}")
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must be an integer or array of integers; got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if lo is not None:
        bad = arr < lo
        if bad.any():
            raise ValueError(f"{name} must be an integer >= {lo}; {_where(arr, bad)}")
    return arr


def int_scalar(name: str, x: object, *, lo: int | None = None) -> int:
    """Return ``x`` as a Python int after the checks of :func:`int_array`; rejects arrays."""
    if not isinstance(x, numbers.Real | np.ndarray):
        raise TypeError(f"{name} must be an integer; got {type(x).__name__}")
    arr = int_array(name, x, lo=lo)
    if arr.ndim != 0:
        raise TypeError(f"{name} must be a scalar integer; got an array of shape {arr.shape}")
    return int(arr)


def scalar_or_array(arr: np.ndarray) -> float | np.ndarray:
    """A 0-d result becomes a Python scalar; anything else stays an array."""
    if arr.ndim == 0:
        return arr[()].item()
    return arr


class DerivationSummary:
    """Mixin for frozen dataclasses of derivation facts: a printable multi-line summary."""

    def summary(self) -> str:
        """One ``name: value`` line per field, in declaration order (for claim reports)."""
        lines = [type(self).__name__]
        for field in dataclasses.fields(self):  # type: ignore[arg-type]
            lines.append(f"  {field.name}: {getattr(self, field.name)}")
        return "\n".join(lines)
