"""Specification of theory.transport: the exact mathematics of paper [B] (claims AT1–AT17).

References are independent of the code under test: sympy evaluations, scipy quadrature,
mpmath, brute-force search, and Monte Carlo with a fixed seed and a 4-standard-error tolerance.
"""

import math

import mpmath
import numpy as np
import pytest
import sympy as sp
from hypothesis import given
from hypothesis import strategies as st
from scipy import integrate, optimize

from posflow.theory import transport as tr

SE = 4.0  # Monte Carlo tolerance in standard errors


def rotate(v, phi):
    """R(φ) v for planar v of shape (..., 2) and angles broadcasting against (...)."""
    c, s = np.cos(phi), np.sin(phi)
    return np.stack([c * v[..., 0] - s * v[..., 1], s * v[..., 0] + c * v[..., 1]], axis=-1)


# ----------------------------------------------------------------------------------------------
# AT10: far-mass lower bound
# ----------------------------------------------------------------------------------------------


def test_far_mass_derivation_proves_signs_corner_and_limit():
    d = tr.far_mass_derivation()
    assert d.far_derivative_positive and d.near_derivative_negative
    assert d.corner_equals_bound and d.limit_is_one
    assert d.increasing_in_m and d.decreasing_in_lambda and d.proven
    m, k = sp.symbols("M K", positive=True)
    lam = sp.Symbol("lambda", nonnegative=True)
    assert sp.simplify(d.bound - m / (m + k * sp.exp(2 * lam))) == 0
    assert "corner_equals_bound: True" in d.summary()


def test_far_mass_lower_bound_matches_exact_values():
    # λ = 3, K = 4 (digest §5 item 10): 0.0062, 0.0584, 0.383, 0.861, 0.984
    ms = [10, 100, 1000, 10_000, 100_000]
    got = tr.far_mass_lower_bound(ms, 4, 3.0)
    exact = [float(sp.Rational(m) / (m + 4 * sp.exp(6))) for m in ms]
    np.testing.assert_allclose(got, exact, rtol=1e-13)
    np.testing.assert_allclose(got, [0.0062, 0.0584, 0.383, 0.861, 0.984], atol=6e-4)
    assert np.all(np.diff(got) > 0)
    assert tr.far_mass_lower_bound(1, 1, 0.0) == pytest.approx(0.5, abs=1e-15)
    assert tr.far_mass_lower_bound(5, 2, 500.0) == pytest.approx(0.0, abs=1e-300)  # no overflow
    np.testing.assert_allclose(
        tr.near_signal_upper_bound(ms, 4, 3.0), 1.0 - np.asarray(got), rtol=1e-12
    )


@pytest.mark.parametrize(("m", "k", "lam"), [(1, 1, 0.5), (7, 3, 2.0), (500, 4, 3.0)])
def test_far_mass_bound_is_attained_at_the_corner(m, k, lam):
    near, far = tr.far_mass_minimiser(m, k, lam)
    assert near.shape == (k,) and far.shape == (m,)
    assert tr.far_mass(near, far) == pytest.approx(tr.far_mass_lower_bound(m, k, lam), rel=1e-12)


def test_far_mass_brute_force_never_below_bound():
    rng = np.random.default_rng(10)
    for k, m, lam in [(1, 1, 1.0), (3, 5, 2.0), (4, 40, 3.0), (8, 2, 0.3)]:
        near = rng.uniform(-lam, lam, size=(20_000, k))
        far = rng.uniform(-lam, lam, size=(20_000, m))
        # corners of the box are the extreme candidates: include random sign patterns too
        near[:5000] = lam * rng.choice([-1.0, 1.0], size=(5000, k))
        far[:5000] = lam * rng.choice([-1.0, 1.0], size=(5000, m))
        rho = tr.far_mass(near, far)
        bound = tr.far_mass_lower_bound(m, k, lam)
        assert rho.min() >= bound - 1e-15
        # a box-constrained optimiser converges to the bound, never below it
        res = optimize.minimize(
            lambda x, k=k: tr.far_mass(x[:k], x[k:]),
            rng.uniform(-lam, lam, size=k + m),
            method="L-BFGS-B",
            bounds=[(-lam, lam)] * (k + m),
        )
        assert res.fun >= bound - 1e-15
        assert res.fun == pytest.approx(bound, rel=1e-6)


@given(
    k=st.integers(1, 12),
    m=st.integers(1, 60),
    lam=st.floats(0.0, 8.0, allow_nan=False),
    u=st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=72, max_size=72),
)
def test_far_mass_bound_holds_for_any_box_point(k, m, lam, u):
    x = lam * np.asarray(u)
    assert tr.far_mass(x[:k], x[k : k + m]) >= tr.far_mass_lower_bound(m, k, lam) * (1 - 1e-12)


