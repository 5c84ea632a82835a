"""Chunked PaTH transport (simulate._householder, claim AT18): the compact-WY / UT-transform route
scores and attention outputs against the dense route product P_{j→i} built here by explicit d×d
matrix products, against the per-query sweep ``householder_scores`` and against the torch
training code's ``schemes.path_scores``; on every backend available here."""

import importlib.util
import math
import re
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.simulate import _householder, backend
from posflow.simulate._arrays import namespace_of
from posflow.simulate._householder import path_score_rows
from posflow.simulate.transport import (
    householder_route_scores,
    householder_scores,
    path_attention,
)

ROUTES = ["path", "from_source"]
TOL = 1e-12
HAS_TORCH = importlib.util.find_spec("torch") is not None


def whole(msg):
    """A pattern matching exactly the message ``msg``."""
    return f"^{re.escape(msg)}$"


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
# superblocks: beyond G chunks (G·C ≈ 256 steps, G ≤ 8) queries cross superblocks by D × D
# transports; every block is written once into the preallocated result


def sweep_scores(q, k, w, beta, route):
    """All route scores by one reverse sweep over the steps, every query at once: u_i ← H_t u_i
    for the queries whose route holds step t, recording u_i·k_j; −inf above the diagonal."""
    t = q.shape[0]
    u, s = q.copy(), np.full((t, t), -np.inf)
    for j in range(t - 1, -1, -1):
        if route == "from_source":  # steps j … i − 1: H_j acts before the record of source j
            u[j + 1 :] -= beta[j] * (u[j + 1 :] @ w[j])[:, None] * w[j]
        s[j:, j] = u[j:] @ k[j]
        if route == "path":  # steps j + 1 … i: H_j acts after the record of source j
            u[j:] -= beta[j] * (u[j:] @ w[j])[:, None] * w[j]
    return s


@pytest.mark.parametrize("route", ROUTES)
def test_the_sweep_reference_is_the_dense_route_product(route):
    q, k, w, b = draw(39, 12, 3)
    assert max_err(sweep_scores(q, k, w, b, route), dense_scores(q, k, w, b, route)) <= TOL


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("t", "chunk"), [(700, 64), (600, 16), (300, 5), (530, 256), (90, 1)])
def test_long_sequences_across_superblocks_equal_the_sweep(route, t, chunk):
    # (700, 64): 3 superblocks of 4 chunks, the last one padded; (600, 16): 5 of 8 chunks;
    # (300, 5): 8 of 8 chunks; (530, 256): 3 superblocks of one chunk; (90, 1): 12 of 8 steps.
    # Scores up to ≈ 12: the rounding of both sides is ≈ 1e-14 (TOL leaves a factor 100)
    q, k, w, b = draw(40 + chunk, t, 6)
    ref = sweep_scores(q, k, w, b, route)
    s = householder_route_scores(q, k, w, b, route, chunk)
    assert max_err(s, ref) <= TOL
    rng = np.random.default_rng(41)
    v = rng.standard_normal((t, 3))
    alibi = -0.05 * np.abs(np.subtract.outer(np.arange(t), np.arange(t)))
    o = path_attention(q, k, v, w, b, route, chunk, bias=alibi)
    assert max_err(o, softmax_output(ref, v, 1 / math.sqrt(6), alibi)) <= TOL


@pytest.mark.parametrize(("t", "chunk", "starts"), [(600, 64, (0, 1, 255, 256, 300, 599)),
                                                     (40, 1, (0, 7, 8, 20, 39))])  # fmt: skip
def test_score_rows_are_the_rows_of_the_route_scores_with_zeros_above(t, chunk, starts):
    # path_score_rows computes only the superblocks holding rows ≥ start (training code's
    # query-chunked evaluation); S = 256 and 8: starts on, before and after their boundaries
    q, k, w, b = draw(42, t, 5)
    s = householder_route_scores(q, k, w, b, "path", chunk)
    for start in starts:
        rows = path_score_rows(q[start:], k, w, b, start, chunk)
        assert rows.shape == (t - start, t) and rows.dtype == np.float64
        assert max_err(np.where(np.isneginf(s[start:]), -np.inf, rows), s[start:]) <= TOL
        assert np.all(rows[np.isneginf(s[start:])] == 0.0)


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


@pytest.mark.parametrize("where", [pytest.param(("numpy", None), id="numpy"), *BACKENDS])
@pytest.mark.parametrize("alias", [None, 0, 1, 2])
def test_scores_written_into_out_equal_a_fresh_result_bit_for_bit(where, alias):
    """A reused ``out`` full of NaN, or one that is q, k or w itself (D = T), receives exactly
    the fresh result and is returned; T = 300 spans a full band and a partial one (S = 256), so
    every kind of write (diagonal block, fill, in-place product, copied product) lands in it."""
    name, dev = where
    t = 300
    arrays = [backend.asarray(x, name, dev) for x in draw(31, t, t, lead=(2,))]
    fresh = householder_route_scores(*arrays)
    if alias is None:
        out = backend.asarray(np.full((2, t, t), np.nan), name, dev)
    else:
        arrays[alias] = out = backend.asarray(backend.to_numpy(arrays[alias]), name, dev)
    got = householder_route_scores(*arrays, out=out)
    assert got is out
    assert np.array_equal(backend.to_numpy(got), backend.to_numpy(fresh))


