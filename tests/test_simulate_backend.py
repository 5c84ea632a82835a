"""One array code path for NumPy, array-api-strict, torch and CuPy (simulate.backend).

Every test that takes the ``xp_backend`` fixture runs the one code path once per backend and
compares with the NumPy results (numba recurrence, the same transport functions on NumPy arrays)
to 1e-10 in float64; CuPy (and CUDA torch) are skipped with the reason shown when absent.
"""

import importlib.util

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.simulate import _scan, backend, transport
from posflow.simulate.kernels import alibi_kernel, alibi_slopes, dense_kernel, uniform_kernel
from posflow.simulate.orthogonal import HaarLaw, SO2BlockLaw
from posflow.simulate.rollout import (
    diagonal,
    influence,
    power_decay,
    rollout_matrix,
    rollout_summary,
    total_mixing,
)

RTOL, ATOL = 1e-10, 1e-13


def _cupy_reason():
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed"
    try:
        backend.resolve_backend("cupy")
    except backend.BackendUnavailableError as exc:
        return str(exc)
    return None


def _torch_reason():
    return None if importlib.util.find_spec("torch") else "torch is not installed"


BACKEND_PARAMS = [
    pytest.param(("numpy", None), id="numpy"),
    pytest.param(("array_api_strict", None), id="array_api_strict"),
    pytest.param(
        ("torch", "cpu"),
        id="torch-cpu",
        marks=pytest.mark.skipif(bool(_torch_reason()), reason=str(_torch_reason())),
    ),
]
_cuda = None
if not _torch_reason():
    import torch

    _cuda = None if torch.cuda.is_available() else "torch finds no CUDA device"
BACKEND_PARAMS += [
    pytest.param(
        ("torch", "cuda"),
        id="torch-cuda",
        marks=pytest.mark.skipif(
            bool(_torch_reason() or _cuda), reason=str(_torch_reason() or _cuda)
        ),
    ),
    pytest.param(
        ("cupy", None),
        id="cupy",
        marks=pytest.mark.skipif(bool(_cupy_reason()), reason=str(_cupy_reason())),
    ),
]


@pytest.fixture(params=BACKEND_PARAMS)
def xp_backend(request):
    """(backend name, device) of every backend available here."""
    return request.param


def close(x, ref, rtol=RTOL, atol=ATOL):
    np.testing.assert_allclose(backend.to_numpy(x), ref, rtol=rtol, atol=atol)


def kernels_for(name, dev):
    """The same kernels on NumPy (numba path) and on ``name``: uniform, ALiBi, mixed slopes."""
    rng = np.random.default_rng(3)
    n = 97
    content = rng.normal(0, 2, 8).round(3)
    A = np.tril(rng.exponential(size=(n, n)))
    A /= A.sum(axis=1, keepdims=True)
    specs = [
        lambda **kw: uniform_kernel(n, **kw),
        lambda **kw: alibi_kernel(n, alibi_slopes(8), content, **kw),
        # zero, tiny, huge and negative slopes; content of both signs
        lambda **kw: alibi_kernel(
            n, [0.0, 1e-4, 0.7, 60.0, -0.05], [1.0, -3.0, 0.0, 4.0, 2.0], **kw
        ),
        lambda **kw: dense_kernel(A, **kw),
    ]
    return [(f(), f(backend=name, device=dev)) for f in specs]


# ------------------------------------------------------------------------------------------
# kernels and rollouts on every backend


def test_rollouts_match_numpy_on_every_backend(xp_backend):
    name, dev = xp_backend
    lam = power_decay(0.8, 0.7, 30)
    for k0, k1 in kernels_for(name, dev):
        assert k1.backend == name
        p = influence(k1, lam)
        assert backend.backend_of(p) == name  # the same kind of array comes back
        close(p, influence(k0, lam))
        close(diagonal(k1, lam, log=True), diagonal(k0, lam, log=True))
        close(diagonal(k1, lam), diagonal(k0, lam))
        close(rollout_matrix(k1, lam[:6]), rollout_matrix(k0, lam[:6]))
        close(k1.dense(), k0.dense())
        close(k1.diagonal(), k0.diagonal())
        assert total_mixing(k1, lam) == pytest.approx(total_mixing(k0, lam), rel=1e-12)
        rows = np.random.default_rng(0).standard_normal((3, k0.n))
        close(k1.apply_left(backend.asarray(rows, name, dev)), k0.apply_left(rows))
        close(k1.apply_left(backend.asarray(rows[0], name, dev)), k0.apply_left(rows[0]))