def test_far_mass_bad_inputs():
    with pytest.raises(ValueError, match="M"):
        tr.far_mass_lower_bound(0, 1, 1.0)
    with pytest.raises(ValueError, match="K"):
        tr.far_mass_lower_bound(3, 0.5, 1.0)
    with pytest.raises(ValueError, match="lam"):
        tr.far_mass_lower_bound(3, 1, -0.1)
    with pytest.raises(ValueError, match="lam"):
        tr.far_mass_lower_bound(3, 1, float("nan"))
    with pytest.raises(ValueError, match=r"M .*index 1"):
        tr.far_mass_lower_bound([2, 0], 1, 1.0)
    with pytest.raises(TypeError, match="lam"):
        tr.far_mass_lower_bound(3, 1, "big")
    with pytest.raises(ValueError, match="far_logits"):
        tr.far_mass([0.0], [])
    with pytest.raises(ValueError, match="near_logits"):
        tr.far_mass([np.inf], [0.0])
    with pytest.raises(ValueError, match="M"):
        tr.far_mass_minimiser(2.5, 1, 1.0)


# ----------------------------------------------------------------------------------------------
# AT13: ALiBi far mass
# ----------------------------------------------------------------------------------------------


def test_alibi_derivation_bounded_in_context_length():
    d = tr.alibi_far_mass_derivation()
    assert d.bounded_in_l and d.ratio_bound_dominates and d.limit_free_of_l
    lam, m, w, big_l = sp.symbols("lambda m W L", positive=True)
    # the finite-L expression evaluated exactly agrees with the numeric bound
    vals = {lam: sp.Rational(3, 2), m: sp.Rational(1, 4), w: 8, big_l: 512}
    exact = float(d.sup_far_mass.subs(vals).evalf(30))
    assert tr.alibi_far_mass_bound(0.25, 8, 1.5, 512) == pytest.approx(exact, rel=1e-13)
    lim = float(d.limit_l_to_infinity.subs(vals).evalf(30))
    assert tr.alibi_far_mass_bound(0.25, 8, 1.5) == pytest.approx(lim, rel=1e-13)


@pytest.mark.parametrize(("m", "w", "lam"), [(0.5, 4, 2.0), (2.0**-8, 64, 1.0), (1.0, 1, 0.0)])
def test_alibi_bound_attained_and_free_of_context_length(m, w, lam):
    lengths = [w, w + 1, 512, 4096, 65536]
    bounds = tr.alibi_far_mass_bound(m, w, lam, lengths)
    assert bounds[0] == 0.0
    for length, b in zip(lengths[1:], bounds[1:], strict=True):
        corner = np.r_[np.full(w, -lam), np.full(length - w, lam)]
        assert tr.alibi_far_mass(corner, m, w) == pytest.approx(b, rel=1e-11)
    limit = tr.alibi_far_mass_bound(m, w, lam)
    assert np.all(np.diff(bounds) >= 0) and bounds[-1] <= limit * (1 + 1e-15)
    if m * (4096 - w) > 40:  # e^{-m(L-W)} below 1e-17: the three lengths agree to 1e-9
        assert np.ptp(bounds[2:]) < 1e-9 and bounds[-1] == pytest.approx(limit, abs=1e-9)
    assert tr.alibi_far_mass_ratio_bound(m, w, lam) >= limit


def test_alibi_random_logits_never_exceed_bound():
    rng = np.random.default_rng(13)
    m, w, lam = 0.3, 5, 1.5
    for length in (6, 50, 512, 4096):
        s = rng.uniform(-lam, lam, size=(200, length))
        assert tr.alibi_far_mass(s, m, w).max() <= tr.alibi_far_mass_bound(m, w, lam, length)
    assert tr.alibi_far_mass(np.zeros(3), m, w) == 0.0


def test_alibi_bad_inputs():
    with pytest.raises(ValueError, match="m must be > 0"):
        tr.alibi_far_mass_bound(0.0, 4, 1.0)
    with pytest.raises(ValueError, match="W"):
        tr.alibi_far_mass_bound(0.5, 0, 1.0)
    with pytest.raises(ValueError, match="lam"):
        tr.alibi_far_mass_bound(0.5, 4, float("nan"))
    with pytest.raises(ValueError, match="L"):
        tr.alibi_far_mass_bound(0.5, 4, 1.0, [512, 0])
    with pytest.raises(ValueError, match="content_logits"):
        tr.alibi_far_mass([0.0, np.nan], 0.5, 1)


# ----------------------------------------------------------------------------------------------
# AT1, AT16, AT17: characteristic functions of angle laws
# ----------------------------------------------------------------------------------------------


