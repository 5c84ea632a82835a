"""Where to hook a causal LM: one adapter per architecture (claims PB15, PB16).

An adapter tells :mod:`posflow.simulate.models.measure`, for decoder block t,

* ``blocks(model)`` — the decoder blocks in order; the block's first input is x_t;
* ``attn_output(block)`` — (module, index): that module's output (or ``output[index]``) is the
  attention sub-layer output a_t after its output projection, before the residual add;
* ``mlp_output(block)`` — (module, index): the same for the MLP update m_t (after its output
  projection and any post norm, before the residual add);
* ``probs(block)`` — (module, index): ``output[index]`` are the post-softmax probabilities
  (B, H, n, n) (Hugging Face models must run the "eager" attention implementation);
* ``qk_source(block)`` — (module, fn, kind): with kind "pre", ``fn(module, args, kwargs)``
  returns (q, k), each (B, H, n, d), after any rotary transform and before any scaling, keys
  repeated to H heads; with kind "out", the module's output is the raw score matrix q·kᵀ;
* ``prepare(model)`` — hook handles installed for the measurement (removed afterwards);
* ``slopes(model)`` — ALiBi slopes in logit units (bias ``-m_h (i - j)`` after the model's
  q·k scaling) or None;
* ``value_source(block)`` — (module, fn): ``fn(module, args, output)`` on that module's forward
  output returns the value vectors v (B, H, n, d) the attention averages (keys/values repeated
  to H heads), and ``out_weight(block)`` the output projection W_O as a (D, H·d) matrix acting
  on the concatenated heads, for the value-norm kernels of Kobayashi et al. (2020) (issue 13;
  ``None`` where the architecture has no such adapter);
* ``d_head(model)``, ``num_heads(model)``, ``max_length(model)`` (None when unbounded).

Supported (:func:`check_architecture`, from the config alone): posflow's own
:class:`posflow.simulate.models.lm.LM`; every family of
:data:`posflow.simulate.models._layouts.LAYOUTS` (Llama, Mistral, Qwen 2/3, Gemma 1/2/3,
OLMo 1/2, Phi, Phi-3, GPT-NeoX, …), whose attention goes through transformers'
``AttentionInterface`` and is recorded there (:mod:`posflow.simulate.models._interface`, any
attention implementation); and, by the hand adapters below, GPT-2, BLOOM, Falcon and MPT, chosen
by ``config.model_type``. BLOOM and MPT (transformers 5.x) compute their attention inline (ALiBi,
no interface), and so does Falcon before transformers 5.25 (from 5.25 it calls the interface with
its ALiBi bias folded into the mask; one hand adapter serves both); GPT-2 goes through the
interface except with ``reorder_and_upcast_attn`` and keeps its hand adapter (eager attention for
probabilities).
"""

from __future__ import annotations

import math

import torch

from posflow.simulate.models._adapter_base import Adapter, _heads, _hidden, _repeat
from posflow.simulate.models._interface import InterfaceAdapter
from posflow.simulate.models._layouts import LAYOUTS
from posflow.simulate.models._supported import SUPPORTED, _refuse, check_architecture

__all__ = ["SUPPORTED", "Adapter", "adapter_for", "check_architecture"]


class PosflowAdapter(Adapter):
    name = "posflow"

    def blocks(self, model):
        return list(model.blocks)

    def attention(self, block):
        return block.attn

    def attn_output(self, block):
        return block.attn, None

    def mlp_output(self, block):
        return block.mlp, None

    def probs(self, block):
        return block.attn.prob_probe, None

    def qk_source(self, block):
        return block.attn.qk_probe, None, "out"

    def slopes(self, model):
        return model.blocks[0].attn.scheme.slopes()

    def value_source(self, block):
        from posflow.simulate.models._scheme import PositionScheme

        attn = block.attn
        if type(attn.scheme).output is not PositionScheme.output:
            return None  # values are transformed after averaging: no per-token norm exists

        def fn(mod, args, out):
            x = args[0]
            B, n, D = x.shape
            q, k, v = out.split(D, dim=2)
            q, k, v = (t.view(B, n, attn.n_head, attn.d_head).transpose(1, 2) for t in (q, k, v))
            return attn.scheme.qkv(q, k, v, x)[2]

        return attn.qkv_proj, fn

    def out_weight(self, block):
        return block.attn.out_proj.weight

    def num_heads(self, model):
        return model.config.n_head

    def d_head(self, model):
        return model.config.d_model // model.config.n_head


