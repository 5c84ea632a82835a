"""The position-scheme interface of posflow's small LM and its registry (claims PB15, AT18, AT20).

A leaf module: :mod:`posflow.simulate.models.lm` (the model and the schemes NoPE, RoPE, ALiBi) and
:mod:`posflow.simulate.models.schemes` (the transport schemes of [B]) both build on it, and
neither imports the other's internals, so the two never form an import circle.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from posflow.conventions import rope_frequencies

__all__ = ["SCHEMES", "PositionScheme", "frequencies", "register_scheme"]

SCHEMES: dict[str, type[PositionScheme]] = {}


def register_scheme(name: str):
    """Class decorator adding a :class:`PositionScheme` subclass to ``SCHEMES[name]``.

    Sets ``cls.name = name``; registering a different class under a taken name raises
    ValueError, a non-subclass TypeError. Serves the models of claims PB15 and PB16.
    """

    def deco(cls):
        if not (isinstance(cls, type) and issubclass(cls, PositionScheme)):
            raise TypeError(f"scheme {name!r} must be a PositionScheme subclass")
        if name in SCHEMES and SCHEMES[name] is not cls:
            raise ValueError(f"scheme name {name!r} is already registered")
        cls.name = name
        SCHEMES[name] = cls
        return cls

    return deco


class PositionScheme(nn.Module):
    """How one attention layer sees positions: four hooks, each the identity by default.

    Attention computes, per layer, with q, k, v of shape (B, H, n, d) and x the normalised
    block input (B, n, D)::

        scheme.see_tokens(idx)                    # once per forward pass, by LM.forward
        q, k, v = scheme.qkv(q, k, v, x)          # e.g. rotate q, k (RoPE), transport v
        s       = scheme.scores(q, k, x)          # raw scores (B, H, n, n), default q kᵀ
        logits  = s / √d + scheme.bias(n, ...)    # additive (H, n, n) bias or None (ALiBi)
        y       = causal_softmax(logits) @ v      # (B, H, n, d)
        y       = scheme.output(y, x)             # e.g. rotate values into the query's frame

    ``slopes()`` returns ALiBi slopes in logit units when the bias is ``-m_h (i - j)`` (used
    by the rollout predictions of claim PB15), else None. Unknown options raise TypeError.
    """

    name = "base"

    def __init__(self, n_head: int, d_head: int, layer: int):
        super().__init__()
        self.n_head, self.d_head, self.layer = n_head, d_head, layer

    def see_tokens(self, idx) -> None:
        """The token ids (B, n) of the forward pass about to run, or None when embeddings are
        given instead; schemes whose angles depend on tokens keep them (learned angles)."""

    def qkv(self, q, k, v, x):
        return q, k, v

    def scores(self, q, k, x):
        return q @ k.transpose(-2, -1)  # (B, H, n, d) @ (B, H, d, n) -> (B, H, n, n)

    def bias(self, n: int, device, dtype):
        return None

    def output(self, y, x):
        return y

    def slopes(self) -> np.ndarray | None:
        return None


def frequencies(d_head: int, base: float = 10000.0) -> torch.Tensor:
    """RoPE frequencies f_b = base^{−2b/d}, b = 0 … d/2 − 1, float64, shape (d/2,) (AT18).

    :func:`posflow.conventions.rope_frequencies` as a tensor, so the LM's RoPE, its transport
    schemes and the NumPy transport of :mod:`posflow.simulate.transport` share one definition.
    Raises ValueError naming ``d_head`` (not an even integer ≥ 2) or ``base`` (not finite > 1).
    """
    if isinstance(d_head, bool) or not isinstance(d_head, int) or d_head < 2 or d_head % 2:
        raise ValueError(f"d_head must be an even integer >= 2; got {d_head!r}")
    return torch.from_numpy(rope_frequencies(d_head, base))
