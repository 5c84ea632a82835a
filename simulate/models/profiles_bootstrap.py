"""The per-sequence bootstrap of every profile of :mod:`posflow.simulate.models.profiles` (PB15).

Each sequence is measured as if alone (:func:`measure_per_sequence`, one batched measurement);
a bootstrap replicate is a weight vector w over the N sequences (w = 1/N for the full sample,
multinomial counts / N for a resample), and everything is resampled together: kernels
A = Σ_s w_s A_s, value weights, λ, content and the measured influence, and the nulls are refitted
to each replicate's p̂.
:func:`batched_rollouts` runs all replicates at once by an implementation independent of
:mod:`posflow.simulate.rollout`; :func:`bootstrap` checks it on the full sample against the
library (:func:`posflow.simulate.models.profiles.rollout_profiles`). Both band the uniform and
content kernels to the layers' sliding windows (``PerSequence.windows``,
:mod:`posflow.simulate.models.bands`), so n may exceed a window (Gemma 3's 512-key layers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from posflow.simulate.models.bands import band, check_windows
from posflow.simulate.models.profiles import (
    batched_spearman,
    batched_w1,
    null_profiles,
    rollout_profiles,
)

__all__ = ["Bootstrap", "PerSequence", "batched_rollouts", "bootstrap", "measure_per_sequence"]

ROLLOUTS = ("b", "a", "shuffled", "uniform", "c", "a_c", "d", "e")


@dataclass
class PerSequence:
    """What one pass per sequence measured (N sequences, L layers, H heads, n tokens)."""

    attention: np.ndarray  # (N, L, n, n), head-averaged
    lambdas: np.ndarray  # (N, L)
    content: np.ndarray  # (N, L, H), [A]'s c in logit units (divided by √d_head)
    influence: np.ndarray  # (N, n), ‖∂p*/∂e_j‖ of each sequence
    slopes: np.ndarray  # (H,) ALiBi slopes in logit units (zeros without ALiBi)
    values: np.ndarray  # (N, L, n, n), Σ_h α_ij^h ‖W_O^h v_j^h‖ (value-norm weights)
    layer_influence: np.ndarray | None = None  # (N, L, n) ‖∂p*/∂x_t[j]‖, rows sum to 1
    lambdas_mlp: np.ndarray | None = None  # (N, L) λ_t with the MLP update counted
    windows: tuple | None = None  # (L,) keys a query sees (Measurement.windows); None: all


def measure_per_sequence(model, ids, *, layer_influence: bool = False, lambdas_mlp: bool = False,
                         batch_size=None, allow_windows: bool = False) -> PerSequence:
    """Each row of ``ids`` (N, n) measured as if alone, by one batched measurement (PB15, PB19).

    One :func:`~posflow.simulate.models.measure.measure` call with ``per_sequence=True``
    (``value_norms=True, heads=False, qk="summary"``): every field equals what a call on
    ``ids[s:s+1]`` alone gives for sequence s (the head mean of its attention, its value-norm
    weights, λ_t, [A]'s content c from its q·k sums, its ‖∂p*/∂e_j‖), at the cost of batched
    passes instead of one pass per sequence.

    Parameters
    ----------
    model : posflow LM or supported Hugging Face causal LM (eager attention)
    ids : array_like or LongTensor, shape (N, n)
    layer_influence : bool
        Also each sequence's gradient norm at every block input, ‖∂p*/∂x_t[j]‖, (N, L, n),
        rows normalised per layer and sequence (claim PB19).
    lambdas_mlp : bool
        Also each sequence's λ_t with the MLP update in the denominator (``lambdas="both"``).
    batch_size : int, optional
        Sequences per pass (default: :func:`measure`'s automatic size).
    allow_windows : bool
        No longer needed, accepted for compatibility and ignored: n may exceed a layer's
        sliding window, whose size is kept in ``PerSequence.windows`` and bands the uniform
        and content kernels of every consumer (:mod:`~posflow.simulate.models.bands`).

    Returns
    -------
    PerSequence

    Raises ValueError as :func:`measure` does, and when a sequence's p* does not depend on its
    embeddings (its influence sums to zero or is not finite).
    """
    from posflow.simulate.models.measure import measure

    m = measure(model, ids, value_norms=True, heads=False, qk="summary", per_sequence=True,
                layer_influence=bool(layer_influence), batch_size=batch_size,
                lambdas="both" if lambdas_mlp else True)  # fmt: skip
    g = m.influence_per_sequence
    total = g.sum(axis=1)
    bad = np.flatnonzero(~(np.isfinite(total) & (total > 0)))
    if bad.size:
        raise ValueError(
            f"gradient influence of sequence {int(bad[0])} is zero or not finite: p* does not "
            "depend on the input embeddings"
        )
    G = None
    if layer_influence:
        G = m.layer_influence_per_sequence
        G = G / G.sum(axis=2, keepdims=True)
    slopes = np.zeros(m.num_heads) if m.slopes is None else np.asarray(m.slopes, float)
    return PerSequence(m.attention_per_sequence, m.lambda_per_sequence,
                       m.content_per_sequence("sqrt_d")[1], g, slopes,
                       m.value_weights_per_sequence, G,
                       m.lambda_mlp_per_sequence if lambdas_mlp else None,
                       None if m.windows is None else tuple(m.windows))  # fmt: skip


def _library(data: PerSequence, w: np.ndarray, perm: np.ndarray) -> tuple[dict, np.ndarray]:
    """The rollout profiles through the library for sequence weights ``w`` (sum 1), and p̂."""
    A = np.tensordot(w, data.attention, axes=1)
    V = np.tensordot(w, data.values, axes=1)
    lam = np.clip(w @ data.lambdas, 0.0, 1.0)
    c = np.tensordot(w, data.content, axes=1)
    g = w @ data.influence
    out = rollout_profiles(A, lam, values=V, content=c, slopes=data.slopes, perm=perm,
                           windows=getattr(data, "windows", None))  # fmt: skip
    return out, g / g.sum()


def batched_rollouts(data: PerSequence, W: np.ndarray, perm: np.ndarray, chunk=None) -> dict:
    """Every rollout profile for each row of sequence weights ``W`` (B, N), vectorised.

    p ← (1 − λ_t) p + λ_t p K_t for t = L−1, …, 0 from p = e_{n−1}, with

    * A_t = Σ_s w_s A_{t,s} (rows renormalised, as ``measured_kernels`` does) for ``b``, ``a``
      and ``shuffled``; the uniform kernel A_ij = 1/(i+1) (j ≤ i) by a reverse cumulative sum,
      in a layer with a sliding window of w < n keys (``data.windows``) the dense banded
      kernel 1/min(i+1, w) (0 ≤ i − j < w);
    * [A]'s kernel (``c``, ``a_c``) A = (1/H) Σ_h diag(1/Z_h)(T_h + (e^{c_h} − 1) I),
      T_h[i, j] = e^{−m_h (i−j)} (0 ≤ i − j < w), Z_h(i) = e^{c_h} + Σ_{k=1}^{min(i, w−1)}
      e^{−m_h k} (w = n without a window: each head's softmax over the band);
    * ``d`` the value-norm kernel Σ_s w_s V_{t,s} with rows renormalised; ``e`` the sink-aware
      kernel of A_t: for rows i ≥ 1 the entry A_t[i, 0] is moved onto the diagonal.

    Parameters
    ----------
    data : PerSequence
    W : ndarray, shape (B, N), rows summing to 1
    perm : ndarray of int, shape (L,)
    chunk : int, optional
        Replicates at a time (memory chunk × 3 L n² floats; default about 2·10⁷ floats).

    Returns
    -------
    dict
        ``{key: (B, n)}`` for the eight rollouts of ``ROLLOUTS``, plus ``"measured"`` (B, n)
        and ``"lambdas"`` (B, L).
    """
    L = data.lambdas.shape[1]
    n = data.influence.shape[1]
    B = W.shape[0]
    wins = getattr(data, "windows", None)
    wins = [None if w is None or w >= n else w
            for w in ((None,) * L if wins is None else check_windows(wins, L))]
    lam = np.clip(W @ data.lambdas, 0.0, 1.0)
    g = W @ data.influence
    rows = np.tensordot(W, data.attention.sum(axis=-1), axes=1)  # (B, L, n) row sums
    cont = np.tensordot(W, data.content, axes=1)  # (B, L, H)
    i = np.arange(n)
    gap = (i[:, None] - i[None, :]).astype(np.float64)
    tables = {}  # per window: T (H, n, n) on the band, S (H, n) = Σ_{k=1}^{min(i, w−1)} e^{−m k}
    for w in set(wins):
        low = (gap >= 0) if w is None else (gap >= 0) & (gap < w)
        T = np.where(low, np.exp(-data.slopes[:, None, None] * np.where(low, gap, 0.0)), 0.0)
        tables[w] = (T, T.sum(axis=-1) - 1.0)
    S = np.stack([tables[w][1] for w in wins])  # (L, H, n)
    U = {w: band(np.tril(np.ones((n, n))) / (i + 1.0)[:, None], [w])[0]
         for w in set(wins) if w is not None}  # fmt: skip
    chunk = chunk or max(1, int(2e7 // (3 * L * n * n)))
    out = {k: np.empty((B, n)) for k in ROLLOUTS}
    start = np.zeros(n)
    start[-1] = 1.0
    for b0 in range(0, B, chunk):
        b1 = min(B, b0 + chunk)
        A = np.tensordot(W[b0:b1], data.attention, axes=1)  # (b, L, n, n)
        A /= rows[b0:b1, :, :, None]
        V = np.tensordot(W[b0:b1], data.values, axes=1)  # (b, L, n, n)
        V /= V.sum(axis=-1, keepdims=True)
        S0 = A.copy()  # sink-aware: rows i ≥ 1 keep their token-0 share on the diagonal
        ii = np.arange(1, n)
        S0[..., ii, ii] += S0[..., ii, 0]
        S0[..., ii, 0] = 0.0
        lb = lam[b0:b1]
        c = cont[b0:b1]  # (b, L, H)
        shift = np.maximum(c, 0.0)
        Z = np.exp(c - shift)[..., None] + S[None] * np.exp(-shift)[..., None]  # (b, L, H, n)
        diag = ((np.exp(c - shift) - np.exp(-shift))[..., None] / Z).mean(axis=2)  # (b, L, n)
        scale = np.exp(-shift)[..., None] / Z  # (b, L, H, n): weight of T_h in row i

        def dense(p, t, M):
            return np.matmul(p[:, None, :], M[:, t])[:, 0]

        def uniform(p, t, M):
            if wins[t] is not None:  # banded: 1/min(i + 1, w) on 0 ≤ i − j < w
                return p @ U[wins[t]]
            q = p / (i + 1.0)
            return np.cumsum(q[:, ::-1], axis=1)[:, ::-1]

        def param(p, t, M, scale=scale, diag=diag):
            ph = np.swapaxes(p[:, None, :] * scale[:, t], 0, 1)  # (H, b, n)
            return np.matmul(ph, tables[wins[t]][0]).mean(axis=0) + p * diag[:, t]

        ones = np.ones_like(lb)
        for name, step, M, lm in (
            ("b", dense, A, lb),
            ("a", dense, A, ones),
            ("shuffled", dense, A, lb[:, perm]),
            ("uniform", uniform, None, lb),
            ("c", param, None, lb),
            ("a_c", param, None, ones),
            ("d", dense, V, lb),
            ("e", dense, S0, lb),
        ):
            p = np.tile(start, (b1 - b0, 1))
            for t in range(L - 1, -1, -1):
                p = (1.0 - lm[:, t, None]) * p + lm[:, t, None] * step(p, t, M)
            out[name][b0:b1] = p
    out["measured"] = g / g.sum(axis=1, keepdims=True)
    out["lambdas"] = lam
    return out


@dataclass
class Bootstrap:
    """Replicate 0 is the full sample; replicates 1..B resample the N sequences."""

    profiles: dict  # key -> (B + 1, n): the rollouts and the nulls
    measured: np.ndarray  # (B + 1, n)
    lambdas: np.ndarray  # (B + 1, L)
    w1: dict  # key -> (B + 1,)
    spearman: dict  # key -> (B + 1,)
    ratio: np.ndarray  # (B + 1,) geometric null's r
    slope: np.ndarray  # (B + 1,) linear null's s
    perm: np.ndarray
    library_gap: float  # max |library rollout − batched rollout| on the full sample


def bootstrap(data: PerSequence, B: int, seed: int) -> Bootstrap:
    """Percentile bootstrap over sequences of every profile and its W1/Spearman to p̂.

    The random stream ``default_rng([seed, 15])`` draws the shuffled null's derangement, then
    B multinomial resamples. The full sample (replicate 0) also runs through the library; the
    largest gap between the two implementations is returned as ``library_gap``.
    """
    from posflow.simulate.nulls import derangement

    N, L = data.lambdas.shape
    rng = np.random.default_rng([seed, 15])
    perm = derangement(L, rng)
    W = np.vstack([np.full(N, 1.0 / N), rng.multinomial(N, np.full(N, 1.0 / N), size=B) / N])
    got = batched_rollouts(data, W, perm)
    measured, lambdas = got.pop("measured"), got.pop("lambdas")
    lib, lib_measured = _library(data, W[0], perm)
    gap = max(float(np.abs(lib[k] - got[k][0]).max()) for k in lib)
    gap = max(gap, float(np.abs(lib_measured - measured[0]).max()))
    profiles = dict(got)
    fitted = null_profiles(measured)
    profiles["geometric"], profiles["linear"] = fitted["geometric"], fitted["linear"]
    w1 = {k: batched_w1(v, measured) for k, v in profiles.items()}
    rho = {k: batched_spearman(v, measured) for k, v in profiles.items()}
    return Bootstrap(profiles, measured, lambdas, w1, rho, fitted["ratio"], fitted["slope"],
                     perm, gap)  # fmt: skip
