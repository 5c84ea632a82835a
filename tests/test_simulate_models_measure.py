"""posflow.simulate.models.measure: hooks on GPT-2, BLOOM, Falcon, MPT, Llama and posflow's LM.

Every adapter is checked on a tiny randomly initialised float64 model built from a config (no
download) against a hand computation: block inputs from ``output_hidden_states``, then the
attention of every layer written out (head split, causal softmax of q·kᵀ/√d + ALiBi or rotary,
output projection), giving λ_t, mean probabilities and mean raw q·k independently of the hooks.
"""

import copy
import inspect
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers.models.falcon.modeling_falcon import FalconAttention  # noqa: E402

from posflow.simulate.kernels import alibi_slopes  # noqa: E402
from posflow.simulate.models import measure as M  # noqa: E402
from posflow.simulate.models.lm import LM, LMConfig  # noqa: E402

V, N, n = 64, 3, 10
# Falcon's attention before transformers 5.25: inline, ALiBi passed as a keyword as well as in
# the mask (eager adds it twice), softmax in the model's dtype; from 5.25: the shared
# eager_attention_forward, ALiBi only in the mask, softmax in float32
FALCON_ALIBI_KEYWORD = "alibi" in inspect.signature(FalconAttention.forward).parameters


def _randomise(model, seed, std=0.3):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return model


def build(kind, seed=0, impl="eager"):
    T = transformers
    cfgs = {
        "gpt2": T.GPT2Config(
            n_layer=2,
            n_head=2,
            n_embd=32,
            vocab_size=V,
            n_positions=32,
            bos_token_id=None,
            eos_token_id=None,
        ),
        "bloom": T.BloomConfig(n_layer=2, n_head=2, hidden_size=32, vocab_size=V),
        "falcon_alibi": T.FalconConfig(
            num_hidden_layers=2,
            num_attention_heads=2,
            hidden_size=32,
            vocab_size=V,
            alibi=True,
            multi_query=False,
            parallel_attn=False,
            bias=True,
        ),
        "falcon_rotary": T.FalconConfig(
            num_hidden_layers=2, num_attention_heads=4, hidden_size=32, vocab_size=V
        ),
        "mpt": T.MptConfig(n_layers=2, n_heads=2, d_model=32, vocab_size=V, max_seq_len=32),
        "llama": T.LlamaConfig(
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            hidden_size=32,
            intermediate_size=48,
            vocab_size=V,
            max_position_embeddings=32,
        ),
    }
    torch.manual_seed(seed)
    if kind == "posflow":
        model = LM(LMConfig(vocab_size=V, n_layer=2, n_head=2, d_model=32), seed=seed)
    else:
        model = T.AutoModelForCausalLM.from_config(cfgs[kind], attn_implementation=impl)
    return _randomise(model.double().eval(), seed)


KINDS = ("gpt2", "bloom", "falcon_alibi", "falcon_rotary", "mpt", "llama", "posflow")
# BLOOM, MPT, Llama and (transformers >= 5.25) Falcon take the softmax in float32 even in a
# float64 model, and rotary models build cos/sin in float32: their results agree to float32
# accuracy only (probabilities within a few 2^-24 relative)
TOL = {k: 1e-6 if k in ("bloom", "mpt", "llama") else 1e-12 for k in KINDS}
TOL["falcon_rotary"] = 1e-7
if not FALCON_ALIBI_KEYWORD:
    TOL["falcon_alibi"] = 1e-6
QK_TOL = {k: 1e-6 if k in ("falcon_rotary", "llama") else 1e-10 for k in KINDS}


def _ids(seed=1, count=N, length=n):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, V, size=(count, length)))


# ------------------------------------------------------------------------------------------
# the hand computation


def _split(t, H, d):  # (B, n, H·d) -> (B, H, n, d)
    return t.reshape(t.shape[0], t.shape[1], H, d).permute(0, 2, 1, 3)