class GPT2Adapter(Adapter):
    name = "gpt2"

    def blocks(self, model):
        return list(model.transformer.h)

    def attention(self, block):
        return block.attn

    def mlp_output(self, block):
        return block.mlp, None

    def qk(self, attn, args, kwargs):
        q, k, _ = attn.c_attn(_hidden(args, kwargs)).split(attn.split_size, dim=2)
        return _heads(q, attn.num_heads, attn.head_dim), _heads(k, attn.num_heads, attn.head_dim)

    def value_source(self, block):
        attn = block.attn

        def fn(mod, args, out):
            v = out.split(attn.split_size, dim=2)[2]
            return _heads(v, attn.num_heads, attn.head_dim)

        return attn.c_attn, fn

    def out_weight(self, block):
        return block.attn.c_proj.weight.T  # Conv1D stores (in, out)

    def max_length(self, model):
        return int(model.config.n_positions)


class BloomAdapter(Adapter):
    name = "bloom"

    def blocks(self, model):
        return list(model.transformer.h)

    def attention(self, block):
        return block.self_attention

    def attn_output(self, block):
        # BloomAttention adds the residual itself; its dense projection is a_t
        return block.self_attention.dense, None

    def mlp_output(self, block):
        return block.mlp.dense_4h_to_h, None  # BloomMLP adds the residual itself, too

    def qk(self, attn, args, kwargs):
        q, k, _ = attn._reshape(attn.query_key_value(_hidden(args, kwargs)))
        return q, k

    def slopes(self, model):
        from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

        return _get_alibi_slopes(self.num_heads(model), torch.device("cpu")).double().numpy()

    def num_heads(self, model):
        return int(model.config.n_head)


def _falcon_split(attn, fused):
    """Falcon's fused projection (B, n, ·) → q (B, H, n, d), k (B, Hkv, n, d), in the layout of
    its three variants (transformers ≥ 5.25 splits inline; earlier ones in ``_split_heads``, with
    the same layout): groups of a key-value head's queries, its key and its value (new decoder
    architecture); H queries, one key, one value (multi-query); else query, key and value
    interleaved per head."""
    B, n, _ = fused.shape
    H, d = attn.num_heads, attn.head_dim
    x = fused.view(B, n, -1, d)
    if attn.new_decoder_architecture:
        g = x.view(B, n, attn.num_kv_heads, -1, d)
        q, k = g[..., :-2, :].flatten(-3, -2), g[..., -2, :]
    elif attn.multi_query:
        q, k, _ = x.split([H, 1, 1], dim=-2)
    else:
        q, k, _ = x.unflatten(-2, (H, 3)).unbind(-2)
    return q.transpose(1, 2), k.transpose(1, 2)


