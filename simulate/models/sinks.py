"""Attention sinks: value-norm kernels, a sink-aware rollout kernel, and the per-layer sink table.

Real pretrained models put much of their attention on token 0 while token 0's value vectors are
small (an attention *sink*), so "attention weight = information flow", on which [A]'s rollout
rests, fails for that column (issue 13, claim PB15). Three NumPy tools on what
:func:`posflow.simulate.models.measure.measure` records:

* :func:`value_norm_kernels` — kernel (d), after Kobayashi et al. (2020), "Attention is not only a
  weight": the weight of token j in row i is ``Σ_h α_ij^h ‖W_O^h v_j^h‖``, renormalised per row;
* :func:`sink_aware_kernels` — kernel (e), ours: the mass a row puts on token 0 is treated as a
  no-op that leaves the token's own state in place (moved onto the diagonal);
* :func:`sink_table` — per layer: the mean attention on token 0, its value-norm share, and token
  0's gradient influence at that layer's input;
* :func:`sink_scores`, :func:`sink_rate` — the field's metric, Sink_ε of Gu et al. (ICLR 2025),
  "When attention sink emerges in language models": per head the attention a key receives
  averaged over the queries that see it, and the share of heads where that exceeds ε = 0.3.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate.kernels import DenseKernel, dense_kernel

__all__ = ["sink_aware_kernels", "sink_rate", "sink_scores", "sink_table", "value_norm_kernels"]


def _stack(a, name: str) -> np.ndarray:
    A = np.asarray(a, dtype=np.float64)
    if A.ndim == 4:
        A = A.mean(axis=1)
    if A.ndim != 3 or A.shape[1] != A.shape[2] or A.shape[1] < 1:
        raise ValueError(f"{name} must have shape (L, n, n) or (L, H, n, n); got {A.shape}")
    if not np.isfinite(A).all():
        raise ValueError(f"{name} must be finite")
    if (A < 0).any():
        raise ValueError(f"{name} must be non-negative")
    return A


def value_norm_kernels(value_weights) -> list[DenseKernel]:
    """Kernel (d): value-norm-weighted attention, one causal row-stochastic kernel per layer.

    .. math::
        \\tilde A_t[i, j] = \\frac{W_t[i, j]}{\\sum_{k \\le i} W_t[i, k]},\\qquad
        W_t[i, j] = \\mathbb{E}\\Big[\\sum_h \\alpha_{ij}^{h}\\,\\lVert W_O^h v_j^h \\rVert\\Big]

    Parameters
    ----------
    value_weights : array_like, shape (L, n, n)
        ``Measurement.value_weights`` (zero above the diagonal).

    Returns
    -------
    list of L DenseKernel
        Raises ValueError for entries above the diagonal (> 1e-12 of the row) or an all-zero
        row (no value reaches it).
    """
    W = _stack(value_weights, "value_weights")
    out = []
    for t, M in enumerate(W):
        rows = M.sum(axis=1)
        if (rows <= 0).any():
            raise ValueError(f"value_weights of layer {t} have a row with no weight")
        if np.triu(M, 1).max(initial=0.0) > 1e-12 * rows.max():
            raise ValueError(f"value_weights of layer {t} are not causal")
        M = np.tril(M)
        out.append(dense_kernel(M / M.sum(axis=1, keepdims=True)))
    return out


def sink_aware_kernels(attention) -> list[DenseKernel]:
    """Kernel (e): attention with token 0's mass returned to each token's own state (ours).

    .. math::
        \\hat A_t = A_t + D_t - D_t \\mathbf 1 e_0^\\top,\\qquad
        D_t = \\operatorname{diag}(0, A_t[1,0], \\dots, A_t[n-1,0])

    i.e. for rows i ≥ 1, ``Â[i, 0] = 0`` and ``Â[i, i] = A[i, i] + A[i, 0]``; row 0 is
    unchanged. With ``R̂_t = (1 − λ_t) I + λ_t Â_t`` a sink behaves like the residual branch: the
    attention spent on it carries no information from token 0. Causal and row-stochastic
    whenever ``A_t`` is.

    Sliding windows need no band here (unlike the constructed uniform and content kernels,
    :mod:`posflow.simulate.models.bands`): ``A_t`` is the measured attention, already zero
    outside layer t's window of w keys (``A_t[i, j] = 0`` for i − j ≥ w), and so is ``Â_t`` —
    the diagonal lies inside every window, and a row whose token 0 is outside its window
    (i ≥ w) has ``A_t[i, 0] = 0``, no token-0 share to move, and is left as it is. The
    value-norm kernels (d) are zero outside the window for the same reason.

    Parameters
    ----------
    attention : array_like, shape (L, H, n, n) or (L, n, n)
        Mean attention (heads averaged when given).

    Returns
    -------
    list of L DenseKernel
    """
    A = _stack(attention, "attention").copy()
    n = A.shape[1]
    idx = np.arange(1, n)
    for M in A:
        M[idx, idx] += M[idx, 0]
        M[idx, 0] = 0.0
    return [dense_kernel(M / M.sum(axis=1, keepdims=True)) for M in A]


def sink_table(attention, value_weights=None, layer_influence=None) -> dict:
    """Per layer: how much attention token 0 draws, how much of it carries value, and how much
    the output depends on token 0 at that layer's input (issue 13, item 4).

    .. math::
        a_t = \\frac{1}{n-1}\\sum_{i\\ge1} A_t[i,0],\\quad
        v_t = \\frac{1}{n-1}\\sum_{i\\ge1} \\tilde A_t[i,0],\\quad
        g_t = \\frac{\\lVert\\partial p^*/\\partial x_t[0]\\rVert}
                   {\\sum_j \\lVert\\partial p^*/\\partial x_t[j]\\rVert}

    Parameters
    ----------
    attention : array_like, shape (L, H, n, n) or (L, n, n), n >= 2
    value_weights : array_like, shape (L, n, n), optional
    layer_influence : array_like, shape (L, n), optional
        ``Measurement.layer_influence`` (rows sum to 1).

    Returns
    -------
    dict with ``attention_on_0`` (L,), and when given ``value_share_of_0`` (L,) and
    ``gradient_influence_of_0`` (L,); rows i ≥ 1 only (row 0 attends to itself alone).
    """
    A = _stack(attention, "attention")
    L, n, _ = A.shape
    if n < 2:
        raise ValueError("attention needs n >= 2 tokens for a sink table")
    out = {"attention_on_0": A[:, 1:, 0].mean(axis=1)}
    if value_weights is not None:
        K = np.stack([k.dense() for k in value_norm_kernels(value_weights)])
        if K.shape != A.shape:
            raise ValueError(f"value_weights must have shape {A.shape}; got {K.shape}")
        out["value_share_of_0"] = K[:, 1:, 0].mean(axis=1)
    if layer_influence is not None:
        g = np.asarray(layer_influence, dtype=np.float64)
        if g.shape != (L, n):
            raise ValueError(f"layer_influence must have shape {(L, n)}; got {g.shape}")
        out["gradient_influence_of_0"] = g[:, 0] / g.sum(axis=1)
    return out


def sink_scores(attention, *, key: int = 0, windows=None) -> np.ndarray:
    """Per head, the attention key ``key`` receives averaged over the queries that see it.

    .. math::
        \\alpha_k^{t,h} = \\frac{1}{|Q_t(k)|}\\sum_{i \\in Q_t(k)} A_t^h[i, k],\\qquad
        Q_t(k) = \\{\\, i : k \\le i,\\ i - k < w_t \\,\\}

    (Gu et al. 2025, with 0-based positions; w_t = ∞ for a global layer).

    Parameters
    ----------
    attention : array_like, shape (..., L, H, n, n)
        Per-head attention probabilities (causal rows); leading axes (sequences) are kept.
        With attention averaged over sequences first, α is the mean of the per-sequence α.
    key : int
        The key position k, 0 ≤ k < n (token 0 by default).
    windows : sequence of L (int or None), optional
        Each layer's sliding window w_t (query i sees keys i − w_t < j ≤ i); None: global.

    Returns
    -------
    ndarray, shape (..., L, H)
    """
    A = np.asarray(attention, dtype=np.float64)
    if A.ndim < 4 or A.shape[-1] != A.shape[-2]:
        raise ValueError("attention must have shape (..., L, H, n, n) with per-head rows (Sink_ε "
                         f"counts heads); got {A.shape}")  # fmt: skip
    if not np.isfinite(A).all() or (A < 0).any():
        raise ValueError("attention must be finite and non-negative")
    L, n = A.shape[-4], A.shape[-1]
    if isinstance(key, bool) or not isinstance(key, int | np.integer) or not 0 <= key < n:
        raise ValueError(f"key must be an integer in [0, {n - 1}]; got {key!r}")
    if windows is None:
        windows = [None] * L
    windows = list(windows)
    if len(windows) != L or any(w is not None and (isinstance(w, bool) or not isinstance(
            w, int | np.integer) or w < 1) for w in windows):  # fmt: skip
        raise ValueError(f"windows must hold L = {L} positive integers or None; got {windows!r}")
    i = np.arange(key, n)
    out = np.empty(A.shape[:-2])
    for t, w in enumerate(windows):
        seen = i if w is None else i[i - key < w]
        out[..., t, :] = A[..., t, :, :, key][..., seen].mean(axis=-1)  # (..., H)
    return out


def sink_rate(attention, *, eps: float = 0.3, key: int = 0, windows=None) -> np.ndarray:
    """Sink_ε: the share of (layer, head) pairs whose :func:`sink_scores` exceed ``eps``.

    .. math::
        \\mathrm{Sink}^{\\epsilon}_k = \\frac{1}{LH}\\sum_{t,h}
        \\mathbb 1\\big[\\alpha_k^{t,h} > \\epsilon\\big]

    Parameters
    ----------
    attention : array_like, shape (..., L, H, n, n)
    eps : float
        The threshold, 0 < ε < 1 (Gu et al. use 0.3).
    key, windows
        As in :func:`sink_scores`.

    Returns
    -------
    ndarray, shape (...) — a 0-d array for one (L, H, n, n) tensor; in [0, 1].
    """
    if isinstance(eps, bool) or not isinstance(eps, int | float) or not 0 < eps < 1:
        raise ValueError(f"eps must be a number in (0, 1); got {eps!r}")
    alpha = sink_scores(attention, key=key, windows=windows)
    return (alpha > eps).mean(axis=(-2, -1))