def _rope(t, theta=10000.0):  # rotate-half convention, positions 0..n-1
    d = t.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = torch.arange(t.shape[-2], dtype=torch.float64)[:, None] * inv
    cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
    half = torch.cat([-t[..., d // 2 :], t[..., : d // 2]], -1)
    return t * cos + half * sin


def _attend(q, k, v, bias):  # q (B,H,n,d), k, v (B,H,n,d); bias (H, n, n) in logit units
    B, H, L, d = q.shape
    raw = q @ k.transpose(-1, -2)
    logits = raw / math.sqrt(d) + bias
    logits = logits.masked_fill(torch.ones(L, L, dtype=torch.bool).triu(1), -math.inf)
    p = torch.softmax(logits, -1)
    return (p @ v).permute(0, 2, 1, 3).reshape(B, L, H * d), p, raw


def _alibi(m, L):
    i = torch.arange(L, dtype=torch.float64)
    return -torch.as_tensor(m, dtype=torch.float64)[:, None, None] * (i[:, None] - i)


def hand_layer(kind, model, blk, x):
    """(a_t, probs (B,H,n,n), raw q·k (B,H,n,n)) of one block, written out."""
    L = x.shape[1]
    if kind == "gpt2":
        at = blk.attn
        q, k, v = at.c_attn(blk.ln_1(x)).split(32, -1)
        H = 2
        y, p, raw = _attend(*(_split(t, H, 16) for t in (q, k, v)), 0.0)
        return at.c_proj(y), p, raw
    if kind in ("bloom", "falcon_alibi"):
        at = blk.self_attention
        fused = at.query_key_value(blk.input_layernorm(x)).reshape(x.shape[0], L, 2, 3, 16)
        q, k, v = (fused[..., j, :].permute(0, 2, 1, 3) for j in range(3))
        # Falcon: alibi/√d; at H = 2 its bfloat16 slopes are the textbook ones (tested below)
        m = alibi_slopes(2) * (1.0 if kind == "bloom" else 1 / 4)
        y, p, raw = _attend(q, k, v, _alibi(m, L))
        return at.dense(y), p, raw
    if kind == "falcon_rotary":  # multi-query: H query heads, one shared key and value head
        at = blk.self_attention
        fused = at.query_key_value(blk.input_layernorm(x)).reshape(x.shape[0], L, 4 + 2, 8)
        q = fused[:, :, :4].permute(0, 2, 1, 3)
        k = fused[:, :, 4:5].permute(0, 2, 1, 3).expand(-1, 4, -1, -1)
        v = fused[:, :, 5:6].permute(0, 2, 1, 3).expand(-1, 4, -1, -1)
        y, p, raw = _attend(_rope(q), _rope(k), v, 0.0)
        return at.dense(y), p, raw
    if kind == "mpt":
        at = blk.attn
        q, k, v = at.Wqkv(blk.norm_1(x)).chunk(3, -1)
        y, p, raw = _attend(*(_split(t, 2, 16) for t in (q, k, v)), _alibi(alibi_slopes(2), L))
        return at.out_proj(y), p, raw
    if kind == "llama":  # 4 query heads, 2 key/value heads (head h uses kv head h // 2)
        at = blk.self_attn
        h = blk.input_layernorm(x)
        q = _split(at.q_proj(h), 4, 8)
        k = _split(at.k_proj(h), 2, 8).repeat_interleave(2, dim=1)
        v = _split(at.v_proj(h), 2, 8).repeat_interleave(2, dim=1)
        y, p, raw = _attend(_rope(q), _rope(k), v, 0.0)
        return at.o_proj(y), p, raw
    if kind == "posflow":
        at = blk.attn
        q, k, v = at.qkv_proj(blk.ln1(x)).split(32, -1)
        qs, ks, vs = (_split(t, 2, 16) for t in (q, k, v))
        y, p, raw = _attend(qs, ks, vs, _alibi(alibi_slopes(2), L))
        return at.out_proj(y), p, raw
    raise AssertionError(kind)


def hand(kind, model, ids):
    """λ_t per sequence (N, L), mean probabilities and mean raw q·k, (L, H, n, n)."""
    with torch.no_grad():
        if kind == "posflow":
            xs, x = [], model.tok_emb(ids)
            for blk in model.blocks:
                xs.append(x)
                x = blk(x)
            blocks = list(model.blocks)
        else:
            adapter = M.adapter_for(model)
            fixes = adapter.prepare(model)  # Falcon + ALiBi: the sdpa semantics (tested below)
            xs = model(input_ids=ids, output_hidden_states=True).hidden_states
            for h in fixes:
                h.remove()
            blocks = adapter.blocks(model)
        lam, P, S = [], [], []
        for t, blk in enumerate(blocks):
            a, p, raw = hand_layer(kind, model, blk, xs[t])
            na, nx = a.norm(dim=-1), xs[t].norm(dim=-1)
            lam.append((na / (na + nx)).mean(dim=1))
            P.append(p.mean(0))
            S.append(raw.mean(0))
    return torch.stack(lam, 1).numpy(), torch.stack(P).numpy(), torch.stack(S).numpy()


@pytest.mark.parametrize("kind", KINDS)
def test_every_adapter_matches_the_hand_computation(kind):
    model = build(kind)
    ids = _ids()
    m = M.measure(model, ids, batch_size=2, chunk=4)
    lam_seq, P, S = hand(kind, model, ids)
    tol = TOL[kind]
    # λ_t: per sequence, then mean and std (ddof 0) over sequences
    np.testing.assert_allclose(m.lambda_per_sequence, lam_seq, rtol=0, atol=tol)
    np.testing.assert_allclose(m.lambdas, lam_seq.mean(0), rtol=0, atol=tol)
    np.testing.assert_allclose(m.lambdas_std, lam_seq.std(0), rtol=0, atol=tol)
    assert ((m.lambdas > 0) & (m.lambdas < 1)).all()
    np.testing.assert_allclose(m.attention, P, rtol=0, atol=tol)
    np.testing.assert_allclose(m.qk, S, rtol=QK_TOL[kind], atol=QK_TOL[kind])
    # the probabilities are causal and row-stochastic
    assert np.abs(np.triu(m.attention, 1)).max() == 0.0
    np.testing.assert_allclose(m.attention.sum(-1), 1.0, rtol=0, atol=tol)


@pytest.mark.parametrize("kind", KINDS)
def test_probabilities_are_the_softmax_of_qk_and_the_reported_slopes(kind):
    """With one sequence the means are the values: softmax(qk/√d − m(i−j)) must be A."""
    model = build(kind, seed=3)
    m = M.measure(model, _ids(seed=4, count=1), influence=False)
    slopes = np.zeros(m.num_heads) if m.slopes is None else m.slopes
    logits = m.qk / math.sqrt(m.d_head) + _alibi(slopes, n).numpy()[None]
    logits = np.where(np.triu(np.ones((n, n), bool), 1), -np.inf, logits)
    A = np.exp(logits - logits.max(-1, keepdims=True))
    np.testing.assert_allclose(m.attention, A / A.sum(-1, keepdims=True), atol=TOL[kind])


def test_falcon_alibi_is_measured_as_the_model_computes_it_with_sdpa():
    """Before transformers 5.25 eager Falcon adds ALiBi twice (keyword and mask) and the
    adapter's hook removes the keyword's copy; from 5.25 the mask alone carries the bias, in
    eager and sdpa alike, and the hook changes nothing. Either way the measured eager pass
    computes what sdpa computes, with the slopes the adapter reports."""
    eager = build("falcon_alibi", seed=15)
    sdpa = (
        transformers.AutoModelForCausalLM.from_config(
            copy.deepcopy(eager.config), attn_implementation="sdpa"
        )
        .double()
        .eval()
    )
    sdpa.load_state_dict(eager.state_dict())
    ids = _ids(seed=16)
    adapter = M.adapter_for(eager)
    seen = {}
    attn = adapter.attention(adapter.blocks(eager)[0])
    spy = attn.register_forward_pre_hook(lambda mod, args, kw: seen.update(kw), with_kwargs=True)
    with torch.no_grad():
        ref = sdpa(input_ids=ids).logits
        raw = eager(input_ids=ids).logits
        handles = adapter.prepare(eager)
        fixed = eager(input_ids=ids).logits
    for h in [spy, *handles]:
        h.remove()
    # the mask carries the reported slope times j at key j ≤ i (exactly: powers of 2 here)
    mask, m = seen["attention_mask"], adapter.slopes(eager)
    low = torch.ones(n, n, dtype=torch.bool).tril()
    bias = torch.as_tensor(m)[:, None, None] * torch.arange(n, dtype=torch.float64)
    assert torch.equal(mask[:, :, low], bias.expand(N, -1, n, -1)[:, :, low])
    if FALCON_ALIBI_KEYWORD:
        assert seen["alibi"] is not None
        assert (raw - ref).abs().max().item() > 1e-6  # the eager path adds ALiBi twice
        np.testing.assert_allclose(fixed.numpy(), ref.numpy(), rtol=0, atol=1e-12)
    else:
        assert "alibi" not in seen
        assert torch.equal(raw, fixed)  # nothing to undo
        # the eager softmax runs in float32 (a few 2^-24 relative per probability), sdpa's in
        # float64; through two layers the logits differ by 6e-8 here
        np.testing.assert_allclose(fixed.numpy(), ref.numpy(), rtol=0, atol=1e-6)


def _press_slopes(H):
    """ALiBi slopes of Press et al. (2022): 2^(-8h/P), h = 1..P, P the largest power of 2 ≤ H,
    then those of 2P at odd h for the remaining H − P heads."""
    P = 2 ** int(math.log2(H))
    m = 2.0 ** (-8.0 * np.arange(1, P + 1) / P)
    return np.concatenate([m, 2.0 ** (-4.0 * np.arange(1, 2 * (H - P), 2) / P)])


@pytest.mark.parametrize("H", [2, 12, 32, 64])
def test_falcon_reports_the_bfloat16_slopes_its_mask_applies(H):
    """The slopes are the increments of the model's own mask, m_h/√d, with m_h Press et al.'s
    slope rounded to bfloat16 (8 significant bits: within 2^-8 relative; exact for H ≤ 8)."""
    cfg = transformers.FalconConfig(
        num_hidden_layers=1, num_attention_heads=H, hidden_size=4 * H, vocab_size=V, alibi=True
    )
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    adapter = M.adapter_for(model.double().eval())
    seen = {}
    attn = adapter.attention(adapter.blocks(model)[0])
    spy = attn.register_forward_pre_hook(lambda mod, args, kw: seen.update(kw), with_kwargs=True)
    with torch.no_grad():
        model(input_ids=_ids(count=1, length=2))
    spy.remove()
    m = adapter.slopes(model)
    np.testing.assert_array_equal(m, seen["attention_mask"][0, :, 1, 1].numpy())
    rel = np.abs(m * 2 / _press_slopes(H) - 1)  # √d = 2
    assert rel.max() <= 2.0**-8
    assert (rel.max() == 0.0) == (H <= 8)


@pytest.mark.parametrize("kind", ["gpt2", "falcon_alibi", "posflow"])  # float64 softmaxes
def test_gradient_influence_matches_central_differences(kind):
    # from transformers 5.25 Falcon's eager softmax runs in float32, whose rounding (2^-24)
    # over the step h = 1e-6 would swamp the differences: sdpa keeps it in float64 (the
    # influence needs no probabilities), and the eager model's influence is checked against
    # it to float32 accuracy
    sdpa = kind == "falcon_alibi" and not FALCON_ALIBI_KEYWORD
    model = build(kind, seed=5, impl="sdpa" if sdpa else "eager")
    ids = _ids(seed=6, count=2, length=6)
    got = M.gradient_influence(model, ids)
    if sdpa:
        eager = M.gradient_influence(build(kind, seed=5), ids)
        np.testing.assert_allclose(eager, got, rtol=1e-6)
    emb = M._embeddings(model)

    def p_top(e):  # e: (K, n, D), K perturbed copies in one batch
        with torch.no_grad():
            out = model(embeds=e) if kind == "posflow" else model(inputs_embeds=e).logits
            return torch.softmax(out[:, -1], -1).max(-1).values.numpy()

    ref, h = np.zeros(6), 1e-6
    fixes = [] if kind == "posflow" else M.adapter_for(model, probabilities=False).prepare(model)
    for s in range(2):
        e0 = emb(ids[s : s + 1]).detach()[0]  # (n, D)
        L, D = e0.shape
        step = h * torch.eye(L * D, dtype=e0.dtype).reshape(L * D, L, D)
        g = (p_top(e0 + step) - p_top(e0 - step)) / (2 * h)  # central differences, (n·D,)
        ref += np.linalg.norm(g.reshape(L, D), axis=1) / 2
    for f in fixes:
        f.remove()
    np.testing.assert_allclose(got.sum(), 1.0, atol=1e-14)
    np.testing.assert_allclose(got, ref / ref.sum(), rtol=1e-6)


def test_batches_and_chunks_do_not_change_the_result():
    model = build("gpt2", seed=7)
    ids = _ids(seed=8, count=5)
    a = M.measure(model, ids, batch_size=1, chunk=3)
    b = M.measure(model, ids, batch_size=5, chunk=256)
    for f in ("lambdas", "lambdas_std", "attention", "qk", "influence"):
        np.testing.assert_allclose(getattr(a, f), getattr(b, f), rtol=1e-10, atol=1e-13)


def test_single_quantity_helpers_and_flags():
    model = build("posflow", seed=9)
    ids = _ids(seed=10)
    full = M.measure(model, ids)
    lam, std = M.mixing_coefficients(model, ids)
    np.testing.assert_allclose(lam, full.lambdas, atol=1e-14)
    np.testing.assert_allclose(std, full.lambdas_std, atol=1e-14)
    np.testing.assert_allclose(M.mean_attention(model, ids), full.attention, atol=1e-14)
    np.testing.assert_allclose(M.mean_qk(model, ids), full.qk, atol=1e-12)
    np.testing.assert_allclose(M.gradient_influence(model, ids), full.influence, atol=1e-14)
    only = M.measure(model, ids, lambdas=False, attention=False, qk=False)
    assert only.lambdas is None and only.attention is None and only.qk is None
    # the model is left as it was: parameters trainable again, hooks removed
    assert all(p.requires_grad for p in model.parameters())
    assert not any(mod._forward_hooks or mod._forward_pre_hooks for mod in model.modules())


def test_kernels_and_content_of_a_measurement():
    model = build("mpt", seed=11)
    m = M.measure(model, _ids(seed=12), influence=False)
    ks = m.kernels()
    assert len(ks) == 2
    np.testing.assert_allclose(ks[1].dense(), m.attention[1].mean(0), atol=1e-12)
    b_raw, c_raw = m.content("raw")
    b, c = m.content("sqrt_d")
    np.testing.assert_allclose(c * math.sqrt(m.d_head), c_raw, rtol=1e-12)
    np.testing.assert_allclose(b * math.sqrt(m.d_head), b_raw, rtol=1e-12)


# ------------------------------------------------------------------------------------------
# content and kernels from arrays


def test_content_scores_recover_a_synthetic_background_and_diagonal():
    rng = np.random.default_rng(13)
    L, H, k, sigma = 3, 4, 40, 0.5
    b_true, c_true = rng.normal(0, 5, (L, H)), rng.normal(0, 5, (L, H))
    S = b_true[..., None, None] + c_true[..., None, None] * np.eye(k)
    S = S + rng.normal(0, sigma, (L, H, k, k))
    b, c = M.content_scores(S)
    # standard errors: b averages k(k-1)/2 entries, the diagonal mean k entries; 4 SE
    se_b, se_c = sigma / math.sqrt(k * (k - 1) / 2), sigma * math.sqrt(1 / k + 2 / (k * (k - 1)))
    assert np.abs(b - b_true).max() < 4 * se_b
    assert np.abs(c - c_true).max() < 4 * se_c
    b2, c2 = M.content_scores(S, d_head=16)
    np.testing.assert_allclose((b2, c2), (b / 4, c / 4), rtol=1e-12)


def test_measured_kernels_clean_float32_rows_and_reject_the_rest():
    rng = np.random.default_rng(14)
    A = np.tril(rng.uniform(size=(2, 3, 6, 6)))
    A /= A.sum(-1, keepdims=True)
    noisy = A * (1 + 1e-7 * rng.standard_normal(A.shape))
    ks = M.measured_kernels(noisy)
    np.testing.assert_allclose(ks[0].dense(), A[0].mean(0), atol=1e-6)
    np.testing.assert_allclose(ks[0].dense().sum(1), 1.0, atol=1e-14)
    bad = A.copy()
    bad[1, :, 0, 3] = 0.1
    with pytest.raises(ValueError, match="not causal"):
        M.measured_kernels(bad)
    with pytest.raises(ValueError, match="row-stochastic"):
        M.measured_kernels(A * 1.01)
    with pytest.raises(ValueError, match="attention must have shape"):
        M.measured_kernels(np.ones((2, 3)))
    with pytest.raises(ValueError, match="qk_mean"):
        M.content_scores(np.ones((3, 1, 1)))
    with pytest.raises(ValueError, match="d_head"):
        M.content_scores(np.ones((3, 3)), d_head=0)


def test_auto_batch_size_keeps_a_125m_model_at_n_1024_to_one_sequence():
    assert M._auto_batch(64, 12, 12, 1024, grad=True) == 1
    assert M._auto_batch(64, 2, 2, 16, grad=True) == 64


# ------------------------------------------------------------------------------------------
# bad input


def test_bad_inputs_raise_one_clear_error():
    model = build("gpt2")
    ids = _ids()
    with pytest.raises(ValueError, match="shorter than n = 20"):
        M.measure(model, ids, n=20)
    with pytest.raises(ValueError, match="input_ids must have shape"):
        M.measure(model, ids[0])
    with pytest.raises(TypeError, match="input_ids must be integers"):
        M.measure(model, ids.double())
    with pytest.raises(ValueError, match=r"input_ids must lie in \[0, 64\)"):
        M.measure(model, ids + 60)
    with pytest.raises(ValueError, match="exceeds the model's maximum sequence length 32"):
        M.measure(model, _ids(length=40))
    with pytest.raises(ValueError, match="chunk"):
        M.measure(model, ids, chunk=0)
    with pytest.raises(ValueError, match="batch_size"):
        M.measure(model, ids, batch_size=0)
    with pytest.raises(ValueError, match=r"unsupported architecture .*supported: posflow LM"):
        M.measure(torch.nn.Linear(2, 2), ids)
    with pytest.raises(TypeError, match=r"model must be a torch\.nn\.Module"):
        M.measure("gpt2", ids)
    opt = transformers.OPTConfig(
        num_hidden_layers=1, hidden_size=16, num_attention_heads=2, ffn_dim=16, vocab_size=V
    )
    with pytest.raises(ValueError, match=r"unsupported architecture 'opt'.*gpt2, bloom, falcon"):
        M.measure(transformers.AutoModelForCausalLM.from_config(opt), ids)
    sdpa = transformers.AutoModelForCausalLM.from_config(
        transformers.GPT2Config(
            n_layer=1, n_head=2, n_embd=16, vocab_size=V, bos_token_id=None, eos_token_id=None
        ),
        attn_implementation="sdpa",
    )
    with pytest.raises(ValueError, match="attn_implementation='eager'"):
        M.measure(sdpa, ids)


@pytest.mark.parametrize("kind", KINDS)
def test_head_mean_and_qk_sums_equal_the_full_accumulators(kind):
    """heads=False keeps the head mean of the attention; qk="summary" gives the same content
    (b, c) as the full mean q·kᵀ (prefix sums of k, or the score tensor's own sums)."""
    model = build(kind, seed=5)
    ids = _ids(seed=6)
    full = M.measure(model, ids, batch_size=2, chunk=4)
    lean = M.measure(model, ids, batch_size=2, chunk=4, heads=False, qk="summary")
    assert lean.qk is None and lean.attention.shape == (full.attention.shape[0], 1, n, n)
    np.testing.assert_allclose(lean.attention[:, 0], full.attention.mean(1), rtol=0, atol=1e-14)
    for scale in ("sqrt_d", "raw"):
        for x, y in zip(lean.content(scale), full.content(scale), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=1e-11)
    S = full.qk  # the sums themselves, from the full accumulator
    np.testing.assert_allclose(lean.qk_sums[..., 0], np.trace(S, axis1=-2, axis2=-1),
                               rtol=1e-10, atol=1e-10)  # fmt: skip
    np.testing.assert_allclose(lean.qk_sums[..., 1], np.tril(S, -1).sum((-2, -1)),
                               rtol=1e-10, atol=1e-10)  # fmt: skip
    with pytest.raises(ValueError, match="qk must be True, False or 'summary'"):
        M.measure(model, ids, qk="diag")


@pytest.mark.parametrize("kind", KINDS)
def test_lambdas_with_the_mlp_match_the_hand_attention_and_the_block_outputs(kind):
    """λ_t with the MLP: a_t written out by hand, m_t = block output − x_t − a_t."""
    model, ids = build(kind, seed=17), _ids(seed=18)
    m = M.measure(model, ids, lambdas="both", attention=False, qk=False, influence=False)
    blocks = list(model.blocks) if kind == "posflow" else M.adapter_for(model).blocks(model)
    xs, ys = {}, {}
    handles = [b.register_forward_pre_hook(lambda mod, a, t=t: xs.__setitem__(t, a[0]))
               for t, b in enumerate(blocks)]  # fmt: skip
    handles += [b.register_forward_hook(lambda mod, a, o, t=t: ys.__setitem__(
        t, o[0] if isinstance(o, tuple) else o)) for t, b in enumerate(blocks)]  # fmt: skip
    fixes = [] if kind == "posflow" else M.adapter_for(model).prepare(model)
    with torch.no_grad():
        model(ids) if kind == "posflow" else model(input_ids=ids)
        lam = []
        for t, blk in enumerate(blocks):
            a = hand_layer(kind, model, blk, xs[t])[0]
            na, nx, nm = a.norm(dim=-1), xs[t].norm(dim=-1), (ys[t] - xs[t] - a).norm(dim=-1)
            lam.append((na / (nx + na + nm)).mean(dim=1))
    for h in handles + fixes:
        h.remove()
    lam = torch.stack(lam, 1).numpy()
    np.testing.assert_allclose(m.lambda_mlp_per_sequence, lam, rtol=0, atol=TOL[kind])
    np.testing.assert_allclose(m.lambdas_mlp, lam.mean(0), rtol=0, atol=TOL[kind])
    # hand adapters: plain causal masks; Llama (attention interface): no mask seen without
    # probabilities or q·k, so no windows reported
    assert m.windows == (None if kind == "llama" else (None,) * m.num_layers)
