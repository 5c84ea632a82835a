"""Reading and drawing the plain-data examples of relaxations (shared by PB and AT)."""

from __future__ import annotations

import math
import numbers

from hypothesis import strategies as st

__all__ = ["floats", "get", "integer", "real"]


def floats(lo: float, hi: float):
    """Hypothesis floats in [lo, hi]: no NaN, no infinities, no subnormals."""
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False)


def get(example, key: str):
    """``example[key]``; TypeError for a non-dict, ValueError naming a missing key."""
    if not isinstance(example, dict):
        raise TypeError(f"example must be a dict; got {type(example).__name__}")
    if key not in example:
        raise ValueError(f"example must have a key {key!r}; it has {sorted(example)}")
    return example[key]


def integer(example, key: str, lo: int) -> int:
    """``example[key]`` as an int ≥ ``lo`` (booleans rejected)."""
    v = get(example, key)
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
        raise ValueError(f"example[{key!r}] must be an integer >= {lo}; got {v!r}")
    return int(v)


def real(example, key: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    """``example[key]`` as a finite float in [lo, hi] (booleans rejected)."""
    v = get(example, key)
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"example[{key!r}] must be a number; got {v!r}")
    if not math.isfinite(v):
        raise ValueError(f"example[{key!r}] must be finite; got {v!r}")
    if not lo <= v <= hi:
        raise ValueError(f"example[{key!r}] must lie in [{lo}, {hi}]; got {v!r}")
    return float(v)
