"""The implementation identities of accumulated transport (paper [B], claim AT18): dense route
products built step by step, and the errors of the NumPy fast paths against them.

* :func:`so2_dense`, :func:`dense_route`, :func:`dense_scores`, :func:`dense_values`,
  :func:`causal_softmax_rows` — plain-loop references, written out entry by entry and
  independent of the routines they check;
* :func:`numpy_identity_errors` — max |fast path − dense| for every fast path of
  :mod:`posflow.simulate.transport` (suffix-sum angles, ``so2_scores``, the inverse output
  rotation and ``so2_value_output``, zero-initialised learned angles against RoPE, the PaTH
  key-cache update, ``householder_scores``, the chunked ``householder_route_scores`` and
  ``path_attention``, absolute frames, ``orthogonal_scores`` and ``route_product``).

The torch schemes are checked the same way by
:func:`posflow.simulate.models.scheme_identities.torch_identity_errors`.
"""

from __future__ import annotations

import math

import numpy as np

from posflow.simulate.orthogonal import rope_frequencies, rotate_blocks
from posflow.simulate.transport import (
    ROUTES,
    frame_prefix,
    householder_route_scores,
    householder_scores,
    householder_step,
    orthogonal_scores,
    path_attention,
    route_product,
    so2_scores,
    so2_value_output,
    suffix_angles,
)

__all__ = [
    "causal_softmax_rows",
    "dense_route",
    "dense_scores",
    "dense_values",
    "numpy_identity_errors",
    "so2_dense",
]


def so2_dense(theta) -> np.ndarray:
    """blockdiag_b R(θ_b) with the half-split pairing (b, b + d/2), entry by entry.

    Parameters
    ----------
    theta : array_like, shape (n, d/2)

    Returns
    -------
    ndarray, shape (n, d, d)
    """
    theta = np.asarray(theta, dtype=float)
    n, half = theta.shape
    m = np.zeros((n, 2 * half, 2 * half))
    for b in range(half):
        c, s = np.cos(theta[:, b]), np.sin(theta[:, b])
        m[:, b, b], m[:, b, b + half] = c, -s
        m[:, b + half, b], m[:, b + half, b + half] = s, c
    return m


def dense_route(steps, j: int, i: int, shift: int = 0) -> np.ndarray:
    """M_{i−1+shift} ⋯ M_{j+shift} (shift 0: from_source; 1: path), a plain loop.

    Parameters
    ----------
    steps : ndarray, shape (n, d, d)
    j, i : int
        Source and query, j ≤ i.
    shift : int
        0 for route ``"from_source"``, 1 for ``"path"``.

    Returns
    -------
    ndarray, shape (d, d)
    """
    p = np.eye(steps.shape[1])
    for s in range(j + shift, i + shift):
        p = steps[s] @ p
    return p


def dense_scores(q, k, steps, shift: int = 0) -> np.ndarray:
    """s_ij = q_iᵀ P_{j→i} k_j for j ≤ i (NaN above the diagonal), by :func:`dense_route`.

    Parameters
    ----------
    q, k : ndarray, shape (n, d)
    steps : ndarray, shape (n, d, d)
    shift : int

    Returns
    -------
    ndarray, shape (n, n)
    """
    n = k.shape[0]
    s = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i + 1):
            s[i, j] = q[i] @ dense_route(steps, j, i, shift) @ k[j]
    return s


def dense_values(a, v, steps) -> np.ndarray:
    """o_i = Σ_{j ≤ i} a_ij P_{j→i} v_j (from_source routes), by :func:`dense_route`.

    Parameters
    ----------
    a : ndarray, shape (n, n)
    v : ndarray, shape (n, d)
    steps : ndarray, shape (n, d, d)

    Returns
    -------
    ndarray, shape (n, d)
    """
    n = v.shape[0]
    return np.array(
        [sum(a[i, j] * dense_route(steps, j, i) @ v[j] for j in range(i + 1)) for i in range(n)]
    )


def causal_softmax_rows(s, scale: float, bias) -> np.ndarray:
    """Causal softmax rows of scale·s + bias (s is NaN above the diagonal).

    Parameters
    ----------
    s : ndarray, shape (n, n)
    scale : float
    bias : ndarray, shape (n, n)

    Returns
    -------
    ndarray, shape (n, n)
        Rows sum to 1; zero above the diagonal.
    """
    z = np.where(np.isnan(s), -np.inf, scale * s + bias)
    a = np.exp(z - z.max(axis=1, keepdims=True))
    return a / a.sum(axis=1, keepdims=True)