def _out_cases():
    cases = [
        (np.ones((6, 6), np.float32), TypeError, "out must have dtype float64; got float32"),
        ([[0.0] * 6] * 6, TypeError,
         "out must be a float64 array of the inputs' backend (numpy); got list"),
        (np.ones((6, 7)), ValueError, "out must have shape (6, 6); got (6, 7)"),
        (np.ones((1, 6, 6)), ValueError, "out must have shape (6, 6); got (1, 6, 6)"),
        (np.lib.stride_tricks.as_strided(np.ones(1), (6, 6), (0, 0), writeable=False),
         ValueError, "out must be writable"),
    ]  # fmt: skip
    if HAS_TORCH:
        msg = "out must be a float64 array of the inputs' backend (numpy); got Tensor"
        cases.append((torch.ones(6, 6, dtype=torch.float64), TypeError, msg))
    return cases


@pytest.mark.parametrize(("out", "error", "match"), _out_cases())
def test_scores_reject_a_bad_out_naming_the_rule(out, error, match):
    with pytest.raises(error, match=whole(match)):
        householder_route_scores(_q(6, 1), _q(6, 1), _q(6, 1), 1.0, out=out)


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_scores_reject_an_out_that_needs_a_gradient_and_leave_it_alone():
    q = torch.ones(6, 1, dtype=torch.float64)
    out = torch.zeros(6, 6, dtype=torch.float64, requires_grad=True)
    with pytest.raises(ValueError, match=whole(
        "out must not require a gradient (the result is written in place)"
    )):  # fmt: skip
        householder_route_scores(q, q, q, 1.0, out=out)
    assert not out.detach().any()


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


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_path_attention_across_superblocks_is_differentiable_with_a_bias():
    # T = 40, C = 2: superblocks of S = 16 steps, M = 3, so the lag loop runs (its products
    # go to reused arrays only outside autograd, and no logit is overwritten under it)
    x = [torch.from_numpy(a).requires_grad_(True) for a in draw(13, 40, 3)[:2]]
    w, b = (torch.from_numpy(a) for a in draw(13, 40, 3)[2:])
    v = torch.from_numpy(np.random.default_rng(1).standard_normal((40, 2)))
    bias = torch.from_numpy(np.random.default_rng(2).standard_normal((40, 40)))
    assert torch.autograd.gradcheck(
        lambda q, k: path_attention(q, k, v, w, b, chunk=2, bias=bias), x)  # fmt: skip


@pytest.mark.parametrize("bias", [False, True])
def test_path_attention_leaves_its_inputs_as_they_were(bias):
    # the logits are shifted and exponentiated in place: only arrays the call made itself
    t = 70
    q, k, w, b = draw(14, t, 4)
    v = np.random.default_rng(3).standard_normal((t, 3))
    args = [q, k, v, w, b, np.random.default_rng(4).standard_normal((t, t))]
    kinds = [lambda a: a] + ([torch.from_numpy] if HAS_TORCH else [])
    for conv in kinds:
        inputs = [conv(a.copy()) for a in args]
        got = path_attention(*inputs[:5], chunk=2, bias=inputs[5] if bias else None)
        assert all(np.array_equal(np.asarray(x), a) for x, a in zip(inputs, args, strict=True))
        again = path_attention(*inputs[:5], chunk=2, bias=inputs[5] if bias else None)
        assert np.array_equal(np.asarray(got), np.asarray(again))


@pytest.mark.parametrize("where", ["numpy", "torch", "torch autograd"])
def test_the_in_place_value_update_is_the_plain_expression_bit_for_bit(where):
    """_rescaled_plus_product against alpha·acc + a @ b (its reference, the expression it
    replaces): equal bit for bit; in place (acc overwritten, the product in buf) on NumPy and
    torch outside autograd, new arrays under autograd (acc kept for the gradient)."""
    if where != "numpy" and not HAS_TORCH:
        pytest.skip("torch is not installed")
    rng = np.random.default_rng(7)
    acc, a, b = (rng.standard_normal(shape) for shape in [(3, 4, 5), (3, 4, 6), (3, 6, 5)])
    alpha = rng.uniform(0, 1, (3, 1, 5))
    conv = (lambda x: x) if where == "numpy" else torch.from_numpy
    args = [conv(x.copy()) for x in (acc, alpha, a, b)]
    want = np.asarray(args[1] * args[0] + args[2] @ args[3])  # the backend's own products
    if where == "torch autograd":
        args[1].requires_grad_(True)
    buf = conv(np.full((3, 4, 5), np.nan))
    got = _householder._rescaled_plus_product(*args, buf)
    plain = [np.asarray(x.detach() if where != "numpy" else x) for x in (got, args[0])]
    np.testing.assert_array_equal(plain[0], want)
    in_place = where != "torch autograd"
    assert (got is args[0]) == in_place
    assert np.array_equal(plain[1], acc) != in_place
    if in_place:  # the product went to buf
        np.testing.assert_array_equal(np.asarray(buf), np.asarray(args[2] @ args[3]))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
