"""The torch position schemes against dense route products (paper [B], claim AT18; needs torch).

:func:`torch_identity_errors` runs each scheme's ``qkv → scores → softmax → output`` hooks exactly
as ``lm.Attention`` calls them (float64, eval mode) and compares the scores and outputs with
dense route products (:mod:`posflow.simulate.identities`) of the angles or Householder steps the
scheme itself produced.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from posflow.simulate.identities import dense_scores, dense_values, so2_dense
from posflow.simulate.models import lm  # registers the schemes

__all__ = ["run_hooks", "scheme_angles", "torch_identity_errors"]


def run_hooks(scheme, q, k, v, x):
    """The hooks in lm.Attention's order on batch 0.

    Parameters
    ----------
    scheme : PositionScheme
    q, k, v : torch.Tensor, shape (1, H, n, d)
    x : torch.Tensor, shape (1, n, H·d)

    Returns
    -------
    scores, weights, output : ndarray, shape (H, n, n), (H, n, n), (H, n, d)
    """
    n, d = q.shape[-2], q.shape[-1]
    future = torch.ones(n, n, dtype=torch.bool).triu(1)
    qr, kr, vr = scheme.qkv(q, k, v, x)
    s = scheme.scores(qr, kr, x)
    att = torch.softmax((s / math.sqrt(d)).masked_fill(future, float("-inf")), dim=-1)
    y = scheme.output(att @ vr, x)
    return (t[0].detach().numpy() for t in (s, att, y))


def scheme_angles(scheme, x, H: int, n: int, d: int):
    """The angles a scheme draws (eval mode: deterministic), (H, n, d/2), and its value angles
    (None unless the scheme rotates values)."""
    if scheme.name == "rope":
        t = -np.broadcast_to(scheme.freq.numpy(), (H, n, d // 2))
        return t, None
    t = scheme.angles(x)
    tv = scheme.value_angles(x, t) if scheme.rotate_v else None
    t = np.broadcast_to(t.detach().numpy().reshape(-1, n, d // 2)[-H:], (H, n, d // 2))
    if tv is not None:
        tv = np.broadcast_to(tv.detach().numpy().reshape(-1, n, d // 2)[-H:], (H, n, d // 2))
    return t, tv


def _path_error(scheme, qn, kn, x, s, H: int, d: int, low) -> float:
    w, beta = (t[0].detach().numpy() for t in scheme.steps(x))
    e = 0.0
    for h in range(H):
        Hs = np.eye(d) - beta[h][:, None, None] * w[h][:, :, None] * w[h][:, None, :]
        e = max(e, float(np.abs(s[h] - dense_scores(qn[h], kn[h], Hs, 1))[low].max()))
    return e


def torch_identity_errors(seed: int, n: int, H: int, d: int, schemes) -> tuple[dict, float]:
    """max |scheme hook − dense route product| for each torch scheme (float64, eval mode).

    Draws q, k, v (1, H, n, d), x (1, n, H·d) and token ids from ``torch.Generator`` seeded with
    ``seed``; learned schemes get random angle embeddings from the same generator. The schemes'
    own parameters are initialised by torch's global generator. Cost O(H·n³·d²).

    Parameters
    ----------
    seed : int
    n, H, d : int
        Tokens, heads and head dimension (d even).
    schemes : sequence of str
        Names in ``lm.SCHEMES`` (``"path"`` is checked on its scores only).

    Returns
    -------
    errors : dict of str to float
        ``torch_<name>_scores`` (and ``torch_<name>_output``) per scheme, then
        ``torch_zero_init_learned_vs_rope`` (learned_qk at zero initialisation vs lm.RoPE).
    scale : float
        max ‖q‖ · max ‖k‖ over heads and tokens.
    """
    gen = torch.Generator().manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64)

    q, k, v = randn(1, H, n, d), randn(1, H, n, d), randn(1, H, n, d)
    x = randn(1, n, H * d)
    idx = torch.randint(0, 256, (1, n), generator=gen)
    low = np.tril_indices(n)
    err = {}
    qn, kn, vn = q[0].numpy(), k[0].numpy(), v[0].numpy()
    for name in schemes:
        opts = {"d_model": H * d} if name == "path" else {}
        scheme = lm.SCHEMES[name](H, d, 0, **opts).double().eval()
        if name.startswith("learned"):
            with torch.no_grad():
                scheme.angle_emb.copy_(randn(*scheme.angle_emb.shape))
            scheme.see_tokens(idx)
        if name == "path":
            s, _, _ = run_hooks(scheme, q, k, v, x)
            err["torch_path_scores"] = _path_error(scheme, qn, kn, x, s, H, d, low)
            continue
        theta, theta_v = scheme_angles(scheme, x, H, n, d)
        s, att, y = run_hooks(scheme, q, k, v, x)
        e_s = e_o = 0.0
        for h in range(H):
            steps = so2_dense(theta[h])
            e_s = max(e_s, float(np.abs(s[h] - dense_scores(qn[h], kn[h], steps))[low].max()))
            steps_v = (
                so2_dense(theta_v[h])
                if theta_v is not None
                else np.broadcast_to(np.eye(d), (n, d, d))
            )
            e_o = max(e_o, float(np.abs(y[h] - dense_values(att[h], vn[h], steps_v)).max()))
        err[f"torch_{name}_scores"] = e_s
        err[f"torch_{name}_output"] = e_o
    # zero-initialised learned angles reproduce lm.RoPE's scores exactly
    zero = lm.SCHEMES["learned_qk"](H, d, 0).double().eval()
    zero.see_tokens(idx)
    s_zero, _, _ = run_hooks(zero, q, k, v, x)
    s_rope, _, _ = run_hooks(lm.RoPE(H, d, 0), q, k, v, x)
    err["torch_zero_init_learned_vs_rope"] = float(np.abs(s_zero - s_rope)[:, low[0], low[1]].max())
    norms = np.linalg.norm(qn, axis=-1).max() * np.linalg.norm(kn, axis=-1).max()
    return err, float(norms)
