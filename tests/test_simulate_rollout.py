"""posflow.simulate.rollout against a plain dense matrix-product reference."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posflow.simulate._kernel import Kernel
from posflow.simulate.kernels import (
    alibi_kernel,
    alibi_kernels,
    alibi_slopes,
    dense_kernel,
    uniform_kernel,
)
from posflow.simulate.rollout import (
    constant,
    diagonal,
    influence,
    power_decay,
    rollout_matrix,
    rollout_summary,
    stationary_profiles,
    total_mixing,
)

floats = dict(allow_nan=False, allow_infinity=False)


def dense_rollout(kernels, lambdas):
    """P = R_{T-1} ⋯ R_0 by explicit matrix products (the reference)."""
    n = kernels[0].n if kernels else 1
    P = np.eye(n)
    for K, lam in zip(kernels, lambdas, strict=False):
        P = ((1 - lam) * np.eye(n) + lam * K.dense()) @ P
    return P


@st.composite
def layered(draw, n_max=64, t_max=20):
    n = draw(st.integers(1, n_max))
    T = draw(st.integers(0, t_max))
    H = draw(st.integers(1, 4))
    shared = draw(st.booleans())
    lam = draw(st.lists(st.floats(0.0, 1.0, **floats), min_size=T, max_size=T))

    def one():
        m = draw(st.lists(st.floats(0.0, 3.0, **floats), min_size=H, max_size=H))
        c = draw(st.lists(st.floats(-50.0, 50.0, **floats), min_size=H, max_size=H))
        return alibi_kernel(n, m, c)

    ks = [one()] * T if shared else [one() for _ in range(T)]
    return n, ks, np.array(lam)


@given(layered())
def test_influence_matrix_and_diagonal_match_dense_products(case):
    n, ks, lam = case
    P = dense_rollout(ks, lam) if ks else np.eye(n)
    np.testing.assert_allclose(rollout_matrix(ks, lam, n=n), P, rtol=0, atol=1e-12)
    np.testing.assert_allclose(influence(ks, lam, n=n), P[-1], rtol=0, atol=1e-12)
    if ks:
        np.testing.assert_allclose(diagonal(ks, lam), np.diag(P), rtol=1e-12, atol=1e-300)
        # one shared kernel gives the same as the repeated list
        if all(k is ks[0] for k in ks):
            np.testing.assert_allclose(influence(ks[0], lam), P[-1], rtol=0, atol=1e-12)
            np.testing.assert_allclose(diagonal(ks[0], lam), np.diag(P), rtol=1e-12)


@given(layered(n_max=32, t_max=12))
def test_rollout_invariants(case):
    n, ks, lam = case
    P = rollout_matrix(ks, lam, n=n)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(np.triu(P, 1) == 0)
    assert P[0, 0] == pytest.approx(1.0, abs=1e-15)
    assert (P >= -1e-15).all()
    p = influence(ks, lam, n=n)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)


def test_dense_and_uniform_kernels_use_the_same_chain():
    rng = np.random.default_rng(3)
    n, T = 17, 6
    raw = np.tril(rng.random((n, n)))
    A = raw / raw.sum(axis=1, keepdims=True)
    ks = [dense_kernel(A), uniform_kernel(n)] * 3
    lam = rng.random(T)
    P = dense_rollout(ks, lam)
    np.testing.assert_allclose(influence(ks, lam), P[-1], atol=1e-13)
    np.testing.assert_allclose(diagonal(ks, lam), np.diag(P), rtol=1e-12)


def test_depth_zero_gives_last_unit_vector():
    p = influence(alibi_kernel(5, 1.0), [])
    np.testing.assert_array_equal(p, [0, 0, 0, 0, 1])
    np.testing.assert_array_equal(rollout_matrix(uniform_kernel(3), []), np.eye(3))


def test_diagonal_log_survives_underflow():
    # P_ii = (1 - λ(1 - 1/(i+1)))^T underflows for T = 1e5; the log stays exact
    K, T, lam = uniform_kernel(8), 100_000, 0.5
    logd = diagonal(K, constant(lam, T), log=True)
    expected = T * np.log1p(-lam * (1 - 1 / np.arange(1, 9)))
    np.testing.assert_allclose(logd, expected, rtol=1e-12)
    assert diagonal(K, constant(lam, T))[-1] == 0.0  # underflows in linear space, as expected


def test_summary_reports_the_log_diagonal_where_the_value_underflows():
    # λ = 0.9, T = 1e5, uniform kernel: min_i P_ii = (0.1 + 0.9/n)^T = e^{-2.2e5} underflows;
    # the summary keeps log min_i P_ii (closed form, row n − 1) and flags the underflow, and
    # nothing it returns is NaN or inf
    n, T, lam = 64, 100_000, 0.9
    K = uniform_kernel(n)
    s = rollout_summary(K, constant(lam, T))
    assert s["log_min_diag"] == pytest.approx(T * np.log(1 - lam + lam / n), rel=1e-12)
    assert s["min_diag"] == 0.0 and s["min_diag_underflows"] is True
    prof = s.pop("profile")
    assert np.isfinite(prof).all() and prof.sum() == pytest.approx(1.0, abs=1e-12)
    assert all(np.isfinite(v) for v in s.values())
    logd = diagonal(K, constant(lam, T), log=True)
    expected = T * np.log1p(-lam * (1 - 1 / np.arange(1, n + 1)))
    np.testing.assert_allclose(logd, expected, rtol=1e-12)
    assert np.isfinite(diagonal(K, constant(lam, T))).all()
    # shallow: the plain value is representable and not flagged
    s = rollout_summary(K, constant(lam, 10))
    assert not s["min_diag_underflows"]
    assert s["min_diag"] == pytest.approx((1 - lam + lam / n) ** 10, rel=1e-12)


def test_summary_log_diagonal_is_minus_inf_only_for_an_exact_zero_factor():
    # λ = 1 and A[2, 2] = 0: P_22 = 0 exactly (not an underflow)
    A = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    A[2] = [0.5, 0.5, 0.0, 0.0]
    s = rollout_summary(dense_kernel(A), constant(1.0, 3))
    assert s["log_min_diag"] == -np.inf and s["min_diag"] == 0.0
    assert not s["min_diag_underflows"]


def test_a_diagonal_entry_negative_at_rounding_level_gives_zero_not_nan():
    # A[1, 1] = −1e-13 passes validation (≥ 0 within rounding); with λ = 1 the factor
    # 1 − λ(1 − A[1, 1]) = −1e-13 is 0 at rounding level: P_11 = 0 and log P_11 = −inf, the other
    # rows as the exact product formula gives them (0.25² = 0.0625)
    A = np.array([[1.0, 0.0, 0.0], [1.0 + 1e-13, -1e-13, 0.0], [0.5, 0.25, 0.25]])
    d = diagonal(dense_kernel(A), constant(1.0, 2))
    assert d.tolist() == [1.0, 0.0, 0.0625]
    logd = diagonal(dense_kernel(A), constant(1.0, 2), log=True)
    assert logd[1] == -np.inf and logd[2] == pytest.approx(2 * np.log(0.25), rel=1e-15)
    d = diagonal(dense_kernel(A), constant(0.5, 2))  # λ < 1: the factor stays positive
    assert d[1] == pytest.approx((0.5 - 0.5e-13) ** 2, rel=1e-15)


def test_total_mixing_and_summary():
    K = alibi_kernel(40, [0.5, 0.05])
    lam = power_decay(0.5, 1.5, 30)
    delta = np.max(1 - K.diagonal())
    assert total_mixing(K, lam) == pytest.approx(lam.sum() * delta, rel=1e-14)
    s = rollout_summary(K, lam)
    P = dense_rollout([K] * 30, lam)
    assert s["p_first"] == pytest.approx(P[-1, 0], abs=1e-14)
    assert s["argmin"] == int(np.argmin(P[-1]))
    # PB3 equality: for a stationary ALiBi kernel the minimum diagonal sits at row n - 1
    assert s["min_diag"] == pytest.approx(np.prod(1 - lam * delta), rel=1e-12)
    assert s["min_diag"] == pytest.approx(np.diag(P).min(), rel=1e-12)


def test_n_that_agrees_with_the_kernels_is_accepted():
    K = uniform_kernel(8)
    np.testing.assert_array_equal(influence(K, [0.3], n=8), influence(K, [0.3]))
    np.testing.assert_array_equal(influence([], [], n=np.int64(3)), [0.0, 0.0, 1.0])
    np.testing.assert_array_equal(diagonal(K, [0.3], log=np.bool_(True)), diagonal(K, [0.3], True))


def test_schedules():
    np.testing.assert_array_equal(constant(0.3, 4), [0.3] * 4)
    np.testing.assert_allclose(power_decay(0.8, 2.0, 4), [0.8, 0.2, 0.8 / 9, 0.05])
    assert constant(1.0, 0).shape == (0,)


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: influence(uniform_kernel(3), [0.5, 1.2]), ValueError, "lambdas must lie in"),
        (lambda: influence(uniform_kernel(3), [np.nan]), ValueError, "lambdas must be finite"),
        (lambda: influence(uniform_kernel(3), 0.5), TypeError, "lambdas"),
        (lambda: influence([uniform_kernel(3)] * 2, [0.5]), ValueError, "one kernel per layer"),
        (
            lambda: influence([uniform_kernel(3), uniform_kernel(4)], [0.1, 0.2]),
            ValueError,
            "same n",
        ),
        (lambda: influence([np.eye(3)], [0.1]), TypeError, r"kernels\[0\]"),
        (lambda: influence("abc", [0.1]), TypeError, "kernels"),
        (lambda: constant(-0.1, 3), ValueError, "lam"),
        (lambda: constant(0.1, -3), ValueError, "T must be nonnegative"),
        (lambda: power_decay(0.5, np.nan, 3), ValueError, "beta"),
        (lambda: power_decay(1.5, 1.0, 3), ValueError, "lam0"),
        (lambda: rollout_matrix(uniform_kernel(10**6), [0.1]), ValueError, "GiB"),
        # probe 1: sizes refused before allocating (these died with MemoryError)
        (
            lambda: constant(0.1, 10**12),
            ValueError,
            r"T = 1000000000000 is too large: constant \(a float64 vector of length T\)",
        ),
        (lambda: power_decay(0.1, 1.0, 10**12), ValueError, "T = 1000000000000 is too large"),
        (
            lambda: influence([], [], n=10**12),
            ValueError,
            r"n = 1000000000000 is too large: influence \(a float64 vector of length n\)",
        ),
        # probe 2: n must be an integer ≥ 1
        (lambda: influence([], [], n=0), ValueError, "n must be at least 1; got 0"),
        (lambda: influence([], [], n=-1), ValueError, "n must be at least 1; got -1"),
        (lambda: influence([], [], n=2.5), TypeError, "n must be an integer"),
        (lambda: rollout_matrix([], [], n=0), ValueError, "n must be at least 1"),
        (lambda: influence([], []), ValueError, "n must be given"),
        # probe 3: n that disagrees with the kernels is refused, not ignored
        (
            lambda: influence(uniform_kernel(64), [0.1], n=32),
            ValueError,
            r"n must equal the kernels' size: got n=32 for kernels of n=64",
        ),
        (lambda: influence([uniform_kernel(64)], [0.1], n=32), ValueError, "n must equal"),
        (lambda: rollout_matrix(uniform_kernel(64), [0.1], n=32), ValueError, "n must equal"),
        # probe 4: log must be a bool
        (
            lambda: diagonal(uniform_kernel(4), [0.1], log="yes"),
            TypeError,
            r"log must be a bool \(True or False\); got 'yes'",
        ),
        (lambda: diagonal(uniform_kernel(4), [0.1], log=1), TypeError, "log must be a bool"),
    ],
)
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# -- mass conservation --------------------------------------------------------------------


def drift(p) -> float:
    """|Σp − 1| with the sum exactly rounded (math.fsum), so the check adds no error."""
    return abs(math.fsum(np.asarray(p).ravel()) - 1.0)


def plain_chain(ks, lam):
    """The vector chain of steps without the mass projection, from e_{n-1}."""
    p = np.zeros((1, ks[0].n))
    p[0, -1] = 1.0
    for t in range(len(lam) - 1, -1, -1):
        p = ks[t]._residual_step(p, float(lam[t]))
    return p[0]


def vector_dense_chain(ks, lam):
    """p ↦ p ((1 − λ) I + λ A) with the dense matrices (the reference)."""
    p = np.zeros(ks[0].n)
    p[-1] = 1.0
    for t in range(len(lam) - 1, -1, -1):
        p = (1 - lam[t]) * p + lam[t] * (p @ ks[t].dense())
    return p


N_MASS = 1024
RNG = np.random.default_rng(15)
MASS_CASES = {
    "uniform": lambda T: [uniform_kernel(N_MASS)] * T,
    "alibi 8 heads": lambda T: [alibi_kernel(N_MASS, alibi_slopes(8))] * T,
    "alibi one slow head": lambda T: [alibi_kernel(N_MASS, 0.1)] * T,
    "alibi + content per layer": lambda T: alibi_kernels(
        N_MASS, alibi_slopes(8), RNG.uniform(-5, 8, (T, 8))
    ),
    "alibi negative slopes + content": lambda T: alibi_kernels(
        N_MASS, [-0.05, 0.1, -0.3, 0.02], RNG.uniform(-3, 3, (T, 4))
    ),
}


@pytest.mark.parametrize("T", [32, 64])
@pytest.mark.parametrize("name", sorted(MASS_CASES))
def test_attention_only_rollout_conserves_mass_to_1e_15_at_n_1024(name, T):
    # λ ≡ 1: the plain chain drifts by 20–60 ulp here (up to 3.6e-14); the projected one keeps
    # Σp within 1e-15 (in practice within 1 ulp), and moves no entry by more than the drift
    ks = MASS_CASES[name](T)
    lam = np.ones(T)
    p = influence(ks, lam)
    assert drift(p) <= 1e-15
    raw = plain_chain(ks, lam)
    change = np.abs(p - raw) / np.maximum(raw, 1e-300)
    assert change.max() <= drift(raw) + 4 * 2.0**-53
    assert (p >= 0).all()


@pytest.mark.parametrize("lam", [0.3, 0.97])
@pytest.mark.parametrize("name", ["uniform", "alibi + content per layer"])
def test_residual_rollout_conserves_mass_too(name, lam):
    ks = MASS_CASES[name](48)
    assert drift(influence(ks, np.full(48, lam))) <= 1e-15


def test_dense_kernels_within_rounding_of_stochastic_conserve_mass_too():
    A = alibi_kernel(N_MASS, alibi_slopes(4)).dense()
    K = dense_kernel(A)
    assert K._row_stochastic
    p = influence(K, np.ones(40))
    assert drift(p) <= 1e-15
    # and the result still equals the dense vector chain, entry by entry to its own drift
    ref = vector_dense_chain([K] * 40, np.ones(40))
    np.testing.assert_allclose(p, ref, rtol=drift(ref) + 4 * 2.0**-53, atol=0)


def test_projected_rollout_still_matches_the_dense_products():
    n, T = 300, 32
    ks = alibi_kernels(n, [0.5, 0.05, -0.02], RNG.uniform(-4, 4, (T, 3)))
    lam = np.ones(T)
    np.testing.assert_allclose(influence(ks, lam), vector_dense_chain(ks, lam), rtol=0, atol=1e-14)
    P = rollout_matrix(ks[:8], lam[:8])
    np.testing.assert_allclose(P, dense_rollout(ks[:8], lam[:8]), rtol=0, atol=1e-13)
    assert max(drift(row) for row in P) <= 1e-15


def test_a_step_that_leaks_mass_keeps_its_loss(monkeypatch):
    # the projection only removes rounding: a residual step that loses 1e-6 λ of its attention
    # branch (mutant leaky-attention-branch) shows the loss (1 − 1e-6 λ)^T, also for small λ
    def leaky(self, p, lam):
        return (1.0 - lam) * p + lam * (1.0 - 1e-6) * self._apply(p)

    monkeypatch.setattr(Kernel, "_residual_step", leaky)
    n, T = 64, 50
    for K in (uniform_kernel(n), alibi_kernel(n, [-0.1, 0.2], [1.0, 0.0])):
        for lam in (1.0, 1e-3, 1e-6):
            loss = 1.0 - math.fsum(influence(K, np.full(T, lam)))
            expected = -math.expm1(T * math.log1p(-lam * 1e-6))
            assert loss == pytest.approx(expected, rel=1e-5)


def test_a_dense_kernel_that_is_not_stochastic_keeps_its_defect():
    # rows summing to 1 − 1e-10 (within the 1e-9 that dense_kernel admits): a real defect,
    # not rounding, so the rollout is not projected and loses mass like the dense chain
    n, T = 50, 20
    A = uniform_kernel(n).dense() * (1.0 - 1e-10)
    K = dense_kernel(A)
    assert not K._row_stochastic
    p = influence(K, np.ones(T))
    np.testing.assert_array_equal(p, plain_chain([K] * T, np.ones(T)))
    assert 1.0 - math.fsum(p) == pytest.approx(T * 1e-10, rel=1e-6)


# ------------------------------------------------------------------------------------------
# stationary_profiles: one chain, every requested depth


def _random_causal(n):
    A = np.tril(np.random.default_rng(3).random((n, n)))
    return A / A.sum(axis=1, keepdims=True)


@pytest.mark.parametrize(
    "K",
    [
        alibi_kernel(40, [0.05, 0.5], [2.0, -1.0]),
        alibi_kernel(40, [-0.3, 0.2], [1.0, 0.0]),
        uniform_kernel(40),
        dense_kernel(_random_causal(40)),
    ],
    ids=["alibi", "alibi-negative-slope", "uniform", "dense"],
)
def test_stationary_profiles_match_dense_matrix_powers(K):
    lam, depths = 0.3, [1, 2, 5, 17, 64]
    P = stationary_profiles(K, lam, depths)
    R = (1 - lam) * np.eye(K.n) + lam * np.asarray(K.dense())
    assert P.shape == (len(depths), K.n)
    for row, T in zip(P, depths, strict=True):
        np.testing.assert_allclose(row, np.linalg.matrix_power(R, T)[-1], rtol=1e-12, atol=1e-15)


def test_stationary_profiles_are_the_plain_unprojected_chain():
    # bit for bit the residual steps of the kernel, extended from one depth to the next
    K = alibi_kernel(30, alibi_slopes(4), 1.5)
    P = stationary_profiles(K, 0.7, range(1, 11))
    row = np.eye(1, 30, 29)
    for T in range(10):
        row = K._residual_step(row, 0.7)
        np.testing.assert_array_equal(P[T], row[0])


@pytest.mark.parametrize(
    "lam, depths, match",
    [(1.5, [1], "lam"), (0.5, [], "increasing"), (0.5, [0, 1], "increasing"),
     (0.5, [3, 3], "increasing"), (0.5, [1.5], "integer")],
)  # fmt: skip
def test_stationary_profiles_bad_input(lam, depths, match):
    with pytest.raises((ValueError, TypeError), match=match):
        stationary_profiles(uniform_kernel(5), lam, depths)


# ------------------------------------------------------------------------------------------
# messages, boundaries and degenerate depths


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: influence(5, [0.1]), TypeError,
         r"^kernels must be a Kernel or a sequence of Kernel; got int$"),
        (lambda: influence([np.eye(3)], [0.1]), TypeError,
         r"^kernels\[0\] must be a Kernel; got ndarray$"),
        (lambda: influence([uniform_kernel(4), uniform_kernel(3)], [0.1, 0.2]), ValueError,
         r"^kernels must all have the same n; got sizes \[3, 4\]$"),
        (lambda: influence([], []), ValueError,
         r"^n must be given when kernels is an empty sequence$"),
        (lambda: influence(uniform_kernel(6), [0.1], n=5), ValueError,
         r"^n must equal the kernels' size: got n=5 for kernels of n=6 "
         r"\(omit n; it is only needed when kernels is an empty sequence\)$"),
        (lambda: diagonal([], []), ValueError,
         r"^diagonal needs at least one layer \(or a single Kernel\)$"),
        (lambda: stationary_profiles(3, 0.5, [1]), TypeError,
         r"^kernel must be a Kernel; got int$"),
        (lambda: stationary_profiles(uniform_kernel(3), -0.5, [1]), ValueError,
         r"^lam must be in \[0, 1\]; got -0.5$"),
        (lambda: constant(1.5, 3), ValueError, r"^lam must be a number in \[0, 1\]; got 1.5$"),
        (lambda: power_decay(0.5, -1.0, 3), ValueError,
         r"^beta must be nonnegative \(so that λ_t <= λ0 <= 1\); got -1.0$"),
        (lambda: power_decay(0.1, 1.0, 10**12), ValueError,
         r"^T = 1000000000000 is too large: power_decay \(two float64 vectors of length T\) "
         r"would need 14901.2 GiB"),
        # 3 float64 arrays of 10⁶ × 10⁶: 2.4e13 bytes = 22351.7 GiB
        (lambda: rollout_matrix(uniform_kernel(10**6), [0.1]), ValueError,
         r"^rollout_matrix would need 22351.7 GiB for a dense \(1000000, 1000000\) float64 "
         r"array"),
    ],
)  # fmt: skip
def test_bad_input_messages(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_the_closed_ends_of_the_ranges_are_accepted():
    K = alibi_kernel(5, [0.4, 1.3])
    np.testing.assert_array_equal(constant(0.0, 2), [0.0, 0.0])
    np.testing.assert_array_equal(power_decay(0.0, 1.0, 3), [0.0, 0.0, 0.0])
    np.testing.assert_array_equal(power_decay(1.0, 0.0, 3), [1.0, 1.0, 1.0])
    # λ = 0 leaves e_{n−1} in place; λ = 1 gives the rows of A and A² (last row)
    np.testing.assert_array_equal(stationary_profiles(K, 0.0, [1, 2]), np.eye(1, 5, 4)[[0, 0]])
    A = K.dense()
    P = stationary_profiles(K, 1.0, [1, 2])
    np.testing.assert_allclose(P, [A[-1], (A @ A)[-1]], rtol=1e-13, atol=1e-16)


def test_power_decay_is_float_division_by_powers_of_t():
    # λ_t = λ0/(t+1)^β computed in float64 (β = 0.5: 1/√(t+1))
    np.testing.assert_allclose(power_decay(0.9, 0.5, 5), 0.9 / np.sqrt(np.arange(1, 6)),
                               rtol=1e-15)  # fmt: skip
    assert power_decay(0.9, 0.5, 5).dtype == np.float64


def test_zero_layers_give_the_unit_diagonal_and_an_empty_summary():
    K = uniform_kernel(4)
    d, logd = diagonal(K, []), diagonal(K, [], log=True)
    np.testing.assert_array_equal(d, np.ones(4))
    np.testing.assert_array_equal(logd, np.zeros(4))
    assert d.dtype == logd.dtype == np.float64
    s = rollout_summary(K, [])
    np.testing.assert_array_equal(s.pop("profile"), [0.0, 0.0, 0.0, 1.0])
    assert s == {"n": 4, "T": 0, "p_first": 0.0, "p_last": 1.0, "argmin": 0, "p_min": 0.0,
                 "min_diag": 1.0, "log_min_diag": 0.0, "min_diag_underflows": False,
                 "sum_lambda_delta": 0.0, "sum_lambda": 0.0}  # fmt: skip
    # the empty sum Σλδ is +0, also for a kernel with δ < 0 (diagonal 1 + 1e-10, admitted
    # by dense_kernel's 1e-9 row tolerance)
    s = rollout_summary(dense_kernel(np.eye(3) * (1 + 1e-10)), [])
    assert math.copysign(1.0, s["sum_lambda_delta"]) == 1.0


def test_summary_entries_against_the_dense_rollout():
    ks = [alibi_kernel(6, [0.3, -0.2], [1.0, 0.5]), uniform_kernel(6), alibi_kernel(6, 0.8)]
    lam = np.array([0.9, 0.4, 0.7])
    s = rollout_summary(ks, lam)
    P = dense_rollout(ks, lam)
    p = P[-1]
    assert sorted(s) == sorted(["n", "T", "p_first", "p_last", "argmin", "p_min", "min_diag",
                                "log_min_diag", "min_diag_underflows", "sum_lambda_delta",
                                "sum_lambda", "profile"])  # fmt: skip
    assert (s["n"], s["T"], s["argmin"]) == (6, 3, int(np.argmin(p)))
    for key, ref in (("p_first", p[0]), ("p_last", p[-1]), ("p_min", p.min())):
        assert s[key] == pytest.approx(ref, rel=1e-13), key
    assert s["p_last"] == pytest.approx(P[-1, -1], rel=1e-13)  # causal: p(n−1) = P_{n−1,n−1}
    assert s["min_diag"] == pytest.approx(np.diag(P).min(), rel=1e-13)
    # Σ λ_t δ_t with δ_t = max_i (1 − A_t[i, i]) read off the dense matrices
    deltas = [np.max(1.0 - np.diag(k.dense())) for k in ks]
    ref = sum(lt * dt for lt, dt in zip(lam, deltas, strict=True))
    assert s["sum_lambda_delta"] == pytest.approx(ref, rel=1e-14)
    assert total_mixing(ks, lam) == s["sum_lambda_delta"]
    assert s["sum_lambda"] == pytest.approx(2.0, rel=1e-15)


def test_summary_underflow_is_silent_even_when_numpy_raises_on_underflow():
    # n = 2, slope 0: A = [[1, 0], [1/2, 1/2]], λ = 1, T = 1100: P_11 = 2^−1100 underflows,
    # log P_11 = −1100 log 2 (closed form); the summary takes exp of it without tripping
    # a caller's np.errstate(under="raise")
    T = 1100
    with np.errstate(under="raise"):
        s = rollout_summary(alibi_kernel(2, 0.0), constant(1.0, T))
    assert s["log_min_diag"] == pytest.approx(-T * np.log(2.0), rel=1e-14)
    assert s["min_diag"] == 0.0 and s["min_diag_underflows"] is True
    assert s["p_first"] == 1.0 and s["p_last"] == 0.0


def test_influence_memory_is_linear_in_n():
    # one step of the uniform kernel at n = 10⁶: p = (1 − λ) e_{n−1} + λ (1/n, …, 1/n);
    # an n × n intermediate (8 TB) could not be allocated
    n, lam = 10**6, 0.25
    p = influence(uniform_kernel(n), [lam])
    assert p.shape == (n,)
    np.testing.assert_allclose(p[:-1], lam / n, rtol=1e-12)
    assert p[-1] == pytest.approx(1 - lam + lam / n, rel=1e-15)


# -- the 80 % memory rule, with the available memory pinned ---------------------------------


@pytest.fixture
def memory(monkeypatch):
    """Pin posflow's view of the available memory (bytes); the rule refuses > 80 % of it."""

    def pin(nbytes):
        monkeypatch.setattr("posflow.simulate._validate.available_memory", lambda: nbytes)

    return pin