@pytest.mark.parametrize("needs_grad", range(4))
def test_the_product_helpers_leave_out_and_buffers_alone_when_one_operand_needs_a_gradient(
    needs_grad,
):
    """Under autograd, whichever operand requires a gradient (acc, alpha, a or b), the helpers
    form new tensors (torch refuses out= there) and leave out and buf as they were; the values
    are the plain expressions'."""
    rng = np.random.default_rng(8)
    acc, alpha, a, b = (torch.from_numpy(rng.standard_normal(shape))
                        for shape in [(3, 4, 5), (3, 1, 5), (3, 4, 6), (3, 6, 5)])  # fmt: skip
    want_sum, want_product = alpha * acc + a @ b, a @ b
    [acc, alpha, a, b][needs_grad].requires_grad_(True)
    out, buf = torch.zeros(3, 4, 5, dtype=torch.float64), torch.zeros(3, 4, 5, dtype=torch.float64)
    got = _householder._rescaled_plus_product(acc, alpha, a, b, buf)
    assert torch.equal(got.detach(), want_sum) and torch.equal(buf, torch.zeros_like(buf))
    if needs_grad >= 2:  # _product_into takes a and b
        y = _householder._product_into(a, b, out)
        assert y is not out and torch.equal(y.detach(), want_product)
        assert torch.equal(out, torch.zeros_like(out))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_work_arrays_take_the_shape_dtype_and_device_asked_for():
    """_work_array: on torch (a CPU tensor over NumPy memory outside autograd, torch's own under
    it) and on NumPy, an array of the shape, dtype and device of ``like``, writable."""
    for like in (torch.zeros(3, dtype=torch.float64), torch.zeros(3).requires_grad_(True)):
        w = _householder._work_array(torch, (2, 3), like)
        assert isinstance(w, torch.Tensor) and w.shape == (2, 3) and w.dtype == like.dtype
        assert w.device == like.device and not w.requires_grad
        w.fill_(1.0)
    assert _householder._work_array(np, (4,), np.zeros(1, np.float32)).dtype == np.float32


WORK = [  # (route, what requires a gradient, the bias's kind, lag work arrays, value-sum buffer)
    ("numpy", None, None, 2, 1),
    ("torch", None, None, 2, 1),
    ("torch", None, "numpy", 2, 1),
    ("torch", "bias", "torch", 2, 0),
    ("torch", "v", None, 2, 0),
    ("torch", "q", None, 0, 0),
    ("torch", "k", None, 0, 0),
    ("torch", "w", None, 0, 0),
    ("torch", "beta", None, 0, 0),
    ("array_api_strict", None, None, 0, 0),
]


@pytest.mark.parametrize(("where", "grad", "bias_kind", "n_lag", "n_sum"), WORK)
def test_work_arrays_are_taken_only_where_products_write_into_them(
    where, grad, bias_kind, n_lag, n_sum, monkeypatch
):
    """path_attention across superblocks (T = 40, C = 2: M = 3 superblocks of S = 14 steps) takes
    two lag work arrays (M − 1) × S × (S + D) where the carries need no gradient and a value-sum
    buffer (M − 1) × D_v × S where the value sums need none (NumPy; torch outside autograd, a
    NumPy bias included), every product of the loop writing into them, and none where the
    products form new arrays (array-api-strict, torch under autograd); outputs equal the dense
    softmax either way."""
    if where == "torch" and not HAS_TORCH:
        pytest.skip("torch is not installed")
    taken, outs, bufs = [], [], []
    work, into, plus = (_householder._work_array, _householder._product_into,
                        _householder._rescaled_plus_product)  # fmt: skip

    def product_into(a, b, out):
        outs.append(out is None)
        y = into(a, b, out)
        assert out is None or y is out
        return y

    monkeypatch.setattr(_householder, "_work_array", lambda *a: taken.append(a[1]) or work(*a))
    monkeypatch.setattr(_householder, "_product_into", product_into)
    monkeypatch.setattr(_householder, "_rescaled_plus_product",
                        lambda *a: bufs.append(a[-1] is None) or plus(*a))  # fmt: skip
    t, c, dv = 40, 2, 2
    q, k, w, b = draw(47, t, 3)
    rng = np.random.default_rng(48)
    v, bias = rng.standard_normal((t, dv)), 0.1 * rng.standard_normal((t, t))
    args = _place(where, [q, k, v, w, b])
    if bias_kind is not None:
        args.append(bias if bias_kind == "numpy" else torch.from_numpy(bias.copy()))
    if grad is not None:
        args[["q", "k", "v", "w", "beta", "bias"].index(grad)].requires_grad_(True)
    o = path_attention(*args[:5], "path", c, bias=args[5] if bias_kind else None)
    m, span = 3, 14
    assert taken == [(m - 1, span, span + 3)] * n_lag + [(m - 1, dv, span)] * n_sum
    assert outs == [n_lag == 0] * (m - 1) and bufs == [n_sum == 0] * (m - 1)
    got = backend.to_numpy(o.detach() if hasattr(o, "detach") else o)
    ref = softmax_output(dense_scores(q, k, w, b, "path"), v, 1 / math.sqrt(3),
                         bias if bias_kind else None)  # fmt: skip
    assert max_err(got, ref) <= TOL


