"""Tiny random Hugging Face causal LMs, one per family (a few thousand parameters, float64).

``build(kind)`` returns the model in eval mode with N(0, 0.3²) weights (seeded); ``WINDOWS``
holds the keys a query sees in each layer at length ``n`` (None: every earlier key), written
from the configs below, not read from the models.
"""

from __future__ import annotations

import numpy as np
import torch
import transformers as T

V, n, W = 48, 12, 4  # vocabulary, sequence length, sliding window (< n)

_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
_SMALL = dict(hidden_size=16, intermediate_size=24, vocab_size=V, num_hidden_layers=2,
              num_attention_heads=4, max_position_embeddings=64)
_GQA = dict(_SMALL, num_key_value_heads=2)


def configs() -> dict:
    """{kind: config}; the kind is the model_type or a named variant of it."""
    # fmt: off
    return {
        "llama": T.LlamaConfig(**_GQA),
        "qwen2": T.Qwen2Config(**_GQA, use_sliding_window=True, sliding_window=W,
                               max_window_layers=1),
        "mistral": T.MistralConfig(**_GQA, sliding_window=W),
        "gemma3_text": T.Gemma3TextConfig(
            **dict(_GQA, num_hidden_layers=3), head_dim=8, sliding_window=W,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
            query_pre_attn_scalar=6,
            rope_parameters={"sliding_attention": dict(_ROPE),
                             "full_attention": {"rope_type": "default", "rope_theta": 1e6}},
        ),
        "gemma2": T.Gemma2Config(**_GQA, head_dim=8, sliding_window=W,
                                 attn_logit_softcapping=5.0, query_pre_attn_scalar=8),
        "gemma": T.GemmaConfig(**_GQA, head_dim=4),
        "gpt_neox": T.GPTNeoXConfig(**_SMALL, rotary_pct=0.5),
        "gpt_neox_sequential": T.GPTNeoXConfig(**_SMALL, use_parallel_residual=False),
        "phi3": T.Phi3Config(**_GQA, pad_token_id=0),
        "phi": T.PhiConfig(**_SMALL),
        "olmo2": T.Olmo2Config(**_GQA),
        "olmo": T.OlmoConfig(**_GQA),
        "qwen3": T.Qwen3Config(**_GQA, head_dim=4),
        "smollm3": T.SmolLM3Config(**_GQA, pad_token_id=0),
        "starcoder2": T.Starcoder2Config(**_GQA),
        "cohere": T.CohereConfig(**_GQA),
        "stablelm": T.StableLmConfig(**_GQA, use_parallel_residual=True),
        "gpt2": T.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=V, n_positions=32,
                             bos_token_id=None, eos_token_id=None),
        "bloom": T.BloomConfig(n_layer=2, n_head=2, hidden_size=16, vocab_size=V),
        "falcon": T.FalconConfig(num_hidden_layers=2, num_attention_heads=4, hidden_size=16,
                                 vocab_size=V),
        "mpt": T.MptConfig(n_layers=2, n_heads=2, d_model=16, vocab_size=V, max_seq_len=32),
    }
    # fmt: on


# keys a query sees per layer at length n (from the configs above)
WINDOWS = {
    "qwen2": (None, W),  # layers from max_window_layers on slide
    "mistral": (W, W),
    "gemma3_text": (W, None, W),
    "gemma2": (W, None),  # Gemma 2 alternates sliding, global
}
HAND = ("gpt2", "bloom", "falcon", "mpt")  # hand adapters: eager attention for probabilities


def build(kind: str, seed: int = 0, impl: str = "eager", std: float = 0.3):
    """The model (eager attention: measure wants it for probabilities), float64, eval mode."""
    cfg = configs()[kind]
    torch.manual_seed(seed)
    model = T.AutoModelForCausalLM.from_config(cfg, attn_implementation=impl)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=p.dtype) * std)
    return model.double().eval()


def ids(seed: int = 1, count: int = 3, length: int = n) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).integers(0, V, size=(count, length)))