def test_schedules_and_bare_influence_follow_the_memory_rule(memory):
    memory(1000)  # 800 bytes usable: 100 float64 entries
    assert constant(0.5, 100).shape == (100,)
    assert power_decay(0.5, 1.0, 50).shape == (50,)  # two vectors of length T
    np.testing.assert_array_equal(influence([], [], n=100), np.eye(1, 100, 99)[0])
    with pytest.raises(ValueError, match=r"^T = 101 is too large: constant \(a float64 vector"):
        constant(0.5, 101)
    with pytest.raises(ValueError, match=r"^T = 51 is too large: power_decay \(two float64"):
        power_decay(0.5, 1.0, 51)
    with pytest.raises(ValueError, match=r"^n = 101 is too large: influence \(a float64 vector"):
        influence([], [], n=101)


def test_rollout_matrix_budgets_three_dense_copies(memory):
    K = uniform_kernel(5)
    ref = dense_rollout([K], [0.5])
    memory(750)  # 600 bytes usable = 3 · 8 · 5²
    np.testing.assert_allclose(rollout_matrix(K, [0.5]), ref, rtol=0, atol=1e-15)
    memory(749)
    with pytest.raises(ValueError, match=r"^rollout_matrix would need 0.0 GiB for a dense \(5, "):
        rollout_matrix(K, [0.5])