def test_characteristic_functions_derived_by_integration():
    for law in tr.ANGLE_LAWS:
        c = tr.angle_characteristic(law)
        assert c.matches_closed_form, law
    uni, nor = tr.angle_characteristic("uniform"), tr.angle_characteristic("normal")
    pos, det = tr.angle_characteristic("uniform_positive"), tr.angle_characteristic("deterministic")
    assert sp.simplify(uni.value - sp.sin(uni.parameter) / uni.parameter) == 0
    assert sp.simplify(nor.value - sp.exp(-(nor.parameter**2) / 2)) == 0
    assert uni.symmetric and nor.symmetric and not pos.symmetric
    assert uni.sum_sin == 0 and nor.sum_sin == 0
    assert det.unit_modulus and not uni.unit_modulus  # RoPE: |E e^{iΣθ}| = 1 for all L (AT16)
    f, big_l = pos.parameter, pos.steps
    assert sp.simplify(pos.sum_cos - (sp.sin(f) / f) ** big_l * sp.cos(big_l * f)) == 0


@pytest.mark.parametrize("law", ["uniform", "uniform_positive"])
def test_two_step_sum_moments_by_double_integration(law):
    c = tr.angle_characteristic(law)
    t1, t2 = sp.symbols("t1 t2", real=True)
    lo, hi = c.support
    dens = c.density**2
    e_cos = sp.integrate(sp.cos(t1 + t2) * dens, (t1, lo, hi), (t2, lo, hi))
    e_sin = sp.integrate(sp.sin(t1 + t2) * dens, (t1, lo, hi), (t2, lo, hi))
    assert sp.simplify(sp.expand_trig(e_cos - c.sum_cos.subs(c.steps, 2))) == 0
    assert sp.simplify(sp.expand_trig(e_sin - c.sum_sin.subs(c.steps, 2))) == 0


@pytest.mark.parametrize(
    ("law", "param", "density", "lo", "hi"),
    [
        ("uniform", 1.3, lambda t: 1 / 2.6, -1.3, 1.3),
        ("normal", 0.7, lambda t: math.exp(-t * t / 0.98) / math.sqrt(0.98 * math.pi), -12, 12),
        ("uniform_positive", 0.4, lambda t: 1 / 0.8, 0.0, 0.8),
    ],
)
def test_characteristic_value_against_quadrature(law, param, density, lo, hi):
    re = integrate.quad(lambda t: math.cos(t) * density(t), lo, hi, epsabs=1e-14)[0]
    im = integrate.quad(lambda t: math.sin(t) * density(t), lo, hi, epsabs=1e-14)[0]
    assert tr.characteristic_value(law, param) == pytest.approx(complex(re, im), abs=1e-12)


@pytest.mark.parametrize(
    ("law", "param"), [("uniform", 1.0), ("normal", 0.5), ("uniform_positive", 0.3)]
)
def test_phase_moments_monte_carlo(law, param):
    rng = np.random.default_rng(1)
    n, steps = 200_000, 5
    if law == "uniform":
        theta = rng.uniform(-param, param, size=(n, steps))
    elif law == "normal":
        theta = rng.normal(0.0, param, size=(n, steps))
    else:
        theta = rng.uniform(0.0, 2 * param, size=(n, steps))
    total = theta.sum(axis=1)
    mc_cos, mc_sin = np.cos(total), np.sin(total)
    e_cos, e_sin = tr.phase_moments(law, param, steps)
    assert abs(mc_cos.mean() - e_cos) < SE * mc_cos.std() / math.sqrt(n)
    assert abs(mc_sin.mean() - e_sin) < SE * mc_sin.std() / math.sqrt(n)
    if law == "uniform":  # AT1 closed form
        assert e_cos == pytest.approx(math.sin(1.0) ** 5, rel=1e-14) and e_sin == 0.0


def test_positive_mean_phase_drifts_linearly_and_rope_never_decays():
    f = 0.01
    for steps in (512, 8192):
        c, s = tr.phase_moments("uniform_positive", f, steps)
        # the mean phase is L·f (AT17): linear drift as for RoPE
        assert math.atan2(s, c) == pytest.approx(math.remainder(steps * f, 2 * math.pi), abs=1e-9)
        c, s = tr.phase_moments("deterministic", f, steps)
        assert math.hypot(c, s) == pytest.approx(1.0, abs=1e-15)  # AT16: no decay
    assert tr.phase_moments("uniform", 2.0, 0) == (1.0, 0.0)


def test_log_sinc_is_accurate_where_gamma_is_near_one():
    f = np.array([1e-8, 1.2115e-4, 1e-2, 0.5, 1.0, 3.0, 4.0])
    with mpmath.workdps(60):
        ref = [float(mpmath.log(abs(mpmath.sin(mpmath.mpf(x)) / mpmath.mpf(x)))) for x in f]
    np.testing.assert_allclose(tr.log_sinc(f), ref, rtol=1e-15)
    assert tr.log_sinc(1.2115e-4) == pytest.approx(-(1.2115e-4**2) / 6, rel=1e-8)
    assert tr.log_sinc(0.0) == 0.0
    big = tr.phase_moments("uniform", 1.2115e-4, 65536)[0]
    assert big == pytest.approx(math.exp(65536 * tr.log_sinc(1.2115e-4)), rel=1e-15)