def _score_and_value_errors(q, k, v, theta, steps, rng, err) -> None:
    """Suffix sums, so2_scores, the inverse output rotation and so2_value_output (draws a)."""
    n, d = q.shape
    low = np.tril_indices(n)
    dense = dense_scores(q, k, steps)
    # (1) suffix sums: (R(φ_i) q_i)·(R(φ_j) k_j) = q_iᵀ M_{i-1}⋯M_j k_j
    phi = suffix_angles(theta)
    suffix = rotate_blocks(q, phi) @ rotate_blocks(k, phi).T
    err["suffix_sum_scores"] = float(np.abs(suffix - dense)[low].max())
    err["so2_scores"] = float(np.abs(so2_scores(q, k, theta) - dense)[low].max())
    # (2) values: R(-φ_i) Σ_j a_ij R(φ_j) v_j = Σ_j a_ij P_{j→i} v_j
    a = np.tril(rng.exponential(size=(n, n)))
    a /= a.sum(axis=1, keepdims=True)
    dense_out = dense_values(a, v, steps)
    inverse_out = rotate_blocks(a @ rotate_blocks(v, phi), -phi)
    err["value_inverse_rotation"] = float(np.abs(inverse_out - dense_out).max())
    err["so2_value_output"] = float(np.abs(so2_value_output(a, v, theta) - dense_out).max())
    # (3) zero-initialised learned angles θ = π tanh(0) − f_b give RoPE's relative rotation
    f = rope_frequencies(d)
    learned = np.broadcast_to(np.pi * np.tanh(0.0) - f, (n, d // 2))
    rope_dense = dense_scores(q, k, so2_dense(np.broadcast_to(-f, (n, d // 2))))
    err["zero_init_learned_vs_rope"] = float(
        np.abs(so2_scores(q, k, learned) - rope_dense)[low].max()
    )


def _householder_errors(q, k, v, rng, chunk, err) -> dict:
    """The PaTH update, cache, householder_scores and the chunked paths (draws w, β)."""
    n, d = q.shape
    low = np.tril_indices(n)
    # (4) PaTH: k ← k − β (k·w) w is H k; iterated over t = j+1 … i it gives the path route
    w = rng.standard_normal((n, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    beta = rng.uniform(0, 2, n)
    H = np.eye(d) - beta[:, None, None] * w[:, :, None] * w[:, None, :]
    err["householder_step_vs_matrix"] = float(
        np.abs(
            np.stack([householder_step(k[t], w[t], beta[t]) for t in range(n)])
            - np.einsum("tab,tb->ta", H, k)
        ).max()
    )
    i = n - 1
    cache = k.copy()
    for t in range(1, n):  # token t arrives: every earlier cached key is updated
        cache[:t] = householder_step(cache[:t], w[t], beta[t])
    dense_h = {route: dense_scores(q, k, H, shift) for shift, route in enumerate(ROUTES)}
    dense_path = dense_h["path"][i]
    err["path_cache_scores"] = float(np.abs(cache @ q[i] - dense_path).max())
    err["householder_scores"] = float(
        np.abs(householder_scores(q[i], k, w, beta, i) - dense_path).max()
    )
    # (4b) the chunked compact-WY / UT-transform scores (all queries) and PaTH attention outputs
    chunked = {}
    for route in ROUTES:
        got = householder_route_scores(q, k, w, beta, route, chunk)
        chunked[f"householder_route_scores_{route}"] = float(
            np.abs(got - dense_h[route])[low].max()
        )
    alibi = -0.1 * np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    ref_out = causal_softmax_rows(dense_h["path"], 1 / math.sqrt(d), alibi) @ v
    out = path_attention(q, k, v, w, beta, "path", chunk, bias=alibi)
    chunked["path_attention"] = float(np.abs(out - ref_out).max())
    return chunked


def numpy_identity_errors(rng, n: int, d: int, chunk: int) -> tuple[dict, dict, float]:
    """max |fast path − dense route product| for every NumPy fast path (claim AT18).

    Draws q, k, v ~ N(0, 1) (n, d), θ ~ Unif[−1, 1] (n, d/2), causal exponential attention
    weights, unit Householder directions w and β ~ Unif[0, 2], in this order, from ``rng``.
    Cost O(n³·d²) (the dense references).

    Parameters
    ----------
    rng : numpy.random.Generator
    n, d : int
        Tokens and head dimension (d even).
    chunk : int
        Chunk length C of the chunked PaTH paths.

    Returns
    -------
    errors : dict of str to float
        ``route_product``, ``suffix_sum_scores``, ``so2_scores``, ``value_inverse_rotation``,
        ``so2_value_output``, ``zero_init_learned_vs_rope``, ``householder_step_vs_matrix``,
        ``path_cache_scores``, ``householder_scores``, ``frames_<route>`` and
        ``orthogonal_scores_<route>`` for both routes.
    chunked : dict of str to float
        ``householder_route_scores_<route>`` for both routes and ``path_attention``.
    scale : float
        max_i ‖q_i‖ · max_j ‖k_j‖.
    """
    q, k, v = rng.standard_normal((3, n, d))
    theta = rng.uniform(-1, 1, (n, d // 2))
    steps = so2_dense(theta)
    low = np.tril_indices(n)
    err = {}
    err["route_product"] = max(
        float(np.abs(route_product(steps, j, i) - dense_route(steps, j, i)).max())
        for i, j in zip(*low, strict=True)
    )
    _score_and_value_errors(q, k, v, theta, steps, rng, err)
    chunked = _householder_errors(q, k, v, rng, chunk, err)
    # (5) absolute frames for orthogonal steps: P_{j→i} = G_i G_jᵀ on both route conventions
    for shift, route in enumerate(("from_source", "path")):
        G = frame_prefix(steps, route)
        err[f"frames_{route}"] = max(
            float(np.abs(G[i] @ G[j].T - dense_route(steps, j, i, shift)).max())
            for i, j in zip(*low, strict=True)
        )
        err[f"orthogonal_scores_{route}"] = float(
            np.abs(orthogonal_scores(q, k, steps, route) - dense_scores(q, k, steps, shift))[
                low
            ].max()
        )
    scale = float(np.max(np.linalg.norm(q, axis=1)) * np.max(np.linalg.norm(k, axis=1)))
    return err, chunked, scale
