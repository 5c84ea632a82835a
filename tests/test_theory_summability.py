"""Tests of posflow.theory._summability against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

from __future__ import annotations

import pytest
import sympy as sp

from posflow.theory import rollout as ro

# A layer index without assumptions: the schedule's form then depends on what collapses
# assumes about t (a nonnegative integer in the range checks, a positive real in the limits).
t = sp.Symbol("t")


def test_range_check_reads_t_as_a_nonnegative_integer():
    """(-1)^(2t) = 1 for every integer t, so λ_t = (-1)^(2t) + 1 = 2 > 1 for all t ≥ 0: refused as
    a whole (the generic check), before any sample point."""
    with pytest.raises(ValueError) as info:
        ro.collapses((-1) ** (2 * t) + 1, t)
    assert str(info.value) == (
        "schedule must lie in [0, 1] for t = 0, 1, 2, ...; got (-1)**(2*t) + 1"
    )


def test_an_explicit_zero_factor_is_the_zero_schedule():
    """0 · e^t/(e^t + 1) written as an unevaluated product: Σ 0 = 0 converges."""
    zero = sp.Mul(0, sp.exp(t) / (sp.exp(t) + 1), evaluate=False)
    assert ro.collapses(zero, t) is False


def test_a_switched_on_cubic_decay_converges():
    """λ_t = H(t - 3)/(t + 1)³ (0 before layer 3, 1/128 at t = 3 with H(0) = 1/2): bounded by
    the p-series 1/(t+1)³, p = 3 > 1, so Σ λ_t < ∞ and there is no collapse."""
    assert ro.collapses(sp.Heaviside(t - 3) / (t + 1) ** 3, t, cross_check=False) is False
