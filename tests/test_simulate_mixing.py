"""posflow.simulate._mixing against independent references (issue 23, mutation testing).

Mixing windows against a brute-force loop over n at the floating-point boundaries γᵏ = ε; the
Monte Carlo route means against an explicit loop over distances that draws with the law's own
``sample_angles`` / ``sample`` from the same Generator (the draws the docstring promises) and
computes the statistics from complex exponentials / the spectral norm; the argument errors by
their full messages.
"""

import math
import re
from fractions import Fraction

import numpy as np
import pytest

from posflow.simulate.orthogonal import HaarLaw, HouseholderLaw, SO2BlockLaw
from posflow.simulate.transport import (
    empirical_mixing_window,
    empirical_route_mean,
    mixing_window,
)


def _brute_window(g: float, eps: float) -> float:
    """Smallest n ≥ 1 with gⁿ ≤ eps by counting up (inf for g ≥ 1). gⁿ is NumPy's float64
    power, as in the routine (libm's pow and NumPy's differ by an ulp at some of these points)."""
    if g >= 1.0:
        return math.inf
    n = 1
    while np.power(np.float64(g), np.float64(n)) > eps:
        n += 1
    return n


def _boundary_cases():
    for g in (0.1, 1 / 3, 0.5, 0.7, 0.875, 0.9, 0.99):
        for k in range(1, 41):
            e = g**k
            for eps in (e, np.nextafter(e, 0.0), np.nextafter(e, 1.0)):
                if 0.0 < eps < 1.0:
                    yield g, float(eps)


def test_mixing_window_equals_the_brute_force_count_at_the_boundaries():
    cases = list(_boundary_cases())
    for g, eps in cases:
        assert mixing_window(g, eps) == _brute_window(g, eps), (g, eps)
    # the vectorised path: one eps, many γ (0 and ≥ 1 included)
    gs = np.array([0.0, 0.1, 0.5, 0.9, 0.99, 1.0, 3.0])
    for eps in (0.5, 0.1, 0.5**7, np.nextafter(0.5**7, 0.0), 1e-9):
        want = [1.0 if g == 0 else _brute_window(g, eps) for g in gs]
        got = mixing_window(gs, eps)
        assert got.dtype == float and list(got) == want


def test_mixing_window_scalar_types_and_exact_inputs():
    assert type(mixing_window(0.5, 0.1)) is int and mixing_window(0.0, 0.3) == 1
    assert mixing_window(2.0, 0.1) is math.inf
    # exact rationals (as from posflow.theory) are read as floats
    assert mixing_window(Fraction(1, 2), 0.1) == 4
    assert list(mixing_window([Fraction(1, 2), Fraction(0)], 0.25)) == [2.0, 1.0]


def test_empirical_mixing_window_boundary_and_exact_inputs():
    assert empirical_mixing_window([1.0, 0.1, 0.0], 0.1) == 1  # ≤ ε, not < ε
    assert empirical_mixing_window([1.0, 0.5], 0.1) is math.inf
    assert empirical_mixing_window([Fraction(1), Fraction(1, 2), Fraction(1, 20)], 0.1) == 2
    col = empirical_mixing_window(np.array([[1.0, 1.0], [0.1, 0.3]]), 0.1)
    assert col.dtype == float and list(col) == [1.0, np.inf]


def _msg(text: str) -> str:
    return "^" + re.escape(text) + "$"


@pytest.mark.parametrize("fn", [mixing_window, empirical_mixing_window])
@pytest.mark.parametrize("eps", [0.0, 1.0, 1.5, -0.1])
def test_eps_outside_the_open_unit_interval_is_refused(fn, eps):
    with pytest.raises(ValueError, match=_msg(f"eps must lie in (0, 1); got {eps}")):
        fn(0.5 if fn is mixing_window else [1.0, 0.0], eps)


def test_argument_errors_by_their_messages():
    for g in (np.nan, np.inf, -1.0):
        with pytest.raises(ValueError, match=_msg("gamma must be finite and >= 0")):
            mixing_window(g, 0.1)
    for v in (np.zeros((2, 2, 2)), [1.0, np.nan], 0.5):
        with pytest.raises(ValueError, match=_msg("values must be a finite 1-d or 2-d array")):
            empirical_mixing_window(v, 0.1)
    msg = "law must be a step law with .d and .sample; got str"
    with pytest.raises(TypeError, match=_msg(msg)):
        empirical_route_mean("haar", 3)

    class NoSample:
        d = 2

    with pytest.raises(TypeError, match=r"got NoSample$"):
        empirical_route_mean(NoSample(), 3)
    with pytest.raises(ValueError, match=_msg("per_block requires an SO2BlockLaw")):
        empirical_route_mean(HaarLaw(2), 3, per_block=True)
    with pytest.raises(ValueError, match=_msg("max_distance must be >= 0; got -1")):
        empirical_route_mean(SO2BlockLaw(2), -1)
    with pytest.raises(ValueError, match=_msg("n_routes must be >= 1; got 0")):
        empirical_route_mean(SO2BlockLaw(2), 3, 0)
    with pytest.raises(TypeError, match=_msg("max_distance must be an integer; got float")):
        empirical_route_mean(HaarLaw(2), 3.0)
    with pytest.raises(TypeError, match=_msg("n_routes must be an integer; got float")):
        empirical_route_mean(HaarLaw(2), 3, 5.0)


