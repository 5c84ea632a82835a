"""A small decoder-only language model with pluggable position schemes (claims PB15, PB16).

Read top to bottom: the three schemes NoPE, RoPE and ALiBi (on the :class:`PositionScheme`
interface and registry of :mod:`posflow.simulate.models._scheme`), then :class:`Attention`,
:class:`Block` and :class:`LM`. Shapes use B = batch, n = tokens, D = ``d_model``, H = heads,
d = D / H, V = vocabulary.

One block (pre-LayerNorm, as GPT-2, BLOOM, MPT and Llama):

.. math::
    h = x + a,\\quad a = \\mathrm{Attn}(\\mathrm{LN}_1(x)),\\qquad
    y = h + \\mathrm{MLP}(\\mathrm{LN}_2(h))

with attention logits ``(q·k) / √d + bias`` and a causal softmax. ``x`` and ``a`` are what
[A]'s mixing coefficient λ_t = E‖a‖/(‖x‖+‖a‖) compares (claim PB16).

Adding a position scheme: subclass :class:`PositionScheme` in any module, override the hooks
it needs and decorate it with ``@register_scheme("name")``; ``LMConfig(scheme="name",
scheme_options={...})`` then builds one instance per layer. Nothing in this file changes.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from posflow.simulate.kernels import alibi_slopes
from posflow.simulate.models import schemes as _transport_schemes  # noqa: F401  (registers [B]'s)
from posflow.simulate.models._scheme import SCHEMES, PositionScheme, frequencies, register_scheme

__all__ = [
    "LM",
    "SCHEMES",
    "Alibi",
    "Attention",
    "Block",
    "LMConfig",
    "NoPE",
    "PositionScheme",
    "RoPE",
    "make_scheme",
    "register_scheme",
]

@register_scheme("nope")
class NoPE(PositionScheme):
    """No position information: order enters only through the causal mask."""


@register_scheme("rope")
class RoPE(PositionScheme):
    """Rotary embedding: rotate pair (k, k + d/2) of q and k at position i by i·base^{-2k/d}."""

    def __init__(self, n_head, d_head, layer, base: float = 10000.0):
        super().__init__(n_head, d_head, layer)
        if d_head % 2:
            raise ValueError(f"rope needs an even head dimension; got d_head = {d_head}")
        self.base = float(base)
        self.freq = frequencies(d_head, base)  # (d/2,) float64; a plain tensor, not a buffer

    def _rotate(self, t):
        n, half = t.shape[-2], self.d_head // 2
        freq = self.freq.to(t.device)
        ang = torch.arange(n, device=t.device, dtype=torch.float64)[:, None] * freq  # (n, d/2)
        cos, sin = ang.cos().to(t.dtype), ang.sin().to(t.dtype)
        t1, t2 = t[..., :half], t[..., half:]  # (B, H, n, d/2) each
        return torch.cat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], dim=-1)

    def qkv(self, q, k, v, x):
        return self._rotate(q), self._rotate(k), v


@register_scheme("alibi")
class Alibi(PositionScheme):
    """ALiBi: add ``-m_h (i - j)`` to the logits of head h (after the 1/√d scaling).

    ``slopes`` (H values) default to ``2^{-8(h+1)/H}``
    (:func:`posflow.simulate.kernels.alibi_slopes`).
    """

    def __init__(self, n_head, d_head, layer, slopes=None):
        super().__init__(n_head, d_head, layer)
        m = alibi_slopes(n_head) if slopes is None else np.asarray(slopes, dtype=np.float64)
        if m.shape != (n_head,) or not np.isfinite(m).all():
            raise ValueError(f"alibi slopes must be {n_head} finite numbers; got {slopes!r}")
        self.register_buffer("m", torch.tensor(m, dtype=torch.float32), persistent=False)

    def bias(self, n, device, dtype):
        i = torch.arange(n, device=device)
        dist = (i[:, None] - i[None, :]).to(dtype)  # (n, n), i - j
        return -self.m.to(device=device, dtype=dtype)[:, None, None] * dist  # (H, n, n)

    def slopes(self):
        return self.m.double().cpu().numpy()


def make_scheme(config: LMConfig, layer: int) -> PositionScheme:
    """The position scheme of layer ``layer``: ``SCHEMES[config.scheme](H, d, layer, **opts)``.

    Unknown options raise TypeError naming ``scheme_options`` (claims PB15, PB16).
    """
    cls = SCHEMES[config.scheme]
    try:
        return cls(config.n_head, config.d_model // config.n_head, layer, **config.scheme_options)
    except TypeError as exc:
        raise TypeError(f"scheme_options for {config.scheme!r}: {exc}") from exc


# --------------------------------------------------------------------------------------------
# The model


@dataclass
class LMConfig:
    """Sizes and position scheme of :class:`LM` (vocabulary 256 = bytes by default)."""

    vocab_size: int = 256
    n_layer: int = 4
    n_head: int = 4
    d_model: int = 128
    mlp_ratio: int = 4
    scheme: str = "alibi"
    scheme_options: dict = field(default_factory=dict)

    def __post_init__(self):
        for name in ("vocab_size", "n_layer", "n_head", "d_model", "mlp_ratio"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
                raise ValueError(f"{name} must be a positive integer; got {v!r}")
        if self.d_model % self.n_head:
            raise ValueError(
                f"d_model must be divisible by n_head; got d_model = {self.d_model}, "
                f"n_head = {self.n_head}"
            )
        if self.scheme not in SCHEMES:
            raise ValueError(
                f"scheme must be one of {', '.join(sorted(SCHEMES))}; got {self.scheme!r}"
            )
        self.scheme_options = dict(self.scheme_options)

    def as_dict(self) -> dict:
        return asdict(self)


class Attention(nn.Module):
    """Causal multi-head self-attention; ``qk_probe``/``prob_probe`` are hook points."""

    def __init__(self, config: LMConfig, layer: int):
        super().__init__()
        D, H = config.d_model, config.n_head
        self.n_head, self.d_head = H, D // H
        self.qkv_proj = nn.Linear(D, 3 * D, bias=False)
        self.out_proj = nn.Linear(D, D, bias=False)
        self.scheme = make_scheme(config, layer)
        self.qk_probe = nn.Identity()  # sees the raw scores q·k, (B, H, n, n), unscaled
        self.prob_probe = nn.Identity()  # sees the attention probabilities, (B, H, n, n)

    def forward(self, x):  # x: (B, n, D), the normalised block input
        B, n, D = x.shape
        H, d = self.n_head, self.d_head
        q, k, v = self.qkv_proj(x).split(D, dim=2)  # 3 × (B, n, D)
        q, k, v = (t.view(B, n, H, d).transpose(1, 2) for t in (q, k, v))  # 3 × (B, H, n, d)
        q, k, v = self.scheme.qkv(q, k, v, x)
        s = self.qk_probe(self.scheme.scores(q, k, x))  # (B, H, n, n)
        logits = s / math.sqrt(d)
        bias = self.scheme.bias(n, x.device, logits.dtype)  # (H, n, n) or None
        if bias is not None:
            logits = logits + bias
        future = torch.ones(n, n, dtype=torch.bool, device=x.device).triu(1)  # j > i
        logits = logits.masked_fill(future, float("-inf"))
        att = self.prob_probe(F.softmax(logits, dim=-1))  # (B, H, n, n), rows sum to 1
        y = self.scheme.output(att @ v, x)  # (B, H, n, d)
        y = y.transpose(1, 2).reshape(B, n, D)  # (B, n, D)
        return self.out_proj(y)  # a_t: (B, n, D), before the residual add


class Block(nn.Module):
    """Pre-LayerNorm block: ``x + attn(ln1(x))``, then ``+ mlp(ln2(·))``."""

    def __init__(self, config: LMConfig, layer: int):
        super().__init__()
        D = config.d_model
        self.ln1 = nn.LayerNorm(D)
        self.attn = Attention(config, layer)
        self.ln2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(
            nn.Linear(D, config.mlp_ratio * D, bias=False),
            nn.GELU(),
            nn.Linear(config.mlp_ratio * D, D, bias=False),
        )

    def forward(self, x):  # x: (B, n, D)
        x = x + self.attn(self.ln1(x))  # residual around attention
        return x + self.mlp(self.ln2(x))  # residual around the MLP


class LM(nn.Module):
    """Token embedding (tied with the output head), blocks, final LayerNorm, logits."""

    def __init__(self, config: LMConfig, seed: int = 0):
        super().__init__()
        if not isinstance(config, LMConfig):
            raise TypeError(f"config must be an LMConfig; got {type(config).__name__}")
        self.config = config
        D = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, D)
        self.blocks = nn.ModuleList(Block(config, t) for t in range(config.n_layer))
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, config.vocab_size, bias=False)
        self.head.weight = self.tok_emb.weight  # weight tying
        self._init_weights(seed)

    def _init_weights(self, seed: int) -> None:
        # GPT-2 style: N(0, 0.02), output projections scaled by 1/√(2L); own generator.
        g = torch.Generator().manual_seed(int(seed))
        std_out = 0.02 / math.sqrt(2 * self.config.n_layer)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                std = std_out if name.endswith(("out_proj.weight", "mlp.2.weight")) else 0.02
                with torch.no_grad():
                    p.copy_(torch.randn(p.shape, generator=g) * std)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx=None, *, embeds=None):
        """Next-token logits of the causal LM (claims PB15, PB16).

        Parameters
        ----------
        idx : LongTensor, shape (B, n), optional
            Token ids in [0, V).
        embeds : Tensor, shape (B, n, D), optional
            Input embeddings instead of ids (what gradient influence differentiates).

        Returns
        -------
        Tensor, shape (B, n, V)
            Cost O(L·(B·n·D² + B·H·n²·d)).
        """
        if (idx is None) == (embeds is None):
            raise ValueError("give exactly one of idx and embeds")
        for block in self.blocks:
            block.attn.scheme.see_tokens(idx)  # None when embeddings are given
        x = self.tok_emb(idx) if embeds is None else embeds  # (B, n, D)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))  # (B, n, V)

    def loss(self, idx, targets):
        """Mean next-token cross-entropy ``-(1/Bn) Σ log softmax(logits)[target]`` in nats.

        ``idx`` and ``targets`` are LongTensors of shape (B, n); returns a scalar tensor.
        """
        logits = self(idx)
        return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
