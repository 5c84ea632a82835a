"""Any causal LM: the adapters and the recording attention function, on tiny random models.

For every family the sub-layer updates a_t (attention) and m_t (MLP) are read by plain forward
hooks on the modules the family's code names, post norms applied by hand, and checked against
the residual stream (block output = x_t + a_t + m_t); λ_t, λ_t with the MLP, the kernels and
their windows are then asserted against them. q·k, the probabilities and the value-norm
weights are written out by hand for Llama (GQA) and Gemma 3 (QK-norm, per-layer RoPE bases,
sliding and global layers, query_pre_attn_scalar).
"""

import functools
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import tiny_lms as TL  # noqa: E402

from posflow.simulate.models import _interface  # noqa: E402
from posflow.simulate.models import measure as M  # noqa: E402
from posflow.simulate.models._adapters import check_architecture  # noqa: E402
from posflow.simulate.models._layouts import LAYOUTS  # noqa: E402

KINDS = tuple(TL.configs())
SANDWICH = ("gemma3_text", "gemma2", "olmo2")
# kind: (attention module, MLP module) inside a block, as each family's code names them
SUBLAYERS = {k: ("self_attn", "mlp") for k in KINDS}
SUBLAYERS.update({
    "gpt_neox": ("attention", "mlp"), "gpt_neox_sequential": ("attention", "mlp"),
    "gpt2": ("attn", "mlp"), "bloom": ("self_attention.dense", "mlp.dense_4h_to_h"),
    "falcon": ("self_attention", "mlp"), "mpt": ("attn", "ffn.down_proj"),
})  # fmt: skip
# float64 models whose RoPE tables, norms or softmax run in float32
TOL = 1e-6


def _rms(x, norm, plus_one):  # an RMS norm written out: x / rms(x) · γ (Gemma: 1 + w)
    eps = getattr(norm, "eps", getattr(norm, "variance_epsilon", None))
    g = norm.weight.detach().double() + (1.0 if plus_one else 0.0)
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def _blocks(model):
    base = model.base_model
    return list(getattr(base, "layers", None) or getattr(base, "h", None) or base.blocks)


@functools.cache
def hand(kind):
    """x_t, a_t, m_t per layer (lists of (N, n, D)) from plain hooks, checked additive."""
    model, ids = TL.build(kind), TL.ids()
    attn_name, mlp_name = SUBLAYERS[kind]
    xs, ys, a, m, handles = {}, {}, {}, {}, []

    def keep(store, t, first):
        def hook(mod, args, out):
            out = out[0] if isinstance(out, tuple) and first else out
            store[t] = out.detach().clone()

        return hook

    for t, blk in enumerate(_blocks(model)):
        pre = blk.register_forward_pre_hook(
            lambda mod, args, kw, t=t: xs.__setitem__(t, (args or (kw["hidden_states"],))[0]),
            with_kwargs=True,
        )
        handles += [pre, blk.register_forward_hook(keep(ys, t, True))]
        handles.append(blk.get_submodule(attn_name).register_forward_hook(keep(a, t, True)))
        handles.append(blk.get_submodule(mlp_name).register_forward_hook(keep(m, t, False)))
    with torch.no_grad():
        model(input_ids=ids)
    for h in handles:
        h.remove()
    L = len(xs)
    x = [xs[t] for t in range(L)]
    if kind in SANDWICH:  # x + norm(attn), then + norm(mlp)
        blocks, one = _blocks(model), kind != "olmo2"
        a = {t: _rms(a[t], blocks[t].post_attention_layernorm, one) for t in range(L)}
        m = {t: _rms(m[t], blocks[t].post_feedforward_layernorm, one) for t in range(L)}
    a, m = [a[t] for t in range(L)], [m[t] for t in range(L)]
    for t in range(L):  # the decomposition is the residual stream's own
        np.testing.assert_allclose(ys[t], x[t] + a[t] + m[t], rtol=0, atol=TOL)
    return model, ids, x, a, m


@functools.cache
def measured(kind):
    model, ids, *_ = hand(kind)
    return M.measure(model, ids, lambdas="both", batch_size=2, chunk=5)