def test_the_product_helpers_form_new_arrays_without_a_buffer():
    """_product_into and _rescaled_plus_product with no buffer (None): a @ b and α·acc + a @ b
    as new arrays, bit for bit, the inputs unchanged."""
    rng = np.random.default_rng(49)
    acc, a, b = (rng.standard_normal(shape) for shape in [(3, 4, 5), (3, 4, 6), (3, 6, 5)])
    alpha, keep = rng.uniform(0, 1, (3, 1, 5)), acc.copy()
    np.testing.assert_array_equal(_householder._product_into(a, b, None), a @ b)
    got = _householder._rescaled_plus_product(acc, alpha, a, b, None)
    np.testing.assert_array_equal(got, alpha * keep + a @ b)
    assert got is not acc and np.array_equal(acc, keep)


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
    with pytest.raises(TypeError, match=whole("chunk must be an integer; got float")):
        path_attention(q, k, np.ones((6, 1)), w, b, chunk=4.0)


# ---------------------------------------------------------------------------------------------
# one dimension: H_s = 1 − β_s is a number and the route product a closed form


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize(("t", "chunk"), [(1, 1), (1, 64), (9, 2), (9, 4), (9, 64)])
def test_one_dimensional_steps_multiply_to_the_closed_form(route, t, chunk):
    # D = 1, w_s = ±1: s_ij = q_i k_j Π_s (1 − β_s) over s = j+1 … i (path) or j … i−1
    rng = np.random.default_rng(20 + t)
    q, k = rng.standard_normal((2, t, 1))
    w = rng.choice([-1.0, 1.0], (t, 1))
    b = rng.uniform(0, 2, t)
    lo = 1 if route == "path" else 0
    ref = np.full((t, t), -np.inf)
    for i in range(t):
        for j in range(i + 1):
            ref[i, j] = q[i, 0] * k[j, 0] * np.prod(1 - b[j + lo : i + lo])
    assert max_err(householder_route_scores(q, k, w, b, route, chunk), ref) <= TOL
    v = rng.standard_normal((t, 2))
    o = path_attention(q, k, v, w, b, route, chunk)  # σ = 1/√1 = 1 by default
    assert max_err(o, softmax_output(ref, v, 1.0)) <= TOL


def test_default_route_and_chunk_are_path_and_64():
    # T = 70 > 64: two chunks of 64 by default; the defaults give the path route, and the same
    # bits as chunk = 64 given explicitly (another chunk length rounds differently)
    q, k, w, b = draw(21, 70, 3)
    ref = dense_scores(q, k, w, b, "path")
    s = householder_route_scores(q, k, w, b)
    assert max_err(s, ref) <= TOL
    assert np.array_equal(s, householder_route_scores(q, k, w, b, "path", 64))
    v = np.random.default_rng(22).standard_normal((70, 2))
    o = path_attention(q, k, v, w, b)
    assert max_err(o, softmax_output(ref, v, 1 / math.sqrt(3))) <= TOL
    assert np.array_equal(o, path_attention(q, k, v, w, b, "path", 64, scale=1 / math.sqrt(3)))


@pytest.mark.parametrize("route", ROUTES)
def test_logits_spread_over_thousands_keep_the_online_softmax_exact(route):
    # bias entries in [−3000, 3000]: e^{±3000} overflows float64, so every row must be shifted
    # by its own running maximum; the reference is the dense softmax shifted by the row maximum
    t = 14
    q, k, w, b = draw(31, t, 3)
    rng = np.random.default_rng(32)
    v, bias = rng.standard_normal((t, 2)), rng.uniform(-3000, 3000, (t, t))
    bias[5, :5] += 6000.0  # row 5: its maximum far below the diagonal
    ref = dense_scores(q, k, w, b, route)
    for chunk in (3, 5):
        o = path_attention(q, k, v, w, b, route, chunk, bias=bias, scale=40.0)
        assert max_err(o, softmax_output(ref, v, 40.0, bias)) <= TOL


@pytest.mark.parametrize("route", ROUTES)
def test_zero_scale_averages_the_values_of_the_visible_keys(route):
    # σ = 0 and no bias: a_ij = 1/(i + 1), o_i is the running mean of v_0 … v_i
    q, k, w, b = draw(23, 11, 3)
    v = np.random.default_rng(24).standard_normal((11, 2))
    o = path_attention(q, k, v, w, b, route, 4, scale=0.0)
    ref = np.cumsum(v, axis=0) / np.arange(1, 12)[:, None]
    assert np.abs(o - ref).max() <= 1e-15


@pytest.mark.parametrize(
    ("t", "chunk", "lead", "b_shape"),
    [(10, 3, (2, 3), (3, 10, 10)), (10, 3, (2, 3), (2, 1, 10, 10)), (9, 4, (2,), (1, 9, 9)),
     (9, 9, (2, 3), (10, 9)[1:] * 2), (7, 2, (), (7, 7))],
)  # fmt: skip
def test_a_bias_broadcasts_over_the_leading_dimensions(t, chunk, lead, b_shape):
    # the bias is added to σ s_ij before the softmax, broadcast like NumPy over heads and batch
    q, k, w, b = draw(25 + t, t, 4, lead=lead)
    rng = np.random.default_rng(26)
    v, bias = rng.standard_normal((*lead, t, 2)), rng.standard_normal(b_shape)
    o = path_attention(q, k, v, w, b, "path", chunk, bias=bias, scale=0.7)
    full = np.broadcast_to(bias, (*lead, t, t))
    for idx in np.ndindex(*lead):
        ref = dense_scores(q[idx], k[idx], w[idx], b[idx], "path")
        assert max_err(o[idx], softmax_output(ref, v[idx], 0.7, full[idx])) <= TOL


