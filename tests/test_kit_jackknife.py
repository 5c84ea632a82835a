"""kit._jackknife: the cross-fitted judge, its negative controls and the library recomputation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import t as student_t

from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    crossfit_decision,
    crossfit_library_reference,
    jackknife_controls,
)


def _replicates(est, spread, G=10, seed=0):
    return np.concatenate([[est], est + spread * np.random.default_rng(seed).standard_normal(G)])


def test_decision_is_the_jackknife_t_interval_written_out():
    d = _replicates(-0.2, 0.01)
    G = d.size - 1
    se = np.sqrt((G - 1) / G * ((d[1:] - d[1:].mean()) ** 2).sum())
    q = student_t.ppf(0.995, G - 1)
    dec = crossfit_decision("x", d, 0.99, 0.0)
    assert (dec.lo, dec.hi) == pytest.approx((d[0] - q * se, d[0] + q * se), abs=1e-14)
    assert dec.decision == HOLDS and dec.label == "x"


@settings(max_examples=200, deadline=None)
@given(
    G=st.integers(2, 60),
    est=st.floats(-1e3, 1e3, allow_nan=False),
    spread=st.floats(1e-9, 1e2, allow_nan=False),
    level=st.floats(0.5, 0.9999, allow_nan=False),
    seed=st.integers(0, 2**16),
)
def test_the_interval_equals_scipy_t_interval_with_the_jackknife_scale(G, est, spread, level,
                                                                       seed):  # fmt: skip
    from posflow.proofs_checks.kit._jackknife import jackknife_scipy

    d = _replicates(est, spread, G, seed)
    dec = crossfit_decision("x", d, level, 0.0)
    lo, hi = jackknife_scipy(d, level)
    # the same formula, sums in another order and scipy's t quantile: a few ε of the ends,
    # relative to the interval's magnitude |θ̂| + half-width (measured worst: about 9e-15), plus
    # the t quantile's conditioning: the tail probability (1 − level)/2 formed in two ways differs
    # by ~ε, which moves the quantile by ~ε/(1 − level) relative (1 d.f., level 0.9999: 2e-12)
    scale = max(1.0, abs(d[0]) + (dec.hi - dec.lo) / 2)
    tol = (1e-13 + 4 * np.finfo(float).eps / (1 - level)) * scale
    assert abs(dec.lo - lo) <= tol and abs(dec.hi - hi) <= tol
    se = np.sqrt((G - 1) / G * ((d[1:] - d[1:].mean()) ** 2).sum())  # the jackknife se
    q = student_t.ppf(0.5 + level / 2, G - 1)
    assert (lo, hi) == pytest.approx((d[0] - q * se, d[0] + q * se), rel=1e-12, abs=tol)


@pytest.mark.parametrize(("est", "spread", "want"), [
    (-0.3, 0.01, HOLDS), (0.3, 0.01, FAILS), (0.0, 0.05, INCONCLUSIVE),
    (-0.001, 0.05, INCONCLUSIVE),
])  # fmt: skip
def test_decision_cases(est, spread, want):
    assert crossfit_decision("x", _replicates(est, spread), 0.99, 0.0).decision == want


def test_controls_pass_on_the_judge_and_catch_a_loosened_one(monkeypatch):
    from posflow.proofs_checks.kit import _jackknife as J

    d = _replicates(-0.2, 0.02)
    assert all(m.passed for m in jackknife_controls(d, 0.99, 0.0))
    orig = J.crossfit_decision

    def loose(label, replicates, level, bound):  # the interval collapsed onto its estimate
        dec = orig(label, replicates, level, bound)
        dec.lo = dec.hi = dec.estimate
        return dec

    monkeypatch.setattr(J, "crossfit_decision", loose)
    assert not all(m.passed for m in jackknife_controls(d, 0.99, 0.0))


def test_library_reference_agrees_with_crossfit():
    from types import SimpleNamespace

    from posflow.simulate.models.crossfit import crossfit

    rng = np.random.default_rng(3)
    N, L, n = 6, 2, 5
    A = np.tril(rng.random((N, L, n, n)) + 0.05)
    A /= A.sum(axis=-1, keepdims=True)
    data = SimpleNamespace(attention=A, lambdas=rng.uniform(0.2, 0.8, (N, L)),
                           influence=rng.random((N, n)) + 0.05, content=rng.normal(0, 1, (N, L, 2)),
                           values=A, slopes=np.zeros(2))  # fmt: skip
    prof, metric, resid, _ = crossfit_library_reference(data, crossfit(data))
    assert max(prof, metric) < 1e-12 and resid < 1e-6


def test_library_reference_agrees_with_crossfit_on_banded_layers():
    """Layer 0 sees 3 keys (a sliding window shorter than n = 7), layer 1 every key: the
    reference's banded library kernels (models.bands) give crossfit's profiles, and the same
    data without the window (unbanded uniform and content kernels) does not."""
    from types import SimpleNamespace

    from posflow.simulate.models.crossfit import crossfit

    rng = np.random.default_rng(5)
    N, L, n, w = 6, 2, 7, 3
    A = np.tril(rng.random((N, L, n, n)) + 0.05)
    i, j = np.indices((n, n))
    A[:, 0] *= (i - j) < w  # the measured attention of layer 0 is zero beyond its window
    A /= A.sum(axis=-1, keepdims=True)
    data = SimpleNamespace(attention=A, lambdas=rng.uniform(0.2, 0.8, (N, L)),
                           influence=rng.random((N, n)) + 0.05, content=rng.normal(0, 1, (N, L, 2)),
                           values=A, slopes=np.array([0.5, 0.1]), windows=(w, None))  # fmt: skip
    cf = crossfit(data)
    prof, metric, resid, _ = crossfit_library_reference(data, cf)
    assert max(prof, metric) < 1e-12 and resid < 1e-6
    unbanded = SimpleNamespace(**{**vars(data), "windows": None})
    assert crossfit_library_reference(unbanded, cf)[0] > 1e-6  # the band matters here
