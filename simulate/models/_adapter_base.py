"""The adapter interface (documented in :mod:`posflow.simulate.models._adapters`) and the tensor
helpers the adapters share; kept apart so that the interface-based adapter
(:mod:`posflow.simulate.models._interface`) and the hand adapters both build on it without an
import circle (claims PB15, PB16).
"""

from __future__ import annotations

__all__ = ["Adapter"]


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
    interface = False  # True: probabilities, q·k and values come from the attention interface

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

    def mlp_output(self, block):  # pragma: no cover - abstract
        raise NotImplementedError

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
