"""posflow.simulate.concentration: exact laws and bounds of far scores (claims AT7–AT9) against
quadrature, closed forms and Monte Carlo."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

from posflow.simulate.concentration import (
    SERIES_TERMS,
    balanced_score_tail,
    block_norms,
    cap_lower_bound,
    max_score_quantile,
    max_score_tail,
)
from posflow.simulate.orthogonal import SO2BlockLaw, rotate_blocks
from posflow.theory import transport as th

# -- cap_lower_bound (AT7; moved from tests/test_proofs_checks_extrapolation_scores.py) -------


@pytest.mark.parametrize("eps", [0.05, 0.3, 0.7, 0.95])
def test_at7_sphere_tail_in_d3_is_archimedes(eps):
    # d = 3: u₁ is uniform on [−1, 1] (Archimedes), so Pr(|u₁| > ε) = 1 − ε
    assert th.sphere_coordinate_tail(3, eps) == pytest.approx(1 - eps, rel=1e-12)
    assert cap_lower_bound(3, eps) <= 1 - eps
    assert th.levy_tail(3, eps) >= 1 - eps


@pytest.mark.parametrize("d", [4, 9, 32])
def test_at7_cap_lower_bound_against_quadrature(d):
    # density of u₁ ∝ (1 − x²)^((d−3)/2) on [−1, 1]
    def dens(x):
        return (1 - x * x) ** ((d - 3) / 2)

    z = quad(dens, -1, 1)[0]
    for eps in (0.1, 0.4, 0.8):
        tail = 2 * quad(dens, eps, 1)[0] / z
        assert th.sphere_coordinate_tail(d, eps) == pytest.approx(tail, rel=1e-8)
        assert cap_lower_bound(d, eps) <= tail


def test_cap_lower_bound_closed_form_and_shape():
    # (1 − ε²)^a / (a B(a, ½)), a = (d − 1)/2, by math.gamma; broadcasts d against ε
    d, eps = np.array([[5], [12]]), np.array([0.0, 0.2, 0.6])
    out = cap_lower_bound(d, eps)
    assert out.shape == (2, 3)
    for i, dd in enumerate((5, 12)):
        a = (dd - 1) / 2
        beta = math.gamma(a) * math.gamma(0.5) / math.gamma(a + 0.5)
        want = [(1 - e * e) ** a / (a * beta) for e in eps]
        np.testing.assert_allclose(out[i], want, rtol=1e-13)


# -- block_norms (AT8) ----------------------------------------------------------


def test_block_norms_pair_b_with_b_plus_half():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 8))
    want = [[math.hypot(row[b], row[b + 4]) for b in range(4)] for row in x]
    np.testing.assert_allclose(block_norms(x), want, rtol=1e-15)
    assert block_norms(x[0]).shape == (4,)


# -- balanced_score_tail, max_score_tail, max_score_quantile (AT9) --------------------------


@pytest.mark.parametrize("d", [16, 32])
def test_at9_exact_law_against_monte_carlo(d):
    rng = np.random.default_rng(7)
    N = 200_000
    q = np.zeros(d)
    q[: d // 2] = np.sqrt(2 / d)
    s = rotate_blocks(q, SO2BlockLaw(d, "uniform", scale=np.pi).sample_angles(N, seed=rng)) @ q
    t = np.array([0.05, 0.2, 0.4, 0.6])
    p = balanced_score_tail(t, d)
    mc = (np.abs(s)[:, None] >= t).mean(0)
    se = np.sqrt(p * (1 - p) / N)
    assert np.all(np.abs(mc - p) <= 4 * se + 1 / N)  # 4 SE each, N = 200,000


def test_at9_exact_law_basic_properties():
    t = np.linspace(0, 1, 101)
    p = balanced_score_tail(t, 32)
    assert p[0] == pytest.approx(1.0, abs=1e-12)
    assert p[-1] == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.diff(p) <= 1e-13)
    # variance of s is Σ c_b²/2 = 1/d: ∫ 2t Pr(|s| ≥ t) dt = E s²
    tt = np.linspace(0, 1, 2_001)
    second = np.trapezoid(2 * tt * balanced_score_tail(tt, 32), tt)
    assert second == pytest.approx(1 / 32, rel=1e-5)  # trapezoid, h = 5e-4
    with pytest.raises(ValueError, match="d must be"):
        balanced_score_tail(0.1, 8)


def test_balanced_score_tail_against_quadrature_of_the_characteristic_function():
    # Gil-Pelaez: Pr(|s| ≥ t) = 1 − (2/π) ∫₀^∞ φ(ω) sin(ωt)/ω dω, φ(ω) = J₀(2ω/d)^{d/2}
    from scipy.special import j0

    d, t = 16, 0.3
    integral = quad(lambda w: j0(2 * w / d) ** (d // 2) * math.sin(w * t) / w, 0, 400, limit=400)
    assert float(balanced_score_tail(t, d)) == pytest.approx(
        1 - 2 / math.pi * integral[0], abs=1e-7
    )
    assert SERIES_TERMS == 4096


def test_max_score_tail_is_the_law_of_the_largest_of_m():
    t = np.array([0.0, 0.2, 0.35, 0.5])
    p = balanced_score_tail(t, 32)
    np.testing.assert_allclose(max_score_tail(t, 32, 50), 1 - (1 - p) ** 50, rtol=1e-12)
    assert max_score_tail(0.0, 32, 50) == 1.0
    # brute force: the largest of M = 20 Monte Carlo scores, 20,000 trials, 4 SE
    rng = np.random.default_rng(5)
    law, d, M, R = SO2BlockLaw(32, "uniform", scale=np.pi), 32, 20, 20_000
    q = np.zeros(d)
    q[: d // 2] = np.sqrt(2 / d)
    s = rotate_blocks(q, law.sample_angles(M * R, seed=rng)) @ q
    mx = np.abs(s).reshape(R, M).max(axis=1)
    for level in (0.3, 0.45):
        exact = float(max_score_tail(level, d, M))
        assert abs((mx >= level).mean() - exact) <= 4 * math.sqrt(exact * (1 - exact) / R)


@pytest.mark.parametrize("prob", [0.9, 0.5, 0.1])
def test_max_score_quantile_inverts_the_tail(prob):
    t = max_score_quantile(prob, 32, 1000)
    assert 0 < t < 1
    assert float(max_score_tail(t, 32, 1000)) == pytest.approx(prob, abs=1e-10)
