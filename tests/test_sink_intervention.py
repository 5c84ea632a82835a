"""The sink intervention (issue 41, item 7): the edit of the attention probabilities, the
intervened forward pass against a plain-torch Llama written out here (embedding, RMSNorm, RoPE,
explicit softmax attention edited by loops, SwiGLU MLP), the identity at zero moved mass, the
statistics against scipy, sliding windows, and bad input refused before any forward pass.
"""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tiny_lms as TL  # noqa: E402

from posflow.simulate.models import _sink_edit as E  # noqa: E402
from posflow.simulate.models import sink_intervention as SI  # noqa: E402


@functools.cache
def model(kind):
    return TL.build(kind)


def _causal_rows(rng, B, H, n, window=None):
    """Random causal (banded) row-stochastic p (B, H, n, n), float64, and its visible mask."""
    i, j = np.indices((n, n))
    vis = (j <= i) & ((i - j < window) if window else True)
    w = rng.exponential(size=(B, H, n, n)) * vis
    w[..., :, 0] *= 1 + 5 * rng.random((B, H, n))  # a sink
    p = w / w.sum(-1, keepdims=True)
    return torch.from_numpy(p), torch.from_numpy(vis)


# ------------------------------------------------------------------------------ the edit


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1),
       st.sampled_from([None, 2, 3]))  # fmt: skip
def test_move_sink_moves_token_0_mass_and_keeps_rows_stochastic(n, f, seed, window):
    p, vis = _causal_rows(np.random.default_rng(seed), 2, 3, n, window)
    m = p[..., 1:, 0] * f
    for target in ("diagonal", "uniform"):
        q = E.move_sink(p, vis, target, f)
        torch.testing.assert_close(q.sum(-1), torch.ones_like(q[..., 0]), rtol=0, atol=1e-12)
        torch.testing.assert_close(q[..., 0, :], p[..., 0, :], rtol=0, atol=0)  # row 0 kept
        torch.testing.assert_close(q[..., 1:, 0], p[..., 1:, 0] - m, rtol=0, atol=1e-15)
        assert (q >= -1e-15).all() and (q[..., ~vis] == 0).all()  # nothing outside the mask
    q = E.move_sink(p, vis, "drop", f)
    torch.testing.assert_close(q[..., 1:, :].sum(-1), 1 - m, rtol=0, atol=1e-12)


def test_the_edit_by_explicit_loops():
    p, vis = _causal_rows(np.random.default_rng(3), 1, 2, 6, window=4)
    want = {t: p.clone() for t in ("diagonal", "uniform")}
    for h in range(2):
        for i in range(1, 6):
            m = float(p[0, h, i, 0]) * 0.7
            for t in want:
                want[t][0, h, i, 0] -= m
            want["diagonal"][0, h, i, i] += m
            keys = [j for j in range(1, i + 1) if i - j < 4]  # visible, not token 0
            for j in keys:
                want["uniform"][0, h, i, j] += m / len(keys)
    for t, w in want.items():
        torch.testing.assert_close(E.move_sink(p, vis, t, 0.7), w, rtol=0, atol=1e-15)


def test_zero_fraction_is_the_identity_bitwise_and_bad_targets_are_named():
    p, vis = _causal_rows(np.random.default_rng(4), 2, 2, 7)
    for t in E.TARGETS:
        assert torch.equal(E.move_sink(p, vis, t, 0.0), p)
    with pytest.raises(ValueError, match="target must be one of"):
        E.move_sink(p, vis, "middle")


# ---------------------------------------------------------- a plain-torch Llama, edited by hand


