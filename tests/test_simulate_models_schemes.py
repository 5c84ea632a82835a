"""simulate.models.schemes: the transport schemes against simulate.transport (claim AT18)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from posflow.simulate import transport as T  # noqa: E402
from posflow.simulate.models import schemes as S  # noqa: E402
from posflow.simulate.models.lm import LM, SCHEMES, LMConfig  # noqa: E402
from posflow.simulate.orthogonal import rope_frequencies, so2_matrices  # noqa: E402

LOW = np.tril_indices(9)


def qkv(n=9, d=8, h=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, h, n, d, generator=g, dtype=torch.float64) for _ in range(3)]


def test_all_schemes_are_registered():
    for name in S.TRANSPORT_SCHEMES:
        assert name in SCHEMES and SCHEMES[name].name == name


def test_frequencies_match_orthogonal_and_reject_odd_d():
    np.testing.assert_allclose(S.frequencies(12).numpy(), rope_frequencies(12), rtol=1e-15)
    with pytest.raises(ValueError, match="d_head"):
        S.frequencies(7)
    with pytest.raises(ValueError, match="base"):
        S.frequencies(8, base=1.0)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=4, max_size=4))
def test_rotate_half_is_an_isometry_undone_by_minus_phi(angles):
    x = torch.arange(1.0, 9.0, dtype=torch.float64)[None]
    phi = torch.tensor([angles], dtype=torch.float64)
    y = S.rotate_half(x, phi)
    assert abs(float(y.norm() - x.norm())) < 1e-12
    assert float((S.rotate_half(y, -phi) - x).abs().max()) < 1e-12


def _eval_thetas(scheme, n, count):
    rng = np.random.default_rng([scheme.eval_seed, scheme.layer, n])
    return [scheme.draw(n, rng).numpy() for _ in range(count)]


@pytest.mark.parametrize("name", ["random_qk", "random_pos_qk"])
def test_random_qk_scores_equal_the_route_product(name):
    sch = SCHEMES[name](2, 8, layer=1).eval()
    q, k, v = qkv()
    q2, k2, v2 = sch.qkv(q, k, v, torch.zeros(1, 9, 16))
    assert torch.equal(v2, v)
    (theta,) = _eval_thetas(sch, 9, 1)
    for h in range(2):
        s = (q2[0, h] @ k2[0, h].T).numpy()
        ref = T.so2_scores(q[0, h].numpy(), k[0, h].numpy(), theta[h])
        assert np.abs(s - ref)[LOW].max() < 1e-10
        steps = so2_matrices(theta[h])  # dense route product for one pair
        dense = q[0, h, 7].numpy() @ T.route_product(steps, 2, 7) @ k[0, h, 2].numpy()
        assert abs(s[7, 2] - dense) < 1e-10


@pytest.mark.parametrize("name", ["random_qkv", "random_pos_qkv"])
def test_value_rotation_with_inverse_output_is_the_transported_sum(name):
    sch = SCHEMES[name](2, 8, layer=0).eval()
    q, k, v = qkv(seed=3)
    _, _, v2 = sch.qkv(q, k, v, torch.zeros(1, 9, 16))
    a = np.tril(np.random.default_rng(0).exponential(size=(9, 9)))
    a /= a.sum(1, keepdims=True)
    y = sch.output(torch.from_numpy(a) @ v2, None)
    _, psi = _eval_thetas(sch, 9, 2)  # value angles: the second draw of the stream
    for h in range(2):
        steps = so2_matrices(psi[h])
        ref = np.array(
            [sum(a[i, j] * T.route_product(steps, j, i) @ v[0, h, j].numpy()
                 for j in range(i + 1)) for i in range(9)]
        )  # fmt: skip
        assert np.abs(y[0, h].numpy() - ref).max() < 1e-10


def test_random_angles_ranges_and_means_monte_carlo():
    f = S.frequencies(8).numpy()
    zero = SCHEMES["random_qk"](1, 8, 0).draw(20000, np.random.default_rng(5)).numpy()[0] / f
    pos = SCHEMES["random_pos_qk"](1, 8, 0).draw(20000, np.random.default_rng(5)).numpy()[0] / f
    assert zero.min() >= -1 and zero.max() <= 1 and pos.min() >= 0 and pos.max() <= 2
    se = math.sqrt(1 / 3 / 20000)  # sd of Unif[-1, 1] over sqrt(N)
    assert np.abs(zero.mean(0)).max() < 5 * se
    assert np.abs(pos.mean(0) - 1).max() < 5 * se


def test_training_resamples_evaluation_repeats():
    sch = SCHEMES["random_qk"](2, 8, 0)
    q, k, v = qkv()
    x = torch.zeros(1, 9, 16)
    a, b = sch.train().qkv(q, k, v, x)[0], sch.qkv(q, k, v, x)[0]
    assert not torch.allclose(a, b)
    c, d = sch.eval().qkv(q, k, v, x)[0], sch.qkv(q, k, v, x)[0]
    assert torch.equal(c, d)


def test_random_seed_is_checked():
    with pytest.raises(ValueError, match="seed"):
        SCHEMES["random_qk"](2, 8, 0, seed=-1)


def _lm(scheme, **opts):
    cfg = LMConfig(vocab_size=32, n_layer=2, n_head=2, d_model=16, scheme=scheme,
                   scheme_options=opts)  # fmt: skip
    return LM(cfg, seed=0).double().eval()


@pytest.mark.parametrize("name", ["learned_qk", "learned_qkv"])
def test_zero_initialised_learned_angles_reproduce_rope(name):
    idx = torch.from_numpy(np.random.default_rng(1).integers(0, 32, (2, 11)))
    rope, learned = _lm("rope"), _lm(name, vocab_size=32)
    assert all(float(b.attn.scheme.angle_emb.detach().abs().max()) == 0 for b in learned.blocks)
    with torch.no_grad():
        diff = (rope(idx) - learned(idx)).abs().max()
    if name == "learned_qk":  # identical weights: identical logits
        assert float(diff) < 1e-10
    else:  # V is rotated too, so logits differ; the Q/K scores still equal RoPE's
        assert float(diff) > 1e-6


def test_learned_angles_are_token_dependent_and_match_so2_scores():
    sch = SCHEMES["learned_qkv"](2, 8, 0, vocab_size=32).double()
    with torch.no_grad():
        sch.angle_emb.normal_(0, 0.5, generator=torch.Generator().manual_seed(0))
    tokens = torch.from_numpy(np.random.default_rng(2).integers(0, 32, (1, 9)))
    sch.see_tokens(tokens)
    q, k, v = qkv(seed=4)
    q2, k2, _ = sch.qkv(q, k, v, torch.zeros(1, 9, 16))
    e = sch.angle_emb[0][tokens[0]].detach().numpy().reshape(9, 2, 4)
    f = rope_frequencies(8)
    for h in range(2):
        theta = np.pi * np.tanh(e[:, h]) - f
        ref = T.so2_scores(q[0, h].numpy(), k[0, h].numpy(), theta)
        assert np.abs((q2[0, h] @ k2[0, h].T).detach().numpy() - ref)[LOW].max() < 1e-10


def test_learned_without_token_ids_raises():
    sch = SCHEMES["learned_qk"](2, 8, 0)
    q, k, v = qkv()
    with pytest.raises(ValueError, match="token ids"):
        sch.qkv(q, k, v, torch.zeros(1, 9, 16))
    with pytest.raises(ValueError, match="vocab_size"):
        SCHEMES["learned_qk"](2, 8, 0, vocab_size=0)
    lm = _lm("learned_qk", vocab_size=32)  # called with embeddings: no token ids either
    with pytest.raises(ValueError, match="token ids"):
        lm(embeds=torch.zeros(1, 9, 16, dtype=torch.float64))


def test_path_scores_equal_householder_scores_every_query():
    g = torch.Generator().manual_seed(7)
    q, k = torch.randn(2, 1, 1, 10, 6, generator=g, dtype=torch.float64)
    w = torch.nn.functional.normalize(torch.randn(1, 1, 10, 6, generator=g, dtype=torch.float64),
                                      dim=-1)  # fmt: skip
    beta = 2 * torch.rand(1, 1, 10, generator=g, dtype=torch.float64)
    s = S.path_scores(q, k, w, beta)[0, 0].numpy()
    for i in range(10):
        ref = T.householder_scores(q[0, 0, i].numpy(), k[0, 0].numpy(), w[0, 0].numpy(),
                                   beta[0, 0].numpy(), i, route="path")  # fmt: skip
        assert np.abs(s[i, : i + 1] - ref).max() < 1e-12
    chunk = S.path_scores(q[..., 6:, :], k, w, beta, start=6)[0, 0].numpy()
    assert np.abs(np.tril(chunk - s[6:], 6)).max() < 1e-12
    with pytest.raises(ValueError, match="keys"):
        S.path_scores(q[..., 6:, :], k, w, beta, start=5)


def _path_inputs(n, c, d=6, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(2, 3, c, d, generator=g, dtype=dtype)
    k = torch.randn(2, 3, n, d, generator=g, dtype=dtype)
    w = torch.nn.functional.normalize(torch.randn(2, 3, n, d, generator=g, dtype=dtype), dim=-1)
    beta = 2 * torch.rand(2, 3, n, generator=g, dtype=dtype)
    return [x.requires_grad_(True) for x in (q, k, w, beta)]


@pytest.mark.parametrize(
    ("n", "start", "chunk"),
    [(37, 0, 8), (37, 20, 4), (37, 36, 64), (37, 0, 1), (300, 150, 16), (300, 0, 64)],
)
def test_chunked_path_scores_equal_the_plain_sweep_in_values_and_gradients(n, start, chunk):
    # the chunked UT-transform path (what Path trains with) against path_scores' reverse sweep,
    # float64: scores and the gradients of Σ r_ij s_ij (random r on j ≤ i) in q, k, w and β.
    # (300, ·): superblocks of 128 and 256 steps crossed; scores ≈ 10 and rounding ≈ 1e-14
    q, k, w, beta = _path_inputs(n, n - start, seed=n + start + chunk)
    low = torch.arange(n)[None, :] <= torch.arange(start, n)[:, None]
    r = torch.randn((*q.shape[:-1], n), generator=torch.Generator().manual_seed(1),
                    dtype=torch.float64) * low  # fmt: skip
    ref = S.path_scores(q, k, w, beta, start)
    got = S.path_scores(q, k, w, beta, start, chunk=chunk)
    assert got.shape == ref.shape and got.dtype == torch.float64
    diff = ((got - ref) * low).detach()
    assert float(diff.abs().max()) < 1e-12
    assert bool((got.detach()[..., ~low] == 0.0).all())  # zeros above the diagonal
    g_ref = torch.autograd.grad((ref * r).sum(), (q, k, w, beta))
    g_got = torch.autograd.grad((got * r).sum(), (q, k, w, beta))
    for a, b in zip(g_got, g_ref, strict=True):
        assert float((a - b).abs().max()) < 1e-11  # sums of ≤ n such score differences


def test_chunked_path_scores_pass_gradcheck_and_reject_a_bad_chunk():
    q, k, w, beta = _path_inputs(7, 4, d=3, seed=5)
    assert torch.autograd.gradcheck(
        lambda q, k, w, beta: S.path_scores(q, k, w, beta, 3, chunk=2), (q, k, w, beta)
    )
    with pytest.raises(TypeError, match="chunk"):
        S.path_scores(q, k, w, beta, 3, chunk=2.0)
    with pytest.raises(ValueError, match="chunk"):
        S.path_scores(q, k, w, beta, 3, chunk=0)


def test_path_scheme_scores_by_the_chunked_path_in_its_own_dtype():
    # Path.scores and scores_chunk use chunk = 64; float32 scores agree with float64 to ≈ 1e-6
    # relative (n = 70 steps of float32 rounding, scores ≈ 10)
    sch = SCHEMES["path"](2, 8, 0).double()
    assert sch.chunk == 64
    x = torch.randn(1, 70, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    q, k, _ = qkv(n=70)
    with torch.no_grad():
        w, beta = sch.steps(x)
        s = sch.scores(q, k, x)
        ref = S.path_scores(q, k, w, beta)
        part = sch.scores_chunk(q[..., 65:, :], k, x, 65)
        s32 = sch.float().scores(q.float(), k.float(), x.float())
    low = np.tril_indices(70)
    assert float((s - ref)[..., low[0], low[1]].abs().max()) < 1e-12
    assert float((part - s[..., 65:, :]).abs().max()) < 1e-12
    assert s32.dtype == torch.float32
    assert float((s32.double() - s)[..., low[0], low[1]].abs().max()) < 1e-4


def test_path_scheme_uses_unit_w_and_beta_in_open_interval():
    sch = SCHEMES["path"](2, 8, 0).double()
    x = torch.randn(1, 9, 16, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        w, beta = sch.steps(x)
    assert float((w.norm(dim=-1) - 1).abs().max()) < 1e-12
    assert float(beta.min()) > 0 and float(beta.max()) < 2
    q, k, _ = qkv()
    with torch.no_grad():
        s = sch.scores(q, k, x)[0, 1].numpy()
    ref = T.householder_scores(q[0, 1, 8].numpy(), k[0, 1].numpy(), w[0, 1].numpy(),
                               beta[0, 1].numpy(), 8, route="path")  # fmt: skip
    assert np.abs(s[8] - ref).max() < 1e-12
