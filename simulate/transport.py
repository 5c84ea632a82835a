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

The stylized single-layer model of [B] (``posflow.simulate._stylized``) and the mixing-window
estimates (``posflow.simulate._mixing``) live in private modules and are re-exported here.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate._mixing import empirical_mixing_window, empirical_route_mean, mixing_window
from posflow.simulate._stylized import SCHEMES, StylizedResult, stylized_attention, stylized_sweep
from posflow.simulate.orthogonal import _check_int, rotate_blocks

__all__ = [
    "ROUTES",
    "SCHEMES",
    "StylizedResult",
    "absolute_angles",
    "attention_weights",
    "empirical_mixing_window",
    "empirical_route_mean",
    "frame_prefix",
    "householder_scores",
    "householder_step",
    "mixing_window",
    "near_far_mass",
    "orthogonal_scores",
    "orthogonal_value_output",
    "route_angles",
    "route_product",
    "so2_scores",
    "so2_value_output",
    "stylized_attention",
    "stylized_sweep",
    "suffix_angles",
    "wrap_angle",
]

ROUTES = ("from_source", "path")


def _check_route(route: str) -> int:
    """Return the shift of the route: 0 for from_source, 1 for path."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}; got {route!r}")
    return 0 if route == "from_source" else 1


def _finite(x, name: str, ndim: int) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array; got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def _angles(theta, n: int, d: int) -> np.ndarray:
    theta = _finite(theta, "theta", 2)
    if theta.shape != (n, d // 2):
        raise ValueError(f"theta must have shape (n, d/2) = ({n}, {d // 2}); got {theta.shape}")
    return theta


def _positions(q_pos, n_q: int, n: int) -> np.ndarray:
    """Query positions; default arange(n) when n_q == n, else the last n_q positions."""
    if q_pos is None:
        if n_q > n:
            raise ValueError(f"q_pos is required when there are more queries ({n_q}) than keys")
        return np.arange(n - n_q, n)
    q_pos = np.asarray(q_pos)
    if q_pos.shape != (n_q,) or not np.issubdtype(q_pos.dtype, np.integer):
        raise ValueError(f"q_pos must be {n_q} integers; got shape {q_pos.shape}, {q_pos.dtype}")
    if n_q and (q_pos.min() < 0 or q_pos.max() >= n):
        raise ValueError(f"q_pos must lie in [0, {n - 1}]")
    return q_pos


def _qk(q, k, name_k: str = "k") -> tuple[np.ndarray, np.ndarray]:
    q, k = _finite(q, "q", 2), _finite(k, name_k, 2)
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q and {name_k} must have the same width d; got {q.shape}, {k.shape}")
    return q, k


def wrap_angle(x) -> np.ndarray:
    """Wrap angles to (−π, π]: π − ((π − x) mod 2π). Shape preserved."""
    return np.pi - np.mod(np.pi - np.asarray(x, dtype=float), 2.0 * np.pi)


def absolute_angles(theta, route: str = "from_source") -> np.ndarray:
    """Prefix (absolute) angles Φ, shape (n, d/2), wrapped to (−π, π] (claims AT18, AT19).

    from_source: Φ_t = Σ_{s<t} θ_s;  path: Φ_t = Σ_{s≤t} θ_s;  route angle of j→i = Φ_i − Φ_j.
    Float64 cumulative sums, absolute error ≲ n·ε·max_t|Σ_{s≤t} θ_s|. Cost O(n·d).
    """
    shift = _check_route(route)
    theta = _finite(theta, "theta", 2)
    c = np.cumsum(theta, axis=0)
    if shift == 0:
        c = np.concatenate([np.zeros((1, theta.shape[1])), c[:-1]], axis=0)
    return wrap_angle(c)


def suffix_angles(theta, route: str = "from_source") -> np.ndarray:
    """Suffix angles φ of [B]'s code (flip → cumsum → flip), shape (n, d/2) (claim AT18).

    from_source: φ_t = Σ_{s≥t} θ_s;  path: φ_t = Σ_{s>t} θ_s;  route angle of j→i = φ_j − φ_i,
    so (R(φ_i) q)·(R(φ_j) k) = qᵀ R(φ_j − φ_i) k. Wrapped to (−π, π]. Cost O(n·d).
    """
    shift = _check_route(route)
    theta = _finite(theta, "theta", 2)
    c = np.cumsum(theta[::-1], axis=0)[::-1]
    if shift == 1:
        c = np.concatenate([c[1:], np.zeros((1, theta.shape[1]))], axis=0)
    return wrap_angle(c)


def route_angles(theta, j: int, i: int, route: str = "from_source") -> np.ndarray:
    """Direct route angle Σ_{s∈route(j→i)} θ_s, shape (d/2,), wrapped; a reference (claim AT18).

    from_source: Σ_{s=j}^{i−1} θ_s;  path: Σ_{s=j+1}^{i} θ_s. Requires 0 ≤ j ≤ i < n.
    """
    shift = _check_route(route)
    theta = _finite(theta, "theta", 2)
    if not 0 <= j <= i < theta.shape[0]:
        raise ValueError(f"need 0 <= j <= i < n = {theta.shape[0]}; got j={j}, i={i}")
    return wrap_angle(theta[j + shift : i + shift].sum(axis=0))


def route_product(steps, j: int, i: int, route: str = "from_source") -> np.ndarray:
    """Dense route product P_{j→i}, shape (d, d); the reference for every fast path.

    from_source: M_{i−1} ⋯ M_j;  path: M_i ⋯ M_{j+1} (later steps on the left; P_{i→i} = I).
    steps: shape (n, d, d), any matrices. Cost O((i − j)·d³). Claims AT2, AT18.
    """
    shift = _check_route(route)
    steps = _finite(steps, "steps", 3)
    if not 0 <= j <= i < steps.shape[0]:
        raise ValueError(f"need 0 <= j <= i < n = {steps.shape[0]}; got j={j}, i={i}")
    p = np.eye(steps.shape[1])
    for s in range(j + shift, i + shift):
        p = steps[s] @ p
    return p


def so2_scores(
    q, k, theta, route: str = "from_source", q_pos=None, pairing: str = "half"
) -> np.ndarray:
    """All-source scores s_ij = q_iᵀ R(route angle j→i) k_j for SO(2)-block steps (AT18, AT19).

    s_ij = (R(−Φ_i) q_i)·(R(−Φ_j) k_j) with Φ from :func:`absolute_angles`.

    Parameters
    ----------
    q : (n_q, d) queries at positions ``q_pos`` (default: the last n_q positions)
    k : (n, d) keys;  theta : (n, d/2) per-position angles θ[s, b]

    Returns (n_q, n). Cost O((n + n_q)·d) rotations plus one (n_q × d)·(d × n) matmul.
    """
    q, k = _qk(q, k)
    theta = _angles(theta, k.shape[0], k.shape[1])
    q_pos = _positions(q_pos, q.shape[0], k.shape[0])
    phi = absolute_angles(theta, route)
    return rotate_blocks(q, -phi[q_pos], pairing) @ rotate_blocks(k, -phi, pairing).T


def _orthogonal_steps(steps, atol: float) -> np.ndarray:
    steps = _finite(steps, "steps", 3)
    n, d, d2 = steps.shape
    if d != d2 or n < 1:
        raise ValueError(f"steps must have shape (n, d, d) with n >= 1; got {steps.shape}")
    err = np.abs(steps @ np.swapaxes(steps, 1, 2) - np.eye(d)).max(axis=(1, 2))
    if (err > atol).any():
        t = int(np.argmax(err))
        raise ValueError(
            f"steps must be orthogonal to atol={atol}; step {t} has max|M Mᵀ − I| = {err[t]:.3g}"
        )
    return steps


def frame_prefix(steps, route: str = "from_source", atol: float = 1e-8) -> np.ndarray:
    """Absolute frames G_t with P_{j→i} = G_i G_jᵀ for orthogonal steps, shape (n, d, d).

    F_t = M_t ⋯ M_0; G_t = F_{t−1} (from_source, G_0 = I) or G_t = F_t (path).
    Cost n d×d products, O(n·d³), once. Raises ValueError if a step is not orthogonal to atol.
    Claims AT2, AT18.
    """
    shift = _check_route(route)
    steps = _orthogonal_steps(steps, atol)
    n, d, _ = steps.shape
    g = np.empty_like(steps)
    f = np.eye(d)
    for t in range(n):
        if shift == 0:
            g[t] = f
        f = steps[t] @ f
        if shift == 1:
            g[t] = f
    return g


def orthogonal_scores(
    q, k, steps, route: str = "from_source", q_pos=None, atol: float = 1e-8
) -> np.ndarray:
    """Scores s_ij = q_iᵀ P_{j→i} k_j for exactly orthogonal steps (e.g. Haar) (claims AT2, AT11).

    s_ij = (G_iᵀ q_i)·(G_jᵀ k_j) with G from :func:`frame_prefix`.
    Shapes: q (n_q, d), k (n, d), steps (n, d, d); returns (n_q, n). Cost O(n·d³ + n_q·n·d).
    """
    q, k = _qk(q, k)
    steps = _orthogonal_steps(steps, atol)
    if steps.shape[0] != k.shape[0] or steps.shape[1] != k.shape[1]:
        raise ValueError(
            f"steps must have shape (n, d, d) = ({k.shape[0]}, {k.shape[1]}, "
            f"{k.shape[1]}); got {steps.shape}"
        )
    q_pos = _positions(q_pos, q.shape[0], k.shape[0])
    g = frame_prefix(steps, route, atol)
    qt = np.einsum("nab,na->nb", g[q_pos], q)
    kt = np.einsum("nab,na->nb", g, k)
    return qt @ kt.T


def _betas(beta, n: int) -> np.ndarray:
    beta = np.asarray(beta, dtype=float)
    if beta.ndim == 0:
        beta = np.full(n, float(beta))
    if beta.shape != (n,):
        raise ValueError(f"beta must be a scalar or have shape ({n},); got {beta.shape}")
    bad = ~((beta >= 0.0) & (beta <= 2.0))
    if bad.any():
        t = int(np.flatnonzero(bad)[0])
        raise ValueError(f"beta must lie in [0, 2]; got {beta[t]} at index {t}")
    return beta


def householder_step(x, w, beta) -> np.ndarray:
    """PaTH key-cache update x ← x − β (w·x) w = (I − β w wᵀ) x (claim AT18).

    x, w: shape (..., d), broadcast; beta: scalar in [0, 2]. Cost O(size of x).
    """
    x, w = np.asarray(x, dtype=float), np.asarray(w, dtype=float)
    if not (np.isfinite(x).all() and np.isfinite(w).all()):
        raise ValueError("x and w must be finite (no NaN or inf)")
    if np.ndim(beta) != 0:
        raise ValueError(f"beta must be a scalar in [0, 2]; got shape {np.shape(beta)}")
    beta = _betas(beta, 1)[0]
    return x - beta * np.sum(w * x, axis=-1, keepdims=True) * w


def householder_scores(q, k, w, beta, query_pos: int, route: str = "path") -> np.ndarray:
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
    shift = _check_route(route)
    q = _finite(q, "q", 1)
    k, w = _finite(k, "k", 2), _finite(w, "w", 2)
    n, d = k.shape
    if q.shape != (d,) or w.shape != (n, d):
        raise ValueError(
            f"q must have shape ({d},) and w shape ({n}, {d}); got {q.shape}, {w.shape}"
        )
    norms = np.linalg.norm(w, axis=1)
    if (np.abs(norms - 1.0) > 1e-12).any():
        t = int(np.argmax(np.abs(norms - 1.0)))
        raise ValueError(
            f"w rows must be unit vectors (tolerance 1e-12); row {t} has norm {norms[t]!r}"
        )
    beta = _betas(beta, n)
    i = _check_int(query_pos, "query_pos", 0)
    if i >= n:
        raise ValueError(f"query_pos must be < n = {n}; got {i}")
    u = q.copy()
    us = np.empty((i + 1, d))
    us[i] = u
    for t in range(i - 1 + shift, shift - 1, -1):
        u = u - beta[t] * (w[t] @ u) * w[t]
        us[t - shift] = u
    return np.einsum("jd,jd->j", us, k[: i + 1])


def attention_weights(
    scores, q_pos=None, *, scale: float = 1.0, alibi_slope: float = 0.0, causal: bool = True
) -> np.ndarray:
    """Softmax attention rows a_ij ∝ exp(scale·s_ij − m·|i − j|) over j ≤ i (claims AT10, AT13).

    scores: (n_q, n) with queries at ``q_pos`` (default: the last n_q positions); m =
    ``alibi_slope`` ≥ 0 (ALiBi bias). ``causal`` masks j > i. Returns (n_q, n), rows summing to 1.
    Numerically stable (max subtraction). Cost O(n_q·n).
    """
    scores = _finite(scores, "scores", 2)
    if not (np.isfinite(scale) and np.isfinite(alibi_slope) and alibi_slope >= 0):
        raise ValueError(
            f"scale must be finite and alibi_slope finite and >= 0; got {scale}, {alibi_slope}"
        )
    n_q, n = scores.shape
    q_pos = _positions(q_pos, n_q, n)
    dist = q_pos[:, None] - np.arange(n)[None, :]
    logits = scale * scores - alibi_slope * np.abs(dist)
    if causal:
        logits = np.where(dist >= 0, logits, -np.inf)
    logits = logits - logits.max(axis=1, keepdims=True)
    a = np.exp(logits)
    return a / a.sum(axis=1, keepdims=True)


def near_far_mass(weights, window: int, q_pos=None) -> tuple[np.ndarray, np.ndarray]:
    """Near and far attention masses per query (claims AT10, AT12, AT13).

    near_i = Σ_{0 ≤ i−j < W} a_ij,  far_i = ρ_D = Σ_{i−j ≥ W} a_ij,  W = ``window`` ≥ 1.
    weights: (n_q, n); returns two arrays of shape (n_q,). Cost O(n_q·n).
    """
    weights = _finite(weights, "weights", 2)
    window = _check_int(window, "window", 1)
    n_q, n = weights.shape
    q_pos = _positions(q_pos, n_q, n)
    dist = q_pos[:, None] - np.arange(n)[None, :]
    near = np.where((dist >= 0) & (dist < window), weights, 0.0).sum(axis=1)
    far = np.where(dist >= window, weights, 0.0).sum(axis=1)
    return near, far


def so2_value_output(
    weights, v, theta, q_pos=None, route: str = "from_source", pairing: str = "half"
) -> np.ndarray:
    """Value transport o_i = Σ_j a_ij R(route angle j→i) v_j (claims AT14, AT18, AT19).

    Computed as o_i = R(Φ_i) Σ_j a_ij R(−Φ_j) v_j (rotate values, average, inverse output
    rotation); with [B]'s suffix angles the same sum reads Σ_j a_ij R(φ_j − φ_i) v_j.
    Shapes: weights (n_q, n), v (n, d), theta (n, d/2); returns (n_q, d). Cost O(n·d + n_q·n·d).
    """
    weights, v = _finite(weights, "weights", 2), _finite(v, "v", 2)
    if weights.shape[1] != v.shape[0]:
        raise ValueError(f"weights must have {v.shape[0]} columns; got {weights.shape}")
    theta = _angles(theta, v.shape[0], v.shape[1])
    q_pos = _positions(q_pos, weights.shape[0], v.shape[0])
    phi = absolute_angles(theta, route)
    return rotate_blocks(weights @ rotate_blocks(v, -phi, pairing), phi[q_pos], pairing)


def orthogonal_value_output(
    weights, v, steps, q_pos=None, route: str = "from_source", atol: float = 1e-8
) -> np.ndarray:
    """Value transport o_i = Σ_j a_ij P_{j→i} v_j = G_i Σ_j a_ij G_jᵀ v_j for orthogonal steps.

    Shapes: weights (n_q, n), v (n, d), steps (n, d, d); returns (n_q, d).
    Cost O(n·d³ + n_q·n·d). Claims AT14, AT18.
    """
    weights, v = _finite(weights, "weights", 2), _finite(v, "v", 2)
    if weights.shape[1] != v.shape[0]:
        raise ValueError(f"weights must have {v.shape[0]} columns; got {weights.shape}")
    q_pos = _positions(q_pos, weights.shape[0], v.shape[0])
    g = frame_prefix(steps, route, atol)
    if g.shape[:2] != v.shape:
        raise ValueError(
            f"steps must have shape ({v.shape[0]}, {v.shape[1]}, {v.shape[1]}); got {g.shape}"
        )
    u = weights @ np.einsum("nab,na->nb", g, v)
    return np.einsum("nab,nb->na", g[q_pos], u)
