"""Value-norm kernels (d), the sink-aware kernel (e) and the sink table (issue 13): the hooks
against a hand computation on a tiny random Llama with grouped-query attention, the NumPy
formulas against explicit loops."""

import numpy as np
import pytest
import torch
from conftest import tiny_gqa_llama

from posflow.simulate.models import sinks
from posflow.simulate.models.measure import measure


@pytest.fixture(scope="module")
def llama():
    return tiny_gqa_llama()


def _hand_value_weights(model, ids):
    """Σ_h α_ij^h ‖W_O^h v_j^h‖ per layer by explicit loops over heads (one sequence)."""
    cap = {}
    hooks = [
        layer.self_attn.v_proj.register_forward_hook(
            lambda m, a, o, t=t: cap.__setitem__(t, o.detach())
        )
        for t, layer in enumerate(model.model.layers)
    ]
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True, use_cache=False)
    for h in hooks:
        h.remove()
    H, d = 4, 8
    W = []
    for t, layer in enumerate(model.model.layers):
        v = cap[t][0].numpy()  # (n, Hkv·d)
        Wo = layer.self_attn.o_proj.weight.detach().numpy()  # (D, H·d)
        alpha = out.attentions[t][0].numpy()  # (H, n, n)
        n = v.shape[0]
        M = np.zeros((n, n))
        for h in range(H):
            g = h // 2  # 4 query heads share 2 key/value heads
            vh = v[:, g * d : (g + 1) * d]
            f = vh @ Wo[:, h * d : (h + 1) * d].T  # (n, D)
            M += alpha[h] * np.linalg.norm(f, axis=1)[None, :]
        W.append(M)
    return np.stack(W)


def test_value_weights_match_a_hand_computation(llama):
    ids = torch.tensor([[1, 5, 7, 250, 3, 9, 17, 2]])
    m = measure(llama, ids, value_norms=True, qk=False, lambdas=False, influence=False)
    np.testing.assert_allclose(m.value_weights, _hand_value_weights(llama, ids), rtol=1e-10)
    ks = sinks.value_norm_kernels(m.value_weights)
    for k in ks:
        np.testing.assert_allclose(k.dense().sum(axis=1), 1.0, atol=1e-14)


def test_layer_influence_at_the_first_block_is_the_embedding_influence(llama):
    ids = torch.tensor([[1, 5, 7, 250, 3, 9], [4, 4, 8, 1, 2, 99]])
    m = measure(llama, ids, attention=False, qk=False, layer_influence=True)
    assert m.layer_influence.shape == (2, 6)
    np.testing.assert_allclose(m.layer_influence.sum(axis=1), 1.0, atol=1e-12)
    # the Llama embedding output is the first block's input: the same gradient norms
    np.testing.assert_allclose(m.layer_influence[0], m.influence, rtol=1e-9)


def test_layer_influence_needs_influence(llama):
    with pytest.raises(ValueError, match="layer_influence needs influence"):
        measure(llama, torch.tensor([[1, 2, 3]]), influence=False, layer_influence=True)


def test_sink_aware_kernel_moves_token_0_mass_onto_the_diagonal():
    A = np.array([[1.0, 0, 0], [0.7, 0.3, 0], [0.5, 0.2, 0.3]])
    (K,) = sinks.sink_aware_kernels(A[None])
    np.testing.assert_allclose(K.dense(), [[1, 0, 0], [0, 1, 0], [0, 0.2, 0.8]], atol=1e-15)


def test_sink_table_by_explicit_loops():
    rng = np.random.default_rng(0)
    L, n = 3, 6
    A = np.tril(rng.exponential(size=(L, n, n)))
    A /= A.sum(axis=2, keepdims=True)
    Wv = A * rng.uniform(0.1, 2.0, size=(L, 1, n))  # α_ij ‖f_j‖ with one head
    g = rng.uniform(size=(L, n))
    tab = sinks.sink_table(A, Wv, g)
    for t in range(L):
        assert tab["attention_on_0"][t] == pytest.approx(sum(A[t, i, 0] for i in range(1, n)) / 5)
        share = [Wv[t, i, 0] / Wv[t, i].sum() for i in range(1, n)]
        assert tab["value_share_of_0"][t] == pytest.approx(np.mean(share), rel=1e-12)
        assert tab["gradient_influence_of_0"][t] == pytest.approx(g[t, 0] / g[t].sum())


def test_bad_inputs_name_the_argument():
    with pytest.raises(ValueError, match="value_weights"):
        sinks.value_norm_kernels(np.ones((2, 3)))
    with pytest.raises(ValueError, match="not causal"):
        sinks.value_norm_kernels(np.ones((1, 3, 3)))
    with pytest.raises(ValueError, match="attention must be non-negative"):
        sinks.sink_aware_kernels(-np.eye(3)[None])
    with pytest.raises(ValueError, match="layer_influence"):
        sinks.sink_table(np.eye(3)[None], layer_influence=np.ones((2, 3)))


def test_per_sequence_influence_and_its_bootstrap(llama):
    ids = torch.tensor([[1, 5, 7, 250, 3, 9], [4, 4, 8, 1, 2, 99], [7, 7, 7, 1, 2, 3]])
    m = measure(llama, ids, attention=False, qk=False)
    G = m.influence_per_sequence
    assert G.shape == (3, 6)
    np.testing.assert_allclose(G.mean(axis=0) / G.mean(axis=0).sum(), m.influence, rtol=1e-12)
    for i in range(3):  # each row is that sequence measured alone
        alone = measure(llama, ids[i : i + 1], attention=False, qk=False)
        np.testing.assert_allclose(G[i], alone.influence_raw, rtol=1e-9)
    B = m.bootstrap_influence(reps=50, seed=1)
    assert B.shape == (50, 6) and np.allclose(B.sum(axis=1), 1.0)
    np.testing.assert_array_equal(B, m.bootstrap_influence(reps=50, seed=1))
    with pytest.raises(ValueError, match="reps"):
        m.bootstrap_influence(reps=0)


