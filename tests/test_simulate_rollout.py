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
