"""posflow.simulate.models.lm: the small decoder-only LM and its pluggable position schemes."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.kernels import alibi_slopes  # noqa: E402
from posflow.simulate.models import lm  # noqa: E402
from posflow.simulate.models.lm import LM, SCHEMES, LMConfig, PositionScheme, register_scheme  # noqa: E402


def tiny(scheme="alibi", n_layer=2, seed=0, **opts):
    cfg = LMConfig(
        vocab_size=32, n_layer=n_layer, n_head=2, d_model=16, scheme=scheme, scheme_options=opts
    )
    return LM(cfg, seed=seed).double().eval()


def ids(b=2, n=9, seed=1):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 32, size=(b, n)))


@pytest.mark.parametrize("scheme", ["nope", "rope", "alibi"])
def test_the_model_is_causal(scheme):
    model = tiny(scheme)
    x = ids()
    y = x.clone()
    y[:, 5:] = (y[:, 5:] + 7) % 32  # change the future of token 4
    with torch.no_grad():
        a, b = model(x), model(y)
    np.testing.assert_allclose(a[:, :5].numpy(), b[:, :5].numpy(), atol=1e-12)
    assert (a[:, 5:] - b[:, 5:]).abs().max().item() > 1e-6


def test_alibi_probabilities_equal_the_written_out_softmax():
    model = tiny("alibi", n_layer=1)
    seen = {}
    at = model.blocks[0].attn
    at.prob_probe.register_forward_hook(lambda m, i, o: seen.setdefault("p", o))
    at.qk_probe.register_forward_hook(lambda m, i, o: seen.setdefault("s", o))
    x = ids(b=1, n=7)
    with torch.no_grad():
        model(x)
        h = model.blocks[0].ln1(model.tok_emb(x))
        q, k, _ = (h @ at.qkv_proj.weight.T).split(16, -1)
        q, k = q.reshape(7, 2, 8).transpose(0, 1), k.reshape(7, 2, 8).transpose(0, 1)
    raw = (q @ k.transpose(-1, -2)).numpy()
    i = np.arange(7)
    logits = raw / math.sqrt(8) - alibi_slopes(2)[:, None, None] * (i[:, None] - i)
    logits[:, np.triu_indices(7, 1)[0], np.triu_indices(7, 1)[1]] = -np.inf
    p = np.exp(logits - logits.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    np.testing.assert_allclose(seen["s"][0].numpy(), raw, atol=1e-12)
    np.testing.assert_allclose(seen["p"][0].numpy(), p, atol=1e-12)


def test_alibi_bias_is_minus_slope_times_distance():
    s = lm.Alibi(3, 4, 0, slopes=[0.5, 0.25, 2.0])
    b = s.bias(4, "cpu", torch.float64).numpy()
    i = np.arange(4)
    ref = -np.array([0.5, 0.25, 2.0])[:, None, None] * (i[:, None] - i)
    np.testing.assert_array_equal(b, ref)
    np.testing.assert_array_equal(s.slopes(), [0.5, 0.25, 2.0])
    np.testing.assert_allclose(lm.Alibi(4, 4, 0).slopes(), alibi_slopes(4), rtol=1e-7)


def test_rope_scores_depend_only_on_the_offset_and_keep_norms():
    rope = lm.RoPE(1, 8, 0)
    g = torch.Generator().manual_seed(2)
    q1, k1 = (
        torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64),
        torch.randn(1, 1, 1, 8, generator=g, dtype=torch.float64),
    )
    n = 12
    q, k = q1.expand(1, 1, n, 8), k1.expand(1, 1, n, 8)
    rq, rk, _ = rope.qkv(q, k, k, None)
    s = (rq @ rk.transpose(-1, -2))[0, 0].numpy()
    for off in range(-3, 4):  # s[i, i - off] is the same for every i
        d = np.diagonal(s, -off)
        np.testing.assert_allclose(d, d[0], atol=1e-12)
    np.testing.assert_allclose(rq.norm(dim=-1).numpy(), q.norm(dim=-1).numpy(), atol=1e-12)


def test_one_nope_layer_last_token_ignores_the_order_of_earlier_tokens():
    model = tiny("nope", n_layer=1)
    x = ids(b=1, n=8)
    perm = torch.tensor([3, 0, 6, 1, 5, 2, 4, 7])  # keep the last token last
    with torch.no_grad():
        a, b = model(x)[0, -1], model(x[:, perm])[0, -1]
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-12)
    ra = tiny("rope", n_layer=1)
    with torch.no_grad():
        assert (ra(x)[0, -1] - ra(x[:, perm])[0, -1]).abs().max().item() > 1e-6


def test_a_scheme_defined_elsewhere_plugs_in_through_the_registry():
    calls = []

    class DiagonalBonus(PositionScheme):
        """Adds c to every self-score: a stand-in for schemes added in other modules."""

        def __init__(self, n_head, d_head, layer, c=1.0):
            super().__init__(n_head, d_head, layer)
            self.c = c

        def bias(self, n, device, dtype):
            calls.append(self.layer)
            return self.c * torch.eye(n, device=device, dtype=dtype).expand(self.n_head, n, n)

    try:
        register_scheme("test_diagonal_bonus")(DiagonalBonus)
        model = tiny("test_diagonal_bonus", c=50.0)
        p = {}
        model.blocks[1].attn.prob_probe.register_forward_hook(lambda m, i, o: p.setdefault(1, o))
        with torch.no_grad():
            model(ids())
        assert calls == [0, 1]
        assert p[1].diagonal(dim1=-2, dim2=-1).min() > 0.999  # c = 50 pins attention on self
        with pytest.raises(ValueError, match="already registered"):
            register_scheme("test_diagonal_bonus")(type("Other", (PositionScheme,), {}))
    finally:
        SCHEMES.pop("test_diagonal_bonus", None)
    with pytest.raises(TypeError, match="PositionScheme subclass"):
        register_scheme("x")(int)


def test_embeds_path_equals_ids_path_and_initial_loss_is_log_vocab():
    model = tiny("alibi")
    x = ids()
    with torch.no_grad():
        np.testing.assert_allclose(
            model(x).numpy(), model(embeds=model.tok_emb(x)).numpy(), atol=1e-12
        )
        loss = model.loss(x[:, :-1], x[:, 1:]).item()
    assert abs(loss - math.log(32)) < 0.05  # small N(0, 0.02) weights: near-uniform logits
    with pytest.raises(ValueError, match="exactly one of idx and embeds"):
        model()


def test_weights_are_seeded():
    a, b, c = tiny(seed=4), tiny(seed=4), tiny(seed=5)
    for (_, p), (_, q) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(p, q)
    assert not torch.equal(a.blocks[0].attn.qkv_proj.weight, c.blocks[0].attn.qkv_proj.weight)
    assert a.head.weight is a.tok_emb.weight  # tied


def test_bad_configs_name_the_argument():
    with pytest.raises(ValueError, match="d_model must be divisible by n_head"):
        LMConfig(d_model=30, n_head=4)
    with pytest.raises(ValueError, match=r"scheme must be one of .*alibi.*; got 'no_such'"):
        LMConfig(scheme="no_such")
    with pytest.raises(ValueError, match="n_layer must be a positive integer"):
        LMConfig(n_layer=0)
    with pytest.raises(ValueError, match="rope needs an even head dimension"):
        LM(LMConfig(d_model=6, n_head=2, scheme="rope"))
    with pytest.raises(ValueError, match="alibi slopes must be 4 finite numbers"):
        LM(LMConfig(scheme="alibi", scheme_options={"slopes": [1.0, 2.0]}))
    with pytest.raises(TypeError, match="scheme_options for 'nope'"):
        LM(LMConfig(scheme="nope", scheme_options={"slopes": [1.0]}))
    with pytest.raises(TypeError, match="config must be an LMConfig"):
        LM({"n_layer": 2})