def test_unit_rows_within_the_tolerance_are_accepted():
    # |‖w‖ − 1| ≤ 1e-12 passes (rows scaled by 1 + 5e-13: scores move by ≈ 1e-12 relative)
    q, k, w, b = draw(27, 6, 3)
    s = householder_route_scores(q, k, w * (1 + 5e-13), b)
    assert max_err(s, dense_scores(q, k, w, b, "path")) <= 1e-11


def _q(*shape):
    return np.ones(shape)


Q_SHAPE = "q must have shape (..., T, D) with every dimension >= 1; got "
B_SHAPE = "bias must have shape (..., 6, 6) broadcasting to () + (6, 6); "


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [((_q(6), _q(6), _q(6), 1.0), {}, Q_SHAPE + "(6,)"),
     ((_q(0, 3), _q(0, 3), _q(0, 3), 1.0), {}, Q_SHAPE + "(0, 3)"),
     ((_q(6, 0), _q(6, 0), _q(6, 0), 1.0), {}, Q_SHAPE + "(6, 0)"),
     ((_q(6, 1), _q(5, 1), _q(6, 1), 1.0), {},
      "q, k and w must have the same shape (..., T, D); got (6, 1), (5, 1), (6, 1)"),
     ((_q(6, 1), _q(6, 1), _q(6, 2) / math.sqrt(2), 1.0), {},
      "q, k and w must have the same shape (..., T, D); got (6, 1), (6, 1), (6, 2)"),
     ((_q(6, 1), _q(6, 1), _q(6, 1) * (1 + 2**-38), 1.0), {},  # ‖w‖ − 1 = 2^-38 exactly
      "w rows must be unit vectors (tolerance 1e-12); worst |‖w‖ − 1| = 3.637978807091713e-12"),
     ((_q(6, 1), _q(6, 1), _q(6, 1) * 3, 1.0), {},
      "w rows must be unit vectors (tolerance 1e-12); worst |‖w‖ − 1| = 2.0"),
     ((_q(6, 1), _q(6, 1), _q(6, 1), _q(5)), {},
      "beta must be a scalar or broadcast to (6,); got (5,)"),
     ((_q(2, 6, 1), _q(2, 6, 1), _q(2, 6, 1), _q(5)), {},
      "beta must be a scalar or broadcast to (2, 6); got (5,)"),
     ((_q(2, 6, 0), _q(2, 6, 0), _q(2, 6, 0), 1.0), {}, Q_SHAPE + "(2, 6, 0)"),
     ((_q(0, 6, 1), _q(0, 6, 1), _q(0, 6, 1), 1.0), {}, Q_SHAPE + "(0, 6, 1)"),
     ((_q(2, 0, 6, 1), _q(2, 0, 6, 1), _q(2, 0, 6, 1), 1.0), {}, Q_SHAPE + "(2, 0, 6, 1)"),
     ((_q(6, 1), _q(6, 1) * np.nan, _q(6, 1), 1.0), {}, "k must be finite (no NaN or inf)"),
     ((_q(6, 1), _q(6, 1), _q(6, 1) * np.inf, 1.0), {}, "w must be finite (no NaN or inf)"),
     ((_q(6, 1), _q(6, 1), _q(6, 1), np.nan), {}, "beta must be finite (no NaN or inf)"),
     ((_q(6, 1), _q(6, 1), _q(6, 1), 1.0), {"chunk": 0}, "chunk must be >= 1; got 0"),
     ((_q(6, 1), _q(6, 1), _q(6, 1), [0.0, 0.5, 2.0, 2.5, 1.0, 1.0]), {},
      "beta must lie in [0, 2]; got values in [0.0, 2.5]"),
     ((_q(6, 1), _q(6, 1), _q(6, 1), [1.0, -0.5, 2.0, 1.0, 1.0, 1.5]), {},
      "beta must lie in [0, 2]; got values in [-0.5, 2.0]")],
)  # fmt: skip
def test_scores_reject_bad_input_with_the_documented_message(args, kwargs, match):
    with pytest.raises(ValueError, match=whole(match)):
        householder_route_scores(*args, **kwargs)


@pytest.mark.parametrize(
    ("v", "kwargs", "match"),
    [(_q(6), {}, "v must have shape (6,) + (D_v,); got (6,)"),
     (_q(1, 6, 2), {}, "v must have shape (6,) + (D_v,); got (1, 6, 2)"),
     (_q(5, 2), {}, "v must have shape (6,) + (D_v,); got (5, 2)"),
     (_q(6, 2) * np.nan, {}, "v must be finite (no NaN or inf)"),
     (_q(6, 2), {"bias": _q(6, 6) * -np.inf}, "bias must be finite (no NaN or inf)"),
     (_q(6, 2), {"bias": _q(6)}, B_SHAPE + "got (6,)"),
     (_q(6, 2), {"bias": _q(6, 5)}, B_SHAPE + "got (6, 5)"),
     (_q(6, 2), {"bias": _q(5, 6)}, B_SHAPE + "got (5, 6)"),
     (_q(6, 2), {"bias": _q(1, 6, 6)}, B_SHAPE + "got (1, 6, 6)"),
     (_q(6, 2), {"scale": math.inf}, "scale must be a finite number; got inf"),
     (_q(6, 2), {"scale": True}, "scale must be a finite number; got True"),
     (_q(6, 2), {"scale": "0.5"}, "scale must be a finite number; got '0.5'"),
     (_q(6, 2), {"scale": np.float64(math.nan)},
      "scale must be a finite number; got np.float64(nan)")],
)  # fmt: skip
def test_attention_rejects_bad_input_with_the_documented_message(v, kwargs, match):
    q, k, w, b = draw(28, 6, 3)
    with pytest.raises(ValueError, match=whole(match)):
        path_attention(q, k, v, w, b, **kwargs)


