"""Chunked PaTH transport (simulate._householder, claim AT18): the compact-WY / UT-transform route
scores and attention outputs against the dense route product P_{j→i} built here by explicit d×d
matrix products, against the per-query sweep ``householder_scores`` and against the torch
training code's ``schemes.path_scores``; on every backend available here."""

import importlib.util
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.simulate import backend
from posflow.simulate.transport import (
    householder_route_scores,
    householder_scores,
    path_attention,
)

ROUTES = ["path", "from_source"]
TOL = 1e-12
HAS_TORCH = importlib.util.find_spec("torch") is not None


def draw(seed, t, d, beta="random", lead=()):
    rng = np.random.default_rng(seed)
    q, k, w = rng.standard_normal((3, *lead, t, d))
    w /= np.linalg.norm(w, axis=-1, keepdims=True)
    b = {
        "zero": np.zeros((*lead, t)),
        "two": np.full((*lead, t), 2.0),
        "random": rng.uniform(0, 2, (*lead, t)),
        "mixed": rng.choice([0.0, 1.0, 2.0], (*lead, t)),
    }[beta]
    return q, k, w, b


def dense_scores(q, k, w, beta, route):
    """s_ij = q_iᵀ P_{j→i} k_j with P_{j→i} an explicit product of d×d matrices H_s; −inf above
    the diagonal. path: H_i ⋯ H_{j+1}; from_source: H_{i−1} ⋯ H_j (later steps on the left)."""
    t, d = q.shape
    h = [np.eye(d) - beta[s] * np.outer(w[s], w[s]) for s in range(t)]
    shift = 1 if route == "path" else 0
    s = np.full((t, t), -np.inf)
    for i in range(t):
        for j in range(i + 1):
            p = np.eye(d)
            for step in range(j + shift, i + shift):
                p = h[step] @ p
            s[i, j] = q[i] @ p @ k[j]
    return s


def softmax_output(s, v, scale, bias=None):
    z = scale * s + (0.0 if bias is None else bias)
    z = np.where(np.isneginf(s), -np.inf, z)
    a = np.exp(z - z.max(axis=-1, keepdims=True))
    return (a / a.sum(axis=-1, keepdims=True)) @ v


def max_err(a, b):
    a, b = backend.to_numpy(a), np.asarray(b)
    assert a.shape == b.shape
    fin = np.isfinite(b)
    assert np.array_equal(np.isfinite(a), fin)  # −inf exactly where the reference is masked
    return float(np.abs(a[fin] - b[fin]).max())


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("beta", ["zero", "two", "random", "mixed"])
@pytest.mark.parametrize(("t", "chunk"), [(13, 4), (13, 1), (13, 13), (13, 64), (16, 4)])
def test_scores_equal_the_dense_route_product(route, beta, t, chunk):
    q, k, w, b = draw(t * 7 + chunk, t, 5, beta)
    ref = dense_scores(q, k, w, b, route)
    got = householder_route_scores(q, k, w, b, route, chunk)
    assert isinstance(got, np.ndarray) and got.dtype == np.float64
    assert max_err(got, ref) <= TOL
    assert np.all(np.isneginf(got[np.triu_indices(t, 1)]))


@pytest.mark.parametrize("route", ROUTES)
def test_beta_zero_is_plain_dot_products_and_scalar_beta_broadcasts(route):
    q, k, w, _ = draw(1, 11, 4)
    s = householder_route_scores(q, k, w, 0.0, route, 3)
    assert max_err(s, np.where(np.tri(11) > 0, q @ k.T, -np.inf)) <= TOL
    s2 = householder_route_scores(q, k, w, 2.0, route, 3)
    assert max_err(s2, dense_scores(q, k, w, np.full(11, 2.0), route)) <= TOL


@pytest.mark.parametrize("route", ROUTES)
def test_parallel_steps_and_width_below_the_chunk_stay_exact(route):
    # all w equal (reflections undo each other: H² = I at β = 2) and D = 2 ≪ C: the worst case
    # for the conditioning of the UT transform's triangular system
    t, d = 40, 2
    q, k, _, b = draw(3, t, d)
    w = np.tile([0.6, 0.8], (t, 1))
    for beta in (np.full(t, 2.0), b):
        ref = dense_scores(q, k, w, beta, route)
        assert max_err(householder_route_scores(q, k, w, beta, route, 16), ref) <= TOL


@pytest.mark.parametrize("route", ROUTES)
def test_scores_equal_the_per_query_sweep(route):
    t, d = 150, 16
    q, k, w, b = draw(4, t, d)
    s = householder_route_scores(q, k, w, b, route, 32)
    for i in (0, 31, 32, 33, 100, t - 1):
        assert np.abs(s[i, : i + 1] - householder_scores(q[i], k, w, b, i, route)).max() <= TOL


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("t", "chunk"), [(13, 4), (13, 1), (13, 32)])
def test_outputs_equal_softmax_of_the_dense_scores(route, t, chunk):
    q, k, w, b = draw(5 + t + chunk, t, 5)
    rng = np.random.default_rng(6)
    v, bias = rng.standard_normal((t, 3)), rng.standard_normal((t, t))
    ref = dense_scores(q, k, w, b, route)
    got = path_attention(q, k, v, w, b, route, chunk)
    assert max_err(got, softmax_output(ref, v, 1 / math.sqrt(5))) <= TOL
    got = path_attention(q, k, v, w, b, route, chunk, bias=bias, scale=0.3)
    assert max_err(got, softmax_output(ref, v, 0.3, bias)) <= TOL


