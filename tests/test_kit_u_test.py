"""kit._u_test: the U test and the interior dip, against direct loops."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.proofs_checks.kit import U_END_MARGIN, U_MIN_DEPTH, interior_depth, is_u, valley


def _direct(p, margin):
    n = len(p)
    gap = max(1, math.ceil(margin * (n - 1)))
    inner = [p[j] for j in range(n) if gap <= j <= n - 1 - gap]
    return 1 - min(inner) / min(p[0], p[-1])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.01, 10.0), min_size=5, max_size=60),
       st.sampled_from([0.01, 0.05, 0.2]))  # fmt: skip
def test_interior_depth_is_the_direct_loop_and_decides_is_u(p, margin):
    d = interior_depth(p, margin)
    assert d == pytest.approx(_direct(p, margin), abs=1e-12)
    _, _, away = valley(p, margin)
    # a U is exactly an interior argmin with an interior dip of the stated depth
    assert is_u(p, U_MIN_DEPTH, margin) == (away and d >= U_MIN_DEPTH)


def test_undefined_cases_are_nan():
    assert math.isnan(interior_depth([0.0, 1.0, 0.0]))
    assert math.isnan(interior_depth([1.0, 1.0]))
    assert interior_depth(np.r_[1.0, 0.5, 1.0], U_END_MARGIN) == pytest.approx(0.5)
