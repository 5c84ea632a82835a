"""Where to hook a causal LM: one adapter per architecture (claims PB15, PB16).

An adapter tells :mod:`posflow.simulate.models.measure`, for decoder block t,

* ``blocks(model)`` — the decoder blocks in order; the block's first input is x_t;
* ``attn_output(block)`` — (module, index): that module's output (or ``output[index]``) is the
  attention sub-layer output a_t after its output projection, before the residual add;
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

Supported: posflow's own :class:`posflow.simulate.models.lm.LM` and the Hugging Face families GPT-2,
BLOOM, Falcon, MPT and Llama, chosen by ``config.model_type``.
"""

from __future__ import annotations

import math

import torch

__all__ = ["SUPPORTED", "Adapter", "adapter_for"]

SUPPORTED = ("posflow", "gpt2", "bloom", "falcon", "mpt", "llama")


def _hidden(args, kwargs):
    if args:
        return args[0]
    if "hidden_states" in kwargs:
        return kwargs["hidden_states"]
    raise ValueError("could not find the hidden states among the module's inputs")


def _heads(t, H, d):  # (B, n, H·d) -> (B, H, n, d)
    B, n, _ = t.shape
    return t.reshape(B, n, H, d).transpose(1, 2)


def _repeat(k, H):  # (B, Hkv, n, d) -> (B, H, n, d)
    return k if k.shape[1] == H else k.repeat_interleave(H // k.shape[1], dim=1)


class Adapter:
    """Base adapter; see the module docstring for the interface."""

    name = "base"

    def blocks(self, model):  # pragma: no cover - abstract
        raise NotImplementedError

    def prepare(self, model) -> list:
        """Hooks that make the measured pass compute what the model computes (default none)."""
        return []

    def attention(self, block):  # pragma: no cover - abstract
        raise NotImplementedError

    def attn_output(self, block):
        return self.attention(block), 0

    def probs(self, block):
        return self.attention(block), 1

    def qk_source(self, block):
        return self.attention(block), self.qk, "pre"

    def qk(self, attn, args, kwargs):  # pragma: no cover - abstract
        raise NotImplementedError

    def slopes(self, model):
        return None

    def value_source(self, block):
        """(module, fn) giving the value vectors, or None (no value-norm adapter)."""
        return None

    def out_weight(self, block):  # pragma: no cover - only called after value_source
        raise NotImplementedError

    def num_heads(self, model) -> int:
        return int(model.config.num_attention_heads)

    def d_head(self, model) -> int:
        return int(model.config.hidden_size) // self.num_heads(model)

    def max_length(self, model) -> int | None:
        return None


class PosflowAdapter(Adapter):
    name = "posflow"

    def blocks(self, model):
        return list(model.blocks)

    def attention(self, block):
        return block.attn

    def attn_output(self, block):
        return block.attn, None

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

    def qk(self, attn, args, kwargs):
        q, k, _ = attn._reshape(attn.query_key_value(_hidden(args, kwargs)))
        return q, k

    def slopes(self, model):
        from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

        return _get_alibi_slopes(self.num_heads(model), torch.device("cpu")).double().numpy()

    def num_heads(self, model):
        return int(model.config.n_head)


class FalconAdapter(Adapter):
    name = "falcon"

    def blocks(self, model):
        return list(model.transformer.h)

    def attention(self, block):
        return block.self_attention

    def qk(self, attn, args, kwargs):
        q, k, _ = attn._split_heads(attn.query_key_value(_hidden(args, kwargs)))
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, n, d), (B, Hkv, n, d)
        if kwargs.get("alibi") is None:
            from transformers.models.falcon.modeling_falcon import apply_rotary_pos_emb

            cos, sin = kwargs["position_embeddings"]
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q, _repeat(k, attn.num_heads)

    def prepare(self, model):
        # Eager Falcon with ALiBi (transformers 5.x) adds the bias twice: to q·k before the
        # 1/√d scaling and again through the additive mask, into which the model folds
        # alibi/√d. The sdpa path, which the model otherwise runs, adds it once. Zero the
        # explicit copy whenever the mask already carries the bias, so that the eager pass
        # measured here computes what the model computes.
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
        if not model.config.alibi:
            return None
        from transformers.models.bloom.modeling_bloom import _get_alibi_slopes

        m = _get_alibi_slopes(self.num_heads(model), torch.device("cpu")).double().numpy()
        return m / math.sqrt(self.d_head(model))  # added as alibi/√d to the scaled logits


class MptAdapter(Adapter):
    name = "mpt"

    def blocks(self, model):
        return list(model.transformer.blocks)

    def attention(self, block):
        return block.attn

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


class LlamaAdapter(Adapter):
    name = "llama"

    def blocks(self, model):
        return list(model.model.layers)

    def attention(self, block):
        return block.self_attn

    def qk(self, attn, args, kwargs):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        h = _hidden(args, kwargs)
        d = attn.head_dim
        q = _heads(attn.q_proj(h), attn.q_proj.out_features // d, d)
        k = _heads(attn.k_proj(h), attn.k_proj.out_features // d, d)
        cos, sin = kwargs["position_embeddings"]
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        return q, _repeat(k, q.shape[1])

    def value_source(self, block):
        attn = block.self_attn
        d = attn.head_dim
        H = attn.q_proj.out_features // d

        def fn(mod, args, out):
            return _repeat(_heads(out, out.shape[-1] // d, d), H)

        return attn.v_proj, fn

    def out_weight(self, block):
        return block.self_attn.o_proj.weight

    def d_head(self, model):
        return int(getattr(model.config, "head_dim", None) or super().d_head(model))


_ADAPTERS = {
    a.name: a
    for a in (
        PosflowAdapter(),
        GPT2Adapter(),
        BloomAdapter(),
        FalconAdapter(),
        MptAdapter(),
        LlamaAdapter(),
    )
}


def adapter_for(model, *, probabilities: bool = True) -> Adapter:
    """The adapter of ``model`` (posflow LM or a HF causal LM chosen by ``config.model_type``).

    With ``probabilities`` (attention or value-norm kernels are wanted) a Hugging Face model
    must run the eager attention, the only one that returns probabilities; λ_t, q·k and the
    gradient influence need no probabilities and work with any attention implementation."""
    from posflow.simulate.models.lm import LM

    if isinstance(model, LM):
        return _ADAPTERS["posflow"]
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module; got {type(model).__name__}")
    kind = getattr(getattr(model, "config", None), "model_type", None)
    if kind not in _ADAPTERS or kind == "posflow":
        raise ValueError(
            f"unsupported architecture {kind!r} ({type(model).__name__}); supported: "
            "posflow LM and Hugging Face gpt2, bloom, falcon, mpt, llama"
        )
    if kind == "gpt2" and getattr(model.config, "add_cross_attention", False):
        raise ValueError("unsupported architecture: gpt2 with cross-attention")
    impl = getattr(model.config, "_attn_implementation", "eager")
    if probabilities and impl not in (None, "eager"):
        raise ValueError(
            f"model runs the {impl!r} attention implementation, which hides attention "
            "probabilities; load it with attn_implementation='eager'"
        )
    return _ADAPTERS[kind]
