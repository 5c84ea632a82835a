"""Independent references of claim AT8 (:mod:`posflow.proofs_checks.claims.at08_bessel_tail`):
Hoeffding's tail by a Python loop, and relative errors against such direct formulas."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["PTS_T", "hoeffding_direct", "rel_err"]

PTS_T = (0.0, 0.3, 1.0, 2.5)
"""Thresholds of the direct comparisons."""


def rel_err(got, ref):
    got, ref = np.asarray(got, dtype=float).ravel(), np.asarray(ref, dtype=float).ravel()
    return float(np.max(np.abs(got - ref) / np.abs(ref)))


def hoeffding_direct(t, qn, kn):
    """2 exp(−t²/(2 Σ_b q_b² k_b²)) by a Python loop."""
    proxy = sum((float(a) * float(b)) ** 2 for a, b in zip(qn, kn, strict=True))
    return [2.0 * math.exp(-x * x / (2.0 * proxy)) for x in t]