def _so2_reference(law: SO2BlockLaw, m: int, n_routes: int, seed: int):
    """E e^{iψ_b(n)} estimated by summing law.sample_angles one distance at a time."""
    rng = np.random.default_rng(seed)
    psi = np.zeros((n_routes, law.d // 2))
    z = [np.ones(law.d // 2, dtype=complex)]
    for _ in range(m):
        psi = psi + law.sample_angles(n_routes, seed=rng)
        z.append(np.exp(1j * psi).mean(axis=0))
    return np.array(z)


@pytest.mark.parametrize(
    "law",
    [
        SO2BlockLaw(4, "uniform", [0.7, 1.3]),
        SO2BlockLaw(4, "normal", [0.4, 0.9]),
        SO2BlockLaw(4, "positive_uniform", [0.3, 1.1]),
        SO2BlockLaw(4, "rope", [0.5, 2.0]),
    ],
    ids=lambda law: law.law,
)
def test_so2_route_mean_equals_the_loop_over_the_law_draws(law):
    m, r = 7, 64
    z = _so2_reference(law, m, r, seed=5)
    got = {
        (stat, pb): empirical_route_mean(
            law, m, r, seed=np.random.default_rng(5), statistic=stat, per_block=pb
        )
        for stat in ("norm", "cos")
        for pb in (False, True)
    }
    tol = dict(rtol=0, atol=1e-12)
    np.testing.assert_allclose(got["cos", True], np.abs(z.real), **tol)
    np.testing.assert_allclose(got["cos", False], np.abs(z.real.mean(axis=1)), **tol)
    np.testing.assert_allclose(got["norm", True], np.abs(z), **tol)
    np.testing.assert_allclose(got["norm", False], np.abs(z).max(axis=1), **tol)
    assert got["norm", True].shape == (m + 1, 2) and got["cos", False].shape == (m + 1,)
    for v in got.values():
        assert v.dtype == np.float64


def test_so2_route_mean_at_the_smallest_sizes():
    law = SO2BlockLaw(2, "uniform", 1.0)
    np.testing.assert_array_equal(empirical_route_mean(law, 0, 5, seed=1), [1.0])
    z = _so2_reference(law, 3, 1, seed=2)
    got = empirical_route_mean(law, 3, 1, seed=np.random.default_rng(2), statistic="cos")
    np.testing.assert_allclose(got, np.abs(z.real[:, 0]), rtol=0, atol=1e-12)
    assert np.allclose(got, 1.0) is False  # one route, angles drawn: cos ψ ≠ 1


@pytest.mark.parametrize("law", [HaarLaw(3), HouseholderLaw(3, 1.5)], ids=["haar", "householder"])
def test_matrix_route_mean_equals_the_loop_over_the_law_draws(law):
    m, r = 4, 40
    rng = np.random.default_rng(9)
    p, norms, traces = np.eye(3), [1.0], [1.0]
    p = np.broadcast_to(p, (r, 3, 3))
    for _ in range(m):
        p = law.sample(r, seed=rng) @ p
        mean = p.mean(axis=0)
        norms.append(np.linalg.norm(mean, 2))  # spectral norm, by its own routine
        traces.append(abs(np.einsum("ii", mean)) / 3)
    got_norm = empirical_route_mean(law, m, r, seed=np.random.default_rng(9))
    got_cos = empirical_route_mean(law, m, r, seed=np.random.default_rng(9), statistic="cos")
    np.testing.assert_allclose(got_norm, norms, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got_cos, traces, rtol=1e-12, atol=1e-14)
    assert got_norm.dtype == got_cos.dtype == np.float64
    assert not np.allclose(got_norm[1:], got_cos[1:])  # the two statistics differ here


def test_so2_route_mean_for_one_and_two_distances_and_the_default_route_count():
    law = SO2BlockLaw(2, "positive_uniform", 0.8)
    for m in (1, 2):
        z = _so2_reference(law, m, 16, seed=4)
        got = empirical_route_mean(law, m, 16, seed=np.random.default_rng(4), per_block=True)
        assert got.shape == (m + 1, 1)
        np.testing.assert_allclose(got[:, 0], np.abs(z[:, 0]), rtol=0, atol=1e-12)
    z = _so2_reference(law, 2, 1000, seed=3)  # n_routes defaults to 1000
    got = empirical_route_mean(law, 2, seed=np.random.default_rng(3), statistic="cos")
    np.testing.assert_allclose(got, np.abs(z[:, 0].real), rtol=0, atol=1e-12)
