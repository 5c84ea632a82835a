"""Fast route transport of simulate.transport against dense route products (AT2, AT5, AT6,
AT10-AT19)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.simulate._stylized import _draw_inputs
from posflow.simulate.orthogonal import (
    HaarLaw,
    HouseholderLaw,
    SO2BlockLaw,
    haar,
    rope_frequencies,
    rotate_blocks,
    so2_matrices,
)
from posflow.simulate.transport import (
    SCHEMES,
    absolute_angles,
    attention_weights,
    empirical_mixing_window,
    empirical_route_mean,
    frame_prefix,
    householder_scores,
    householder_step,
    mixing_window,
    near_far_mass,
    orthogonal_scores,
    orthogonal_value_output,
    route_angles,
    route_product,
    so2_scores,
    so2_value_output,
    stylized_attention,
    stylized_sweep,
    suffix_angles,
    wrap_angle,
)

ROUTES = ["from_source", "path"]
N, D = 9, 6


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    return {
        "q": rng.standard_normal((N, D)),
        "k": rng.standard_normal((N, D)),
        "v": rng.standard_normal((N, D)),
        "theta": rng.uniform(-3, 3, (N, D // 2)),
        "haar": haar(D, N, seed=1),
        "w": HouseholderLaw(D, 1.0).sample_vectors(N, seed=2),
        "beta": rng.uniform(0, 2, N),
    }


def _explicit_scores(q, k, steps, route):
    """Reference: s_ij = q_iᵀ P_{j→i} k_j with dense route products, j ≤ i."""
    s = np.full((N, N), np.nan)
    for i in range(N):
        for j in range(i + 1):
            s[i, j] = q[i] @ route_product(steps, j, i, route) @ k[j]
    return s


def test_route_product_orders_the_factors_later_step_on_the_left(data):
    m = data["haar"]
    assert np.allclose(route_product(m, 2, 5, "from_source"), m[4] @ m[3] @ m[2])
    assert np.allclose(route_product(m, 2, 5, "path"), m[5] @ m[4] @ m[3])
    assert np.array_equal(route_product(m, 3, 3, "path"), np.eye(D))


# ---------------------------------------------------------------- SO(2) blocks (AT18)


@pytest.mark.parametrize("route", ROUTES)
def test_prefix_and_suffix_angles_give_the_route_angle(data, route):
    theta = data["theta"]
    phi, sfx = absolute_angles(theta, route), suffix_angles(theta, route)
    assert (np.abs(phi) <= np.pi).all() and (np.abs(sfx) <= np.pi).all()
    shift = 0 if route == "from_source" else 1
    for i in range(N):
        for j in range(i + 1):
            direct = theta[j + shift : i + shift].sum(axis=0)
            for got in (phi[i] - phi[j], sfx[j] - sfx[i], route_angles(theta, j, i, route)):
                assert np.allclose(wrap_angle(got - direct), 0.0, atol=1e-12)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("pairing", ["half", "interleaved"])
def test_so2_scores_equal_explicit_route_products(data, route, pairing):
    q, k, theta = data["q"], data["k"], data["theta"]
    ref = _explicit_scores(q, k, so2_matrices(theta, pairing), route)
    fast = so2_scores(q, k, theta, route, pairing=pairing)
    low = np.tril_indices(N)
    assert np.abs(fast[low] - ref[low]).max() < 1e-10
    # a query subset at given positions
    sub = so2_scores(q[[2, 7]], k, theta, route, q_pos=np.array([2, 7]), pairing=pairing)
    assert np.allclose(sub, fast[[2, 7]], atol=1e-12)


@pytest.mark.parametrize("route", ROUTES)
def test_suffix_sum_code_identity_at18(data, route):
    # [B]'s code: q → R(φ_i) q, k → R(φ_j) k with suffix sums φ; equals qᵀ P_{j→i} k
    q, k, theta = data["q"], data["k"], data["theta"]
    sfx = suffix_angles(theta, route)
    code = rotate_blocks(q, sfx) @ rotate_blocks(k, sfx).T
    ref = _explicit_scores(q, k, so2_matrices(theta), route)
    low = np.tril_indices(N)
    assert np.abs(code[low] - ref[low]).max() < 1e-10


@pytest.mark.parametrize("route", ROUTES)
def test_so2_value_output_equals_inverse_output_rotation_form_at18(data, route):
    theta, v = data["theta"], data["v"]
    a = attention_weights(data["q"] @ data["k"].T)
    fast = so2_value_output(a, v, theta, route=route)
    sfx = suffix_angles(theta, route)
    m = so2_matrices(theta)
    for i in range(N):
        explicit = sum(a[i, j] * route_product(m, j, i, route) @ v[j] for j in range(i + 1))
        code = sum(a[i, j] * rotate_blocks(v[j], sfx[j] - sfx[i]) for j in range(N))
        assert np.abs(fast[i] - explicit).max() < 1e-10
        assert np.abs(code - explicit).max() < 1e-10


# ---------------------------------------------------------------- general orthogonal steps


@pytest.mark.parametrize("route", ROUTES)
def test_orthogonal_scores_and_values_via_absolute_frames(data, route):
    q, k, v, m = data["q"], data["k"], data["v"], data["haar"]
    g = frame_prefix(m, route)
    assert np.allclose(g[6] @ g[2].T, route_product(m, 2, 6, route), atol=1e-12)
    ref = _explicit_scores(q, k, m, route)
    fast = orthogonal_scores(q, k, m, route)
    low = np.tril_indices(N)
    assert np.abs(fast[low] - ref[low]).max() < 1e-10
    a = attention_weights(fast)
    out = orthogonal_value_output(a, v, m, route=route)
    for i in range(N):
        explicit = sum(a[i, j] * route_product(m, j, i, route) @ v[j] for j in range(i + 1))
        assert np.abs(out[i] - explicit).max() < 1e-10


def test_orthogonal_scores_reject_non_orthogonal_steps(data):
    h = HouseholderLaw(D, 1.0).sample(N, seed=3)
    with pytest.raises(ValueError, match="steps"):
        orthogonal_scores(data["q"], data["k"], h)


# ---------------------------------------------------------------- Householder / PaTH (AT18)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("beta_kind", ["per_position", "scalar"])
def test_householder_scores_equal_explicit_products(data, route, beta_kind):
    w, k, q = data["w"], data["k"], data["q"]
    beta = data["beta"] if beta_kind == "per_position" else 0.7
    b = np.broadcast_to(beta, (N,))
    h = np.eye(D) - b[:, None, None] * w[:, :, None] * w[:, None, :]
    for i in (0, 4, N - 1):
        ref = [q[i] @ route_product(h, j, i, route) @ k[j] for j in range(i + 1)]
        got = householder_scores(q[i], k, w, beta, i, route)
        assert got.shape == (i + 1,)
        assert np.abs(got - ref).max() < 1e-10


def test_path_key_cache_update_is_h_times_k(data):
    w, k, beta = data["w"], data["k"], data["beta"]
    h = np.eye(D) - beta[:, None, None] * w[:, :, None] * w[:, None, :]
    assert np.abs(householder_step(k[0], w[3], beta[3]) - h[3] @ k[0]).max() < 1e-12
    # decoding: cached key j is updated by H_{j+1}, …, H_i in turn = PaTH route product
    cache, j, i = k[1].copy(), 1, 7
    for t in range(j + 1, i + 1):
        cache = householder_step(cache, w[t], beta[t])
    assert np.abs(cache - route_product(h, j, i, "path") @ k[1]).max() < 1e-12
    # PaTH logit k_jᵀ (H_{j+1} ⋯ H_i) q_i equals the transported-cache score
    logit = k[j] @ np.linalg.multi_dot(list(h[j + 1 : i + 1])) @ data["q"][i]
    assert np.isclose(logit, cache @ data["q"][i], atol=1e-12)


# ---------------------------------------------------------------- attention and masses


def test_attention_weights_against_a_direct_softmax():
    rng = np.random.default_rng(4)
    s = rng.standard_normal((3, 6)) * 400  # large logits: no overflow
    q_pos = np.array([1, 3, 5])
    a = attention_weights(s, q_pos, scale=0.5, alibi_slope=0.3)
    for r, i in enumerate(q_pos):
        z = 0.5 * s[r, : i + 1] - 0.3 * (i - np.arange(i + 1))
        ref = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
        assert np.allclose(a[r, : i + 1], ref, atol=1e-14)
        assert (a[r, i + 1 :] == 0).all()
    assert np.allclose(attention_weights(s, q_pos, causal=False).sum(axis=1), 1.0)


def test_near_far_mass_against_a_loop():
    rng = np.random.default_rng(5)
    a = attention_weights(rng.standard_normal((4, 10)), np.array([0, 3, 8, 9]))
    near, far = near_far_mass(a, 3, np.array([0, 3, 8, 9]))
    for r, i in enumerate([0, 3, 8, 9]):
        assert np.isclose(near[r], sum(a[r, j] for j in range(i + 1) if i - j < 3))
        assert np.isclose(far[r], sum(a[r, j] for j in range(i + 1) if i - j >= 3))
    assert np.allclose(near + far, 1.0)


@settings(max_examples=30, deadline=None)
@given(
    m=st.integers(1, 50),
    k=st.integers(1, 8),
    lam=st.floats(min_value=0.0, max_value=5.0, allow_nan=False),
)
def test_far_mass_lower_bound_attained_at_the_box_corner_at10(m, k, lam):
    # K near logits at +λ, M far logits at −λ: ρ_D = M / (M + K e^{2λ}) exactly
    s = np.concatenate([np.full(m, -lam), np.full(k, lam)])[None, :]
    _, far = near_far_mass(attention_weights(s), k)
    assert np.isclose(far[0], m / (m + k * np.exp(2 * lam)), rtol=1e-12)


# ---------------------------------------------------------------- mixing windows (AT5, AT6)


@settings(max_examples=40, deadline=None)
@given(
    g=st.floats(min_value=1e-3, max_value=0.999, allow_nan=False),
    eps=st.floats(min_value=1e-6, max_value=0.9, allow_nan=False),
)
def test_mixing_window_is_the_smallest_n_with_gamma_power_below_eps(g, eps):
    w = mixing_window(g, eps)
    assert g**w <= eps and (w == 1 or g ** (w - 1) > eps)


def test_mixing_window_edges_and_the_d96_table_at6():
    assert mixing_window(1.0, 0.1) == math.inf and mixing_window(0.0, 0.1) == 1
    c = SO2BlockLaw(96, "uniform").characteristic().real
    w = mixing_window(c, 0.01)
    assert list(w[:3]) == [27, 40, 59]  # [B]: W_0 = 26.7, W_1 = 39.6, W_2 = 58.6
    counts = [int((mixing_window(c, 0.1) <= n).sum()) for n in (512, 8192, 65536)]
    assert counts == [10, 17, 23]


def test_empirical_route_mean_so2_against_the_characteristic_decay():
    a, n = 1.0, 20_000
    law = SO2BlockLaw(2, "uniform", a)
    est = empirical_route_mean(law, 12, n, seed=6, statistic="cos")
    exact = np.sinc(a / np.pi) ** np.arange(13)
    assert np.abs(est - exact).max() < 4 / np.sqrt(n)  # |cos| ≤ 1, so SE ≤ 1/√N
    assert empirical_mixing_window(est, 0.2) == empirical_mixing_window(exact, 0.2) == 10
    blocks = empirical_route_mean(SO2BlockLaw(4, "rope"), 5, 10, seed=0, per_block=True)
    assert np.allclose(blocks, 1.0)  # AT16: deterministic angles never mix
    # two blocks, statistic "cos": |(1/d) tr Ê P_n| = |mean_b Ê cos ψ_b|, exact here
    two = empirical_route_mean(
        SO2BlockLaw(4, "rope", [0.5, 0.5 + np.pi]), 3, 2, seed=0, statistic="cos"
    )
    n_ = np.arange(4)
    assert np.allclose(two, np.abs(np.cos(0.5 * n_) + np.cos((0.5 + np.pi) * n_)) / 2, atol=1e-12)


def test_empirical_route_mean_general_laws_at2():
    n = 4000
    hh = empirical_route_mean(HouseholderLaw(3, 1.5), 6, n, seed=7, statistic="cos")
    assert np.abs(hh - 0.5 ** np.arange(7)).max() < 4 * 1.0 / np.sqrt(n)  # (1 − β/d)^n
    haar_mean = empirical_route_mean(HaarLaw(3), 3, n, seed=8)
    assert haar_mean[0] == pytest.approx(1.0) and (haar_mean[1:] < 0.15).all()  # √(d/N) ≈ 0.03


def test_empirical_mixing_window_per_column():
    v = np.array([[1.0, 1.0], [0.5, 0.9], [0.05, 0.8]])
    assert list(empirical_mixing_window(v, 0.1)) == [2.0, np.inf]


# ---------------------------------------------------------------- stylized model (AT12, AT19)


@pytest.mark.parametrize("scheme", ["rope", "random_qkv", "learned_qkv", "accum_alibi"])
@pytest.mark.parametrize("route", ROUTES)
def test_stylized_model_against_the_general_transport_functions(scheme, route):
    length, d, nd, w, lam, m = 40, 8, 3, 10, 3.0, 0.2
    kw = dict(
        d=d,
        near_distance=nd,
        window=w,
        logit_scale=lam,
        alibi_slope=m,
        vocab=17,
        key_coherence=0.3,
        value_coherence=0.6,
        embed_scale=0.5,
        route=route,
    )
    res = stylized_attention(scheme, length, seed=11, **kw)
    f = rope_frequencies(d)
    x = _draw_inputs(np.random.default_rng(11), length, d, nd, 0.3, 0.6, f, 17, 0.5)
    theta = {
        "rope": np.broadcast_to(-f, (length, d // 2)),
        "random_qkv": x["theta_qk"],
        "accum_alibi": x["theta_qk"],
    }.get(scheme)
    if scheme == "learned_qkv":
        theta = np.pi * np.tanh(x["table"][x["tokens"]]) - f
    q = lam * x["q"][None, :]
    s = so2_scores(q, x["keys"], theta, route)
    a = attention_weights(s, alibi_slope=m if scheme == "accum_alibi" else 0.0)
    _, far = near_far_mass(a, w)
    theta_v = {"random_qkv": x["theta_v"], "learned_qkv": theta}.get(scheme)
    if theta_v is None:
        out, target = a @ x["values"], x["values"][length - 1 - nd]
    else:
        out = so2_value_output(a, x["values"], theta_v, route=route)[0]
        target = (
            route_product(so2_matrices(theta_v), length - 1 - nd, length - 1, route)
            @ x["values"][length - 1 - nd]
        )
    assert np.isclose(res.far_mass[0], far[0], atol=1e-12)
    assert np.isclose(res.near_weight[0], a[0, length - 1 - nd], atol=1e-12)
    assert np.isclose(res.signal_coef[0], out @ target, atol=1e-10)
    assert np.isclose(res.output_error[0], np.linalg.norm(out - target), atol=1e-10)
    a_far = np.where(np.arange(length) <= length - 1 - w, a, 0.0)
    far_out = (
        a_far @ x["values"]
        if theta_v is None
        else so2_value_output(a_far, x["values"], theta_v, route=route)[0]
    )
    assert np.isclose(res.far_residual[0], np.linalg.norm(far_out), atol=1e-10)


def test_stylized_rope_is_standard_rope_and_zero_learned_angles_reproduce_it_at18():
    length, d = 30, 8
    x = _draw_inputs(np.random.default_rng(3), length, d, 4, 0.5, 1.0, rope_frequencies(d), 5, 0.0)
    f, pos = rope_frequencies(d), np.arange(length)
    std = rotate_blocks(x["keys"], pos[:, None] * f) @ rotate_blocks(x["q"], (length - 1) * f)
    a = np.exp(std - std.max())
    a /= a.sum()
    kw = dict(d=d, key_coherence=0.5, vocab=5, window=10)
    rope = stylized_attention("rope", length, seed=3, logit_scale=1.0, **kw)
    assert np.isclose(rope.near_weight[0], a[length - 5], atol=1e-12)
    learned = stylized_attention("learned", length, seed=3, embed_scale=0.0, logit_scale=1.0, **kw)
    assert np.allclose(learned.far_mass, rope.far_mass, atol=1e-12)
    assert np.allclose(learned.near_weight, rope.near_weight, atol=1e-12)


def test_stylized_lengths_at19():
    res = {
        (r.scheme, r.length): r.summary()
        for r in stylized_sweep(
            ["random_qk", "random_qkv", "alibi"], [512, 8192], n_trials=3, seed=12
        )
    }
    # rotation-only far mass grows with L; ALiBi's stays negligible at every length
    assert res["random_qk", 8192]["far_mass"] > res["random_qk", 512]["far_mass"] + 0.2
    assert max(res["alibi", n]["far_mass"] for n in (512, 8192)) < 1e-3
    # same Q/K angles: same far mass; value rotation shrinks the coherent far residual
    assert res["random_qkv", 8192]["far_mass"] == res["random_qk", 8192]["far_mass"]
    assert res["random_qkv", 8192]["far_residual"] < 0.9 * res["random_qk", 8192]["far_residual"]


def test_stylized_is_reproducible():
    a = stylized_attention("learned_qkv", 300, n_trials=2, seed=5)
    b = stylized_attention("learned_qkv", 300, n_trials=2, seed=np.random.default_rng(5))
    assert np.array_equal(a.far_mass, b.far_mass) and np.array_equal(a.output_error, b.output_error)
    assert set(SCHEMES) >= {"rope", "random_qk", "random_qkv", "learned", "alibi", "accum_alibi"}


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda d: so2_scores(d["q"], d["k"], d["theta"], "backwards"), "route"),
        (lambda d: so2_scores(d["q"], d["k"][:, :4], d["theta"]), "width"),
        (lambda d: so2_scores(d["q"], d["k"], d["theta"][:, :2]), "theta"),
        (lambda d: so2_scores(d["q"], d["k"], d["theta"] * np.nan), "theta"),
        (lambda d: so2_scores(d["q"], d["k"], d["theta"], q_pos=np.arange(1, 10)), "q_pos"),
        (lambda d: orthogonal_scores(d["q"], d["k"], d["haar"][:5]), "steps"),
        (lambda d: householder_scores(d["q"][0], d["k"], d["w"], 2.5, 3), "beta"),
        (lambda d: householder_scores(d["q"][0], d["k"], 2 * d["w"], 1.0, 3), "w"),
        (lambda d: householder_scores(d["q"][0], d["k"], d["w"], 1.0, N), "query_pos"),
        (lambda d: householder_step(d["k"][0], d["w"][0], [1.0, 1.0]), "beta"),
        (lambda d: route_product(d["haar"], 5, 2), "j <= i"),
        (lambda d: attention_weights(d["q"], alibi_slope=-1.0), "alibi_slope"),
        (lambda d: near_far_mass(attention_weights(d["q"] @ d["k"].T), 0), "window"),
        (lambda d: mixing_window(0.5, 1.5), "eps"),
        (lambda d: mixing_window(-0.5, 0.1), "gamma"),
        (lambda d: empirical_route_mean(HaarLaw(2), 3, statistic="max"), "statistic"),
        (lambda d: empirical_route_mean(HaarLaw(2), 3, per_block=True), "per_block"),
        (lambda d: so2_value_output(d["q"][:, :5], d["v"], d["theta"]), "weights"),
        (lambda d: stylized_attention("haar", 100), "scheme"),
        (lambda d: stylized_attention("rope", 1), "length"),
        (lambda d: stylized_attention("rope", 100, near_distance=8, window=8), "window"),
        (lambda d: stylized_attention("rope", 100, key_coherence=1.5), "key_coherence"),
        (lambda d: stylized_attention("alibi", 100, alibi_slope=np.nan), "alibi_slope"),
        (lambda d: stylized_attention("rope", 100, d=7), "d"),
    ],
)
def test_bad_input_names_the_argument(data, call, match):
    with pytest.raises((ValueError, TypeError), match=match):
        call(data)


# ---------------------------------------------------------------------------------------------
# routes and frames (posflow.simulate._routes): default route, ranges, messages
# ---------------------------------------------------------------------------------------------

import posflow.simulate.transport as tp  # noqa: E402

THETA = np.array([[0.1, -0.2], [0.3, 0.5], [-0.7, 0.2], [0.4, 0.4]])  # partial sums stay in (−π, π]


def rot(a):
    return np.array([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])


def test_route_functions_default_to_from_source():
    n = THETA.shape[0]
    # from_source by loops: Φ_t = Σ_{s<t} θ_s, φ_t = Σ_{s≥t} θ_s, route j→i = Σ_{s=j}^{i−1} θ_s
    prefix = np.array([sum((THETA[s] for s in range(t)), np.zeros(2)) for t in range(n)])
    suffix = np.array([sum((THETA[s] for s in range(t, n)), np.zeros(2)) for t in range(n)])
    np.testing.assert_allclose(tp.absolute_angles(THETA), prefix, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tp.suffix_angles(THETA), suffix, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tp.route_angles(THETA, 1, 3), THETA[1] + THETA[2], rtol=0,
                               atol=1e-15)  # fmt: skip
    a = THETA[:, 0]
    steps = np.stack([rot(x) for x in a])
    frames = tp.frame_prefix(steps)  # G_t = M_{t−1} ⋯ M_0 = R(Σ_{s<t} a_s)
    for t in range(n):
        np.testing.assert_allclose(frames[t], rot(sum(a[:t])), rtol=0, atol=1e-15)


def test_frames_of_one_step():
    step = rot(0.3)[None]
    np.testing.assert_allclose(tp.frame_prefix(step, "from_source"), np.eye(2)[None], atol=0)
    np.testing.assert_allclose(tp.frame_prefix(step, "path"), step, rtol=0, atol=0)


def test_wrap_angle_passes_nan_and_closes_at_pi():
    out = tp.wrap_angle([np.nan, 3 * math.pi, -math.pi, 0.5])
    assert math.isnan(out[0])
    np.testing.assert_allclose(out[1:], [math.pi, math.pi, 0.5], rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: tp.route_angles(np.zeros((3, 2)), 0, 3), "need 0 <= j <= i < n = 3; got j=0, i=3"),
        (lambda: tp.route_product(np.zeros((3, 2, 2)), 1, 3),
         "need 0 <= j <= i < n = 3; got j=1, i=3"),
        (lambda: tp.absolute_angles(np.zeros(3)), "theta must be a 2-d array; got shape (3,)"),
        (lambda: tp.suffix_angles(np.zeros(3)), "theta must be a 2-d array; got shape (3,)"),
        (lambda: tp.route_angles(np.zeros(3), 0, 0), "theta must be a 2-d array; got shape (3,)"),
        (lambda: tp.route_product(np.zeros((2, 2)), 0, 0),
         "steps must be a 3-d array; got shape (2, 2)"),
        (lambda: tp.frame_prefix(np.zeros((2, 2))), "steps must be a 3-d array; got shape (2, 2)"),
        (lambda: tp.frame_prefix(np.zeros((2, 2, 3))),
         "steps must have shape (n, d, d) with n >= 1; got (2, 2, 3)"),
        (lambda: tp.frame_prefix(np.zeros((0, 2, 2))),
         "steps must have shape (n, d, d) with n >= 1; got (0, 2, 2)"),
        (lambda: tp.frame_prefix(np.stack([np.eye(2), (1 + 1e-6) * np.eye(2)])),
         "steps must be orthogonal to atol=1e-08; step 1 has max|M Mᵀ − I| = 2e-06"),
        (lambda: tp.wrap_angle("abc"), "x must be an array of numbers"),
    ],
)
def test_route_errors_are_exact(call, message):
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    assert str(info.value) == message


# ---------------------------------------------------------------------------------------------
# transport functions: exact messages, defaults, query positions, backends and devices
# ---------------------------------------------------------------------------------------------

import array_api_strict as xps  # noqa: E402

from posflow.simulate.backend import backend_of  # noqa: E402

Q, K, V = np.random.default_rng(20).standard_normal((3, N, D))
TH = np.random.default_rng(21).uniform(-3, 3, (N, D // 2))
HAAR = haar(D, N, seed=22)
W = HouseholderLaw(D, 1.0).sample_vectors(N, seed=23)
A = attention_weights(Q @ K.T)
E_ROWS = np.eye(D)[np.arange(N) % D]  # unit rows e_{t mod D}


def _scaled_rows(scale):
    """E_ROWS with row t multiplied by scale[t] (exact norms |scale[t]|)."""
    return E_ROWS * np.asarray(scale, dtype=float)[:, None]


def _one_bad_norm(row, norm, other=None):
    s = np.ones(N)
    s[row] = norm
    if other is not None:
        s[other[0]] = other[1]
    return _scaled_rows(s)


def _stretched(steps, t, c):
    out = steps.copy()
    out[t] *= c
    return out


TRANSPORT_ERRORS = [
    (lambda: so2_scores(Q, K, TH[:, 0]), ValueError, "theta must be a 2-d array; got shape (9,)"),
    (lambda: so2_scores(Q, K, TH[:, :2]), ValueError,
     "theta must have shape (n, d/2) = (9, 3); got (9, 2)"),
    (lambda: so2_scores(Q[0], K, TH), ValueError, "q must be a 2-d array; got shape (6,)"),
    (lambda: so2_scores(Q * np.nan, K, TH), ValueError, "q must be finite (no NaN or inf)"),
    (lambda: so2_scores(Q, K[0], TH), ValueError, "k must be a 2-d array; got shape (6,)"),
    (lambda: so2_scores(Q, K * np.inf, TH), ValueError, "k must be finite (no NaN or inf)"),
    (lambda: so2_scores(Q, K[:, :4], TH), ValueError,
     "q and k must have the same width d; got (9, 6), (9, 4)"),
    (lambda: so2_value_output(A[0], V, TH), ValueError,
     "weights must be a 2-d array; got shape (9,)"),
    (lambda: so2_value_output(A * np.nan, V, TH), ValueError,
     "weights must be finite (no NaN or inf)"),
    (lambda: so2_value_output(A, V[0], TH), ValueError, "v must be a 2-d array; got shape (6,)"),
    (lambda: so2_value_output(A, V * np.nan, TH), ValueError, "v must be finite (no NaN or inf)"),
    (lambda: so2_value_output(A[:, :5], V, TH), ValueError,
     "weights must have 9 columns; got (9, 5)"),
    (lambda: orthogonal_value_output(A, V, HAAR[:5]), ValueError,
     "steps must have shape (9, 6, 6); got (5, 6, 6)"),
    # step 3 scaled by 1 + 1e-6: M Mᵀ − I = (2e-6 + 1e-12) I up to rounding
    (lambda: orthogonal_value_output(A, V, _stretched(HAAR, 3, 1 + 1e-6)), ValueError,
     "steps must be orthogonal to atol=1e-08; step 3 has max|M Mᵀ − I| = 2e-06"),
    (lambda: householder_step("abc", W[0], 1.0), TypeError, "x must be an array of numbers"),
    (lambda: householder_step(K[0], "abc", 1.0), TypeError, "w must be an array of numbers"),
    (lambda: householder_step(K[0] * np.nan, W[0], 1.0), ValueError,
     "x and w must be finite (no NaN or inf)"),
    (lambda: householder_step(K[0], W[0], [1.0, 1.0]), ValueError,
     "beta must be a scalar in [0, 2]; got shape (2,)"),
    (lambda: householder_step(K[0], W[0], 2.5), ValueError,
     "beta must lie in [0, 2]; got 2.5 at index 0"),
    (lambda: householder_scores(Q[0], K, W, [1.0, 1.0], 3), ValueError,
     "beta must be a scalar or have shape (9,); got (2,)"),
    # integer β: the message shows the float64 value, at the first bad index
    (lambda: householder_scores(Q[0], K, W, [0, 3, 1, -1, 0, 0, 0, 0, 0], 3), ValueError,
     "beta must lie in [0, 2]; got 3.0 at index 1"),
    (lambda: householder_scores(Q[0][None], K, W, 1.0, 3), ValueError,
     "q must be a 1-d array; got shape (1, 6)"),
    (lambda: householder_scores(Q[0] * np.nan, K, W, 1.0, 3), ValueError,
     "q must be finite (no NaN or inf)"),
    (lambda: householder_scores(Q[0, :5], K, W, 1.0, 3), ValueError,
     "q must have shape (6,) and w shape (9, 6); got (5,), (9, 6)"),
    (lambda: householder_scores(Q[0], K, W[:, :5], 1.0, 3), ValueError,
     "q must have shape (6,) and w shape (9, 6); got (6,), (9, 5)"),
    (lambda: householder_scores(Q[0], K[0], W, 1.0, 3), ValueError,
     "k must be a 2-d array; got shape (6,)"),
    (lambda: householder_scores(Q[0], K * np.nan, W, 1.0, 3), ValueError,
     "k must be finite (no NaN or inf)"),
    (lambda: householder_scores(Q[0], K, W[0], 1.0, 3), ValueError,
     "w must be a 2-d array; got shape (6,)"),
    (lambda: householder_scores(Q[0], K, W * np.nan, 1.0, 3), ValueError,
     "w must be finite (no NaN or inf)"),
    # the row farthest from norm 1: the shortest row here, the longest one below
    (lambda: householder_scores(Q[0], K, _one_bad_norm(2, 0.5), 1.0, 3), ValueError,
     f"w rows must be unit vectors (tolerance 1e-12); row 2 has norm {np.float64(0.5)!r}"),
    (lambda: householder_scores(Q[0], K, _one_bad_norm(2, 1.5, (4, 0.9)), 1.0, 3), ValueError,
     f"w rows must be unit vectors (tolerance 1e-12); row 2 has norm {np.float64(1.5)!r}"),
    (lambda: householder_scores(Q[0], K, W, 1.0, -1), ValueError,
     "query_pos must be >= 0; got -1"),
    (lambda: householder_scores(Q[0], K, W, 1.0, 2.0), TypeError,
     "query_pos must be an integer; got float"),
    (lambda: attention_weights(Q[0]), ValueError, "scores must be a 2-d array; got shape (6,)"),
    (lambda: attention_weights(Q * np.nan), ValueError, "scores must be finite (no NaN or inf)"),
    (lambda: near_far_mass(A[0], 2), ValueError, "weights must be a 2-d array; got shape (9,)"),
    (lambda: near_far_mass(A * np.nan, 2), ValueError, "weights must be finite (no NaN or inf)"),
    (lambda: near_far_mass(A, 0), ValueError, "window must be >= 1; got 0"),
]  # fmt: skip


@pytest.mark.parametrize(("call", "exc", "message"), TRANSPORT_ERRORS)
def test_transport_errors_are_exact(call, exc, message):
    with pytest.raises(exc) as info:
        call()
    assert str(info.value) == message


def test_householder_step_names_the_non_finite_input():
    with pytest.raises(ValueError) as info:
        householder_step(K[0], W[0] * np.inf, 1.0)
    assert str(info.value.__cause__) == "w must be finite (no NaN or inf)"
    with pytest.raises(ValueError) as info:
        householder_step(K[0] * np.nan, W[0], 1.0)
    assert str(info.value.__cause__) == "x must be finite (no NaN or inf)"


def _dense_householder(w, beta):
    b = np.broadcast_to(np.asarray(beta, dtype=float), (N,))
    return np.eye(D) - b[:, None, None] * w[:, :, None] * w[:, None, :]


@pytest.mark.parametrize("beta", [0.0, 2.0, [0, 2, 1, 2, 0, 1, 2, 0, 2]])
@pytest.mark.parametrize("route", ROUTES)
def test_householder_scores_at_the_ends_of_the_beta_range(beta, route):
    """β = 0 (H = I) and β = 2 (exact reflections) against dense route products."""
    h = _dense_householder(W, beta)
    i = N - 1
    ref = [Q[i] @ route_product(h, j, i, route) @ K[j] for j in range(i + 1)]
    np.testing.assert_allclose(householder_scores(Q[i], K, W, beta, i, route), ref, rtol=0,
                               atol=1e-12)  # fmt: skip
    if np.ndim(beta) == 0 and beta == 0.0:
        np.testing.assert_allclose(ref, K @ Q[i], rtol=0, atol=1e-12)


def test_householder_step_broadcasts_over_leading_axes():
    """x (3, d) against one w, and one x against w (3, d): row by row (I − β w wᵀ) x."""
    h = _dense_householder(W, 1.3)
    many = householder_step(K[:3], W[5], 1.3)
    np.testing.assert_allclose(many, K[:3] @ h[5].T, rtol=0, atol=1e-12)
    per_w = householder_step(K[0], W[:3], 1.3)
    np.testing.assert_allclose(per_w, np.stack([h[t] @ K[0] for t in range(3)]), rtol=0,
                               atol=1e-12)  # fmt: skip
    assert householder_step(K[0], W[0], 2).shape == (D,)


def test_orthogonal_defaults_are_from_source_and_atol_1e_8():
    ref = _explicit_scores(Q, K, HAAR, "from_source")
    low = np.tril_indices(N)
    np.testing.assert_allclose(orthogonal_scores(Q, K, HAAR)[low], ref[low], rtol=0, atol=1e-10)
    out = orthogonal_value_output(A, V, HAAR)
    for i in range(N):
        explicit = sum(A[i, j] * route_product(HAAR, j, i) @ V[j] for j in range(i + 1))
        np.testing.assert_allclose(out[i], explicit, rtol=0, atol=1e-10)


def test_orthogonal_transport_honours_a_looser_atol():
    """Steps c·M (c = 1 + 1e-7, |M Mᵀ − I| = 2e-7 + c²−1 ≪ 1e-5): the frames are G_t = c^t F_t
    (from_source), so s_ij = c^(i+j) q_iᵀ F_i F_jᵀ k_j and o_i = Σ_j a_ij c^(i+j) P_{j→i} v_j."""
    c = 1 + 1e-7
    steps = HAAR * c
    ii, jj = np.indices((N, N))
    ref = _explicit_scores(Q, K, HAAR, "from_source") * c ** (ii + jj)
    low = np.tril_indices(N)
    fast = orthogonal_scores(Q, K, steps, atol=1e-5)
    np.testing.assert_allclose(fast[low], ref[low], rtol=0, atol=1e-10)
    out = orthogonal_value_output(A, V, steps, atol=1e-5)
    for i in range(N):
        explicit = sum(A[i, j] * c ** (i + j) * route_product(HAAR, j, i) @ V[j]
                       for j in range(i + 1))
        np.testing.assert_allclose(out[i], explicit, rtol=0, atol=1e-10)


@pytest.mark.parametrize("route", ROUTES)
def test_query_positions_select_the_rows_of_the_full_result(route):
    """Queries at q_pos = (1, 4, 6): the rows of the dense route-product references."""
    pos = np.array([1, 4, 6])
    low = np.tril_indices(N)
    ref = _explicit_scores(Q, K, HAAR, route)
    sub = orthogonal_scores(Q[pos], K, HAAR, route, q_pos=pos)
    for r, i in enumerate(pos):
        np.testing.assert_allclose(sub[r, : i + 1], ref[i, : i + 1], rtol=0, atol=1e-10)
    assert np.isfinite(ref[low]).all()
    a = attention_weights(Q[pos] @ K.T, pos)
    so2 = so2_matrices(TH)
    got_so2 = so2_value_output(a, V, TH, q_pos=pos, route=route)
    got_orth = orthogonal_value_output(a, V, HAAR, q_pos=pos, route=route)
    for r, i in enumerate(pos):
        e_so2 = sum(a[r, j] * route_product(so2, j, i, route) @ V[j] for j in range(i + 1))
        e_orth = sum(a[r, j] * route_product(HAAR, j, i, route) @ V[j] for j in range(i + 1))
        np.testing.assert_allclose(got_so2[r], e_so2, rtol=0, atol=1e-10)
        np.testing.assert_allclose(got_orth[r], e_orth, rtol=0, atol=1e-10)


@pytest.mark.parametrize("route", ROUTES)
def test_so2_value_output_with_interleaved_pairs(route):
    m = so2_matrices(TH, "interleaved")
    out = so2_value_output(A, V, TH, route=route, pairing="interleaved")
    for i in range(N):
        explicit = sum(A[i, j] * route_product(m, j, i, route) @ V[j] for j in range(i + 1))
        np.testing.assert_allclose(out[i], explicit, rtol=0, atol=1e-10)


def test_attention_weights_subtract_the_maximum_of_each_row():
    """Rows 2000 apart: each row is the softmax of its own logits, (1, e)/(1 + e)."""
    s = np.array([[0.0, 1.0], [-2000.0, -1999.0]])
    ref = np.array([1.0, math.e]) / (1 + math.e)
    for a in (attention_weights(s, causal=False), attention_weights(s, np.array([1, 1]))):
        np.testing.assert_allclose(a, [ref, ref], rtol=1e-15, atol=0)


# The array of one other backend may come in any argument; the others are NumPy (module
# docstring): the result is on that backend and equal to the all-NumPy result.
def _x(a):
    return xps.asarray(np.asarray(a, dtype=float))


BACKEND_CASES = [
    ("so2_scores", lambda a: so2_scores(*a), (Q, K, TH)),
    ("orthogonal_scores", lambda a: orthogonal_scores(*a), (Q, K, HAAR)),
    ("householder_scores", lambda a: householder_scores(*a, 1.3, 6), (Q[6], K, W)),
    ("householder_step", lambda a: householder_step(*a, 1.3), (K[0], W[2])),
    ("so2_value_output", lambda a: so2_value_output(*a), (A, V, TH)),
    ("attention_weights", lambda a: attention_weights(*a, alibi_slope=0.2), (Q @ K.T,)),
    ("near_far_mass", lambda a: near_far_mass(*a, 3)[1], (A,)),
    ("orthogonal_value_output", lambda a: orthogonal_value_output(*a), (A, V, HAAR)),
]


@pytest.mark.parametrize(("name", "call", "args"), BACKEND_CASES, ids=[c[0] for c in BACKEND_CASES])
def test_one_array_of_another_backend_sets_the_result_backend(name, call, args):
    ref = call(args)
    for p in range(len(args)):
        mixed = tuple(_x(a) if t == p else a for t, a in enumerate(args))
        got = call(mixed)
        assert backend_of(got) == "array_api_strict", (name, p)
        np.testing.assert_allclose(np.asarray(got), ref, rtol=0, atol=1e-12)


def test_attention_and_masses_stay_on_the_scores_device():
    """array_api_strict refuses to combine arrays of two devices: the distances i − j are made
    on the device of the scores."""
    dev = xps.Device("device1")
    s = xps.asarray(Q @ K.T, device=dev)
    a = attention_weights(s, alibi_slope=0.2)
    near, far = near_far_mass(a, 3)
    assert a.device == near.device == far.device == dev
    ref = attention_weights(Q @ K.T, alibi_slope=0.2)
    cpu = xps.Device("CPU_DEVICE")
    np.testing.assert_allclose(np.asarray(xps.asarray(a, device=cpu)), ref, rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.asarray(xps.asarray(far, device=cpu)), near_far_mass(ref, 3)[1],
                               rtol=0, atol=1e-15)  # fmt: skip