def test_influence_of_existing_kernels_is_not_refused_for_memory(memory):
    # the kernels' vectors exist already; only an n given without kernels is checked
    K = uniform_kernel(8)
    memory(0)
    np.testing.assert_array_equal(influence(K, []), np.eye(1, 8, 7)[0])
    p = influence([K, K], [0.5, 0.5])
    assert p.sum() == pytest.approx(1.0, abs=1e-15)


# -- the rounding budget of one step ---------------------------------------------------------

U = 2.0**-53


@pytest.mark.parametrize(
    "make, heads, lam",
    [(lambda: uniform_kernel(64), 1, 0.5), (lambda: alibi_kernel(64, alibi_slopes(4)), 4, 1.0),
     (lambda: alibi_kernel(64, [0.5, 0.1]), 2, 0.25)],
)  # fmt: skip
def test_mass_defect_is_rounding_up_to_the_documented_budget(monkeypatch, make, heads, lam):
    # One step that scales e_{n−1} by c = 1 − k u (exact in float64). A defect k u within the
    # budget (8 + 8 λ (n + H)) u of the module docstring counts as rounding and is projected
    # away (Σp back to 1); one ulp beyond it is a real loss and is kept (Σp = c).
    K = make()
    limit = 8 + 8 * lam * (K.n + heads)
    assert limit == int(limit)
    for k, kept in ((int(limit), False), (int(limit) + 1, True)):
        c = 1.0 - k * U
        monkeypatch.setattr(K, "_residual_step", lambda p, lam, c=c: p * c)
        p = influence(K, [lam])
        assert p[:-1].max() == 0.0
        if kept:
            assert p[-1] == c
        else:
            assert p[-1] == pytest.approx(1.0, abs=2 * U)  # one division and one product
