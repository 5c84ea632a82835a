"""Definitions shared by the exact and the numeric side (a leaf module: it imports no posflow code).

:mod:`posflow.theory` and :mod:`posflow.simulate` are kept apart so that each can be checked
against the other; a *convention* — a definition both must use identically rather than a result
to compare — lives here once.
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["rope_frequencies"]


def rope_frequencies(d, base=10_000.0) -> np.ndarray:
    """RoPE block frequencies f_b = base^(−2b/d), b = 0 … d/2 − 1 (claims AT6, AT16, AT18).

    Block b rotates the dimension pair (b, b + d/2) by the angle i·f_b at position i.

    Parameters
    ----------
    d : int
        Head dimension, even, ≥ 2 (d = 96 in [B]'s models).
    base : float, optional
        Base, finite and > 1 (10⁴ in RoPE).

    Returns
    -------
    f : ndarray of float64, shape (d/2,)
        Decreasing from f_0 = 1; for d = 96 and base 10⁴, f ∈ [1.21e-4, 1].

    Raises ValueError naming ``d`` (not an even integer ≥ 2) or ``base`` (not finite and > 1).
    """
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 2 or d % 2:
        raise ValueError(f"d must be an even integer >= 2 (SO(2) blocks pair dims); got {d!r}")
    if isinstance(base, bool) or not isinstance(base, numbers.Real) or not (
        math.isfinite(base) and base > 1
    ):
        raise ValueError(f"base must be a finite number > 1; got {base!r}")
    d = int(d)
    return float(base) ** (-2.0 * np.arange(d // 2, dtype=np.float64) / d)
