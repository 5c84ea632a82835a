"""Transport position schemes of [B] for posflow's small LM (claims AT18, AT20).

Importing this module (done by :mod:`posflow.simulate.models.lm`) registers, into
:data:`posflow.simulate.models._scheme.SCHEMES`:

* ``random_qk`` / ``random_qkv`` — accumulated random SO(2) angles θ_t,b ~ Unif[−f_b, f_b],
  independent per layer and head, resampled on every training forward pass; ``_qkv`` also
  rotates the values by independent angles ψ and the output back by −ψ_i;
* ``random_pos_qk`` / ``random_pos_qkv`` — the positive-mean ablation θ ~ Unif[0, 2 f_b];
* ``learned_qk`` / ``learned_qkv`` — token-dependent angles θ_t = π·tanh(E_ℓ[x_t]) − f_b with a
  zero-initialised per-layer embedding E_ℓ (V uses the same angles in ``_qkv``);
* ``path`` — Householder (PaTH-style) transport H_t = I − β_t w_t w_tᵀ, w_t = unit(W_w x_t),
  β_t = 2·sigmoid(W_β x_t), scored by the chunked UT-transform algorithm
  (:func:`path_scores` with ``chunk``; its plain reverse sweep, ``chunk=None``, is the reference).

Angles accumulate by suffix sums φ_t = Σ_{s ≥ t} θ_s in float64 (flip → cumsum → flip, as in
[B]'s code); rotating q_i by R(φ_i) and k_j by R(φ_j) gives the route score
q_iᵀ R(Σ_{s=j}^{i−1} θ_s) k_j (route ``from_source`` of :mod:`posflow.simulate.transport`). With θ ≡
−f_b this is exactly lm.RoPE's score, which is why zero-initialised learned angles reproduce RoPE.

Evaluation of random schemes: in ``eval()`` mode the angles are drawn from a generator seeded
by ``(eval_seed, layer, n)``, so a perplexity is reproducible; in training they come from a
per-layer generator seeded by ``(seed, layer)`` and advanced every forward pass.

Token ids reach ``learned_*`` schemes through the interface's ``see_tokens`` hook, called by
``LM.forward``; :meth:`Path.scores_chunk` evaluates a block of queries for the query-chunked
evaluation of :func:`posflow.simulate.models.extrapolate.chunked_logits`.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from posflow.simulate._arrays import check_int
from posflow.simulate._householder import path_score_rows
from posflow.simulate.models._scheme import PositionScheme, frequencies, register_scheme

__all__ = [
    "TRANSPORT_SCHEMES",
    "LearnedAngles",
    "Path",
    "RandomAngles",
    "frequencies",
    "path_scores",
    "rotate_half",
    "suffix_sum",
]

TRANSPORT_SCHEMES = (
    "random_qk",
    "random_qkv",
    "random_pos_qk",
    "random_pos_qkv",
    "learned_qk",
    "learned_qkv",
    "path",
)


def suffix_sum(theta: torch.Tensor) -> torch.Tensor:
    """φ_t = Σ_{s ≥ t} θ_s along the position axis (−2), in float64 (flip → cumsum → flip).

    theta: (..., n, d/2). Returns float64 of the same shape. Cost O(size). Claim AT18.
    """
    t = theta.to(torch.float64)
    return t.flip(-2).cumsum(-2).flip(-2)


def rotate_half(t: torch.Tensor, phi: torch.Tensor) -> torch.Tensor:
    """Rotate pair (b, b + d/2) of ``t`` by φ_b: [t1 cos φ − t2 sin φ, t1 sin φ + t2 cos φ].

    t: (..., n, d); phi: broadcastable to (..., n, d/2), any float dtype (cos/sin are taken in
    the dtype of phi, then cast to t's). The pairing of lm.RoPE ("half"). Claim AT18.
    """
    half = t.shape[-1] // 2
    cos, sin = phi.cos().to(t.dtype), phi.sin().to(t.dtype)
    t1, t2 = t[..., :half], t[..., half:]
    return torch.cat([t1 * cos - t2 * sin, t1 * sin + t2 * cos], dim=-1)


class _Accumulated(PositionScheme):
    """Shared machinery: per-position angles θ → suffix sums φ → rotate q, k (and v)."""

    rotate_v = False

    def __init__(self, n_head, d_head, layer, base: float = 10000.0):
        super().__init__(n_head, d_head, layer)
        self.register_buffer("freq", frequencies(d_head, base), persistent=False)
        self._psi = None

    def angles(self, x) -> torch.Tensor:  # (…, n, d/2), broadcastable to (B, H, n, d/2)
        raise NotImplementedError

    def value_angles(self, x, theta) -> torch.Tensor:
        return theta

    def qkv(self, q, k, v, x):
        theta = self.angles(x)
        phi = suffix_sum(theta)
        q, k = rotate_half(q, phi), rotate_half(k, phi)
        if self.rotate_v:
            psi = suffix_sum(self.value_angles(x, theta))
            self._psi = psi
            v = rotate_half(v, psi)
        return q, k, v

    def output(self, y, x):
        if not self.rotate_v:
            return y
        psi, self._psi = self._psi, None
        if psi is None:
            raise ValueError("output() called before qkv(): no value angles to undo")
        return rotate_half(y, -psi)


class RandomAngles(_Accumulated):
    """θ_t,b ~ Unif[lo·f_b, hi·f_b] per head, resampled every forward pass (claims AT18, AT20).

    Options: ``base`` (10⁴), ``seed`` (training generator, with the layer), ``eval_seed``
    (evaluation angles, seeded by (eval_seed, layer, n)), ``positive`` (Unif[0, 2f_b]).
    """

    positive = False

    def __init__(self, n_head, d_head, layer, base=10000.0, seed: int = 0, eval_seed: int = 1234):
        super().__init__(n_head, d_head, layer, base)
        for name, v in (("seed", seed), ("eval_seed", eval_seed)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"{name} must be a nonnegative integer; got {v!r}")
        self.seed, self.eval_seed = seed, eval_seed
        self._rng = np.random.default_rng([seed, layer])

    def draw(self, n: int, rng: np.random.Generator) -> torch.Tensor:
        """One draw of θ, float64 (H, n, d/2): f_b·Unif[−1, 1] (or f_b·Unif[0, 2])."""
        u = rng.uniform(0.0, 2.0, size=(self.n_head, n, self.d_head // 2))
        if not self.positive:
            u = u - 1.0
        return torch.from_numpy(u) * self.freq.cpu()

    def angles(self, x):
        n = x.shape[-2]
        rng = self._rng if self.training else np.random.default_rng([self.eval_seed, self.layer, n])
        theta = self.draw(n, rng).to(x.device)
        if self.rotate_v:  # independent value angles, drawn from the same stream
            self._v_theta = self.draw(n, rng).to(x.device)
        return theta

    def value_angles(self, x, theta):
        out, self._v_theta = self._v_theta, None
        return out


@register_scheme("random_qk")
class RandomQK(RandomAngles):
    """Random accumulated rotations on Q and K (θ ~ Unif[−f_b, f_b])."""


@register_scheme("random_qkv")
class RandomQKV(RandomAngles):
    """Random accumulated rotations on Q, K and (independent angles) V."""

    rotate_v = True


@register_scheme("random_pos_qk")
class RandomPosQK(RandomAngles):
    """Positive-mean ablation on Q and K: θ ~ Unif[0, 2 f_b]."""

    positive = True


@register_scheme("random_pos_qkv")
class RandomPosQKV(RandomAngles):
    """Positive-mean ablation on Q, K and V: θ, ψ ~ Unif[0, 2 f_b]."""

    positive = True
    rotate_v = True


class LearnedAngles(_Accumulated):
    """θ_t = π·tanh(E_ℓ[x_t]) − f_b, E_ℓ a zero-initialised (V, H·d/2) embedding (AT18, AT20).

    Token ids arrive through :meth:`see_tokens` (called by ``LM.forward``); calling the scheme
    without them raises ValueError. Options: ``base``, ``vocab_size`` (256).
    """

    def __init__(self, n_head, d_head, layer, base=10000.0, vocab_size: int = 256):
        super().__init__(n_head, d_head, layer, base)
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size must be a positive integer; got {vocab_size!r}")
        # a 3-dimensional parameter: lm.LM._init_weights re-draws every 2-dimensional one
        self.angle_emb = nn.Parameter(torch.zeros(1, vocab_size, n_head * (d_head // 2)))
        self.tokens = None

    def see_tokens(self, idx) -> None:
        self.tokens = idx  # (B, n) LongTensor, or None when the LM is given embeddings

    def angles(self, x):
        if self.tokens is None or self.tokens.shape != x.shape[:2]:
            raise ValueError(
                "learned schemes need the token ids: call the LM with idx (not embeds), or "
                "scheme.see_tokens(idx) before calling the scheme directly"
            )
        B, n = self.tokens.shape
        e = self.angle_emb[0][self.tokens]  # (B, n, H·d/2)
        e = e.view(B, n, self.n_head, self.d_head // 2).transpose(1, 2)  # (B, H, n, d/2)
        return math.pi * torch.tanh(e.to(torch.float64)) - self.freq


@register_scheme("learned_qk")
class LearnedQK(LearnedAngles):
    """Learned token-dependent accumulated rotations on Q and K."""


@register_scheme("learned_qkv")
class LearnedQKV(LearnedAngles):
    """Learned token-dependent accumulated rotations on Q, K and V (same angles for V)."""

    rotate_v = True


def path_scores(q, k, w, beta, start: int = 0, chunk: int | None = None) -> torch.Tensor:
    """Householder route scores s_ij = q_iᵀ H_i ⋯ H_{j+1} k_j, H_t = I − β_t w_t w_tᵀ (AT18).

    Route ``path`` of :func:`posflow.simulate.transport.householder_scores`.

    ``chunk=None`` (the plain reference): as H_t is symmetric, s_ij = u_ij·k_j with
    u = H_{j+1} ⋯ H_i q_i, built by one reverse sweep t = m−1 … 0 that records u·k_t, then
    applies H_t to the queries at positions i ≥ t; cost O(B·H·c·m·d) with m sequential steps.

    ``chunk=C`` (what :class:`Path` uses): the chunked compact-WY / UT-transform algorithm of
    :func:`posflow.simulate.transport.householder_route_scores`
    (:func:`posflow.simulate._householder.path_score_rows`), differentiable, in the inputs'
    dtype; cost O(B·H·(c·m·d + m·(C + 256)·d + m·d²)) with ⌈m/C⌉ + 8 sequential lags. Both
    agree to rounding (≲ (⌈m/C⌉ + 1)·(2d + 4C²)·u·‖q‖‖k‖ apart in float64).

    Parameters
    ----------
    q : (B, H, c, d) queries at positions start … start + c − 1
    k, w : (B, H, m, d) keys and unit vectors at positions 0 … m − 1, m = start + c
    beta : (B, H, m) in [0, 2]
    start : int ≥ 0
    chunk : int ≥ 1 or None

    Returns (B, H, c, m); entries with j > i are meaningless (the sweep) or 0 (chunked), masked
    by the caller. Memory O(B·H·c·m). Raises ValueError when m ≠ start + c; TypeError for a
    non-integer chunk.
    """
    c, m = q.shape[-2], k.shape[-2]
    if m != start + c:
        raise ValueError(f"keys must cover positions 0 … start + c − 1 = {start + c - 1}; got {m}")
    if chunk is not None:
        return path_score_rows(q, k, w, beta, start, check_int(chunk, "chunk", 1))
    pos = torch.arange(start, start + c, device=q.device)
    u, cols = q, []
    for t in range(m - 1, -1, -1):
        cols.append((u * k[..., t : t + 1, :]).sum(-1))  # (B, H, c)
        wt = w[..., t : t + 1, :]  # (B, H, 1, d)
        coef = beta[..., t, None, None] * (u * wt).sum(-1, keepdim=True)  # (B, H, c, 1)
        u = u - torch.where((pos >= t)[:, None], coef, torch.zeros_like(coef)) * wt
    return torch.stack(cols[::-1], dim=-1)


@register_scheme("path")
class Path(PositionScheme):
    """PaTH-style Householder transport: w_t = unit(W_w x_t), β_t = 2·sigmoid(W_β x_t) (AT20).

    Per head; no short convolution or forget gate (a plain reference, see [B] §4). Scores by the
    chunked UT-transform algorithm (:func:`path_scores` with ``chunk`` = :attr:`chunk`, 64),
    differentiable and in the model's dtype.
    """

    chunk = 64

    def __init__(self, n_head, d_head, layer, d_model: int | None = None):
        super().__init__(n_head, d_head, layer)
        D = n_head * d_head if d_model is None else int(d_model)
        self.w_proj = nn.Linear(D, n_head * d_head, bias=False)
        self.beta_proj = nn.Linear(D, n_head, bias=True)

    def steps(self, x):
        """(w, β): unit vectors (B, H, n, d) and β ∈ (0, 2) of shape (B, H, n)."""
        B, n, _ = x.shape
        w = self.w_proj(x).view(B, n, self.n_head, self.d_head).transpose(1, 2)
        w = F.normalize(w, dim=-1, eps=1e-6)
        beta = 2.0 * torch.sigmoid(self.beta_proj(x)).transpose(1, 2)
        return w, beta

    def scores(self, q, k, x):
        return self.scores_chunk(q, k, x, 0)

    def scores_chunk(self, q, k, x, start: int):
        """Scores of queries at positions start … start + c − 1 against keys 0 … start + c − 1."""
        m = start + q.shape[-2]
        w, beta = self.steps(x[:, :m])
        return path_scores(q, k[..., :m, :], w, beta, start, chunk=self.chunk)