def test_per_layer_kernels_and_summary_match_numpy(xp_backend):
    name, dev = xp_backend
    lam = np.array([0.3, 1.0, 0.0, 0.6])
    slopes = ([0.5], [0.1, 2.0], [0.02], [1.0, 0.25])
    ks0 = [alibi_kernel(300, m, 1.5) for m in slopes]
    ks1 = [alibi_kernel(300, m, 1.5, backend=name, device=dev) for m in slopes]
    close(influence(ks1, lam), influence(ks0, lam))
    close(diagonal(ks1, lam, log=True), diagonal(ks0, lam, log=True))
    s0, s1 = rollout_summary(ks0, lam), rollout_summary(ks1, lam)
    close(s1.pop("profile"), s0.pop("profile"))
    assert s1["argmin"] == s0["argmin"]
    for key in s0:
        assert s1[key] == pytest.approx(s0[key], rel=1e-10, abs=1e-14), key


def test_long_alibi_rollout_with_stationary_rows_matches_numba(xp_backend):
    # n far beyond the table rows (45 / min m) and several levels of the chunked scan
    name, dev = xp_backend
    m, c = [0.5, 0.25, 1.0, 2.0], [0.0, 2.0, -1.0, 0.5]
    k0, k1 = alibi_kernel(5000, m, c), alibi_kernel(5000, m, c, backend=name, device=dev)
    assert k0._w_off.shape[0] < 5000
    lam = np.full(8, 0.4)
    close(influence(k1, lam), influence(k0, lam))


def test_extreme_slopes_and_content_stay_exact_on_every_backend(xp_backend):
    # slopes and content of any finite magnitude: the tables are ratios of terms of Z (each ≤ 1),
    # on every backend; the chunked scan clips slopes at MAX_SLOPE where e^{-m} is already 0
    name, dev = xp_backend
    m, c = [-1e308, 1e308, 900.0, -800.0, 0.2], [1e308, -1e308, 0.0, 2.0, -1e308]
    k0, k1 = alibi_kernel(70, m, c), alibi_kernel(70, m, c, backend=name, device=dev)
    lam = np.full(5, 0.7)
    p = influence(k1, lam)
    assert np.isfinite(backend.to_numpy(p)).all()
    close(p, influence(k0, lam))
    close(k1.dense(), k0.dense())
    close(diagonal(k1, lam, log=True), diagonal(k0, lam, log=True))


