"""The attention edit behind :func:`posflow.simulate.models.sink_intervention.sink_intervention`
(issue 41, item 7; private).

:func:`move_sink` moves a share of each query row's attention on token 0 elsewhere;
:func:`intervening_attention`, registered under :data:`NAME` in transformers'
``AttentionInterface`` (with ``eager_mask`` under the same name, so every layer receives its
explicit causal band), computes the attention exactly as
:func:`posflow.simulate.models._interface.recording_attention` does — the project's eager
re-implementation, softmax in float32 — and, for the modules an :class:`Intervention` names,
replaces p by the edited p' before ``out = p' v``. posflow's own LM is edited by a forward hook
on its ``prob_probe`` (an identity module its probabilities pass through before ``att @ v``).
"""

from __future__ import annotations

import torch

from posflow.simulate.models._interface import _configs, recording_attention

__all__ = ["NAME", "TARGETS", "Intervention", "intervening_attention", "move_sink"]

NAME = "posflow_sink_intervention"
TARGETS = ("diagonal", "uniform", "drop")
_EDITS: dict[int, tuple] = {}  # id(attention module) -> (target, fraction, tally or None)


def move_sink(p, visible, target: str, fraction: float = 1.0):
    """Rows i ≥ 1 of ``p`` with ``m_i = fraction · p[..., i, 0]`` taken off token 0 and put on

    * ``"diagonal"`` — the query's own key: ``p'[i, i] = p[i, i] + m_i``;
    * ``"uniform"`` — the row's other visible keys ``V_i = {j ≥ 1 : visible[i, j]}`` evenly:
      ``p'[i, j] = p[i, j] + m_i / |V_i|`` for j ∈ V_i;
    * ``"drop"`` — nowhere (the row then sums to 1 − m_i: the sink's value term is removed).

    Row 0 (token 0 attends to itself alone) is left as it is. With ``fraction = 0`` the result
    equals ``p`` bitwise (p + 0).

    Parameters
    ----------
    p : Tensor, shape (..., n, n)
        Attention probabilities (causal rows).
    visible : Tensor of bool, shape broadcastable to p
        Which keys each query sees (its mask); only used by ``"uniform"``.
    target : {"diagonal", "uniform", "drop"}
    fraction : float in [0, 1]

    Returns
    -------
    Tensor, shape and dtype of ``p``; differentiable in p.
    """
    n = p.shape[-1]
    m = p[..., :, 0] * fraction
    m = torch.cat([torch.zeros_like(m[..., :1]), m[..., 1:]], dim=-1)  # (..., n), row 0 kept
    e0 = torch.zeros(n, dtype=p.dtype, device=p.device)
    e0[0] = 1.0
    take = m.unsqueeze(-1) * e0  # (..., n, n): m_i at column 0
    if target == "diagonal":
        put = torch.diag_embed(m)
    elif target == "uniform":
        keys = (visible & (torch.arange(n, device=p.device) > 0)).to(p.dtype)
        put = m.unsqueeze(-1) * keys / keys.sum(-1, keepdim=True).clamp_min(1.0)
    elif target == "drop":
        put = torch.zeros_like(take)
    else:
        raise ValueError(f"target must be one of {', '.join(TARGETS)}; got {target!r}")
    return p + (put - take)


def visible_keys(attention_mask, n: int, device) -> torch.Tensor:
    """Bool (B or 1, 1, n, n): which keys each query sees, from an additive or boolean mask
    (causal when there is none)."""
    if attention_mask is None:
        return torch.ones(n, n, dtype=torch.bool, device=device).tril()
    mask = attention_mask[..., :n, :n]
    if mask.dtype == torch.bool:
        return mask
    return mask > torch.finfo(mask.dtype).min / 2


def intervening_attention(
    module, query, key, value, attention_mask, scaling=None, dropout=0.0, softcap=None, **kwargs
):
    """:func:`recording_attention`, with p edited by :func:`move_sink` for the modules an
    :class:`Intervention` names. Returns (out (B, n, H, d), p' (B, H, n, n))."""
    out, p = recording_attention(
        module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
        softcap=softcap, **kwargs,
    )  # fmt: skip
    edit = _EDITS.get(id(module))
    if edit is None:
        return out, p
    n = p.shape[-1]
    if p.shape[-2] != n:
        raise ValueError("the sink intervention needs a full pass without cached keys")
    target, fraction, tally = edit
    visible = visible_keys(attention_mask, n, p.device)
    if tally is not None:
        tally(p, visible)
    q = move_sink(p, visible, target, fraction)
    H, Hkv = query.shape[1], value.shape[1]
    v = value.repeat_interleave(H // Hkv, dim=1) if Hkv != H else value
    return torch.matmul(q, v).transpose(1, 2).contiguous(), q


def register() -> None:
    """Register :func:`intervening_attention` and the eager mask under :data:`NAME`."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(NAME, intervening_attention)
    AttentionMaskInterface.register(NAME, eager_mask)


class Intervention:
    """While entered, the model's attention runs :func:`intervening_attention` (posflow's LM: a
    hook on ``prob_probe``); :meth:`set` chooses the layers, target and fraction of the next
    passes, and ``tally`` (optional) receives ``(t, p, visible)`` of every edited layer."""

    def __init__(self, model, adapter, blocks):
        self.model, self.adapter, self.blocks = model, adapter, blocks
        self.modules = [adapter.attention(b) for b in blocks]
        self.handles, self.configs, self.before = [], [], []

    def __enter__(self):
        if self.adapter.interface:
            register()
            self.configs = _configs(self.model)
            self.before = [c._attn_implementation_internal for c in self.configs]
            for c in self.configs:
                c._attn_implementation_internal = NAME
        else:  # posflow's LM
            for mod in self.modules:
                self.handles.append(mod.prob_probe.register_forward_hook(self._probe(mod)))
        return self

    def _probe(self, mod):
        def hook(_, args, p):
            edit = _EDITS.get(id(mod))
            if edit is None:
                return None
            target, fraction, tally = edit
            visible = visible_keys(None, p.shape[-1], p.device)
            if tally is not None:
                tally(p, visible)
            return move_sink(p, visible, target, fraction)

        return hook

    def set(self, layers, target: str = "diagonal", fraction: float = 1.0, tally=None) -> None:
        """Edit the attention of ``layers`` (indices) in the following passes."""
        self.clear()
        for t in layers:
            cb = None if tally is None else (lambda p, vis, t=t: tally(t, p, vis))
            _EDITS[id(self.modules[t])] = (target, fraction, cb)

    def clear(self) -> None:
        for mod in self.modules:
            _EDITS.pop(id(mod), None)

    def __exit__(self, *exc):
        self.clear()
        for h in self.handles:
            h.remove()
        self.handles.clear()
        for c, impl in zip(self.configs, self.before, strict=True):
            c._attn_implementation_internal = impl
        return False
