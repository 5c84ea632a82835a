"""Where each Hugging Face family adds its sub-layers to the residual stream (claims PB15, PB16).

The families here run their attention through transformers' ``AttentionInterface``, so the
attention probabilities, the post-RoPE (and post-QK-norm) q and k, the values, the mask with
each layer's sliding window and the module's ``scaling`` all reach one recording function
(:mod:`posflow.simulate.models._interface`). What differs between families is only where the
sub-layers meet the residual stream; for one decoder block, by attribute name:

* ``attention`` — the module that calls the attention interface;
* ``update`` — the module whose output is the attention update a_t added to the residual
  (the attention module itself, output[0], or the sandwich/post norm applied to its output:
  ``post_attention_layernorm`` in Gemma 2/3 and OLMo-2, whose blocks compute
  ``x + norm(attn(·))``; Llama-style blocks use that name for the pre-MLP norm instead);
* ``mlp`` — the module whose output is the MLP update m_t added to the residual (after its own
  post norm where there is one);
* ``out_proj`` — the output projection W_O inside ``attention`` (an ``nn.Linear``).

Every block computes x_{t+1} = x_t + a_t + m_t (sequential blocks feed the MLP x_t + a_t,
parallel ones — GPT-NeoX, Phi, Cohere, StableLM with ``use_parallel_residual`` — feed it x_t);
the tests check that identity for every family here.
"""

__all__ = ["LAYOUTS"]

LLAMA_LIKE = ("self_attn", "self_attn", "mlp", "o_proj")
SANDWICH = ("self_attn", "post_attention_layernorm", "post_feedforward_layernorm", "o_proj")

# model_type: (attention, update a_t, update m_t, W_O)
LAYOUTS = {
    "llama": LLAMA_LIKE,
    "mistral": LLAMA_LIKE,
    "qwen2": LLAMA_LIKE,
    "qwen3": LLAMA_LIKE,
    "smollm3": LLAMA_LIKE,
    "gemma": LLAMA_LIKE,
    "gemma2": SANDWICH,
    "gemma3_text": SANDWICH,
    "olmo": LLAMA_LIKE,
    "olmo2": ("self_attn", "post_attention_layernorm", "post_feedforward_layernorm", "o_proj"),
    "phi3": LLAMA_LIKE,
    "starcoder2": LLAMA_LIKE,
    "cohere": LLAMA_LIKE,
    "stablelm": LLAMA_LIKE,
    "phi": ("self_attn", "self_attn", "mlp", "dense"),
    "gpt_neox": ("attention", "attention", "mlp", "dense"),
}