@pytest.mark.parametrize(
    ("lead", "b_shape"), [((2, 3), (2, 6, 6)), ((2,), (2, 2, 6, 6)), ((2,), (3, 6, 6))]
)
def test_a_bias_that_does_not_broadcast_over_the_heads_is_rejected(lead, b_shape):
    q, k, w, b = draw(29, 6, 3, lead=lead)
    msg = f"bias must have shape (..., 6, 6) broadcasting to {lead} + (6, 6); got {b_shape}"
    with pytest.raises(ValueError, match=whole(msg)):
        path_attention(q, k, np.ones((*lead, 6, 2)), w, b, bias=np.zeros(b_shape))


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_beta_of_the_wrong_length_is_a_value_error():
    # torch.broadcast_to raises RuntimeError; the message is the same as on NumPy
    q, k, w, b = (torch.from_numpy(x) for x in draw(30, 6, 3))
    msg = "beta must be a scalar or broadcast to (6,); got (5,)"
    with pytest.raises(ValueError, match=whole(msg)):
        householder_route_scores(q, k, w, b[:-1])


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_torch_inputs_requiring_a_gradient_are_checked_without_warnings():
    """The checks read w and β outside autograd: no warning about converting a tensor that
    requires a gradient (an error under filterwarnings = error), the documented messages."""
    q, k, w, b = (torch.from_numpy(x) for x in draw(31, 6, 3))
    w_bad = (w * 3.0).requires_grad_(True)
    head = re.escape("w rows must be unit vectors (tolerance 1e-12); worst |‖w‖ − 1| = ")
    with pytest.raises(ValueError, match=f"^{head}2\\.0[0-9]*$"):
        householder_route_scores(q, k, w_bad, b)
    b_bad = torch.tensor([0.0, 0.5, 2.0, 2.5, 1.0, 1.0], dtype=torch.float64, requires_grad=True)
    msg = "beta must lie in [0, 2]; got values in [0.0, 2.5]"
    with pytest.raises(ValueError, match=whole(msg)):
        householder_route_scores(q, k, w, b_bad)
    s = householder_route_scores(q, k, w.clone().requires_grad_(True), b)
    assert s.requires_grad


def test_v_of_another_batch_shape_is_rejected():
    q, k, w, b = draw(33, 6, 3, lead=(2,))
    msg = "v must have shape (2, 6) + (D_v,); got (3, 6, 1)"
    with pytest.raises(ValueError, match=whole(msg)):
        path_attention(q, k, np.ones((3, 6, 1)), w, b)


# ---------------------------------------------------------------------------------------------
# one array off NumPy takes the whole call there (array-api-strict's second device: arrays of
# two devices cannot be combined, so every array built inside must follow the inputs' device)

@pytest.mark.parametrize("which", range(6))
def test_one_argument_on_another_backend_and_device_moves_the_call_there(which):
    xp = pytest.importorskip("array_api_strict")
    dev = xp.Device("device1")
    lead, t, d = (2,), 13, 3
    q, k, w, b = draw(34, t, d, lead=lead)
    rng = np.random.default_rng(35)
    v, bias = rng.standard_normal((*lead, t, 2)), rng.standard_normal((1, t, t))
    args = [q, k, v, w, b, bias]  # which = 5: the bias alone
    args[which] = backend.asarray(args[which], "array_api_strict", dev)
    o = path_attention(*args[:5], "from_source", 4, bias=args[5], scale=0.6)
    assert backend.backend_of(o) == "array_api_strict" and o.device == dev
    if which not in (2, 5):  # neither v nor the bias is an argument of the scores
        s = householder_route_scores(*(args[i] for i in (0, 1, 3, 4)), "from_source", 4)
        assert backend.backend_of(s) == "array_api_strict" and s.device == dev
    for h in range(lead[0]):
        ref = dense_scores(q[h], k[h], w[h], b[h], "from_source")
        assert max_err(o[h, ...], softmax_output(ref, v[h], 0.6, bias[0])) <= TOL
        if which not in (2, 5):
            assert max_err(s[h, ...], ref) <= TOL


# ---------------------------------------------------------------------------------------------
# routes the first tests did not reach (the mutation run, benchmarks/results/mutation.md):
# the online softmax across superblocks on the backends that form new arrays, the layout, the
# helpers, and path_score_rows with batch dims, float32, defaults and a second device