def _rms(x, w, eps):
    """RMSNorm in float32, as transformers' LlamaRMSNorm computes it for every dtype."""
    y = x.float()
    return w * (y * torch.rsqrt(y.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def _rope(x, theta):
    """Rotate-half RoPE of Llama on x (B, H, n, d); the angles' cos and sin in float32, as
    transformers computes them for every model dtype."""
    d, n = x.shape[-1], x.shape[-2]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d)
    ang = torch.arange(n, dtype=torch.float32)[:, None] * inv
    ang = torch.cat([ang, ang], -1)
    cos, sin = ang.cos().to(x.dtype), ang.sin().to(x.dtype)
    half = torch.cat([-x[..., d // 2 :], x[..., : d // 2]], -1)
    return x * cos + half * sin


def _plain_llama(m, ids, edit_layers=(), target="diagonal", fraction=1.0):
    """(NLL (B,), ‖∂p*/∂e_j‖ (B, n)) of the tiny Llama by plain torch, the attention of
    ``edit_layers`` edited by explicit loops over rows."""
    c = m.config
    H, Hkv, d, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
    theta = c.rope_parameters["rope_theta"]
    ids = torch.as_tensor(ids)
    B, n = ids.shape
    e = m.model.embed_tokens.weight.detach()[ids].clone().requires_grad_(True)
    x = e
    for t, blk in enumerate(m.model.layers):
        a = blk.self_attn
        h = _rms(x, blk.input_layernorm.weight, eps)
        q = (h @ a.q_proj.weight.T).view(B, n, H, d).transpose(1, 2)
        k = (h @ a.k_proj.weight.T).view(B, n, Hkv, d).transpose(1, 2)
        v = (h @ a.v_proj.weight.T).view(B, n, Hkv, d).transpose(1, 2)
        q, k = _rope(q, theta), _rope(k, theta)
        k, v = k.repeat_interleave(H // Hkv, 1), v.repeat_interleave(H // Hkv, 1)
        s = (q @ k.transpose(-1, -2)) / d**0.5
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), -torch.inf)
        p = torch.softmax(s, -1, dtype=torch.float32).to(s.dtype)  # as transformers' eager
        if t in edit_layers:
            rows = []
            for i in range(n):
                r = p[:, :, i, :]
                if i > 0:
                    mv = r[..., 0:1] * fraction
                    add = torch.zeros_like(r)
                    if target == "diagonal":
                        add[..., i] = 1.0
                    else:
                        add[..., 1 : i + 1] = 1.0 / i
                    drop = torch.zeros_like(r)
                    drop[..., 0] = 1.0
                    r = r + mv * (add - drop)
                rows.append(r)
            p = torch.stack(rows, dim=2)
        o = (p @ v).transpose(1, 2).reshape(B, n, H * d) @ a.o_proj.weight.T
        x = x + o
        h = _rms(x, blk.post_attention_layernorm.weight, eps)
        mlp = blk.mlp
        x = x + (torch.nn.functional.silu(h @ mlp.gate_proj.weight.T) * (h @ mlp.up_proj.weight.T)
                 ) @ mlp.down_proj.weight.T  # fmt: skip
    logits = _rms(x, m.model.norm.weight, eps) @ m.lm_head.weight.T
    logp = torch.log_softmax(logits[:, :-1], -1)
    nll = -logp.gather(-1, ids[:, 1:, None])[..., 0].mean(1)
    top = torch.softmax(logits[:, -1].double(), -1).max(-1).values
    (g,) = torch.autograd.grad(top.sum(), e)
    return nll.detach().numpy(), g.norm(dim=-1).numpy()


# transformers runs RMSNorm, the RoPE angles and the softmax in float32 also in a float64 model,
# and so does the reference (float64 elsewhere); the two then agree to rounding (bitwise here).
# With everything in float64 they differ by ~2e-8 nats, 8e-7 relative in the influence.
NLL_TOL, G_TOL = 1e-12, 1e-10


@pytest.fixture(scope="module")
def llama_run():
    m = model("llama")
    ids = TL.ids(seed=2, count=4)
    for p in m.parameters():
        p.requires_grad_(False)
    return m, ids, SI.sink_intervention(m, ids, resamples=200)


def test_intervened_passes_equal_the_plain_torch_llama_edited_by_hand(llama_run):
    m, ids, r = llama_run
    nll0, g0 = _plain_llama(m, ids)
    np.testing.assert_allclose(r.nll_base, nll0, rtol=0, atol=NLL_TOL)
    np.testing.assert_allclose(r.influence_base, g0, rtol=G_TOL, atol=0)
    assert r.labels == ("0", "1", "all") and r.targets == ("diagonal", "uniform")
    for c, layers in enumerate(r.conditions):
        for k, target in enumerate(r.targets):
            nll, g = _plain_llama(m, ids, layers, target)
            np.testing.assert_allclose(r.nll[c, k], nll, rtol=0, atol=NLL_TOL)
            np.testing.assert_allclose(r.influence[c, k], g, rtol=G_TOL, atol=0)
            assert np.abs(r.nll[c, k] - r.nll_base).max() > 1e-4  # the edit does something


def test_partial_fraction_equals_the_hand_edit():
    m, ids = model("llama"), TL.ids(seed=5, count=2)
    r = SI.sink_intervention(m, ids, layers=[1], target="uniform", fraction=0.3, resamples=50)
    nll, g = _plain_llama(m, ids, (1,), "uniform", 0.3)
    np.testing.assert_allclose(r.nll[0, 0], nll, rtol=0, atol=NLL_TOL)
    np.testing.assert_allclose(r.influence[0, 0], g, rtol=G_TOL, atol=0)


def test_zero_moved_mass_is_the_identity_and_the_model_is_left_as_found():
    m, ids = model("llama"), TL.ids(seed=2, count=3)
    m.train()
    flags = [p.requires_grad for p in m.parameters()]
    r = SI.sink_intervention(m, ids, fraction=0.0, target=SI.TARGETS, resamples=50)
    assert (r.nll == r.nll_base).all() and (r.influence == r.influence_base).all()  # bitwise
    assert (r.dnll == 0).all() and (r.w1 == 0).all() and (r.dmass0 == 0).all()
    assert m.training and [p.requires_grad for p in m.parameters()] == flags
    assert m.config._attn_implementation == "eager" and not E._EDITS
    m.eval()
    with torch.no_grad():  # the model's own eager pass gives the same loss
        logits = m(input_ids=torch.as_tensor(ids)).logits
    own = -torch.log_softmax(logits[:, :-1].double(), -1).gather(
        -1, torch.as_tensor(ids)[:, 1:, None])[..., 0].mean(1).numpy()  # fmt: skip
    np.testing.assert_allclose(r.nll_base, own, rtol=0, atol=1e-12)


def test_attention_on_token_0_is_what_the_eager_pass_puts_there(llama_run):
    m, ids, r = llama_run
    with torch.no_grad():
        att = m(input_ids=torch.as_tensor(ids), output_attentions=True).attentions
    want = np.stack([a[:, :, 1:, 0].mean(dim=(1, 2)).numpy() for a in att], axis=1)  # (N, L)
    np.testing.assert_allclose(r.attention_on_0, want, rtol=0, atol=1e-12)


# ----------------------------------------------------------------------- sliding windows


def test_a_sliding_layer_moves_mass_only_inside_its_window():
    g = model("gemma3_text")
    ids = torch.as_tensor(TL.ids(seed=3, count=2))
    from posflow.simulate.models._adapters import adapter_for

    adapter = adapter_for(g, probabilities=False)
    blocks = adapter.blocks(g)
    seen = {}
    with torch.no_grad():
        with E.Intervention(g, adapter, blocks) as edit:
            edit.set([0], "uniform", 1.0, tally=lambda t, p, vis: seen.update(vis=vis, p=p))
            att = g(input_ids=ids, output_attentions=True).attentions[0]
    base = seen["p"]
    i, j = np.indices((TL.n, TL.n))
    band = torch.from_numpy((j <= i) & (i - j < TL.W))
    assert torch.equal(seen["vis"][0, 0], band)
    torch.testing.assert_close(att[:, :, TL.W :], base[:, :, TL.W :], rtol=0, atol=0)
    # rows keep their sums (1 within the float32 softmax's 1e-7)
    torch.testing.assert_close(att.sum(-1), base.sum(-1), rtol=0, atol=1e-15)
    assert (att[:, :, 1 : TL.W, 0] == 0).all() and (att[..., ~band] == 0).all()
    assert g.config._attn_implementation == "eager" and not E._EDITS


# ------------------------------------------------------------------------------ statistics


def test_w1_and_t_interval_agree_with_scipy():
    from scipy import stats

    rng = np.random.default_rng(0)
    p, q = rng.random((3, 9)), rng.random((3, 9))
    p, q = p / p.sum(-1, keepdims=True), q / q.sum(-1, keepdims=True)
    x = np.arange(9)
    want = [stats.wasserstein_distance(x, x, a, b) / 8 for a, b in zip(p, q, strict=True)]
    np.testing.assert_allclose(SI.w1_positions(p, q), want, rtol=1e-12)
    d = rng.normal(size=(2, 7))
    for row, got in zip(d, SI.t_interval(d, 0.9), strict=True):
        want = stats.t.interval(0.9, 6, loc=row.mean(), scale=stats.sem(row))
        np.testing.assert_allclose(got, want, rtol=1e-12)


def test_table_contrast_and_intervals_are_consistent(llama_run):
    _, _, r = llama_run
    rows = r.table()
    assert len(rows) == len(r.conditions) * len(r.targets)
    for row in rows:
        for key in ("dnll", "w1", "dmass0"):
            lo, hi = row[f"{key}_interval"]
            assert lo <= hi
        assert row["w1"] >= 0 and 0 < row["moved"] < 1
    con = r.contrast()
    np.testing.assert_allclose(con["nll"], r.dnll[:, 0] - r.dnll[:, 1], rtol=0, atol=1e-14)
    np.testing.assert_allclose(con["w1"], r.w1[:, 0] - r.w1[:, 1], rtol=0, atol=1e-15)
    assert (con["nll_interval"][:, 0] <= con["nll_interval"][:, 1]).all()
    d = r.to_dict()
    assert len(d["diagonal_minus_uniform"]) == len(r.conditions) and "Student t" in d["intervals"]
    with pytest.raises(ValueError, match="a must be one of the measured targets"):
        r.contrast("drop", "uniform")
    np.testing.assert_allclose(r.profile().sum(), 1.0)


def test_posflow_lm_is_edited_through_its_probability_probe():
    from posflow.simulate.models.lm import LM, LMConfig

    lm = LM(LMConfig(n_layer=2, n_head=2, d_model=16), seed=1).double()
    ids = np.random.default_rng(0).integers(0, 256, (3, 10))
    zero = SI.sink_intervention(lm, ids, fraction=0.0, resamples=20)
    with torch.no_grad():
        logits = lm(torch.as_tensor(ids))
    own = -torch.log_softmax(logits[:, :-1], -1).gather(
        -1, torch.as_tensor(ids)[:, 1:, None])[..., 0].mean(1).numpy()  # fmt: skip
    np.testing.assert_allclose(zero.nll_base, own, rtol=0, atol=1e-13)
    assert (zero.nll == zero.nll_base).all()
    r = SI.sink_intervention(lm, ids, layers="all", target="diagonal", resamples=20)
    assert r.labels == ("all",) and np.abs(r.nll - r.nll_base).max() > 0
    assert not any(b.attn.prob_probe._forward_hooks for b in lm.blocks)


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("kw", "exc", "match"),
    [
        (dict(ids=np.zeros((2, TL.n))), TypeError, "input_ids must be integers"),
        (dict(ids=TL.ids(count=1)), ValueError, "N >= 2 windows"),
        (dict(ids=np.full((2, 4), TL.V)), ValueError, "input_ids must lie in"),
        (dict(layers="some"), ValueError, "layers must be 'each', 'all'"),
        (dict(layers=[0, 0]), ValueError, "layers must be distinct integers"),
        (dict(layers=[2]), ValueError, r"layers must be distinct integers in \[0, 1\]"),
        (dict(layers=[True]), ValueError, "layers must be distinct"),
        (dict(layers=[]), ValueError, "layers must be distinct"),
        (dict(layers=3), TypeError, "layers must be"),
        (dict(target="middle"), ValueError, "target must be distinct names"),
        (dict(target=()), ValueError, "target must be distinct names"),
        (dict(target=("uniform", "uniform")), ValueError, "target must be distinct names"),
        (dict(target=5), TypeError, "target must be a name"),
        (dict(fraction=1.5), ValueError, "fraction must be a number in"),
        (dict(fraction=float("nan")), ValueError, "fraction must be a number in"),
        (dict(fraction=True), ValueError, "fraction must be a number in"),
        (dict(confidence=0.0), ValueError, "confidence must be a number in"),
        (dict(confidence=1.0), ValueError, "confidence must be a number in"),
        (dict(resamples=0), ValueError, "resamples must be an integer >= 1"),
        (dict(seed=-1), ValueError, "seed must be an integer >= 0"),
        (dict(batch_size=0), ValueError, "batch_size must be an integer >= 1"),
        (dict(progress="yes"), TypeError, "progress must be True, False or None"),
    ],
)
def test_bad_input_is_refused_before_any_forward_pass(kw, exc, match, monkeypatch):
    m = model("llama")
    monkeypatch.setattr(m, "forward", lambda *a, **k: pytest.fail("ran before validating"))
    args = {"ids": TL.ids(count=2), **kw}
    with pytest.raises(exc, match=match):
        SI.sink_intervention(m, args.pop("ids"), **args)


def test_a_hand_adapter_family_is_refused_by_name():
    with pytest.raises(ValueError, match=r"model: the sink intervention .* gpt2 adapter"):
        SI.sink_intervention(model("gpt2"), TL.ids(count=2))


def _gguf(path, arch: str):
    """A GGUF v3 header naming ``arch`` (no tensors)."""
    key, val = b"general.architecture", arch.encode()
    le = lambda v, k: v.to_bytes(k, "little")  # noqa: E731
    path.write_bytes(b"GGUF" + le(3, 4) + le(0, 8) + le(1, 8) + le(len(key), 8) + key
                     + le(8, 4) + le(len(val), 8) + val)  # fmt: skip
    return path


def test_architecture_of_reads_configs_and_gguf_headers_without_weights(tmp_path):
    folder = tmp_path / "hf"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "gemma3_text"}')
    assert SI.architecture_of(str(folder)) == "gemma3_text"
    assert SI.architecture_of(_gguf(tmp_path / "m.gguf", "llama")) == "llama"
    assert SI.architecture_of(_gguf(tmp_path / "b.gguf", "bloom")) == "bloom"
    ckpt = tmp_path / "tiny.pt"
    ckpt.write_bytes(b"not read")
    assert SI.architecture_of(ckpt) == "posflow"
    assert "bloom" not in SI.INTERVENABLE and {"posflow", "llama"} <= set(SI.INTERVENABLE)
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match=r"no readable config\.json"):
        SI.architecture_of(folder)
    with pytest.raises(ValueError, match="neither an installed model"):
        SI.architecture_of(tmp_path / "missing")
