"""Recording attention through transformers' ``AttentionInterface`` (claims PB15, PB16).

:func:`recording_attention` is registered under the name :data:`NAME` in transformers'
``AttentionInterface`` (and ``eager_mask`` under the same name in its ``AttentionMaskInterface``,
so that every layer receives an explicit additive mask — sliding-window layers their band).
While a measurement runs, the model's configs are switched to :data:`NAME`; every attention
layer then calls

    p = softmax(s · q kᵀ  [→ c · tanh(· / c) with a logit softcap c]  + mask),   out = p v

with the q, k, v and ``scaling`` s the layer passes (q and k after RoPE and any QK-norm, keys
and values repeated to the H query heads), the softmax in float32 (as the families' eager
functions take it, also in a float64 model), and hands
(q, k, v, p, mask) to the recorder routed to that module. It computes what the families'
own eager attention computes; the model's default implementation (sdpa, flash) is restored
afterwards.

:class:`InterfaceAdapter` is the adapter of every family in
:data:`posflow.simulate.models._layouts.LAYOUTS`.
"""

from __future__ import annotations

import torch

from posflow.simulate.models._adapter_base import Adapter
from posflow.simulate.models._layouts import LAYOUTS

__all__ = ["NAME", "InterfaceAdapter", "recording_attention", "register"]

NAME = "posflow_recording"
_ROUTES: dict[int, tuple] = {}  # id(attention module) -> (sink, layer index)


def recording_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None, **kwargs
):
    """Eager attention that also reports (q, k, v, p, mask) of the layer, shapes (B, H, n, ·).

    Returns (out (B, n, H, d), p (B, H, n, n)) as transformers' attention functions do.
    Raises ValueError for attention sinks (``s_aux``), which no family in the table uses.
    """
    if kwargs.get("s_aux") is not None:
        raise ValueError("attention with learned sinks (s_aux) is not supported")
    H, Hkv = query.shape[1], key.shape[1]
    if H % Hkv:
        raise ValueError(f"{H} query heads do not share {Hkv} key/value heads evenly")
    k = key.repeat_interleave(H // Hkv, dim=1) if Hkv != H else key
    v = value.repeat_interleave(H // Hkv, dim=1) if Hkv != H else value
    s = query.shape[-1] ** -0.5 if scaling is None else scaling
    w = torch.matmul(query, k.transpose(-1, -2)) * s
    if softcap is not None:
        w = torch.tanh(w / softcap) * softcap
    if attention_mask is not None:
        mask = attention_mask[..., : k.shape[-2]]
        if mask.dtype == torch.bool:
            w = w.masked_fill(~mask, torch.finfo(w.dtype).min)
        else:
            w = w + mask
    p = torch.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)  # as the eager paths do
    p = torch.nn.functional.dropout(p, p=dropout, training=module.training)
    route = _ROUTES.get(id(module))
    if route is not None:
        sink, t = route
        sink(t, query, k, v, p, attention_mask)
    return torch.matmul(p, v).transpose(1, 2).contiguous(), p


def register() -> None:
    """Register :func:`recording_attention` and the eager mask under :data:`NAME` (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(NAME, recording_attention)
    AttentionMaskInterface.register(NAME, eager_mask)


class _Undo:
    """A handle whose ``remove()`` runs ``fn`` once (like a hook handle)."""

    def __init__(self, fn):
        self._fn = fn

    def remove(self):
        if self._fn is not None:
            self._fn()
            self._fn = None


def _configs(model) -> list:
    """Every distinct transformers config reachable from the model's modules (sub-configs too)."""
    from transformers import PretrainedConfig

    seen, todo = {}, [getattr(m, "config", None) for m in model.modules()]
    while todo:
        c = todo.pop()
        if isinstance(c, PretrainedConfig) and id(c) not in seen:
            seen[id(c)] = c
            todo += [getattr(c, key, None) for key in c.sub_configs]
    return list(seen.values())


class InterfaceAdapter(Adapter):
    """Adapter of a family in ``LAYOUTS``: probabilities, q·k and values come from
    :func:`recording_attention`; λ_t and the MLP update from the table's module names."""

    interface = True

    def __init__(self, kind: str):
        self.name = kind
        self.attn_name, self.update_name, self.mlp_name, self.out_name = LAYOUTS[kind]

    def blocks(self, model):
        base = model.base_model
        for attr in ("layers", "h", "blocks"):
            layers = getattr(base, attr, None)
            if isinstance(layers, torch.nn.ModuleList):
                return list(layers)
        raise ValueError(f"{type(model).__name__}: found no list of decoder layers")

    def attention(self, block):
        return getattr(block, self.attn_name)

    def attn_output(self, block):
        post_norm = self.update_name != self.attn_name
        return getattr(block, self.update_name), None if post_norm else 0

    def mlp_output(self, block):
        return getattr(block, self.mlp_name), None

    def value_source(self, block):
        return self.attention(block), None  # the values reach recording_attention

    def out_weight(self, block):
        """W_O (D, H·d); with a post norm, diag(γ) W_O, γ the norm's gain (its output on a
        vector of ones: the RMS factor 1/rms(·) is shared by a row and cancels when the
        value-norm rows are normalised)."""
        W = getattr(self.attention(block), self.out_name).weight
        if self.update_name == self.attn_name:
            return W
        with torch.no_grad():
            gain = getattr(block, self.update_name)(torch.ones_like(W[:, 0]))
        return gain[:, None] * W

    def route(self, model, blocks, sink):
        """Switch the model to :data:`NAME` and send each block's attention to ``sink(t, q, k,
        v, p, mask)``; the returned handle's ``remove()`` restores both."""
        register()
        configs = _configs(model)
        before = [c._attn_implementation_internal for c in configs]
        for c in configs:
            c._attn_implementation_internal = NAME
        keys = [id(self.attention(b)) for b in blocks]
        _ROUTES.update({key: (sink, t) for t, key in enumerate(keys)})

        def undo():
            for key in keys:
                _ROUTES.pop(key, None)
            for c, impl in zip(configs, before, strict=True):
                c._attn_implementation_internal = impl

        return _Undo(undo)

    def d_head(self, model) -> int:
        head_dim = getattr(model.config, "head_dim", None)
        return int(head_dim) if head_dim else super().d_head(model)
