"""The shared statistical helpers of the kit: family-wise z limits, means with standard errors,
log-log fits, and the family-wise judging of Monte Carlo comparisons."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.kit import (
    FAMILY_LEVEL,
    family_reason,
    loglog_slope,
    mean_se,
    z_at_most,
    z_limit,
)


def test_z_limit_is_the_bonferroni_level_of_four_standard_errors():
    from scipy.stats import norm

    assert z_limit(1) == 4.0
    for n in (10, 100, 1000):
        assert 2 * n * norm.sf(z_limit(n)) == pytest.approx(2 * norm.sf(4.0), rel=1e-9)
    assert z_limit(10) < z_limit(100) < z_limit(1000)
    with pytest.raises(ValueError, match="n_comparisons"):
        z_limit(0)


def test_mean_se_and_loglog_slope():
    m, se = mean_se(np.array([1.0, 2.0, 3.0, 4.0]))
    assert m == 2.5 and se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    p, b, s = loglog_slope(x, 3 * x**-0.5)
    assert p == pytest.approx(-0.5) and math.exp(b) == pytest.approx(3) and s < 1e-12
    with pytest.raises(ValueError, match="x"):
        mean_se(np.array([1.0]))
    with pytest.raises(ValueError, match="3 points"):
        loglog_slope([1.0, 2.0], [1.0, 2.0])


def test_family_reason_names_samples_comparisons_and_level():
    text = family_reason(12, "N = 10 draws")
    assert "N = 10 draws" in text and "12" in text and f"{z_limit(12):.2f}" in text
    assert f"{FAMILY_LEVEL:.1e}" in text


def test_z_at_most_is_an_at_most_in_standard_errors_with_the_family_limit():
    m = z_at_most("max_z", 1.5, 12, "N = 10 draws", "max |x − 0| / SE")
    assert (m.test, m.unit, m.reference, m.tol.kind) == ("at_most", "SE", 0.0, "statistical")
    assert m.tol.value == pytest.approx(z_limit(12))
    assert m.tol.reason == family_reason(12, "N = 10 draws")
    assert m.passed is True
    assert z_at_most("max_z", z_limit(12) + 0.1, 12, "N", "x").passed is False
