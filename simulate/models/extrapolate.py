"""Query-chunked attention: the forward pass of a long sequence in O(chunk·L) memory (AT20).

:func:`chunked_logits` computes ``model(idx)`` of posflow's LM
(:class:`~posflow.simulate.models.lm.LM`, any position scheme) with attention evaluated
``chunk`` queries at a time, so scoring a length L needs O(chunk·L) memory per head instead of
O(L²). The multi-seed train-short/test-long runner
:mod:`posflow.simulate.models.extrapolate_seeds` scores every length with it.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch.nn import functional as F

from posflow.simulate.models.lm import LM, PositionScheme

__all__ = ["chunked_logits"]


def _pos_int(v, name):
    if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
        raise ValueError(f"{name} must be a positive integer; got {v!r}")
    return int(v)


def _bias_chunk(scheme: PositionScheme, a: int, b: int, n: int, device, dtype):
    if hasattr(scheme, "bias_chunk"):
        return scheme.bias_chunk(a, b, device, dtype)
    if type(scheme).bias is PositionScheme.bias:
        return None
    m = scheme.slopes()
    if m is not None:  # ALiBi: -m_h (i - j)
        i = torch.arange(a, b, device=device)[:, None]
        j = torch.arange(b, device=device)[None, :]
        mt = torch.as_tensor(m, device=device, dtype=dtype)
        return -mt[:, None, None] * (i - j).to(dtype)
    return scheme.bias(n, device, dtype)[:, a:b, :b]  # generic fallback: O(n²) memory


def _attention(attn, x, chunk: int):
    B, n, D = x.shape
    H, d = attn.n_head, attn.d_head
    scheme = attn.scheme
    q, k, v = attn.qkv_proj(x).split(D, dim=2)
    q, k, v = (t.view(B, n, H, d).transpose(1, 2) for t in (q, k, v))
    q, k, v = scheme.qkv(q, k, v, x)
    custom = type(scheme).scores is not PositionScheme.scores
    if custom and not hasattr(scheme, "scores_chunk"):
        raise ValueError(f"scheme {scheme.name!r} overrides scores() without scores_chunk()")
    ys = []
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        qc = q[:, :, a:b]
        s = scheme.scores_chunk(qc, k, x, a) if custom else qc @ k[:, :, :b].transpose(-2, -1)
        logits = s / math.sqrt(d)
        bias = _bias_chunk(scheme, a, b, n, x.device, logits.dtype)
        if bias is not None:
            logits = logits + bias
        future = (
            torch.arange(b, device=x.device)[None, :] > torch.arange(a, b, device=x.device)[:, None]
        )
        att = F.softmax(logits.masked_fill(future, float("-inf")), dim=-1)
        ys.append(att @ v[:, :, :b])  # (B, H, c, d)
    y = scheme.output(torch.cat(ys, dim=2), x)
    return attn.out_proj(y.transpose(1, 2).reshape(B, n, D))


@torch.no_grad()
def chunked_logits(model: LM, idx: torch.Tensor, chunk: int = 512) -> torch.Tensor:
    """``model(idx)`` with attention computed ``chunk`` queries at a time (claim AT20).

    Same numbers as the plain forward pass (up to float rounding); memory O(B·H·chunk·n) for
    the scores instead of O(B·H·n²). idx: (B, n) LongTensor; returns logits (B, n, V).
    Cost O(L·(B·n·D² + B·H·n²·d)), as the plain forward pass.
    """
    if not isinstance(model, LM):
        raise TypeError(f"model must be a posflow LM; got {type(model).__name__}")
    chunk = _pos_int(chunk, "chunk")
    for blk in model.blocks:
        blk.attn.scheme.see_tokens(idx)
    x = model.tok_emb(idx)
    for blk in model.blocks:
        x = x + _attention(blk.attn, blk.ln1(x), chunk)
        x = x + blk.mlp(blk.ln2(x))
    return model.head(model.ln_f(x))