@pytest.mark.parametrize("kind", KINDS)
def test_lambdas_with_and_without_the_mlp_match_the_residual_stream(kind):
    _, _, x, a, m = hand(kind)
    got = measured(kind)
    nx, na, nm = (torch.stack([v.norm(dim=-1) for v in s]) for s in (x, a, m))  # (L, N, n)
    lam = (na / (nx + na)).mean(-1).T.numpy()  # (N, L)
    lam_mlp = (na / (nx + na + nm)).mean(-1).T.numpy()
    np.testing.assert_allclose(got.lambda_per_sequence, lam, rtol=0, atol=TOL)
    np.testing.assert_allclose(got.lambdas, lam.mean(0), rtol=0, atol=TOL)
    np.testing.assert_allclose(got.lambda_mlp_per_sequence, lam_mlp, rtol=0, atol=TOL)
    np.testing.assert_allclose(got.lambdas_mlp, lam_mlp.mean(0), rtol=0, atol=TOL)
    np.testing.assert_allclose(got.lambdas_mlp_std, lam_mlp.std(0), rtol=0, atol=TOL)
    assert (got.lambdas_mlp < got.lambdas).all()


@pytest.mark.parametrize("kind", KINDS)
def test_kernels_are_causal_stochastic_and_keep_each_layers_window(kind):
    got = measured(kind)
    L, n = got.num_layers, TL.n
    windows = TL.WINDOWS.get(kind, (None,) * L)
    assert got.windows == windows
    ks = got.kernels()  # validated: causal and row-stochastic within 1e-4, else ValueError
    A = got.attention
    np.testing.assert_allclose(A.sum(-1), 1.0, rtol=0, atol=1e-6)
    i, j = np.indices((n, n))
    for t, w in enumerate(windows):
        inside = (j <= i) & (j > i - (w or n))
        assert (A[t][:, ~inside] == 0.0).all()  # exactly zero outside the window
        assert (A[t][:, inside] > 0.0).all()
        np.testing.assert_allclose(ks[t].dense(), A[t].mean(0), atol=1e-6)


def _split(t, H, d):  # (B, n, H·d) -> (B, H, n, d)
    return t.reshape(t.shape[0], t.shape[1], H, d).transpose(1, 2)