# ------------------------------------------------------ Sink_ε (Gu et al. 2025) on synthetic heads


def random_causal_heads(rng, shape, n):
    """Row-stochastic causal attention of shape (*shape, n, n) with random rows."""
    A = np.tril(rng.random((*shape, n, n)) + 1e-3)
    return A / A.sum(axis=-1, keepdims=True)


def loop_sink_scores(A, key, windows):
    """α_k^{t,h} by explicit loops over layers, heads and the queries that see the key."""
    L, H, n, _ = A.shape
    out = np.zeros((L, H))
    for t in range(L):
        for h in range(H):
            w = n if windows[t] is None else windows[t]
            seen = [i for i in range(n) if i >= key and i - key < w]
            out[t, h] = sum(A[t, h, i, key] for i in seen) / len(seen)
    return out


@pytest.mark.parametrize(("key", "windows"), [(0, [None, None, None]), (0, [3, None, 2]),
                                              (2, [None, 4, 1]), (6, [2, 2, 2])])  # fmt: skip
def test_sink_scores_match_the_loop_definition(key, windows):
    A = random_causal_heads(np.random.default_rng(key), (3, 2), 7)
    np.testing.assert_allclose(sinks.sink_scores(A, key=key, windows=windows),
                               loop_sink_scores(A, key, windows), rtol=1e-14)  # fmt: skip


def test_sink_rate_counts_the_heads_above_eps():
    """Planted sinks: heads (0, 1), (2, 0), (2, 3) put 0.6 of every row i ≥ 1 on token 0
    (α = (1 + 0.6 (n − 1))/n > 0.3); the other heads spread rows uniformly (α = H_n/n < 0.3
    at n = 12)."""
    L, H, n = 3, 4, 12
    A = np.tril(np.ones((L, H, n, n))) / np.arange(1, n + 1)[:, None]
    for t, h in [(0, 1), (2, 0), (2, 3)]:
        A[t, h, 1:] *= 0.4
        A[t, h, 1:, 0] += 0.6
    assert np.allclose(A.sum(axis=-1), 1)
    assert float(sinks.sink_rate(A)) == 3 / (L * H)
    assert float(sinks.sink_rate(A, eps=0.9)) == 0.0
    batch = np.stack([A, np.tril(np.ones((L, H, n, n))) / np.arange(1, n + 1)[:, None]])
    np.testing.assert_array_equal(sinks.sink_rate(batch), [3 / 12, 0.0])  # per sequence
    # a window that hides token 0 from the late queries: only rows i < 2 count, where every
    # head's α is (1 + A[1, 0]) / 2 ≥ 0.5 > 0.3
    assert float(sinks.sink_rate(A, windows=[2, 2, 2])) == 1.0


@pytest.mark.parametrize(("kw", "words"), [
    ({"attention": np.ones((4, 4))}, "per-head rows"),
    ({"attention": np.ones((2, 3, 4, 5))}, r"\(\.\.\., L, H, n, n\)"),
    ({"key": 4}, r"key must be an integer in \[0, 3\]"),
    ({"key": True}, "key must be an integer"),
    ({"windows": [1]}, "windows must hold L = 2"),
    ({"windows": [0, None]}, "positive integers"),
    ({"eps": 0}, r"eps must be a number in \(0, 1\)"),
    ({"attention": -np.ones((2, 1, 4, 4))}, "non-negative"),
])  # fmt: skip
def test_sink_metric_bad_input_names_the_argument(kw, words):
    args = {"attention": random_causal_heads(np.random.default_rng(0), (2, 1), 4), **kw}
    with pytest.raises(ValueError, match=words):
        sinks.sink_rate(**args)


def test_sink_aware_and_value_norm_kernels_stay_in_a_sliding_window():
    """Tiny Gemma 3 at n = 12 beyond its 4-key windows: the measured attention and value weights
    are zero outside each layer's band, and so are kernels (d) and (e) — no band is needed; the
    rows whose token 0 is outside the window (i ≥ w) have no token-0 share and stay as they are."""
    import tiny_lms

    model = tiny_lms.build("gemma3_text", seed=1)
    m = measure(model, tiny_lms.ids(seed=2, count=2), value_norms=True, qk=False)
    n, W = m.n, tiny_lms.W
    assert m.windows == (W, None, W) and W < n
    i = np.arange(n)
    off = (i[:, None] - i[None, :] >= W) | (i[:, None] < i[None, :])  # outside the band
    A = m.attention.mean(axis=1)
    for t, (e, d) in enumerate(zip(sinks.sink_aware_kernels(m.attention),
                                   sinks.value_norm_kernels(m.value_weights), strict=True)):
        E, D = np.asarray(e.dense()), np.asarray(d.dense())
        if m.windows[t] is None:
            continue
        assert (A[t][off] == 0.0).all() and (E[off] == 0.0).all() and (D[off] == 0.0).all()
        # rows i ≥ W: A[i, 0] = 0 already, so Â's row is A's (renormalised: 1e-15)
        np.testing.assert_allclose(E[W:], A[t][W:] / A[t][W:].sum(1, keepdims=True), rtol=0,
                                   atol=1e-15)  # fmt: skip
        np.testing.assert_allclose(E.sum(axis=1), 1.0, atol=1e-14)