def test_angle_law_bad_inputs():
    with pytest.raises(ValueError, match="law"):
        tr.characteristic_value("cauchy", 1.0)
    with pytest.raises(TypeError, match="law"):
        tr.angle_characteristic(3)
    with pytest.raises(ValueError, match="param"):
        tr.characteristic_value("uniform", -1.0)
    with pytest.raises(ValueError, match="L"):
        tr.phase_moments("uniform", 1.0, -1)
    with pytest.raises(ValueError, match="f"):
        tr.log_sinc(float("nan"))


# ----------------------------------------------------------------------------------------------
# AT4: Householder steps
# ----------------------------------------------------------------------------------------------


def test_householder_derivation():
    beta = sp.Symbol("beta", real=True)
    for d in (2, 3, 4):
        h = tr.householder_derivation(d)
        assert h.isotropic and h.gram_defect_rank_one
        assert h.second_moment_by_symmetry == sp.eye(d) / d
        assert h.mean_matrix == (1 - beta / d) * sp.eye(d)
        assert sp.expand(h.gram_defect - (beta**2 - 2 * beta)) == 0
        assert h.orthogonal_betas == sp.FiniteSet(0, 2)
        assert h.eigenvalues == {sp.Integer(1): d - 1, 1 - beta: 1}
    with pytest.raises(ValueError, match="d"):
        tr.householder_derivation(7)


