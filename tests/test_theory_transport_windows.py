"""Tests of posflow.theory._transport_windows against independent references.

References: closed forms, exact rationals, brute force. This file is the module's own oracle
in the mutation tests (benchmarks/mutation.py: ORACLE).
"""

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
import sympy as sp

from posflow.theory import _transport_windows as tw
from posflow.theory import transport as tr


def smallest_window(gamma, eps):
    """min{n ≥ 1 : γⁿ ≤ ε} by exact rational powers of the float inputs."""
    g, e = Fraction(gamma), Fraction(eps)
    n, power = 1, g
    while power > e:
        n, power = n + 1, power * g
    return n


# ----------------------------------------------------------------------------------------------
# AT5: the mixing window W(γ, ε) = min{n ≥ 1 : γⁿ ≤ ε}
# ----------------------------------------------------------------------------------------------

# (γ, ε): exact ties γⁿ = ε (dyadic), ratios below 1, γ = 0, and generic values
_WINDOW_CASES = [(0.5, 0.5), (0.5, 0.25), (0.5, 2.0**-10), (0.25, 0.125), (0.75, 0.5625),
                 (0.01, 0.5), (0.3, 0.9), (0.0, 0.5), (0.0, 1e-300), (0.9, 0.1), (0.99, 0.01),
                 (0.5, 0.1), (1 - 2.0**-6, 0.5)]  # fmt: skip


@pytest.mark.parametrize(("gamma", "eps"), _WINDOW_CASES)
def test_mixing_window_is_the_smallest_sufficient_step_count(gamma, eps):
    w = tr.mixing_window(gamma, eps)
    assert type(w) is int
    assert w == (1 if gamma == 0.0 else smallest_window(gamma, eps))


def test_mixing_window_broadcasts_to_int64():
    gammas = np.array([0.0, 0.5, 0.9])
    eps = np.array([[0.5], [0.25]])
    got = tr.mixing_window(gammas, eps)
    assert got.dtype == np.int64 and got.shape == (2, 3)
    want = [[1 if g == 0 else smallest_window(g, e) for g in gammas] for e in eps[:, 0]]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(("delta", "window"), [(0.0, 2), (0.5e-12, 2), (2e-12, 3), (1e-9, 3)])
def test_mixing_window_rounds_ratios_within_1e_12_of_an_integer(delta, window):
    """γ = 1/2, ε = 2^{-2(1+δ)}: the ratio ln ε/ln γ is 2(1 + δ); W is 2 for δ ≤ 1e-12.

    ε is a float, so δ is known to ±1e-16 (a float64 ulp), far inside the margins used.
    """
    eps = 0.25 * math.exp(-2.0 * delta * math.log(2.0))
    assert tr.mixing_window(0.5, eps) == window


@pytest.mark.parametrize(
    ("gamma", "eps", "message"),
    [
        (1.0, 0.5, "gamma must be in [0, 1); got np.float64(1.0)"),
        (-0.25, 0.5, "gamma must be in [0, 1); got np.float64(-0.25)"),
        (0.5, 0.0, "eps must be in (0, 1); got np.float64(0.0)"),
        (0.5, 1.0, "eps must be in (0, 1); got np.float64(1.0)"),
    ],
)
def test_mixing_window_argument_errors(gamma, eps, message):
    with pytest.raises(ValueError) as info:
        tr.mixing_window(gamma, eps)
    assert str(info.value) == message


# ----------------------------------------------------------------------------------------------
# AT6: per-block windows of RoPE frequencies with uniform angles
# ----------------------------------------------------------------------------------------------


def mp_log_sinc(f):
    return mpmath.log(mpmath.sin(f) / f)


