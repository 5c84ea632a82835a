"""kit._quiet: checks that meet broken numbers without raising."""

import math

import numpy as np

from posflow.proofs_checks.kit import nan_max, quiet, quiet_log


def test_quiet_turns_numpy_warnings_off_inside_the_check_only():
    @quiet
    def check(ctx):
        return np.log(np.array([0.0, -1.0])), np.geterr()

    before = np.geterr()
    (out, err) = check(None)
    assert np.geterr() == before  # restored afterwards
    assert out[0] == -np.inf and np.isnan(out[1])
    assert err["divide"] == err["invalid"] == err["over"] == "ignore"
    assert check.__name__ == "check"


def test_quiet_log_and_nan_max():
    assert quiet_log(math.e) == 1.0 and quiet_log(0.0) == -math.inf
    assert math.isnan(quiet_log(-1.0)) and math.isnan(quiet_log(math.nan))
    assert nan_max(1.0, 2.0) == 2.0 and nan_max(-math.inf, 0.5) == 0.5
    assert math.isnan(nan_max(math.nan, 1.0)) and math.isnan(nan_max(1.0, math.nan))
