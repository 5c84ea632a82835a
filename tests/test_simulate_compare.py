"""Input checks of the profile comparisons (posflow.simulate.compare)."""

import warnings

import numpy as np
import pytest

from posflow.simulate.compare import profile_shape, spearman


def test_spearman_of_ranked_profiles():
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 4], [1, 3, 9]) == pytest.approx(1.0)


def test_profile_shape_of_short_profiles_is_other():
    assert profile_shape([1.0]) == "other"
    assert profile_shape([1.0, 2.0]) == "other"


@pytest.mark.parametrize(
    "call, exc, match",
    [
        # probe 5: a constant profile has no ranks (scipy gave NaN and a warning)
        (
            lambda: spearman(np.ones(5), np.arange(1.0, 6.0)),
            ValueError,
            r"p must not be constant \(all 5 entries equal\): a constant profile has no ranks",
        ),
        (lambda: spearman(np.arange(1.0, 6.0), [2, 2, 2, 2, 2]), ValueError, "q must not be"),
        (lambda: spearman([1.0], [2.0]), ValueError, "p must not be constant"),
        # probe 6: an empty profile has no shape
        (
            lambda: profile_shape([]),
            ValueError,
            "p must have at least one entry; got an empty profile",
        ),
    ],
)
def test_compare_refuses_bad_profiles(call, exc, match):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the refusal is the only signal: no NaN, no warning
        with pytest.raises(exc, match=match):
            call()
