"""Null influence profiles (claim PB15): geometric recency, linear ramp, derangements."""

import numpy as np
import pytest

from posflow.simulate.nulls import derangement, geometric_recency, linear_ramp, ramp_slope


def _mean(p):
    return p @ np.arange(p.shape[-1])


@pytest.mark.parametrize("n", [2, 5, 64, 1000])
def test_geometric_recency_has_the_asked_mean(n):
    means = np.linspace(0.01, n - 1.01, 16)  # the midpoint (r = 1) is not among them
    p, r = geometric_recency(n, means)
    assert p.shape == (16, n) and r.shape == (16,)
    np.testing.assert_allclose(p.sum(axis=1), 1, atol=1e-12)
    np.testing.assert_allclose(_mean(p), means, rtol=0, atol=1e-9 * n)
    # r < 1 (recency) exactly when the mean lies past the middle
    mid = (n - 1) / 2
    assert ((r < 1) == (means > mid)).all()


def test_geometric_recency_is_the_stated_law():
    """p(j) ∝ r^{n−1−j}: the ratio of neighbours is r everywhere."""
    p, r = geometric_recency(10, 6.3)
    np.testing.assert_allclose(p[:-1] / p[1:], r, rtol=1e-12)
    # closed form of the mean of a truncated geometric law k ~ r^k on 0..n−1 (k = n−1−j)
    n = 10
    ek = r / (1 - r) - n * r**n / (1 - r**n)
    assert abs((n - 1 - ek) - 6.3) < 1e-9


def test_geometric_recency_ends_and_middle():
    p, r = geometric_recency(8, 3.5)
    np.testing.assert_allclose(p, 1 / 8, atol=1e-12)
    assert abs(r - 1) < 1e-12
    p, _ = geometric_recency(8, 7.0)
    assert p[-1] > 1 - 1e-12
    p, _ = geometric_recency(8, 0.0)
    assert p[0] > 1 - 1e-12


def test_linear_ramp_mean_and_clipping():
    n = 64
    c, var = (n - 1) / 2, (n * n - 1) / 12
    reach = var / c  # a nonnegative ramp's mean lies within c ± σ²/c
    inside = np.linspace(c - reach, c + reach, 9)
    p = linear_ramp(n, inside)
    np.testing.assert_allclose(_mean(p), inside, atol=1e-9)
    assert (p >= -1e-15).all()
    # beyond the reach: the steepest ramps p ∝ j and p ∝ n−1−j
    np.testing.assert_allclose(linear_ramp(n, n - 2.0), np.arange(n) / np.arange(n).sum())
    np.testing.assert_allclose(linear_ramp(n, 1.0), np.arange(n)[::-1] / np.arange(n).sum())
    assert ramp_slope(n, n - 2.0) == 1.0 and ramp_slope(n, 1.0) == -1.0
    # the profile is affine in j
    d = np.diff(linear_ramp(n, 40.0))
    np.testing.assert_allclose(d, d[0], atol=1e-15)


def test_derangement_has_no_fixed_point_and_is_seeded():
    for L in (2, 3, 4, 30):
        for seed in range(20):
            perm = derangement(L, seed)
            assert sorted(perm.tolist()) == list(range(L))
            assert not (perm == np.arange(L)).any()
    assert derangement(2, 0).tolist() == [1, 0]
    assert (derangement(30, 5) == derangement(30, 5)).all()
    # every derangement of 3 (the two cyclic shifts) occurs
    seen = {tuple(derangement(3, s).tolist()) for s in range(40)}
    assert seen == {(1, 2, 0), (2, 0, 1)}


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: geometric_recency(1, 0.0), "n must"),
        (lambda: geometric_recency(5, 4.5), "mean must lie"),
        (lambda: geometric_recency(5, np.nan), "finite"),
        (lambda: linear_ramp(True, 0.5), "n must"),
        (lambda: linear_ramp(5, -0.1), "mean must lie"),
        (lambda: derangement(1, 0), "no derangement"),
    ],
)
def test_bad_inputs_are_refused(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_non_integer_sizes_and_exact_messages():
    """Sizes must be integers (a float 5.0 is refused, not truncated); the messages in full."""
    import re

    with pytest.raises(ValueError, match=re.escape("n must be an integer >= 2; got 5.0")):
        geometric_recency(5.0, 1.0)
    with pytest.raises(ValueError, match=re.escape("n must be an integer >= 2; got 4.0")):
        linear_ramp(4.0, 1.0)
    with pytest.raises(ValueError, match=re.escape("L must be an integer >= 2 (one layer")):
        derangement(3.0, 0)
    with pytest.raises(ValueError, match=r"^mean must be finite$"):
        ramp_slope(5, [1.0, np.inf])
    with pytest.raises(ValueError, match=re.escape("mean must lie in [0, n − 1] = [0, 4]")):
        ramp_slope(5, 4.5)
    with pytest.raises(ValueError, match=re.escape("mean must lie in [0, n − 1] = [0, 9]")):
        geometric_recency(10, -1.0)


def test_exact_rational_means_are_read_as_floats():
    from fractions import Fraction

    p, r = geometric_recency(5, Fraction(3, 2))
    np.testing.assert_allclose(_mean(p), 1.5, atol=1e-12)
    # 1.5 < c = 2: the mean lies early, so r > 1 (primacy)
    assert r > 1
    np.testing.assert_allclose(ramp_slope(5, Fraction(3, 2)), (1.5 - 2) * 2 / 2)  # σ² = 2
    np.testing.assert_allclose(linear_ramp(5, Fraction(2)), 0.2)
