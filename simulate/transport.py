"""Route transport, scores, attention masses and value transport (paper [B], claims AT2, AT5,
AT10-AT19), without d×d products per (query, source) pair.

Conventions. Positions are 0-indexed, one step M_s per position s. A source j ≤ i reaches the
query i along a route; the route product applies the step nearest the source first, so the
later step stands on the left:

* ``route="from_source"`` (JoFormer/[B] code): steps s = j, …, i−1,
  P_{j→i} = M_{i−1} M_{i−2} ⋯ M_j;
* ``route="path"`` (PaTH): steps s = j+1, …, i, P_{j→i} = M_i M_{i−1} ⋯ M_{j+1}.

P_{i→i} = I and the score is s_ij = q_iᵀ P_{j→i} k_j. JoFormer writes the factors in the
opposite order (M_j ⋯ M_{i−1}); for commuting steps (SO(2) blocks) both agree, and for i.i.d.
steps they have the same law. For symmetric steps (Householder) q_iᵀ H_i ⋯ H_{j+1} k_j is exactly
PaTH's logit k_jᵀ (∏_{s=j+1}^{i} H_s) q_i.

Absolute frames. With F_t = M_t ⋯ M_0 (F_{−1} = I) and G_t = F_{t−1} (from_source) or
G_t = F_t (path), orthogonal steps give P_{j→i} = G_i G_jᵀ; for SO(2) blocks G_t = R(Φ_t) with
the prefix angles of :func:`absolute_angles`. Scores are (G_iᵀ q_i)·(G_jᵀ k_j): O(n·d) for SO(2)
or O(n·d³) for general steps once, plus one matmul. Entries with j > i use the same formula (the
inverse route); :func:`attention_weights` masks them.

Backends. Every function takes NumPy arrays, array_like, or the arrays of one other backend
(torch, CuPy, array_api_strict) and returns arrays of that backend; NumPy callers get NumPy
arrays. The computation is the same array-API code on every backend (float64).

Route angles, products and frames (``posflow.simulate._routes``), the chunked (compact-WY /
UT-transform) Householder route scores and PaTH attention (``posflow.simulate._householder``),
the stylized single-layer model of [B] (``posflow.simulate._stylized``), the mixing-window
estimates (``posflow.simulate._mixing``), the planted-target sweep and references of AT12, AT13,
AT19 (``posflow.simulate._planted``) and the moments of route phases, products and far
scores (``posflow.simulate._route_moments``) live in private modules and are re-exported here.
"""

from __future__ import annotations

import math

import numpy as np

from posflow.simulate._arrays import as_float, check_int, namespace_of, positions
from posflow.simulate._householder import householder_route_scores, path_attention
from posflow.simulate._mixing import empirical_mixing_window, empirical_route_mean, mixing_window
from posflow.simulate._planted import (
    PLANTED,
    PlantedSetup,
    alibi_far_mass_reference,
    coherence_per_block,
    crossing_length,
    far_logit_cv2,
    far_sum_mgf,
    near_mass_reference,
    planted_lengths,
    planted_sweep,
    value_ratio_reference,
)
from posflow.simulate._route_moments import (
    PhaseMoments,
    phase_path_moments,
    route_product_moments,
    so2_far_score_moments,
    so2_score_moments,
)
from posflow.simulate._routes import (
    ROUTES,
    absolute_angles,
    check_route,
    frame_prefix,
    orthogonal_steps,
    route_angles,
    route_product,
    suffix_angles,
    wrap_angle,
)
from posflow.simulate._stylized import (
    SCHEMES,
    StylizedResult,
    stylized_attention,
    stylized_sweep,
)
from posflow.simulate.backend import host
from posflow.simulate.orthogonal import rotate_blocks

