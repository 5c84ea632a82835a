"""Checks that meet broken numbers (a mutant driving a mass to 0 or NaN) without raising.

:func:`quiet` runs a check with NumPy's divide / invalid / overflow warnings off, and
:func:`quiet_log` and :func:`nan_max` are the scalar log and max that keep −inf and NaN instead
of raising or dropping them, so that a broken rollout gives a failing comparison, not an error.
"""

from __future__ import annotations

import functools
import math

import numpy as np

__all__ = ["nan_max", "quiet", "quiet_log"]


def quiet(check):
    """Run ``check(ctx)`` with NumPy's divide, invalid and overflow warnings off."""

    @functools.wraps(check)
    def run(ctx):
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return check(ctx)

    return run


def quiet_log(x: float) -> float:
    """log x with log 0 = −inf and NaN for negative or NaN x (no exception)."""
    x = float(x)
    return math.log(x) if x > 0 else (-math.inf if x == 0 else math.nan)


def nan_max(a: float, b: float) -> float:
    """max(a, b) that keeps NaN (Python's max would drop it)."""
    return math.nan if math.isnan(a) or math.isnan(b) else max(a, b)