def test_batched_heads_and_a_shared_bias():
    lead, t, d = (2, 3), 10, 4
    q, k, w, b = draw(7, t, d, lead=lead)
    v = np.random.default_rng(8).standard_normal((*lead, t, 2))
    bias = -0.2 * np.abs(np.subtract.outer(np.arange(t), np.arange(t)))  # ALiBi, all heads
    s = householder_route_scores(q, k, w, b, "path", 3)
    o = path_attention(q, k, v, w, b, "path", 3, bias=bias)
    for idx in np.ndindex(*lead):
        ref = dense_scores(q[idx], k[idx], w[idx], b[idx], "path")
        assert max_err(s[idx], ref) <= TOL
        assert max_err(o[idx], softmax_output(ref, v[idx], 0.5, bias)) <= TOL


@settings(max_examples=25, deadline=None)
@given(
    t=st.integers(1, 24),
    c1=st.integers(1, 30),
    c2=st.integers(1, 30),
    seed=st.integers(0, 2**16),
    route=st.sampled_from(ROUTES),
)
def test_chunk_size_does_not_change_the_result_and_rows_average_ones(t, c1, c2, seed, route):
    q, k, w, b = draw(seed, t, 3, "mixed" if seed % 2 else "random")
    s1 = householder_route_scores(q, k, w, b, route, c1)
    s2 = householder_route_scores(q, k, w, b, route, c2)
    assert max_err(s1, s2) <= TOL
    o = path_attention(q, k, np.ones((t, 1)), w, b, route, c2)  # softmax rows sum to 1
    assert np.abs(o - 1.0).max() <= 1e-14


# ---------------------------------------------------------------------------------------------
# backends: the same array-API lines on array-api-strict and torch (CPU, and CUDA when present)

BACKENDS = [
    pytest.param(("array_api_strict", None), id="array_api_strict"),
    pytest.param(
        ("torch", "cpu"), id="torch-cpu", marks=pytest.mark.skipif(not HAS_TORCH, reason="torch")
    ),
]
if HAS_TORCH:
    import torch

    BACKENDS.append(
        pytest.param(
            ("torch", "cuda"),
            id="torch-cuda",
            marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device"),
        )
    )


@pytest.mark.parametrize("where", BACKENDS)
@pytest.mark.parametrize("route", ROUTES)
def test_backends_agree_with_the_dense_route_product(where, route):
    name, dev = where
    lead, t, d = (2,), 11, 4
    q, k, w, b = draw(9, t, d, lead=lead)
    rng = np.random.default_rng(10)
    v, bias = rng.standard_normal((*lead, t, 3)), rng.standard_normal((t, t))
    on = [backend.asarray(x, name, dev) for x in (q, k, v, w, b, bias)]
    s = householder_route_scores(on[0], on[1], on[3], on[4], route, 4)
    o = path_attention(*on[:5], route, 4, bias=on[5])
    assert backend.backend_of(s) == name and backend.backend_of(o) == name
    for h in range(lead[0]):
        ref = dense_scores(q[h], k[h], w[h], b[h], route)
        assert max_err(s[h, ...], ref) <= TOL
        assert max_err(o[h, ...], softmax_output(ref, v[h], 0.5, bias)) <= TOL


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_agrees_with_the_training_codes_path_scores_and_is_differentiable():
    from posflow.simulate.models.schemes import path_scores

    q, k, w, b = (torch.from_numpy(x) for x in draw(11, 37, 8, lead=(2, 3)))
    ref = path_scores(q, k, w, b)  # (B, H, T, T), reverse sweep over t
    got = householder_route_scores(q, k, w, b, "path", 8)
    low = np.tril_indices(37)
    assert float((got - ref)[..., low[0], low[1]].abs().max()) <= TOL
    x = [torch.from_numpy(a).requires_grad_(True) for a in draw(12, 5, 3)[:2]]
    w5, b5 = (torch.from_numpy(a) for a in draw(12, 5, 3)[2:])
    v5 = torch.ones(5, 2, dtype=torch.float64).cumsum(0)
    assert torch.autograd.gradcheck(lambda q, k: path_attention(q, k, v5, w5, b5, chunk=2), x)


# ---------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda q, k, w, b, v: householder_route_scores(q[:-1], k, w, b), "same shape"),
        (lambda q, k, w, b, v: householder_route_scores(q[0], k[0], w[0], b), "T, D"),
        (lambda q, k, w, b, v: householder_route_scores(q, k, 2 * w, b), "w rows must be unit"),
        (lambda q, k, w, b, v: householder_route_scores(q, k, w, b + 2.5), "beta must lie"),
        (lambda q, k, w, b, v: householder_route_scores(q, k, w, b[:-1]), "beta must be a"),
        (lambda q, k, w, b, v: householder_route_scores(q, k, w, b, "fwd"), "route"),
        (lambda q, k, w, b, v: householder_route_scores(q, k, w, b, chunk=0), "chunk"),
        (lambda q, k, w, b, v: householder_route_scores(q * np.nan, k, w, b), "q must be finite"),
        (lambda q, k, w, b, v: path_attention(q, k, v[:-1], w, b), "v must have shape"),
        (lambda q, k, w, b, v: path_attention(q, k, v, w, b, bias=np.ones((3, 3))), "bias"),
        (lambda q, k, w, b, v: path_attention(q, k, v, w, b, scale=math.nan), "scale"),
    ],
)
def test_bad_input_is_rejected_naming_the_argument(call, match):
    q, k, w, b = draw(13, 6, 3)
    with pytest.raises(ValueError, match=match):
        call(q, k, w, b, np.ones((6, 2)))


def test_non_integer_chunk_is_a_type_error():
    q, k, w, b = draw(14, 6, 3)
    with pytest.raises(TypeError, match="chunk"):
        householder_route_scores(q, k, w, b, chunk=4.0)