__all__ = [
    "PLANTED",
    "ROUTES",
    "SCHEMES",
    "PhaseMoments",
    "PlantedSetup",
    "StylizedResult",
    "absolute_angles",
    "alibi_far_mass_reference",
    "attention_weights",
    "coherence_per_block",
    "crossing_length",
    "empirical_mixing_window",
    "empirical_route_mean",
    "far_logit_cv2",
    "far_sum_mgf",
    "frame_prefix",
    "householder_route_scores",
    "householder_scores",
    "householder_step",
    "mixing_window",
    "near_far_mass",
    "near_mass_reference",
    "orthogonal_scores",
    "orthogonal_value_output",
    "path_attention",
    "phase_path_moments",
    "planted_lengths",
    "planted_sweep",
    "rotate_blocks",
    "route_angles",
    "route_product",
    "route_product_moments",
    "so2_far_score_moments",
    "so2_score_moments",
    "so2_scores",
    "so2_value_output",
    "stylized_attention",
    "stylized_sweep",
    "suffix_angles",
    "value_ratio_reference",
    "wrap_angle",
]


def _angles(at, theta, n: int, d: int):
    theta = as_float(at, theta, "theta", 2)
    if tuple(theta.shape) != (n, d // 2) or d % 2:
        raise ValueError(
            f"theta must have shape (n, d/2) = ({n}, {d // 2}); got {tuple(theta.shape)}"
        )
    return theta


def _qk(at, q, k, name_k: str = "k"):
    q, k = as_float(at, q, "q", 2), as_float(at, k, name_k, 2)
    if q.shape[1] != k.shape[1]:
        raise ValueError(
            f"q and {name_k} must have the same width d; got {tuple(q.shape)}, {tuple(k.shape)}"
        )
    return q, k


def _weights_values(at, weights, v):
    weights, v = as_float(at, weights, "weights", 2), as_float(at, v, "v", 2)
    if weights.shape[1] != v.shape[0]:
        raise ValueError(f"weights must have {v.shape[0]} columns; got {tuple(weights.shape)}")
    return weights, v


def _rows_times(g, x):
    """(G_n x_n) for every n: g (n, d, d), x (n, d) → (n, d)."""
    return (g @ x[..., None])[..., 0]


def _rows_times_t(g, x):
    """(G_nᵀ x_n) for every n: g (n, d, d), x (n, d) → (n, d)."""
    return (x[:, None, :] @ g)[:, 0, :]


def so2_scores(q, k, theta, route: str = "from_source", q_pos=None, pairing: str = "half"):
    """All-source scores s_ij = q_iᵀ R(route angle j→i) k_j for SO(2)-block steps (AT18, AT19).

    s_ij = (R(−Φ_i) q_i)·(R(−Φ_j) k_j) with Φ from :func:`absolute_angles`.

    Parameters
    ----------
    q : (n_q, d) queries at positions ``q_pos`` (default: the last n_q positions)
    k : (n, d) keys;  theta : (n, d/2) per-position angles θ[s, b]

    Returns (n_q, n). Cost O((n + n_q)·d) rotations plus one (n_q × d)·(d × n) matmul.
    """
    at = namespace_of(q, k, theta)
    q, k = _qk(at, q, k)
    theta = _angles(at, theta, k.shape[0], k.shape[1])
    pos = positions(at, q_pos, q.shape[0], k.shape[0])
    phi = absolute_angles(theta, route)
    qr = rotate_blocks(q, -at.xp.take(phi, pos, axis=0), pairing)
    return qr @ at.xp.matrix_transpose(rotate_blocks(k, -phi, pairing))


def orthogonal_scores(q, k, steps, route: str = "from_source", q_pos=None, atol: float = 1e-8):
    """Scores s_ij = q_iᵀ P_{j→i} k_j for exactly orthogonal steps (e.g. Haar) (claims AT2, AT11).

    s_ij = (G_iᵀ q_i)·(G_jᵀ k_j) with G from :func:`frame_prefix`.
    Shapes: q (n_q, d), k (n, d), steps (n, d, d); returns (n_q, n). Cost O(n·d³ + n_q·n·d).
    """
    at = namespace_of(q, k, steps)
    q, k = _qk(at, q, k)
    steps = orthogonal_steps(at, steps, atol)
    n, d = k.shape
    if tuple(steps.shape) != (n, d, d):
        raise ValueError(f"steps must have shape (n, d, d) = ({n}, {d}, {d}); got {steps.shape}")
    pos = positions(at, q_pos, q.shape[0], n)
    g = frame_prefix(steps, route, atol)
    qt = _rows_times_t(at.xp.take(g, pos, axis=0), q)
    return qt @ at.xp.matrix_transpose(_rows_times_t(g, k))


def _betas(beta, n: int) -> np.ndarray:
    """β as host float64 (n,) in [0, 2] (a scalar is repeated)."""
    beta = np.asarray(host(beta), dtype=float)
    if beta.ndim == 0:
        beta = np.full(n, float(beta))
    if beta.shape != (n,):
        raise ValueError(f"beta must be a scalar or have shape ({n},); got {beta.shape}")
    bad = ~((beta >= 0.0) & (beta <= 2.0))
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise ValueError(f"beta must lie in [0, 2]; got {beta[t]} at index {t}")
    return beta


def householder_step(x, w, beta):
    """PaTH key-cache update x ← x − β (w·x) w = (I − β w wᵀ) x (claim AT18).

    x, w: shape (..., d), broadcast; beta: scalar in [0, 2]. Cost O(size of x).
    """
    at = namespace_of(x, w)
    try:
        x, w = as_float(at, x, "x"), as_float(at, w, "w")
    except ValueError as exc:
        raise ValueError("x and w must be finite (no NaN or inf)") from exc
    if np.ndim(host(beta)) != 0:
        raise ValueError(f"beta must be a scalar in [0, 2]; got shape {np.shape(host(beta))}")
    b = float(_betas(beta, 1)[0])
    return x - b * at.xp.sum(w * x, axis=-1, keepdims=True) * w


def householder_scores(q, k, w, beta, query_pos: int, route: str = "path"):
    """Scores of one query against all sources j ≤ i for Householder steps H_s = I − β_s w_s w_sᵀ.

    s_j = q_iᵀ P_{j→i} k_j. As H is symmetric, s_j = u_j·k_j with u_j = H_{j+1} ⋯ H_i q_i (path)
    or u_j = H_j ⋯ H_{i−1} q_i (from_source), obtained by one sweep from the query backwards
    applying u ← u − β_t (w_t·u) w_t. Steps need not be orthogonal (β ∈ [0, 2]).

    Parameters
    ----------
    q : (d,) query at position i = ``query_pos``;  k : (n, d) keys;  w : (n, d) unit vectors
    beta : scalar or (n,), in [0, 2]

    Returns (i + 1,) scores for j = 0 … i. Cost O(i·d), memory O(i·d). Claims AT2, AT18.
    """
    shift = check_route(route)
    at = namespace_of(q, k, w)
    xp = at.xp
    q = as_float(at, q, "q", 1)
    k, w = as_float(at, k, "k", 2), as_float(at, w, "w", 2)
    n, d = k.shape
    if tuple(q.shape) != (d,) or tuple(w.shape) != (n, d):
        raise ValueError(
            f"q must have shape ({d},) and w shape ({n}, {d}); got {tuple(q.shape)}, "
            f"{tuple(w.shape)}"
        )
    norms = np.sqrt(np.asarray(host(xp.sum(w * w, axis=1)), dtype=float))
    if (np.abs(norms - 1.0) > 1e-12).any():
        t = int(np.argmax(np.abs(norms - 1.0)))
        raise ValueError(
            f"w rows must be unit vectors (tolerance 1e-12); row {t} has norm {norms[t]!r}"
        )
    beta = _betas(beta, n)
    i = check_int(query_pos, "query_pos", 0)
    if i >= n:
        raise ValueError(f"query_pos must be < n = {n}; got {i}")
    u = q
    us = [u] * (i + 1)
    for t in range(i - 1 + shift, shift - 1, -1):
        u = u - float(beta[t]) * xp.sum(w[t, ...] * u) * w[t, ...]
        us[t - shift] = u
    return xp.sum(xp.stack(us, axis=0) * k[: i + 1, ...], axis=1)


def _distances(at, q_pos, n_q: int, n: int):
    """i − j as float64, shape (n_q, n), for the query positions of :func:`positions`."""
    xp = at.xp
    j = xp.arange(n, dtype=xp.float64, device=at.device)
    return xp.astype(positions(at, q_pos, n_q, n), xp.float64)[:, None] - j[None, :]


def attention_weights(
    scores, q_pos=None, *, scale: float = 1.0, alibi_slope: float = 0.0, causal: bool = True
):
    """Softmax attention rows a_ij ∝ exp(scale·s_ij − m·|i − j|) over j ≤ i (claims AT10, AT13).

    scores: (n_q, n) with queries at ``q_pos`` (default: the last n_q positions); m =
    ``alibi_slope`` ≥ 0 (ALiBi bias). ``causal`` masks j > i. Returns (n_q, n), rows summing to 1.
    Numerically stable (max subtraction). Cost O(n_q·n).
    """
    at = namespace_of(scores)
    xp = at.xp
    scores = as_float(at, scores, "scores", 2)
    if not (math.isfinite(scale) and math.isfinite(alibi_slope) and alibi_slope >= 0):
        raise ValueError(
            f"scale must be finite and alibi_slope finite and >= 0; got {scale}, {alibi_slope}"
        )
    dist = _distances(at, q_pos, *scores.shape)
    logits = scale * scores - alibi_slope * xp.abs(dist)
    if causal:
        logits = xp.where(dist >= 0, logits, -math.inf)
    a = xp.exp(logits - xp.max(logits, axis=1, keepdims=True))
    return a / xp.sum(a, axis=1, keepdims=True)


def near_far_mass(weights, window: int, q_pos=None):
    """Near and far attention masses per query (claims AT10, AT12, AT13).

    near_i = Σ_{0 ≤ i−j < W} a_ij,  far_i = ρ_D = Σ_{i−j ≥ W} a_ij,  W = ``window`` ≥ 1.
    weights: (n_q, n); returns two arrays of shape (n_q,). Cost O(n_q·n).
    """
    at = namespace_of(weights)
    xp = at.xp
    weights = as_float(at, weights, "weights", 2)
    window = check_int(window, "window", 1)
    dist = _distances(at, q_pos, *weights.shape)
    near = xp.sum(xp.where((dist >= 0) & (dist < window), weights, 0.0), axis=1)
    far = xp.sum(xp.where(dist >= window, weights, 0.0), axis=1)
    return near, far


def so2_value_output(
    weights, v, theta, q_pos=None, route: str = "from_source", pairing: str = "half"
):
    """Value transport o_i = Σ_j a_ij R(route angle j→i) v_j (claims AT14, AT18, AT19).

    Computed as o_i = R(Φ_i) Σ_j a_ij R(−Φ_j) v_j (rotate values, average, inverse output
    rotation); with [B]'s suffix angles the same sum reads Σ_j a_ij R(φ_j − φ_i) v_j.
    Shapes: weights (n_q, n), v (n, d), theta (n, d/2); returns (n_q, d). Cost O(n·d + n_q·n·d).
    """
    at = namespace_of(weights, v, theta)
    weights, v = _weights_values(at, weights, v)
    theta = _angles(at, theta, v.shape[0], v.shape[1])
    pos = positions(at, q_pos, weights.shape[0], v.shape[0])
    phi = absolute_angles(theta, route)
    u = weights @ rotate_blocks(v, -phi, pairing)
    return rotate_blocks(u, at.xp.take(phi, pos, axis=0), pairing)


def orthogonal_value_output(
    weights, v, steps, q_pos=None, route: str = "from_source", atol: float = 1e-8
):
    """Value transport o_i = Σ_j a_ij P_{j→i} v_j = G_i Σ_j a_ij G_jᵀ v_j for orthogonal steps.

    Shapes: weights (n_q, n), v (n, d), steps (n, d, d); returns (n_q, d).
    Cost O(n·d³ + n_q·n·d). Claims AT14, AT18.
    """
    at = namespace_of(weights, v, steps)
    weights, v = _weights_values(at, weights, v)
    pos = positions(at, q_pos, weights.shape[0], v.shape[0])
    g = frame_prefix(orthogonal_steps(at, steps, atol), route, atol)  # on the common backend
    if tuple(g.shape[:2]) != tuple(v.shape):
        raise ValueError(
            f"steps must have shape ({v.shape[0]}, {v.shape[1]}, {v.shape[1]}); got {g.shape}"
        )
    u = weights @ _rows_times_t(g, v)
    return _rows_times(at.xp.take(g, pos, axis=0), u)