def _place(where, arrays):
    """``arrays`` on the route ``where``: NumPy, array-api-strict's second device, or torch
    (outside autograd, or with the first array, or the second alone, requiring a gradient)."""
    if where == "numpy":
        return list(arrays)
    if where == "array_api_strict":
        xp = pytest.importorskip("array_api_strict")
        return [backend.asarray(a, "array_api_strict", xp.Device("device1")) for a in arrays]
    if not HAS_TORCH:
        pytest.skip("torch is not installed")
    out = [torch.from_numpy(np.array(a)) for a in arrays]
    if where.startswith("torch autograd"):
        out[1 if where.endswith("k") else 0].requires_grad_(True)
    return out


@pytest.mark.parametrize(
    "where", ["numpy", "array_api_strict", "torch", "torch autograd", "torch autograd k"]
)
@pytest.mark.parametrize("route", ROUTES)
def test_spread_logits_across_superblocks_on_every_route_of_the_online_softmax(where, route):
    """T = 40, C = 2: seven chunks a superblock, M = 3, so the lag loop runs; bias entries in
    [−3000, 3000], so each row must be shifted by its own running maximum (a shift by a
    column's or the global maximum underflows whole rows). Against the dense softmax. Under
    autograd with q alone, or k alone, requiring a gradient: every product that carries it
    must leave the out= route (torch refuses out= under autograd)."""
    t = 40
    q, k, w, b = draw(36, t, 3)
    rng = np.random.default_rng(37)
    v, bias = rng.standard_normal((t, 2)), rng.uniform(-3000, 3000, (t, t))
    bias[30, :20] += 6000.0  # row 30: its maximum two superblocks back
    want = softmax_output(dense_scores(q, k, w, b, route), v, 40.0, bias)
    q_, k_, v_, w_, b_, bias_ = _place(where, [q, k, v, w, b, bias])
    o = path_attention(q_, k_, v_, w_, b_, route, 2, bias=bias_, scale=40.0)
    o = o.detach() if where.startswith("torch autograd") else o
    assert max_err(o, want) <= TOL


@pytest.mark.parametrize("where", ["numpy", "torch"])
def test_heads_across_superblocks_equal_each_head_alone(where):
    """Two heads (leading dim) at T = 40, C = 2 (M = 3), v of width 5 ≠ T: each head's output
    equals the same call on that head alone (the work arrays of the lag loop are sized by the
    heads, M − 1, D_v and S)."""
    q, k, w, b = draw(38, 40, 3, lead=(2,))
    v = np.random.default_rng(39).standard_normal((2, 40, 5))
    args = _place(where, [q, k, v, w, b])
    o = backend.to_numpy(path_attention(*args, "path", 2))
    for h in range(2):
        alone = path_attention(*(a[h] for a in args), "path", 2)
        assert max_err(alone, o[h]) <= TOL


@pytest.mark.parametrize(("t", "chunk", "want"), [
    (1024, 64, (64, 4, 4)), (4096, 64, (64, 4, 16)), (1100, 64, (64, 4, 5)),
    (1024, 256, (256, 1, 4)), (300, 100, (100, 3, 1)), (5, 64, (5, 1, 1)), (40, 2, (2, 7, 3)),
])  # fmt: skip
def test_the_layout_groups_chunks_into_balanced_superblocks_of_about_256_steps(t, chunk, want):
    """_layout: (C, G, M) with G = min(8, ⌈256/C⌉) at most, balanced so that M·G·C − T < G·C
    (1100 steps: 18 chunks in 5 superblocks of 4, not 3 of 8 and one of 2)."""
    c, g, m = _householder._layout(t, chunk)
    assert (c, g, m) == want and m * g * c >= t > (m - 1) * g * c