def transport_inputs(seed, n_q, n, d, spread):
    """A seeded Generator and queries (n_q, d), keys and values (n, d), angles (n, d/2)."""
    rng = np.random.default_rng(seed)
    q, k, v = (
        rng.standard_normal((n_q, d)),
        rng.standard_normal((n, d)),
        rng.standard_normal((n, d)),
    )
    return rng, q, k, v, rng.uniform(-spread, spread, (n, d // 2))


def test_generic_transport_matches_numpy(xp_backend):
    name, dev = xp_backend
    _, q, k, v, theta = transport_inputs(5, 6, 40, 12, 2.0)

    def on(x):
        return backend.asarray(x, name, dev)

    q_pos = np.array([0, 3, 17, 17, 30, 39])
    for route in transport.ROUTES:
        close(transport.absolute_angles(on(theta), route), transport.absolute_angles(theta, route))
        for pairing in ("half", "interleaved"):
            s1 = transport.so2_scores(on(q), on(k), on(theta), route, q_pos, pairing)
            assert backend.backend_of(s1) == name
            close(s1, transport.so2_scores(q, k, theta, route, q_pos, pairing))
    close(
        transport.rotate_blocks(on(k), on(theta), "interleaved"),
        transport.rotate_blocks(k, theta, "interleaved"),
    )
    sc = transport.so2_scores(q, k, theta, q_pos=q_pos)
    w0 = transport.attention_weights(sc, q_pos, scale=0.7, alibi_slope=0.1)
    w1 = transport.attention_weights(on(sc), q_pos, scale=0.7, alibi_slope=0.1)
    close(w1, w0)
    for got, ref in zip(
        transport.near_far_mass(w1, 5, q_pos), transport.near_far_mass(w0, 5, q_pos), strict=True
    ):
        close(got, ref)
    close(
        transport.so2_value_output(w1, on(v), on(theta), q_pos),
        transport.so2_value_output(w0, v, theta, q_pos),
    )


def test_dense_step_transport_matches_numpy(xp_backend):
    # the functions with d×d steps, Householder sweeps and direct route angles: one code path
    name, dev = xp_backend
    n, d = 12, 4
    rng, q, k, v, theta = transport_inputs(8, 3, n, d, 3.0)
    steps = np.linalg.qr(rng.standard_normal((n, d, d)))[0]
    w = rng.standard_normal((n, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    beta = rng.uniform(0, 2, n)
    weights = transport.attention_weights(rng.standard_normal((3, n)))

    def on(x):
        return backend.asarray(x, name, dev)

    for route in transport.ROUTES:
        got = transport.suffix_angles(on(theta), route)
        assert backend.backend_of(got) == name
        close(got, transport.suffix_angles(theta, route))
        close(
            transport.route_angles(on(theta), 2, 9, route),
            transport.route_angles(theta, 2, 9, route),
        )
        close(
            transport.route_product(on(steps), 3, 10, route),
            transport.route_product(steps, 3, 10, route),
        )
        close(transport.frame_prefix(on(steps), route), transport.frame_prefix(steps, route))
        close(
            transport.orthogonal_scores(on(q), on(k), on(steps), route),
            transport.orthogonal_scores(q, k, steps, route),
        )
        close(
            transport.orthogonal_value_output(on(weights), on(v), on(steps), route=route),
            transport.orthogonal_value_output(weights, v, steps, route=route),
        )
        close(
            transport.householder_scores(on(q[0]), on(k), on(w), beta, 9, route),
            transport.householder_scores(q[0], k, w, beta, 9, route),
        )
    close(transport.wrap_angle(on(theta * 5)), transport.wrap_angle(theta * 5))
    close(transport.householder_step(on(k), on(w), 1.5), transport.householder_step(k, w, 1.5))
    close(
        transport.empirical_route_mean(HaarLaw(3), 4, 50, seed=2, backend=name, device=dev),
        transport.empirical_route_mean(HaarLaw(3), 4, 50, seed=2),
    )


def test_monte_carlo_estimators_with_host_draws_match_numpy(xp_backend):
    name, dev = xp_backend
    law = SO2BlockLaw(8, "normal", 0.4)
    got = transport.empirical_route_mean(law, 25, 300, seed=11, backend=name, device=dev, host=True)
    close(got, transport.empirical_route_mean(law, 25, 300, seed=11))
    got = transport.empirical_route_mean(
        law, 25, 300, seed=11, statistic="cos", per_block=True, backend=name, device=dev, host=True
    )
    ref = transport.empirical_route_mean(law, 25, 300, seed=11, statistic="cos", per_block=True)
    close(got, ref)
    for scheme in transport.SCHEMES:
        kw = dict(d=16, vocab=50, n_trials=2, seed=9, key_coherence=0.2, value_coherence=0.5)
        r1 = transport.stylized_attention(scheme, 400, backend=name, device=dev, host=True, **kw)
        r0 = transport.stylized_attention(scheme, 400, **kw)
        for field in ("far_mass", "near_weight", "signal_coef", "output_error", "far_residual"):
            close(getattr(r1, field), getattr(r0, field))


def test_native_draws_are_reproducible_and_unbiased(xp_backend):
    # (sin a / a)^n for uniform angles on [-a, a] (claim AT1), 20000 routes: the Monte Carlo
    # error of |E e^{iψ}| is about 1/sqrt(2·20000) = 0.005; tolerance 0.03 (6 standard errors)
    name, dev = xp_backend
    law = SO2BlockLaw(4, "uniform", 0.5)
    a = transport.empirical_route_mean(law, 6, 20000, seed=1, backend=name, device=dev)
    b = transport.empirical_route_mean(law, 6, 20000, seed=1, backend=name, device=dev)
    np.testing.assert_array_equal(backend.to_numpy(a), backend.to_numpy(b))
    exact = (np.sin(0.5) / 0.5) ** np.arange(7)
    close(a, exact, rtol=0, atol=0.03)
    src = backend.random_source(7, name, dev)
    u, z, i = (
        src.uniform(-1.0, 3.0, (20000,)),
        src.standard_normal(20000),
        src.integers(2, 5, (1000,)),
    )
    u, z, i = (backend.to_numpy(x) for x in (u, z, i))
    assert -1 <= u.min() and u.max() < 3 and set(np.unique(i)) <= {2, 3, 4}
    assert abs(u.mean() - 1.0) < 5 * (4 / np.sqrt(12)) / np.sqrt(u.size)  # 5 standard errors
    assert abs(z.mean()) < 5 / np.sqrt(z.size) and abs(z.var() - 1) < 5 * np.sqrt(2 / z.size)


def test_host_draws_are_the_numpy_generator_numbers(xp_backend):
    name, dev = xp_backend
    src = backend.random_source(42, name, dev, host=True)
    ref = np.random.default_rng(42)
    close(src.uniform(0.0, 2.0, (3, 4)), ref.uniform(0.0, 2.0, (3, 4)), rtol=0, atol=0)
    close(src.normal(1.0, 3.0, (5,)), ref.normal(1.0, 3.0, 5), rtol=0, atol=0)


# ------------------------------------------------------------------------------------------
# the chunked scan against the sequential recurrence


def sequential(x, m):
    y, g = np.zeros_like(x), np.zeros(x.shape[:-1])
    for j in range(x.shape[-1] - 1, -1, -1):
        g = x[..., j] + np.exp(-m) * g
        y[..., j] = g
    return y


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 300),
    block=st.integers(2, 40),
    m=st.lists(st.floats(0.0, 50.0, allow_nan=False), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_chunked_suffix_scan_equals_the_recurrence(n, block, m, seed):
    import array_api_compat.numpy as xp

    m = np.array(m)
    x = np.random.default_rng(seed).uniform(-1, 1, (2, m.size, n))
    np.testing.assert_allclose(
        _scan.suffix_scan(xp, x, m, block), sequential(x, m), rtol=1e-10, atol=1e-12
    )


def test_head_groups_do_not_change_the_result(monkeypatch):
    k0 = alibi_kernel(200, alibi_slopes(6), 1.0)
    k1 = alibi_kernel(200, alibi_slopes(6), 1.0, backend="array_api_strict")
    monkeypatch.setattr(_scan, "ELEMENTS", 150)  # one head per group
    close(influence(k1, np.full(5, 0.5)), influence(k0, np.full(5, 0.5)))


# ------------------------------------------------------------------------------------------
# choosing backends, conversions, bad input


def test_numpy_stays_the_default_and_numba_path():
    K = alibi_kernel(10, 0.5)
    assert K.backend == "numpy" and K._use_numba
    assert set(backend.available_backends()) >= {"numpy", "array_api_strict"}


def test_backend_is_inferred_from_array_arguments():
    import array_api_strict as xps

    A = np.tril(np.ones((4, 4))) / np.arange(1, 5)[:, None]
    K = dense_kernel(xps.asarray(A))
    assert K.backend == "array_api_strict"
    assert backend.backend_of(influence(K, [0.5, 0.5])) == "array_api_strict"
    np.testing.assert_array_equal(
        backend.to_numpy(backend.asarray([1, 2], "array_api_strict")), [1.0, 2.0]
    )


def test_unknown_or_missing_backends_are_named():
    with pytest.raises(ValueError, match="backend must be one of"):
        alibi_kernel(8, 0.5, backend="tpu")
    with pytest.raises(ValueError, match="device"):
        uniform_kernel(8, device="gpu")
    if _cupy_reason():
        with pytest.raises(backend.BackendUnavailableError, match="cupy"):
            uniform_kernel(8, backend="cupy")
    if not _torch_reason() and _cuda:
        with pytest.raises(backend.BackendUnavailableError, match="cuda"):
            uniform_kernel(8, backend="torch", device="cuda")


def test_mixed_backends_in_one_rollout_are_refused():
    ks = [uniform_kernel(5), uniform_kernel(5, backend="array_api_strict")]
    with pytest.raises(ValueError, match="backend"):
        influence(ks, [0.5, 0.5])


def test_device_dense_kernels_are_validated_like_numpy_ones():
    import array_api_strict as xps

    good = np.tril(np.ones((3, 3))) / np.arange(1, 4)[:, None]
    bad = {
        "causal": np.full((3, 3), 1 / 3),
        "row-stochastic": 2 * good,
        "nonnegative": np.array([[1.0, 0, 0], [1.5, -0.5, 0], [0.2, 0.3, 0.5]]),
        "finite": np.where(good > 0.4, np.nan, good),
        "square": np.ones((2, 3)),
    }
    for rule, A in bad.items():
        with pytest.raises(ValueError, match=rule):
            dense_kernel(xps.asarray(A))
    K = alibi_kernel(6, 0.3, backend="array_api_strict")
    with pytest.raises(ValueError, match="p must have shape"):
        K.apply_left(xps.ones((2, 5)))
    with pytest.raises(ValueError, match="p must be finite"):
        K.apply_left(xps.full((6,), np.inf))


def test_bad_seeds_and_laws_are_refused():
    with pytest.raises(TypeError, match="seed"):
        backend.random_source("0")
    with pytest.raises(ValueError, match="seed"):
        backend.random_source(-1, "array_api_strict")
    with pytest.raises(TypeError, match="law"):
        transport.empirical_route_mean(object(), 3)
    with pytest.raises(ValueError, match="scheme"):
        transport.stylized_attention("nope", 10)
    with pytest.raises(ValueError, match="key_coherence"):
        transport.stylized_attention("rope", 10, key_coherence=2.0)