def _rope(t, theta):  # rotate-half convention, positions 0..n-1
    d = t.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(t.shape[-2], dtype=torch.float64)[:, None] * inv
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    return t * cos + torch.cat([-t[..., d // 2 :], t[..., : d // 2]], -1) * sin


def _attention_by_hand(kind):
    """Mean q·kᵀ, probabilities and Σ_h α ‖W_O^h v^h‖ per layer, from q/k/v projections."""
    model, ids, *_ = hand(kind)
    cfg, H, Hkv = model.config, 4, 2
    d = cfg.head_dim
    proj, handles = {}, []
    for t, blk in enumerate(_blocks(model)):
        for name in ("q_proj", "k_proj", "v_proj"):
            def hook(mod, args, out, key=(t, name)):
                proj[key] = out.detach()

            handles.append(getattr(blk.self_attn, name).register_forward_hook(hook))
    with torch.no_grad():
        model(input_ids=ids)
    for h in handles:
        h.remove()
    S, P, VN = [], [], []
    n = ids.shape[1]
    i, j = np.indices((n, n))
    for t, blk in enumerate(_blocks(model)):
        q, k, v = (_split(proj[t, nm], h, d) for nm, h in (("q_proj", H), ("k_proj", Hkv),
                                                         ("v_proj", Hkv)))  # fmt: skip
        theta, scale, w = 10000.0, d**-0.5, None
        if kind == "gemma3_text":  # QK-norm over each head, then per-layer RoPE base
            q, k = _rms(q, blk.self_attn.q_norm, True), _rms(k, blk.self_attn.k_norm, True)
            w = TL.WINDOWS[kind][t]
            theta, scale = (10000.0 if w else 1e6), cfg.query_pre_attn_scalar**-0.5
        q, k = _rope(q, theta), _rope(k, theta).repeat_interleave(H // Hkv, 1)
        v = v.repeat_interleave(H // Hkv, 1)
        raw = q @ k.transpose(-1, -2)
        allowed = torch.from_numpy((j <= i) & (j > i - (w or n)))
        p = torch.softmax((raw * scale).masked_fill(~allowed, -math.inf), -1)
        Wo = blk.self_attn.o_proj.weight.detach().double()
        if kind == "gemma3_text":  # the post norm's gain; its 1/rms is shared by the row
            Wo = (1 + blk.post_attention_layernorm.weight.detach().double())[:, None] * Wo
        f = torch.einsum("ehd,bhjd->bhje", Wo.reshape(-1, H, d), v).norm(dim=-1)  # (B,H,n)
        S.append(raw.mean(0))
        P.append(p.mean(0))
        VN.append(torch.einsum("bhij,bhj->ij", p, f) / ids.shape[0])
    return (torch.stack(x).numpy() for x in (S, P, VN))


@pytest.mark.parametrize("kind", ["llama", "gemma3_text"])
def test_qk_probabilities_and_value_norms_match_a_hand_computation(kind):
    model, ids, *_ = hand(kind)
    S, P, VN = _attention_by_hand(kind)
    got = M.measure(model, ids, influence=False, value_norms=True, chunk=5)
    np.testing.assert_allclose(got.qk, S, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got.attention, P, rtol=0, atol=1e-6)
    np.testing.assert_allclose(got.value_weights, VN, rtol=1e-6, atol=1e-6)
    assert got.d_head == model.config.head_dim


def test_the_recording_function_computes_what_eager_and_sdpa_compute_and_is_undone():
    eager, sdpa = TL.build("mistral", seed=2), TL.build("mistral", seed=2, impl="sdpa")
    ids = TL.ids(seed=3)
    with torch.no_grad():
        before = sdpa(input_ids=ids).logits
        ref = eager(input_ids=ids, output_attentions=True)

    def hooks(model):  # transformers keeps its own output-capturing hooks once used
        return [(len(m._forward_hooks), len(m._forward_pre_hooks)) for m in model.modules()]

    before_hooks = [hooks(eager), hooks(sdpa)]
    a = M.measure(eager, ids, batch_size=1)
    b = M.measure(sdpa, ids, attention=False)  # q·k through the recording function too
    np.testing.assert_array_equal(a.qk, b.qk)
    np.testing.assert_array_equal(a.influence, b.influence)  # both passes recorded
    mean = np.stack([p.detach().numpy().mean(0) for p in ref.attentions])
    np.testing.assert_allclose(a.attention, mean, rtol=0, atol=1e-15)  # eager's own
    assert [hooks(eager), hooks(sdpa)] == before_hooks and not _interface._ROUTES
    assert (eager.config._attn_implementation, sdpa.config._attn_implementation) == (
        "eager", "sdpa")  # fmt: skip
    with torch.no_grad():
        np.testing.assert_array_equal(sdpa(input_ids=ids).logits, before)
    assert b.windows == (TL.W, TL.W)
    lean = M.measure(sdpa, ids, attention=False, qk=False)  # λ only: the model's own sdpa
    assert lean.windows is None
    np.testing.assert_allclose(lean.lambdas, a.lambdas, rtol=1e-6)  # float32 vs 64 softmax
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        M.measure(sdpa, ids, influence=False)


def test_lambdas_both_leaves_the_default_result_unchanged_and_bad_values_raise():
    model, ids, *_ = hand("phi3")
    plain, both = M.measure(model, ids, influence=False), measured("phi3")
    np.testing.assert_array_equal(plain.lambda_per_sequence, both.lambda_per_sequence)
    np.testing.assert_array_equal(plain.attention, both.attention)
    assert plain.lambdas_mlp is None
    with pytest.raises(ValueError, match="lambdas must be True, False or 'both'"):
        M.measure(model, ids, lambdas="mlp")


# ------------------------------------------------------------------------------------------
# the architecture, from the config alone


@pytest.mark.parametrize("kind", [*LAYOUTS, *TL.HAND])
def test_every_supported_family_passes_the_config_check(kind):
    check_architecture(transformers.AutoConfig.for_model(kind))
    check_architecture({"model_type": kind})


def test_an_unsupported_architecture_is_refused_from_its_config():
    for cfg in (transformers.AutoConfig.for_model("opt"), {"model_type": "gemma3"}):
        with pytest.raises(ValueError, match=r"unsupported architecture '(opt|gemma3)'; "
                           r"supported: posflow LM and Hugging Face gpt2, bloom.*gemma3_text"):
            check_architecture(cfg)  # fmt: skip
    with pytest.raises(ValueError, match="unsupported architecture None"):
        check_architecture({})
    with pytest.raises(ValueError, match="gpt2 with cross-attention"):
        check_architecture(transformers.GPT2Config(add_cross_attention=True))