def test_householder_mean_and_spectrum_numerically():
    rng = np.random.default_rng(4)
    d, beta, n = 4, 0.7, 40_000
    w = rng.normal(size=(n, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    h = np.eye(d) - beta * w[:, :, None] * w[:, None, :]
    mean, se = h.mean(axis=0), h.std(axis=0) / math.sqrt(n)
    target = tr.householder_mean_factor(beta, d) * np.eye(d)
    assert np.all(np.abs(mean - target) <= SE * se + 1e-15)
    one = np.eye(d) - beta * np.outer(w[0], w[0])
    np.testing.assert_allclose(np.linalg.eigvalsh(one), [1 - beta, 1, 1, 1], atol=1e-12)
    for b, orth in [(0.0, True), (2.0, True), (0.5, False), (1.9, False)]:
        hb = np.eye(d) - b * np.outer(w[1], w[1])
        assert np.allclose(hb.T @ hb, np.eye(d), atol=1e-12) is orth
    np.testing.assert_allclose(tr.householder_mean_factor([0.0, 2.0], 8), [1.0, 0.75])
    with pytest.raises(ValueError, match="beta"):
        tr.householder_mean_factor(np.nan, 3)


# ----------------------------------------------------------------------------------------------
# AT5, AT6: mixing windows
# ----------------------------------------------------------------------------------------------


def test_mixing_window_exact_cases():
    assert tr.mixing_window(0.5, 0.25) == 2
    assert tr.mixing_window(0.5, 0.1) == 4
    assert tr.mixing_window(0.0, 0.5) == 1
    np.testing.assert_array_equal(tr.mixing_window([0.0, 0.5, 0.9], 0.1), [1, 4, 22])
    gamma = tr.householder_mean_factor(1.0, 8)  # Householder: W ≈ d ln(1/ε)/β
    assert tr.mixing_window(gamma, 0.01) == math.ceil(math.log(100) / -math.log(7 / 8))


@given(eps=st.floats(1e-6, 0.99, allow_nan=False), gamma=st.floats(1e-3, 0.999, allow_nan=False))
def test_mixing_window_is_smallest_sufficient_step_count(eps, gamma):
    w = tr.mixing_window(gamma, eps)
    ratio = math.log(eps) / math.log(gamma)
    if abs(ratio - round(ratio)) < 1e-9 * ratio:
        return  # float tie: either neighbour is defensible
    assert w >= 1 and gamma**w <= eps
    assert w == 1 or gamma ** (w - 1) > eps


def test_blocks_mixed_at_head_dim_96():
    counts = tr.blocks_mixed(96, 1e4, 0.1, [512, 8192, 65536])
    print(f"AT6 blocks with gamma_b^n < 0.1 at n = 512, 8192, 65536 (of 48): {counts.tolist()}")
    np.testing.assert_array_equal(counts, [10, 17, 23])
    bw = tr.block_mixing_windows(96, 0.1)
    float_counts = [int(np.sum(n * bw.log_gamma < math.log(0.1))) for n in (512, 8192, 65536)]
    assert float_counts == counts.tolist()
    assert tr.blocks_mixed(96, 1e4, 0.1, 0) == 0


def test_block_windows_and_their_approximation():
    bw = tr.block_mixing_windows(96, 0.01)
    print("AT6 per-block windows (eps = 0.01):", np.round(bw.ratio[:3], 2), f"{bw.ratio[-1]:.4g}")
    np.testing.assert_allclose(bw.ratio[:3], [26.68, 39.62, 58.59], atol=6e-3)
    assert bw.ratio[-1] == pytest.approx(1.8825e9, rel=1e-4)
    np.testing.assert_array_equal(bw.window, np.ceil(bw.ratio).astype(int))
    assert np.all(bw.approx > bw.ratio)  # the approximation over-estimates
    small = bw.frequencies < 0.05
    f = bw.frequencies[small]
    np.testing.assert_allclose(bw.approx[small] / bw.ratio[small] - 1, f * f / 30, rtol=1e-3)
    d = tr.window_approximation_derivation()
    f_sym = sp.Symbol("f", positive=True)
    assert d.gamma_from_integration and d.approx_overestimates
    assert d.leading_term == -(f_sym**2) / 6
    assert d.approx_ratio_series.removeO().coeff(f_sym, 2) == sp.Rational(-1, 30)


def test_window_bad_inputs():
    with pytest.raises(ValueError, match="eps"):
        tr.mixing_window(0.5, 1.0)
    with pytest.raises(ValueError, match="gamma"):
        tr.mixing_window(1.0, 0.1)
    with pytest.raises(ValueError, match="d must be an even integer"):
        tr.rope_frequencies(95)
    with pytest.raises(ValueError, match="base"):
        tr.blocks_mixed(96, 1.0, 0.1, 512)
    with pytest.raises(ValueError, match="n"):
        tr.blocks_mixed(96, 1e4, 0.1, [512, -1])


# ----------------------------------------------------------------------------------------------
# AT7, AT8, AT9: concentration
# ----------------------------------------------------------------------------------------------


def test_exact_sphere_tail_below_levy_bound_and_matches_density():
    for d in (2, 3, 8, 32, 96, 512):
        eps = np.linspace(0.0, 1.2, 61)
        assert np.all(tr.sphere_coordinate_tail(d, eps) <= tr.levy_tail(d, eps) + 1e-15)
    assert tr.sphere_coordinate_tail(3, 0.3) == pytest.approx(0.7, rel=1e-13)  # Archimedes
    for d in (5, 96):
        const = 1 / integrate.quad(lambda x, d=d: (1 - x * x) ** ((d - 3) / 2), -1, 1)[0]
        ref = 2 * const * integrate.quad(lambda x, d=d: (1 - x * x) ** ((d - 3) / 2), 0.2, 1)[0]
        assert tr.sphere_coordinate_tail(d, 0.2) == pytest.approx(ref, rel=1e-9)


def test_levy_tail_monte_carlo():
    rng = np.random.default_rng(7)
    d, n = 96, 100_000
    g = rng.normal(size=(n, d))
    u1 = g[:, 0] / np.linalg.norm(g, axis=1)
    for eps in (0.1, 0.2, 0.3):
        hit = np.abs(u1) > eps
        p = tr.sphere_coordinate_tail(d, eps)
        assert abs(hit.mean() - p) < SE * math.sqrt(p * (1 - p) / n)
        assert hit.mean() <= tr.levy_tail(d, eps)
    assert tr.levy_tail(96, 0.3) == pytest.approx(2 * math.exp(-96 * 0.09 / 2), rel=1e-15)


def test_hoeffding_tail_holds_for_mixed_blocks():
    rng = np.random.default_rng(8)
    d, n = 96, 100_000
    q, k = rng.normal(size=d), rng.normal(size=d)
    qn = np.hypot(q[: d // 2], q[d // 2 :])  # half-split pairing
    kn = np.hypot(k[: d // 2], k[d // 2 :])
    psi = rng.uniform(0, 2 * np.pi, size=(n, d // 2))
    s = np.cos(psi) @ (qn * kn)
    scale = np.linalg.norm(q) * np.linalg.norm(k)
    for eps in (0.1, 0.2, 0.3):
        t = eps * scale
        emp = np.mean(np.abs(s) > t)
        bound = tr.hoeffding_tail(t, qn, kn)
        assert emp <= bound
        assert bound == pytest.approx(2 * math.exp(-(t**2) / (2 * np.sum((qn * kn) ** 2))))
    np.testing.assert_array_equal(tr.hoeffding_tail([0.0, 1.0], [0.0], [1.0]), [2.0, 0.0])
    with pytest.raises(ValueError, match="k_norms"):
        tr.hoeffding_tail(1.0, [1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="q_norms"):
        tr.hoeffding_tail(1.0, [-1.0], [1.0])


def test_score_gap_union_bound_and_quantile():
    rng = np.random.default_rng(9)
    d, m, trials = 64, 1000, 300
    q = np.zeros(d)
    q[0] = 1.0
    g = rng.normal(size=(trials, m, d))
    scores = g[..., 0] / np.linalg.norm(g, axis=-1)  # ⟨q, u_j⟩ for uniform unit u_j
    max_abs = np.abs(scores).max(axis=1)
    for delta in (0.05, 0.5):
        t = tr.score_gap_quantile(delta, m, d)
        assert tr.score_gap_union_bound(t, m, d) == pytest.approx(delta, rel=1e-12)
        freq = np.mean(max_abs > t)
        assert freq <= delta + SE * math.sqrt(delta * (1 - delta) / trials)
    scale = tr.score_gap_quantile(1.0, m, d)
    assert scale == pytest.approx(math.sqrt(2 * math.log(2 * m) / d), rel=1e-14)
    assert max_abs.mean() < scale  # the largest far score stays below √(2 ln 2M / d)
    assert tr.score_gap_quantile(1.0, m, d, rate=0.25) == pytest.approx(math.sqrt(2) * scale)
    with pytest.raises(ValueError, match="delta"):
        tr.score_gap_quantile(0.0, m, d)
    with pytest.raises(ValueError, match="rate"):
        tr.score_gap_union_bound(0.1, m, d, rate=0.0)
    with pytest.raises(ValueError, match="d"):
        tr.levy_tail(1, 0.1)


# ----------------------------------------------------------------------------------------------
# AT14: value-side incoherence
# ----------------------------------------------------------------------------------------------


def test_value_side_derivation():
    d = tr.value_side_derivation()
    assert d.rotation_split and d.cross_term_is_power and d.factor_matches


def _brute_expectation(a, v, n, c):
    """Σ_{j,k} a_j a_k c^{|n_j-n_k|} ⟨v_j, v_k⟩ for a real (symmetric-law) c."""
    gram = np.einsum("jbx,kbx->jkb", v, v)
    powers = c[None, None, :] ** np.abs(n[:, None] - n[None, :])[..., None]
    return float(np.einsum("j,k,jkb->", a, a, powers * gram))


def test_value_side_expectation_equals_pairwise_sum():
    rng = np.random.default_rng(14)
    a, v = rng.normal(size=30), rng.normal(size=(30, 3, 2))
    n = rng.choice(200, size=30, replace=False)
    c = np.array([0.9, 0.3, -0.5])
    assert tr.value_side_expectation(a, v, n, c) == pytest.approx(
        _brute_expectation(a, v, n, c), rel=1e-12
    )
    coherent = tr.value_side_expectation(a, v, n, 1.0)  # no rotation at all
    assert coherent == pytest.approx(tr.value_side_bound(a, v, 0.0).coherent, rel=1e-12)


@pytest.mark.parametrize(("law", "param"), [("uniform", 1.0), ("uniform_positive", 0.3)])
def test_value_side_expectation_monte_carlo(law, param):
    rng = np.random.default_rng(15)
    m, draws = 40, 20_000
    a = rng.uniform(0.0, 1.0, size=m)
    v = rng.normal(size=(m, 2))
    n = np.sort(rng.choice(120, size=m, replace=False))
    lo, hi = (-param, param) if law == "uniform" else (0.0, 2 * param)
    theta = rng.uniform(lo, hi, size=(draws, n.max()))
    phi = np.concatenate([np.zeros((draws, 1)), np.cumsum(theta, axis=1)], axis=1)[:, n]
    out = np.einsum("j,rjx->rx", a, rotate(v[None], phi))
    sq = np.sum(out**2, axis=1)
    chi = tr.characteristic_value(law, param)
    exact = tr.value_side_expectation(a, v, n, chi)
    assert abs(sq.mean() - exact) < SE * sq.std() / math.sqrt(draws)
    bound = tr.value_side_bound(a, v, abs(chi))
    assert exact <= bound.bound


def test_value_side_digest_example():
    # a = 1 (θ ~ Unif[-1, 1]), M = 200 uniform weights, identical unit values: 0.0558 ≤ 0.0581
    m = 200
    a, v = np.full(m, 1 / m), np.tile([1.0, 0.0], (m, 1))
    c = tr.characteristic_value("uniform", 1.0).real
    res = tr.value_side_bound(a, v, c)
    exact = tr.value_side_expectation(a, v, np.arange(m), c)
    print(f"AT14 example: exact {exact:.4f} <= bound {res.bound:.4f}; coherent {res.coherent}")
    assert res.bound == pytest.approx(0.0581, abs=5e-5)
    # independent closed form (1/M²)(M + 2 Σ_{m≥1} (M - m) c^m); the digest's Monte Carlo
    # figure 0.0558 lies 1.1 % below this exact 0.0564 (a 200 000-draw Monte Carlo gives 0.0564)
    ref = (m + 2 * sum((m - k) * c**k for k in range(1, m))) / m**2
    assert exact == pytest.approx(ref, rel=1e-12) and exact <= res.bound
    assert exact == pytest.approx(0.0558, rel=0.015)
    assert res.coherent == pytest.approx(1.0, rel=1e-12)
    assert res.diagonal == pytest.approx(1 / m, rel=1e-12)


@given(
    c=st.floats(-0.99, 0.99, allow_nan=False),
    seed=st.integers(0, 2**32 - 1),
    m=st.integers(1, 25),
)
def test_value_side_bound_dominates_exact_expectation(c, seed, m):
    rng = np.random.default_rng(seed)
    a, v = rng.normal(size=m), rng.normal(size=(m, 2))
    n = rng.choice(4 * m, size=m, replace=False)
    exact = tr.value_side_expectation(a, v, n, c)
    assert exact <= tr.value_side_bound(a, v, c).bound * (1 + 1e-12) + 1e-12


def test_value_side_bad_inputs():
    a, v = np.ones(3), np.ones((3, 2))
    with pytest.raises(ValueError, match="c must satisfy"):
        tr.value_side_bound(a, v, 1.0)
    with pytest.raises(ValueError, match="values"):
        tr.value_side_bound(a, np.ones((3, 3)), 0.5)
    with pytest.raises(ValueError, match="weights"):
        tr.value_side_bound(np.ones(2), v, 0.5)
    with pytest.raises(ValueError, match="distances must be distinct"):
        tr.value_side_expectation(a, v, [1, 1, 2], 0.5)
    with pytest.raises(ValueError, match="chi"):
        tr.value_side_expectation(a, v, [0, 1, 2], 1.5)


# ----------------------------------------------------------------------------------------------
# AT16: RoPE phases beyond the training length
# ----------------------------------------------------------------------------------------------


def test_rope_blocks_leaving_the_trained_range():
    f = tr.rope_frequencies(96)
    assert f[0] == 1.0 and f[-1] == pytest.approx(1e4 ** (-94 / 96), rel=1e-15)
    unwrapped = tr.rope_unwrapped_blocks(f, 512)
    np.testing.assert_array_equal(np.flatnonzero(unwrapped), np.arange(23, 48))
    assert not tr.rope_blocks_outside_training(f, 512, 511).any()
    for dist in (1024, 8192, 65536):
        out = tr.rope_blocks_outside_training(f, 512, dist)
        phase = tr.rope_phase(dist, f)
        assert not (out & ~unwrapped).any()
        np.testing.assert_array_equal(out, unwrapped & (phase > 512 * f))
        seen = np.mod(np.arange(512)[:, None] * f[None, :], 2 * np.pi)
        assert np.all(phase[out] > seen[:, out].max(axis=0))  # never seen in training
        print(f"AT16 blocks outside the trained range (L_train 512) at D = {dist}: {out.sum()}")
    assert tr.rope_phase(1000, 0.001) == pytest.approx(1.0, abs=1e-15)
    with pytest.raises(ValueError, match="L_train"):
        tr.rope_unwrapped_blocks(f, 0)
    with pytest.raises(ValueError, match="distance"):
        tr.rope_phase(-1, f)


# ----------------------------------------------------------------------------------------------
# the argument checks shared by theory.transport (theory._transport_common): exact messages
# ----------------------------------------------------------------------------------------------

import dataclasses  # noqa: E402

from posflow.theory import _transport_common as tc  # noqa: E402

F = "np.float64"  # NumPy 2 repr of a float64 entry


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tc.real_array("x", True),
         "x must be a real number or array of real numbers; got a bool"),
        (lambda: tc.real_array("x", [1.0, np.nan]), f"x must not be NaN; got {F}(nan) at index 1"),
        (lambda: tc.real_array("x", [[1.0, 2.0], [3.0, np.inf]]),
         f"x must be finite; got {F}(inf) at index (1, 1)"),
        (lambda: tc.real_array("x", np.inf), f"x must be finite; got {F}(inf)"),
        (lambda: tc.real_array("x", -1, lo=0), f"x must be >= 0; got {F}(-1.0)"),
        (lambda: tc.real_array("x", 0, lo=0, lo_open=True), f"x must be > 0; got {F}(0.0)"),
        (lambda: tc.real_array("x", 2, hi=1), f"x must be <= 1; got {F}(2.0)"),
        (lambda: tc.real_array("x", 1, hi=1, hi_open=True), f"x must be < 1; got {F}(1.0)"),
        (lambda: tc.real_array("x", 0, lo=0, lo_open=True, hi=1, hi_open=True),
         f"x must be in (0, 1); got {F}(0.0)"),
        (lambda: tc.real_array("x", 1, lo=0, lo_open=True, hi=1, hi_open=True),
         f"x must be in (0, 1); got {F}(1.0)"),
        (lambda: tc.real_array("x", -1, lo=0, hi=1), f"x must be in [0, 1]; got {F}(-1.0)"),
        (lambda: tc.real_array("x", 2, lo=0, hi=1), f"x must be in [0, 1]; got {F}(2.0)"),
        (lambda: tc.real_scalar("x", [1.0, 2.0]), "x must be a scalar; got an array of shape (2,)"),
        (lambda: tc.int_array("k", np.bool_(True)),
         "k must be an integer or array of integers; got a bool"),
        (lambda: tc.int_array("k", [1.5]), f"k must be integer-valued; got {F}(1.5) at index 0"),
        (lambda: tc.int_array("k", [0.0, 2.0**63]),
         f"k must be below 2**62 in magnitude; got {F}(9.223372036854776e+18) at index 1"),
        (lambda: tc.int_array("k", ["a"]),
         "k must be an integer or array of integers; got dtype <U1"),
        (lambda: tc.int_array("k", [3], lo=4),
         "k must be an integer >= 4; got np.int64(3) at index 0"),
        (lambda: tc.int_scalar("k", "3"), "k must be an integer; got str"),
        (lambda: tc.int_scalar("k", np.array([1, 2])),
         "k must be a scalar integer; got an array of shape (2,)"),
    ],
)
def test_transport_argument_errors_are_exact(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == message


def test_transport_integer_checks_accept_integral_values_up_to_2_62():
    for x in ([1.0, -2.0], np.array([1, -2], dtype=np.int32), np.array([1, 2], dtype=np.uint8)):
        out = tc.int_array("k", x)
        assert out.dtype == np.int64
        assert out.tolist() == [int(v) for v in x]
    out = tc.int_array("k", 2.0**62)  # the bound itself is allowed
    assert out.dtype == np.int64 and int(out) == 2**62
    assert tc.int_scalar("k", 7.0) == 7 and type(tc.int_scalar("k", 7.0)) is int


def test_derivation_summary_lists_the_fields_in_order():
    @dataclasses.dataclass(frozen=True)
    class Facts(tc.DerivationSummary):
        a: int
        b: str

    assert Facts(1, "x").summary() == "Facts\n  a: 1\n  b: x"


# the argument checks of the tail bounds (theory._transport_tails): exact messages and edges
_TAIL_ERRORS = [
    (lambda: tr.levy_tail(1, 0.1), "d must be an integer >= 2; got np.int64(1)"),
    (lambda: tr.levy_tail(3, -0.5), "eps must be >= 0; got np.float64(-0.5)"),
    (lambda: tr.sphere_coordinate_tail(1, 0.1), "d must be an integer >= 2; got np.int64(1)"),
    (lambda: tr.sphere_coordinate_tail(3, -0.5), "eps must be >= 0; got np.float64(-0.5)"),
    (lambda: tr.hoeffding_tail(-1, [1.0], [1.0]), "t must be >= 0; got np.float64(-1.0)"),
    (lambda: tr.hoeffding_tail(1, [-1.0], [1.0]),
     "q_norms must be >= 0; got np.float64(-1.0) at index 0"),
    (lambda: tr.hoeffding_tail(1, [1.0], [-1.0]),
     "k_norms must be >= 0; got np.float64(-1.0) at index 0"),
    (lambda: tr.hoeffding_tail(1, [[1.0]], [[1.0]]),
     "q_norms must be a 1-D array with B >= 1 entries; got shape (1, 1)"),
    (lambda: tr.hoeffding_tail(1, [], []),
     "q_norms must be a 1-D array with B >= 1 entries; got shape (0,)"),
    (lambda: tr.score_gap_union_bound(-1, 1, 1), "t must be >= 0; got np.float64(-1.0)"),
    (lambda: tr.score_gap_union_bound(0.5, 0, 1), "M must be an integer >= 1; got np.int64(0)"),
    (lambda: tr.score_gap_union_bound(0.5, 1, 0), "d must be an integer >= 1; got np.int64(0)"),
    (lambda: tr.score_gap_union_bound(0.5, 1, 1, rate=0), "rate must be > 0; got np.float64(0.0)"),
    (lambda: tr.score_gap_quantile(0, 1, 1), "delta must be in (0, 1]; got np.float64(0.0)"),
    (lambda: tr.score_gap_quantile(1.5, 1, 1), "delta must be in (0, 1]; got np.float64(1.5)"),
    (lambda: tr.score_gap_quantile(0.5, 0, 1), "M must be an integer >= 1; got np.int64(0)"),
    (lambda: tr.score_gap_quantile(0.5, 1, 0), "d must be an integer >= 1; got np.int64(0)"),
    (lambda: tr.score_gap_quantile(0.5, 1, 1, rate=0), "rate must be > 0; got np.float64(0.0)"),
    (lambda: tr.score_gap_quantile(0.5, 1, 1, rate=-1), "rate must be > 0; got np.float64(-1.0)"),
]


@pytest.mark.parametrize(("call", "message"), _TAIL_ERRORS)
def test_tail_argument_errors_are_exact(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == message


def test_tail_bounds_at_the_smallest_arguments():
    # M = 1, d = 1, δ = 1: 2 M e^{-c d t²} and √(ln(2M/δ)/(c d)) typed in
    assert tr.score_gap_union_bound(0.5, 1, 1) == pytest.approx(2 * math.exp(-0.125), rel=1e-15)
    assert tr.score_gap_quantile(1.0, 1, 1) == pytest.approx(math.sqrt(2 * math.log(2)), rel=1e-15)