@pytest.mark.parametrize(("d", "eps", "base"), [(12, 0.05, None), (8, 0.3, 500.0), (2, 0.5, 7.0)])
def test_block_mixing_windows_against_mpmath(d, eps, base):
    """Every field against 50-digit mpmath: f_b = base^{-2b/d} (base 10⁴ by default),
    γ_b = sin f_b/f_b, W_b = min{n : n ln γ_b ≤ ln ε}, approximation 6 ln(1/ε)/f_b².

    Tolerance 4e-15: float64 f_b = base ** (-2b/d) carries the exponent's rounding times
    |ln f_b| ≤ 9.3 (≤ 1e-15 relative); the other fields add a few ulps."""
    bw = tr.block_mixing_windows(d, eps) if base is None else tr.block_mixing_windows(d, eps, base)
    with mpmath.workdps(50):
        b_mp = mpmath.mpf(10000 if base is None else base)
        f = [b_mp ** (-mpmath.mpf(2 * b) / d) for b in range(d // 2)]
        lg = [mp_log_sinc(x) for x in f]
        log_inv_eps = -mpmath.log(mpmath.mpf(eps))
        ratio = [log_inv_eps / -x for x in lg]
        window = [int(mpmath.ceil(r)) for r in ratio]
        approx = [6 * log_inv_eps / (x * x) for x in f]
        gamma = [mpmath.sin(x) / x for x in f]
    assert bw.eps == eps and type(bw.eps) is float
    for got, want in [(bw.frequencies, f), (bw.gamma, gamma), (bw.log_gamma, lg),
                      (bw.ratio, ratio), (bw.approx, approx)]:  # fmt: skip
        assert got.dtype == np.float64 and got.shape == (d // 2,)
        np.testing.assert_allclose(got, [float(x) for x in want], rtol=4e-15)
    assert bw.window.dtype == np.int64
    np.testing.assert_array_equal(bw.window, window)


def test_block_mixing_windows_floor_of_one_step():
    """At ε close to 1 the real window is below 1 for the top block; W is then 1 step."""
    bw = tr.block_mixing_windows(4, 0.99)
    assert bw.ratio[0] < 1.0 and bw.window[0] == 1


@pytest.mark.parametrize("eps", [0.0, 1.0])
def test_block_mixing_windows_eps_errors(eps):
    with pytest.raises(ValueError) as info:
        tr.block_mixing_windows(8, eps)
    assert str(info.value) == f"eps must be in (0, 1); got np.float64({eps})"


def mixed_count(d, base, eps, n):
    """#{b : n ln γ_b < ln ε} in 60-digit mpmath (brute force over the d/2 blocks)."""
    with mpmath.workdps(60):
        base_mp = mpmath.mpf(base)
        logs = [mp_log_sinc(base_mp ** (-mpmath.mpf(2 * b) / d)) for b in range(d // 2)]
        return sum(int(n) * lg < mpmath.log(mpmath.mpf(eps)) for lg in logs)


@pytest.mark.parametrize(
    ("d", "base", "eps", "n"),
    [(2, 10.0, 0.1, [13, 14, 0]), (8, 100.0, 0.2, [1, 10, 50, 400, 10_000]),
     (16, 1e4, 0.05, [[3, 30], [3000, 300_000]]), (12, 2.5, 0.9, 5)],
)  # fmt: skip
def test_blocks_mixed_against_mpmath(d, base, eps, n):
    got = tr.blocks_mixed(d, base, eps, n)
    want = np.vectorize(lambda k: mixed_count(d, base, eps, k))(np.asarray(n))
    if np.ndim(n) == 0:
        assert type(got) is int and got == want
    else:
        assert got.dtype == np.int64 and got.shape == np.shape(n)
        np.testing.assert_array_equal(got, want)


def test_blocks_mixed_single_block_threshold():
    """d = 2 has one block, f = 1: it mixes below ε = 0.1 once n > ln 10 / -ln sin 1 ≈ 13.34."""
    assert math.log(10) / -math.log(math.sin(1.0)) == pytest.approx(13.34, abs=0.01)
    np.testing.assert_array_equal(tr.blocks_mixed(2, 10.0, 0.1, [13, 14]), [0, 1])
    assert tr.blocks_mixed(2.0, 10.0, 0.1, 14) == 1  # integral float d


def test_blocks_mixed_empty_route_lengths():
    got = tr.blocks_mixed(8, 100.0, 0.5, [])
    assert got.shape == (0,) and got.dtype == np.int64


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        ((1, 10.0, 0.1, 3), ValueError, "d must be an integer >= 2; got np.int64(1)"),
        ((4, 1.0, 0.1, 3), ValueError, "base must be a finite number > 1; got 1.0"),
        ((4, Fraction(3), 0.1, 3), TypeError,
         "base must be a real number or array of real numbers; got dtype object"),
        ((4, 10.0, 0.0, 3), ValueError, "eps must be in (0, 1); got np.float64(0.0)"),
        ((4, 10.0, 1.0, 3), ValueError, "eps must be in (0, 1); got np.float64(1.0)"),
        ((4, 10.0, 0.1, [3, -1]), ValueError,
         "n must be an integer >= 0; got np.int64(-1) at index 1"),
    ],
)  # fmt: skip
def test_blocks_mixed_argument_errors(args, error, message):
    with pytest.raises(error) as info:
        tr.blocks_mixed(*args)
    assert str(info.value) == message


# ----------------------------------------------------------------------------------------------
# the series behind W_b ≈ 6 ln(1/ε)/f²
# ----------------------------------------------------------------------------------------------


def test_window_approximation_derivation_series():
    """ln(sin f/f) = -f²/6 - f⁴/180 - f⁶/2835 - … (the classical series, from the Bernoulli
    numbers); inverting -ln γ = (f²/6)(1 + f²/30 + 2f⁴/945 + …) gives
    W_exact/W_approx = 1 - f²/30 + (1/900 - 2/945) f⁴ + … = 1 - f²/30 - 19f⁴/18900 + …"""
    d = tr.window_approximation_derivation()
    f = sp.Symbol("f", positive=True)
    eps = sp.Symbol("epsilon", positive=True)
    assert d.gamma == sp.sin(f) / f and d.gamma_from_integration is True
    assert d.log_gamma_series == -(f**2) / 6 - f**4 / 180 - f**6 / 2835 + sp.O(f**8)
    assert d.leading_term == -(f**2) / 6
    assert d.window_exact == sp.log(1 / eps) / -sp.log(sp.sin(f) / f)
    assert d.window_approx == -6 * sp.log(eps) / f**2
    assert d.approx_ratio_series == 1 - f**2 / 30 - sp.Rational(19, 18900) * f**4 + sp.O(f**6)
    assert d.approx_overestimates is True
    assert "approx_ratio_series: 1 - f**2/30 - 19*f**4/18900 + O(f**6)" in d.summary()


# ----------------------------------------------------------------------------------------------
# AT4: random Householder steps H = I - β w wᵀ
# ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [2, 3])
def test_symmetric_second_moment_is_identity_over_d(d):
    """E w wᵀ = I/d for w uniform on the sphere (isotropy; the trace is E‖w‖² = 1)."""
    assert tw._symmetric_second_moment(d) == sp.eye(d) / d


@pytest.mark.parametrize("d", [2, 3])
def test_householder_derivation_fields(d):
    """E H = (1 - β/d) I; HᵀH - I = β(β - 2) w wᵀ for unit w; det(H - xI) = (1-x)^{d-1}(1-β-x).

    Second moments by the integrals ∫cos²t dt/2π = 1/2 (circle), ∫cos²φ sin φ dφ dθ/4π = 1/3."""
    h = tr.householder_derivation(d)
    beta = sp.Symbol("beta", real=True)
    d_sym = sp.Symbol("d", positive=True, integer=True)
    x = sp.Symbol("x")
    assert h.d == d and type(h.d) is int
    assert h.isotropic is True and h.gram_defect_rank_one is True
    assert h.second_moment_by_symmetry == sp.eye(d) / d
    assert h.second_moment_d2 == sp.eye(2) / 2 and h.second_moment_d3 == sp.eye(3) / 3
    assert h.mean_factor == 1 - beta / d_sym
    assert h.mean_matrix == (1 - beta / d) * sp.eye(d)
    assert h.gram_defect == beta * (beta - 2)
    assert h.orthogonal_betas == sp.FiniteSet(0, 2)
    assert h.characteristic_polynomial == sp.factor((1 - x) ** (d - 1) * (1 - beta - x))
    assert h.eigenvalues == {sp.Integer(1): d - 1, 1 - beta: 1}


@pytest.mark.parametrize(
    ("d", "message"),
    [(7, "d must be at most 6 for the symbolic derivation; got 7"),
     (1, "d must be an integer >= 2; got np.int64(1)")],
)  # fmt: skip
def test_householder_derivation_argument_errors(d, message):
    with pytest.raises(ValueError) as info:
        tr.householder_derivation(d)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("beta", "d"), [(0.5, 1), (0.7, 4), (2.0, 8), (-1.5, 3), ([0.25, 1.0, 3.0], 2)]
)
def test_householder_mean_factor_exact(beta, d):
    """1 - β/d in exact rationals of the float inputs; the result is rounded once or twice."""
    got = tr.householder_mean_factor(beta, d)
    want = [float(1 - Fraction(b) / d) for b in np.atleast_1d(beta)]
    if np.ndim(beta) == 0:
        assert type(got) is float
    np.testing.assert_allclose(np.atleast_1d(got), want, rtol=2.3e-16, atol=1e-300)


@pytest.mark.parametrize(
    ("beta", "d", "message"),
    [(0.5, 0, "d must be an integer >= 1; got np.int64(0)"),
     (np.inf, 3, "beta must be finite; got np.float64(inf)")],
)  # fmt: skip
def test_householder_mean_factor_argument_errors(beta, d, message):
    with pytest.raises(ValueError) as info:
        tr.householder_mean_factor(beta, d)
    assert str(info.value) == message