class FalconAdapter(Adapter):
    name = "falcon"

    def blocks(self, model):
        return list(model.transformer.h)

    def attention(self, block):
        return block.self_attention

    def mlp_output(self, block):
        return block.mlp, None  # read before the parallel blocks add a_t to it in place

    def qk(self, attn, args, kwargs):
        q, k = _falcon_split(attn, attn.query_key_value(_hidden(args, kwargs)))
        if not attn.config.alibi:
            from transformers.models.falcon.modeling_falcon import apply_rotary_pos_emb

            cos, sin = kwargs["position_embeddings"]
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q, _repeat(k, attn.num_heads)

    def prepare(self, model):
        # Eager Falcon with ALiBi before transformers 5.25 adds the bias twice: to q·k before
        # the 1/√d scaling (the ``alibi`` keyword) and again through the additive mask, into
        # which the model folds alibi/√d. The sdpa path, which the model otherwise runs, adds
        # it once. Zero the explicit copy whenever the mask already carries the bias, so that
        # the eager pass measured here computes what the model computes. From 5.25 the
        # attention takes no ``alibi`` keyword (the mask alone carries the bias, in eager and
        # sdpa alike) and the hook leaves every call as it is.
        if not model.config.alibi:
            return []

        def hook(mod, args, kwargs):
            mask, alibi = kwargs.get("attention_mask"), kwargs.get("alibi")
            if alibi is None or mask is None or not mask.is_floating_point():
                return None
            lower = torch.ones(mask.shape[-2:], dtype=torch.bool, device=mask.device).tril()
            if mask.masked_select(lower).abs().max() > 0:
                return args, {**kwargs, "alibi": torch.zeros_like(alibi)}
            return None

        return [
            self.attention(b).register_forward_pre_hook(hook, with_kwargs=True)
            for b in self.blocks(model)
        ]

    def slopes(self, model):
        """The ALiBi slopes the model applies, in logit units.

        Falcon adds its bias through the attention mask, as alibi/√d on the scaled logits with
        alibi = bf16(m_h · j) at key position j (transformers' ``build_alibi_tensor``, read
        here at j = 1, so that the slopes are the model's own). m_h is Press et al.'s slope
        (2^(-8h/H) for H a power of 2; else those of the power of 2 below H, then every other
        one of twice it), computed in float32 and rounded to bfloat16, which keeps 8
        significant bits: within 2^-8 relative of the exact slope, exact for H ≤ 8. The
        positions j > 256 and the products m_h · j are rounded to bfloat16 too (2^-8 relative
        each), so the model's bias departs from the ramp −m_h (i − j)/√d: for H = 32, d = 64
        by up to 0.06 in the logits at n = 256 and 0.9 at n = 2048. That departure is in the
        measured probabilities, not in these slopes.

        Returns
        -------
        numpy.ndarray or None
            m_h/√d, shape (H,), float64; None for rotary Falcon.
        """
        if not model.config.alibi:
            return None
        from transformers.models.falcon.modeling_falcon import build_alibi_tensor

        keys = torch.ones(1, 2, dtype=torch.long)  # one sequence, key positions 0 and 1
        alibi = build_alibi_tensor(keys, self.num_heads(model), torch.float64)  # (H, 1, 2)
        return alibi[:, 0, 1].numpy() / math.sqrt(self.d_head(model))


class MptAdapter(Adapter):
    name = "mpt"

    def blocks(self, model):
        return list(model.transformer.blocks)

    def attention(self, block):
        return block.attn

    def mlp_output(self, block):
        return block.ffn.down_proj, None  # MptMLP adds the residual itself

    def qk(self, attn, args, kwargs):
        qkv = attn.Wqkv(_hidden(args, kwargs))
        if attn.clip_qkv:
            qkv = qkv.clamp(min=-attn.clip_qkv, max=attn.clip_qkv)
        q, k, _ = qkv.chunk(3, dim=2)
        return _heads(q, attn.n_heads, attn.head_dim), _heads(k, attn.n_heads, attn.head_dim)

    def slopes(self, model):
        # the model builds its bias with the method's default alibi_bias_max
        row = model.transformer.build_mpt_alibi_tensor(self.num_heads(model), 2)  # [-m_h, 0]
        return -row[:, 0, 0].double().cpu().numpy()

    def max_length(self, model):
        return int(model.config.max_seq_len)

    def num_heads(self, model):
        return int(model.config.n_heads)


_ADAPTERS = {
    a.name: a
    for a in (
        PosflowAdapter(),
        GPT2Adapter(),
        BloomAdapter(),
        FalconAdapter(),
        MptAdapter(),
    )
}


def adapter_for(model, *, probabilities: bool = True) -> Adapter:
    """The adapter of ``model`` (posflow LM or a HF causal LM chosen by ``config.model_type``).

    With ``probabilities`` (attention or value-norm kernels are wanted) a Hugging Face model
    must have been loaded with the eager attention, the only one that returns probabilities
    (the families recorded through the attention interface would not need it: their attention
    is switched to the recording function during the measurement, whatever it was; the rule is
    kept for one contract across families); λ_t, q·k and the gradient influence need no
    probabilities and work with any attention implementation."""
    from posflow.simulate.models.lm import LM

    if isinstance(model, LM):
        return _ADAPTERS["posflow"]
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if config is None or kind == "posflow":
        _refuse(kind, f" ({type(model).__name__})")
    check_architecture(config)
    impl = getattr(model.config, "_attn_implementation", "eager")
    if probabilities and impl not in (None, "eager"):
        raise ValueError(
            f"model runs the {impl!r} attention implementation, which hides attention "
            "probabilities; load it with attn_implementation='eager'"
        )
    if kind in LAYOUTS:
        return InterfaceAdapter(kind)
    return _ADAPTERS[kind]
