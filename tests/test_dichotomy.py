"""Property tests of the infinite-depth dichotomy (claims PB4–PB6), across theory and simulate."""

import numpy as np
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.simulate.kernels import alibi_kernel, dense_kernel, uniform_kernel
from posflow.simulate.rollout import diagonal, influence, power_decay
from posflow.theory.rollout import collapses

t = sp.Symbol("t", integer=True, nonnegative=True)
floats = dict(allow_nan=False, allow_infinity=False)


@settings(max_examples=25, deadline=None)
@given(
    lam0=st.floats(0.05, 1.0, **floats),
    beta=st.floats(1.05, 3.0, **floats),
    n=st.integers(2, 64),
    m=st.floats(0.0, 2.0, **floats),
    c=st.floats(-10.0, 10.0, **floats),
)
def test_summable_schedules_keep_the_diagonal_above_the_product_bound(lam0, beta, n, m, c):
    # Σλ_tδ_t < ∞: for every T ≤ 1e4, min_i P_ii ≥ ∏_{t<T}(1 − λ_t δ) ≥ ∏_{t≥0}(1 − λ_t δ)
    K = alibi_kernel(n, m, c)
    delta = float(np.max(1 - K.diagonal()))
    lam = power_decay(lam0, beta, 10_000)
    with np.errstate(divide="ignore"):
        partial = np.cumsum(np.log1p(-lam * delta))
    for T in (1, 10, 100, 1000, 10_000):
        assert diagonal(K, lam[:T], log=True).min() >= partial[T - 1] - 1e-9
    # the bound at depth stays positive (no collapse)
    assert np.isfinite(partial[-1]) or lam0 * delta == 1.0


@st.composite
def reachable_kernel(draw):
    n = draw(st.integers(2, 24))
    eps = draw(st.floats(0.01, 0.5 / n, **floats))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    A = np.tril(rng.exponential(size=(n, n)))
    A /= A.sum(axis=1, keepdims=True)
    A = (1 - n * eps) * A
    A[:, 0] += n * eps  # A[i,0] ≥ n·eps ≥ eps
    return dense_kernel(A), float(A[:, 0].min())


@settings(max_examples=25, deadline=None)
@given(
    kernel=reachable_kernel(),
    lam0=st.floats(0.05, 1.0, **floats),
    beta=st.floats(0.0, 1.0, **floats),
    T=st.integers(1, 400),
)
def test_divergent_schedules_obey_the_collapse_bound(kernel, lam0, beta, T):
    K, eps = kernel
    lam = power_decay(lam0, beta, T)
    p = influence(K, lam)
    assert p[1:].sum() <= np.exp(-eps * lam.sum()) * (1 + 1e-12) + 1e-15


@settings(max_examples=10, deadline=None)
@given(
    beta=st.sampled_from(
        [
            sp.Rational(1, 4),
            sp.Rational(1, 2),
            sp.Rational(3, 4),
            1,
            sp.Rational(3, 2),
            2,
            sp.Rational(5, 2),
            3,
        ]
    )
)
def test_symbolic_collapse_agrees_with_numerics_on_power_decay(beta):
    # the numeric criterion resolves |β − 1| ≥ 1/2 (and β = 1) within depth 1e4; closer to 1
    # the decade ratio 10^{1−β} of a convergent sum is too near 1 to separate at this depth
    sym = collapses(sp.Rational(1, 2) / (t + 1) ** beta, t)
    assert sym is bool(beta <= 1)
    # numeric: with the uniform kernel, 1 − P[n−1, 0] keeps falling decade after decade iff
    # Σλ_t = ∞ (the decade ratio of log(1 − P) stays ≳ 1 for β ≤ 1, → 0 for β > 1)
    K = uniform_kernel(32)
    logs = [
        np.log(influence(K, power_decay(0.5, float(beta), T))[1:].sum())
        for T in (100, 1000, 10_000)
    ]
    s1, s2 = logs[1] - logs[0], logs[2] - logs[1]
    numeric = bool(s2 < 0 and s2 / s1 >= 0.6)
    assert numeric is sym
