"""Gradient influence by plain torch autograd: the independent reference of
``posflow.simulate.models.measure``'s hooks (claims PB15, PB19).

:func:`plain_influence` differentiates p* — the largest next-token probability at the last
position, in float32 or better — with respect to the input embeddings (a leaf tensor passed as
``inputs_embeds=`` / ``embeds=``) and, with ``layers=True``, with respect to every block input
(``output_hidden_states[:L]`` of a Hugging Face model; for posflow's LM, the tensors its blocks
are called on, the blocks run here one after the other), in one ``torch.autograd.grad`` call.
"""

from __future__ import annotations

import numpy as np

__all__ = ["plain_influence"]


def plain_influence(model, ids, *, layers: bool = False) -> np.ndarray:
    """‖∂p*/∂e_j‖₂ (n,) of one window ``ids`` (n,), or with ``layers`` ‖∂p*/∂x_t[j]‖₂ (L, n) at
    every block input x_t (raw norms, not normalised). The model is left as it was found
    (training flag and ``requires_grad`` of every parameter restored)."""
    import torch

    x = torch.as_tensor(np.asarray(ids)).reshape(1, -1)
    hf = hasattr(model, "get_input_embeddings")
    flags = [p.requires_grad for p in model.parameters()]
    training = model.training
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        e = (model.get_input_embeddings() if hf else model.tok_emb)(x).detach()
        e.requires_grad_(True)
        targets = [e]
        if hf:
            out = model(inputs_embeds=e, output_hidden_states=layers)
            logits = out.logits
            if layers:
                targets = list(out.hidden_states[: model.config.num_hidden_layers])
        elif layers:
            targets, h = [], e
            for blk in model.blocks:
                blk.attn.scheme.see_tokens(None)
                targets.append(h)
                h = blk(h)
            logits = model.head(model.ln_f(h))
        else:
            logits = model(embeds=e)
        dt = torch.promote_types(logits.dtype, torch.float32)  # float32 or better, as measure
        top = torch.softmax(logits[0, -1].to(dt), dim=-1).max()
        grads = torch.autograd.grad(top, targets)
    finally:
        for p, f in zip(model.parameters(), flags, strict=True):
            p.requires_grad_(f)
        model.train(training)
    norms = np.stack([g[0].double().norm(dim=-1).numpy() for g in grads])
    return norms if layers else norms[0]