@pytest.mark.parametrize("where", ["numpy", "array_api_strict", "torch", "torch autograd"])
@pytest.mark.parametrize("beta", ["random", "mixed", "two"])
def test_the_ut_solve_gives_l_times_its_right_hand_sides_and_the_chunk_product(where, beta):
    """_ut_products (one solve on every route: SciPy's forward substitution on NumPy, torch's,
    LU on array-api-strict): L tril(W Kᵀ, −1) and L W against L = (I + B tril(W Wᵀ, −1))⁻¹ B
    formed by an explicit inverse, and I − Wᵀ (L W) against the chunk's steps H_e ⋯ H_a
    multiplied as d × d matrices; two chunks of C = 8 steps, D = 3 < C (parallel-ish rows)."""
    lead, c, d = (2,), 8, 3
    _, k, w, b = draw(46, c, d, beta, lead=lead)
    args = _place(where, [w, b, k])
    xp = namespace_of(*args).xp
    lwk, lw = (backend.to_numpy(x.detach() if hasattr(x, "detach") else x)
               for x in _householder._ut_products(xp, *args))  # fmt: skip
    for h in range(lead[0]):
        a = b[h, :, None] * np.tril(w[h] @ w[h].T, -1)
        ell = np.linalg.inv(np.eye(c) + a) * b[h][None, :]
        assert max_err(lwk[h], ell @ np.tril(w[h] @ k[h].T, -1)) <= TOL
        assert max_err(lw[h], ell @ w[h]) <= TOL
        prod = np.eye(d)
        for s in range(c):
            prod = (np.eye(d) - b[h, s] * np.outer(w[h, s], w[h, s])) @ prod
        assert max_err(np.eye(d) - w[h].T @ lw[h], prod) <= TOL
        if where != "array_api_strict":  # forward substitution keeps the zeros exact
            assert np.all(np.triu(lwk[h]) == 0.0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_numpy_solve_writes_into_a_contiguous_right_hand_side_and_leaves_others_alone(dtype):
    """_unit_lower_solve on NumPy (BLAS trsm on the transposed memory): (I + A)⁻¹ B against
    np.linalg.solve for batch dims (2, 3), C = 5, K = 7; a C-contiguous B is overwritten with
    the result and returned, any other B is copied first and left as it was; the dtype kept."""
    rng = np.random.default_rng(50)
    a = np.tril(rng.uniform(-2, 2, (2, 3, 5, 5)), -1).astype(dtype)
    b = rng.standard_normal((2, 3, 5, 7)).astype(dtype)
    want = np.linalg.solve(np.eye(5) + a.astype(np.float64), b.astype(np.float64))
    tol = 1e-12 if dtype == np.float64 else 1e-4
    fresh = b.copy()
    got = _householder._unit_lower_solve(np, a, fresh)
    assert got is fresh and got.dtype == dtype and np.abs(got - want).max() <= tol
    strided = np.swapaxes(b.copy(), -1, -2).copy()  # the same B behind a transposed view
    view = np.swapaxes(strided, -1, -2)
    kept = strided.copy()
    got = _householder._unit_lower_solve(np, a, view)
    assert np.abs(got - want).max() <= tol and np.array_equal(strided, kept)
    other = a.astype(np.float32 if dtype == np.float64 else np.float64)  # A of another dtype
    fresh = b.copy()
    got = _householder._unit_lower_solve(np, other, fresh)
    assert got is fresh and got.dtype == dtype and np.abs(got - want).max() <= 1e-4


def test_exp2_is_the_namespaces_own_and_else_exp_of_x_ln2():
    """_exp2: NumPy's exp2 bit for bit where the namespace has one; exp(x·ln 2) where it has
    not (the two differ in the last bit for some x, so the test tells them apart)."""
    x = np.linspace(-1070.0, 1020.0, 20001)
    np.testing.assert_array_equal(_householder._exp2(np, x), np.exp2(x))
    only_exp = types.SimpleNamespace(exp=np.exp)
    np.testing.assert_array_equal(_householder._exp2(only_exp, x), np.exp(x * math.log(2.0)))
    assert not np.array_equal(np.exp2(x), np.exp(x * math.log(2.0)))


def test_the_finite_check_reads_an_overflowing_sum_as_a_question_not_an_answer():
    """_as_finite: finite entries whose sum overflows pass (the full test decides); NaN and
    ±inf raise the documented message; what is not an array of numbers is named."""
    at = namespace_of(np.zeros(1))
    big = np.array([1e308, 1e308, -1.0])
    np.testing.assert_array_equal(_householder._as_finite(at, big, "q"), big)
    for bad in (np.array([1.0, np.nan]), np.array([np.inf, -np.inf])):
        with pytest.raises(ValueError, match=whole("q must be finite (no NaN or inf)")):
            _householder._as_finite(at, bad, "q")
    with pytest.raises(TypeError, match=whole("k must be an array of numbers")):
        _householder._as_finite(at, [["a"]], "k")


@pytest.mark.parametrize("where", ["numpy", "array_api_strict", "torch"])
def test_score_rows_keep_batch_dims_dtype_and_device_and_default_to_the_whole_sequence(where):
    """path_score_rows, for training code: batch dims (the zeros of the skipped queries go along
    T), float32 kept, the inputs' backend and device kept; T = 40, C = 2 crosses superblocks."""
    t, start = 40, 17
    q, k, w, b = draw(44, t, 3, lead=(2,))
    s = householder_route_scores(q, k, w, b, "path", 2)
    args = _place(where, [q[:, start:], k, w, b])
    rows = path_score_rows(*args, start, 2)
    assert backend.backend_of(rows) == backend.backend_of(args[0])
    assert getattr(rows, "device", None) == getattr(args[0], "device", None)
    got, ref = backend.to_numpy(rows), s[:, start:]
    assert got.shape == (2, t - start, t) and got.dtype == np.float64
    assert max_err(np.where(np.isneginf(ref), -np.inf, got), ref) <= TOL
    assert np.all(got[np.isneginf(ref)] == 0.0)
    f32 = [x.astype(np.float32) for x in (q[:, start:], k, w, b)]
    if where == "array_api_strict":  # backend.asarray makes float64; float32 as it is
        xs = pytest.importorskip("array_api_strict")
        args32 = [xs.asarray(x, device=xs.Device("device1")) for x in f32]
    else:
        args32 = _place(where, f32)
    rows32 = path_score_rows(*args32, start, 2)
    assert backend.to_numpy(rows32).dtype == np.float32  # float32 kept on every route
    assert np.allclose(backend.to_numpy(rows32), got, rtol=1e-4, atol=1e-4)
    if where == "numpy":
        q70, k70, w70, b70 = draw(45, 70, 3)  # T > 64: the default chunk is 64, not min(T, ·)
        np.testing.assert_array_equal(path_score_rows(q70, k70, w70, b70),
                                      path_score_rows(q70, k70, w70, b70, 0, 64))  # fmt: skip
