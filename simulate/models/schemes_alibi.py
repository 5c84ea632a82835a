"""Accumulated random rotations plus ALiBi biases: the scheme [B] argues for but does not train.

[B]'s analysis (digest §2.5–2.6) splits length extrapolation into two controls: score-side
decorrelation of far keys (random accumulated rotations make far route products incoherent, so
far scores average out) and far-*mass* control (orthogonal transport never bounds the logit
λ = max‖q‖‖k‖/√d, so nothing stops M_L far keys from collecting mass; a distance penalty does).
``random_qk_alibi`` combines both (claim AT20, sub-claim ``alibi_rotations_flat``): the scores
of :class:`~posflow.simulate.models.schemes.RandomQK`, plus ALiBi's bias,

.. math:: \\ell_{ij} = \\frac{q_i^\\top R\\big(\\textstyle\\sum_{s=j}^{i-1}\\theta_s\\big)\\,k_j}
          {\\sqrt d} - m_h\\,(i - j),\\qquad \\theta_{s,b}\\sim\\mathrm{Unif}[-f_b, f_b],
          \\quad m_h = 2^{-8(h+1)/H}.

Importing this module registers the scheme into
:data:`posflow.simulate.models._scheme.SCHEMES` (schemes.py is left alone: its source is part of
the training-code hash of the cached preset models).
"""

from __future__ import annotations

import numpy as np
import torch

from posflow.simulate.kernels import alibi_slopes
from posflow.simulate.models._scheme import register_scheme
from posflow.simulate.models.schemes import RandomQK

__all__ = ["RandomQKAlibi"]


@register_scheme("random_qk_alibi")
class RandomQKAlibi(RandomQK):
    """Random accumulated Q/K rotations (θ ~ Unif[−f_b, f_b]) plus the ALiBi bias −m_h (i − j).

    Options: those of :class:`~posflow.simulate.models.schemes.RandomAngles` (``base``,
    ``seed``, ``eval_seed``) and ``slopes`` (H values; default
    :func:`posflow.simulate.kernels.alibi_slopes`). ``slopes()`` returns them, so the query-chunked
    evaluation adds the bias chunk by chunk. Raises ValueError for slopes that are not H finite
    numbers. Claim AT20.
    """

    def __init__(self, n_head, d_head, layer, base=10000.0, seed=0, eval_seed=1234, slopes=None):
        super().__init__(n_head, d_head, layer, base=base, seed=seed, eval_seed=eval_seed)
        m = alibi_slopes(n_head) if slopes is None else np.asarray(slopes, dtype=np.float64)
        if m.shape != (n_head,) or not np.isfinite(m).all():
            raise ValueError(f"slopes must be {n_head} finite numbers; got {slopes!r}")
        self.register_buffer("m", torch.tensor(m, dtype=torch.float32), persistent=False)

    def bias(self, n, device, dtype):
        i = torch.arange(n, device=device)
        dist = (i[:, None] - i[None, :]).to(dtype)  # (n, n), i − j
        return -self.m.to(device=device, dtype=dtype)[:, None, None] * dist  # (H, n, n)

    def slopes(self):
        return self.m.double().cpu().numpy()
