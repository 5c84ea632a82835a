"""Generic (array API) SO(2) transport and Monte Carlo estimators of paper [B].

Re-exported by :mod:`posflow.simulate.backend`. Every function takes arrays of any backend (NumPy,
torch, CuPy, array_api_strict), computes with the standard functions of their namespace, and
returns arrays of the same kind; the NumPy references are the functions of
:mod:`posflow.simulate.transport` of the same name without ``_xp``, which these match to rounding
(≤ 1e-10 in float64). Conventions (routes, half/interleaved pairing, wrapped angles) are those
of :mod:`posflow.simulate.transport`.
"""

from __future__ import annotations

import math
import numbers

import numpy as np
from array_api_compat import array_namespace
from array_api_compat import device as _device_of

from posflow.simulate.orthogonal import SO2BlockLaw, rope_frequencies
from posflow.simulate.transport import ROUTES, SCHEMES, StylizedResult

__all__ = [
    "absolute_angles_xp",
    "attention_weights_xp",
    "near_far_mass_xp",
    "rotate_blocks_xp",
    "route_mean_xp",
    "so2_scores_xp",
    "so2_value_output_xp",
    "stylized_attention_xp",
]


def _int(value, name: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}; got {value}")
    return int(value)


def _finite(xp, x, name: str, ndim: int | None = None):
    if ndim is not None and x.ndim != ndim:
        raise ValueError(f"{name} must be a {ndim}-d array; got shape {tuple(x.shape)}")
    x = x if x.dtype == xp.float64 else xp.astype(x, xp.float64)
    if not bool(xp.all(xp.isfinite(x))):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return x


def _shift(route: str) -> int:
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}; got {route!r}")
    return 0 if route == "from_source" else 1


def _positions(xp, q_pos, n_q: int, n: int, dev):
    """Query positions as an int64 array on ``dev``; default: the last n_q positions."""
    if q_pos is None:
        if n_q > n:
            raise ValueError(f"q_pos is required when there are more queries ({n_q}) than keys")
        return xp.arange(n - n_q, n, dtype=xp.int64, device=dev)
    from posflow.simulate.backend import to_numpy

    host = to_numpy(q_pos)
    if host.shape != (n_q,) or not np.issubdtype(host.dtype, np.integer):
        raise ValueError(f"q_pos must be {n_q} integers; got shape {host.shape}, {host.dtype}")
    if n_q and (host.min() < 0 or host.max() >= n):
        raise ValueError(f"q_pos must lie in [0, {n - 1}]")
    return xp.asarray(host.astype(np.int64), device=dev)


def _wrap(xp, x):
    return math.pi - xp.remainder(math.pi - x, 2.0 * math.pi)


def rotate_blocks_xp(x, angles, pairing: str = "half"):
    """Rotate every 2-block of x: y_b = R(angle_b) x_b (claim AT18); generic backend.

    y[i1] = x[i1] cos φ − x[i2] sin φ,  y[i2] = x[i1] sin φ + x[i2] cos φ with the pairs of
    :func:`posflow.simulate.orthogonal.block_indices`. x: (..., d), d even; angles broadcastable to
    (..., d/2). Returns the broadcast shape (..., d), same backend. Cost O(size of x).
    """
    xp = array_namespace(x, angles)
    if x.ndim < 1 or x.shape[-1] % 2:
        raise ValueError(f"x must have a last axis of even length d; got shape {tuple(x.shape)}")
    if pairing not in ("half", "interleaved"):
        raise ValueError(f"pairing must be one of ('half', 'interleaved'); got {pairing!r}")
    d = x.shape[-1]
    if angles.ndim < 1 or angles.shape[-1] != d // 2:
        raise ValueError(f"angles must have last axis d/2 = {d // 2}; got {tuple(angles.shape)}")
    c, s = xp.cos(angles), xp.sin(angles)
    if pairing == "half":
        x1, x2 = x[..., : d // 2], x[..., d // 2 :]
        return xp.concat([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    y = xp.stack([x1 * c - x2 * s, x1 * s + x2 * c], axis=-1)
    return xp.reshape(y, (*y.shape[:-2], d))


def absolute_angles_xp(theta, route: str = "from_source"):
    """Prefix angles Φ (from_source: Σ_{s<t} θ_s, path: Σ_{s≤t} θ_s), wrapped to (−π, π].

    theta: (n, d/2) on any backend; returns (n, d/2) on the same. Cost O(n·d). Claim AT18.
    """
    shift = _shift(route)
    xp = array_namespace(theta)
    theta = _finite(xp, theta, "theta", 2)
    c = xp.cumulative_sum(theta, axis=0)
    if shift == 0:
        zero = xp.zeros((1, theta.shape[1]), dtype=xp.float64, device=_device_of(theta))
        c = xp.concat([zero, c[:-1, ...]], axis=0)
    return _wrap(xp, c)


def _qk_theta(q, k, theta):
    xp = array_namespace(q, k, theta)
    q, k = _finite(xp, q, "q", 2), _finite(xp, k, "k", 2)
    if q.shape[1] != k.shape[1]:
        raise ValueError(f"q and k must have the same width d; got {q.shape}, {k.shape}")
    theta = _finite(xp, theta, "theta", 2)
    n, d = k.shape
    if tuple(theta.shape) != (n, d // 2) or d % 2:
        raise ValueError(f"theta must have shape (n, d/2) = ({n}, {d // 2}); got {theta.shape}")
    return xp, q, k, theta


def so2_scores_xp(q, k, theta, route: str = "from_source", q_pos=None, pairing: str = "half"):
    """Scores s_ij = q_iᵀ R(route angle j→i) k_j for SO(2)-block steps (claims AT18, AT19).

    s_ij = (R(−Φ_i) q_i)·(R(−Φ_j) k_j), Φ = :func:`absolute_angles_xp`. q: (n_q, d) at
    ``q_pos`` (default: the last n_q positions), k: (n, d), theta: (n, d/2), one backend.
    Returns (n_q, n) on that backend. Cost O((n + n_q)·d) plus one (n_q×d)·(d×n) matmul.
    """
    xp, q, k, theta = _qk_theta(q, k, theta)
    pos = _positions(xp, q_pos, q.shape[0], k.shape[0], _device_of(k))
    phi = absolute_angles_xp(theta, route)
    qr = rotate_blocks_xp(q, -xp.take(phi, pos, axis=0), pairing)
    return qr @ rotate_blocks_xp(k, -phi, pairing).T


def so2_value_output_xp(
    weights, v, theta, q_pos=None, route: str = "from_source", pairing: str = "half"
):
    """Value transport o_i = R(Φ_i) Σ_j a_ij R(−Φ_j) v_j (claims AT14, AT18, AT19), generic.

    weights: (n_q, n), v: (n, d), theta: (n, d/2); returns (n_q, d), same backend.
    Cost O(n·d + n_q·n·d).
    """
    xp = array_namespace(weights, v, theta)
    weights, v = _finite(xp, weights, "weights", 2), _finite(xp, v, "v", 2)
    if weights.shape[1] != v.shape[0]:
        raise ValueError(f"weights must have {v.shape[0]} columns; got {tuple(weights.shape)}")
    _, _, v, theta = _qk_theta(v, v, theta)
    pos = _positions(xp, q_pos, weights.shape[0], v.shape[0], _device_of(v))
    phi = absolute_angles_xp(theta, route)
    u = weights @ rotate_blocks_xp(v, -phi, pairing)
    return rotate_blocks_xp(u, xp.take(phi, pos, axis=0), pairing)


def _dist(xp, pos, n: int, dev):
    """i − j as float64, shape (n_q, n)."""
    j = xp.arange(n, dtype=xp.float64, device=dev)
    return xp.astype(pos, xp.float64)[:, None] - j[None, :]


def attention_weights_xp(
    scores, q_pos=None, *, scale: float = 1.0, alibi_slope: float = 0.0, causal: bool = True
):
    """Softmax rows a_ij ∝ exp(scale·s_ij − m·|i − j|) over j ≤ i (claims AT10, AT13), generic.

    scores: (n_q, n); returns (n_q, n) rows summing to 1, same backend. Cost O(n_q·n).
    """
    xp = array_namespace(scores)
    scores = _finite(xp, scores, "scores", 2)
    if not (math.isfinite(scale) and math.isfinite(alibi_slope) and alibi_slope >= 0):
        raise ValueError(
            f"scale must be finite and alibi_slope finite and >= 0; got {scale}, {alibi_slope}"
        )
    n_q, n = scores.shape
    dev = _device_of(scores)
    dist = _dist(xp, _positions(xp, q_pos, n_q, n, dev), n, dev)
    logits = scale * scores - alibi_slope * xp.abs(dist)
    if causal:
        logits = xp.where(dist >= 0, logits, -math.inf)
    logits = logits - xp.max(logits, axis=1, keepdims=True)
    a = xp.exp(logits)
    return a / xp.sum(a, axis=1, keepdims=True)


def near_far_mass_xp(weights, window: int, q_pos=None):
    """Near mass Σ_{0 ≤ i−j < W} a_ij and far mass ρ_D = Σ_{i−j ≥ W} a_ij per query.

    weights: (n_q, n); returns two (n_q,) arrays, same backend. Claims AT10, AT12, AT13.
    """
    xp = array_namespace(weights)
    weights = _finite(xp, weights, "weights", 2)
    window = _int(window, "window", 1)
    n_q, n = weights.shape
    dev = _device_of(weights)
    dist = _dist(xp, _positions(xp, q_pos, n_q, n, dev), n, dev)
    near = xp.sum(xp.where((dist >= 0) & (dist < window), weights, 0.0), axis=1)
    far = xp.sum(xp.where(dist >= window, weights, 0.0), axis=1)
    return near, far


def _law_angles(src, law: SO2BlockLaw, shape):
    s = law.scale
    if law.law == "uniform":
        return src.uniform(-s, s, shape)
    if law.law == "normal":
        return src.normal(0.0, s, shape)
    if law.law == "positive_uniform":
        return src.uniform(0.0, 2.0 * s, shape)
    xp = src.xp
    return xp.broadcast_to(xp.asarray(s, dtype=xp.float64, device=src.device), shape)


def route_mean_xp(
    law,
    max_distance: int,
    n_routes: int = 1000,
    seed=None,
    *,
    statistic: str = "norm",
    per_block: bool = False,
    backend: str = "numpy",
    device=None,
    host: bool = False,
):
    """Monte Carlo decorrelation of SO(2) route products, vectorised over distances (AT5, AT6).

    ψ_b(n) = Σ_{s<n} θ_{s,b} by a cumulative sum over distances; ``"norm"``: |Ê e^{iψ_b}|
    (max over blocks unless ``per_block``), ``"cos"``: |Ê cos ψ_b| (mean over blocks unless
    ``per_block``), n = 0 … max_distance. Exact for the uniform law: (sin a/a)ⁿ.
    Random angles from :func:`posflow.simulate.backend.random_source` (``host=True``: the numbers of
    :func:`posflow.simulate.transport.empirical_route_mean`, which this then matches to 1e-10).

    Returns (max_distance + 1,) or (max_distance + 1, d/2) on ``backend``. Cost
    O(max_distance·n_routes·d), memory O(n_routes·d) per chunk of distances.
    """
    from posflow.simulate.backend import random_source

    if not isinstance(law, SO2BlockLaw):
        raise TypeError(f"law must be an SO2BlockLaw; got {type(law).__name__}")
    if statistic not in ("norm", "cos"):
        raise ValueError(f"statistic must be 'norm' or 'cos'; got {statistic!r}")
    m = _int(max_distance, "max_distance", 0)
    n_routes = _int(n_routes, "n_routes", 1)
    src = random_source(seed, backend, device, host=host)
    xp, dev, nb = src.xp, src.device, law.d // 2
    psi = xp.zeros((n_routes, nb), dtype=xp.float64, device=dev)
    rows = [(xp.ones((1, nb), dtype=xp.float64, device=dev), xp.zeros_like(psi[:1, ...]))]
    chunk = max(1, 2**22 // (n_routes * nb))
    for start in range(1, m + 1, chunk):
        c = min(chunk, m + 1 - start)
        steps = xp.cumulative_sum(_law_angles(src, law, (c, n_routes, nb)), axis=0)
        ang = psi[None, ...] + steps
        rows.append((xp.mean(xp.cos(ang), axis=1), xp.mean(xp.sin(ang), axis=1)))
        psi = ang[-1, ...]
    zc = xp.concat([r[0] for r in rows], axis=0)
    zs = xp.concat([r[1] for r in rows], axis=0)
    if statistic == "norm":
        mag = xp.sqrt(zc * zc + zs * zs)
        return mag if per_block else xp.max(mag, axis=1)
    return xp.abs(zc) if per_block else xp.abs(xp.mean(zc, axis=1))


def _unit(xp, g):
    return g / xp.sqrt(xp.sum(g * g, axis=-1, keepdims=True))


def _suffix_route(xp, theta, shift: int):
    """ψ_j = Σ_{s∈route(j→L−1)} θ_s, shape (L, d/2); ψ_{L−1} = 0."""
    length = theta.shape[0]
    seg = xp.flip(theta[shift : length - 1 + shift, ...], axis=0)
    psi = xp.flip(xp.cumulative_sum(seg, axis=0), axis=0)
    return xp.concat([psi, xp.zeros_like(theta[:1, ...])], axis=0)


def _draw(src, length, d, j_star, kappa, kappa_v, f, vocab, embed_scale) -> dict:
    """The inputs of one trial in the order of the NumPy model (common random numbers)."""
    xp = src.xp
    q = _unit(xp, src.standard_normal(d))
    keys = _unit(
        xp, kappa * q + math.sqrt(1.0 - kappa**2) * _unit(xp, src.standard_normal((length, d)))
    )
    keys[j_star, ...] = q
    t0 = _unit(xp, src.standard_normal(d))
    u = src.standard_normal(d)
    u = _unit(xp, u - xp.sum(u * t0) * t0)
    h = _unit(xp, src.standard_normal((length, d)))
    values = _unit(xp, kappa_v * u + math.sqrt(1.0 - kappa_v**2) * h)
    values[j_star, ...] = t0
    theta_qk = src.uniform(-f, f, (length, d // 2))
    theta_v = src.uniform(-f, f, (length, d // 2))
    table = src.normal(0.0, embed_scale, (vocab, d // 2))
    tokens = src.integers(0, vocab, (length,))
    return {
        "q": q,
        "keys": keys,
        "values": values,
        "theta_qk": theta_qk,
        "theta_v": theta_v,
        "table": table,
        "tokens": tokens,
    }


def stylized_attention_xp(
    scheme: str,
    length: int,
    *,
    d: int = 96,
    base: float = 10_000.0,
    near_distance: int = 4,
    window: int = 64,
    logit_scale: float = 8.0,
    key_coherence: float = 0.0,
    value_coherence: float = 1.0,
    alibi_slope: float = 2.0**-4,
    vocab: int = 1024,
    embed_scale: float = 0.1,
    route: str = "from_source",
    n_trials: int = 1,
    seed=None,
    backend: str = "numpy",
    device=None,
    host: bool = False,
) -> StylizedResult:
    """[B]'s stylized single-layer attention with a planted near target on any backend (AT19).

    The model, parameters and measurements of :func:`posflow.simulate.transport.stylized_attention`
    (far mass ρ_D = Σ_{i−j ≥ W} a_ij, near weight, near-signal coefficient, output error, far
    residual), computed with the array API on ``backend``/``device``; random inputs from
    :func:`posflow.simulate.backend.random_source`. With ``host=True`` (or NumPy) the draws are
    those of the NumPy function and the results agree with it to 1e-10.

    Returns a :class:`posflow.simulate.transport.StylizedResult` (per-trial NumPy arrays). Cost
    O(n_trials·L·d) on the device.
    """
    from posflow.simulate.backend import random_source

    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}; got {scheme!r}")
    shift = _shift(route)
    length = _int(length, "length", 2)
    near_distance = _int(near_distance, "near_distance", 1)
    window = _int(window, "window", near_distance + 1)
    if near_distance >= length:
        raise ValueError(f"near_distance must be < length = {length}; got {near_distance}")
    n_trials = _int(n_trials, "n_trials", 1)
    vocab = _int(vocab, "vocab", 1)
    for name, x, hi in (
        ("key_coherence", key_coherence, 1.0),
        ("value_coherence", value_coherence, 1.0),
        ("logit_scale", logit_scale, math.inf),
        ("alibi_slope", alibi_slope, math.inf),
        ("embed_scale", embed_scale, math.inf),
    ):
        if not (isinstance(x, numbers.Real) and 0.0 <= x <= hi and math.isfinite(x)):
            rule = "lie in [0, 1]" if hi == 1.0 else "be finite and >= 0"
            raise ValueError(f"{name} must {rule}; got {x!r}")
    f = rope_frequencies(d, base)
    src = random_source(seed, backend, device, host=host)
    xp, dev = src.xp, src.device
    fx = xp.asarray(f, dtype=xp.float64, device=dev)
    dist = xp.arange(length - 1, -1, -1, dtype=xp.float64, device=dev)  # i − j, j = 0 … L−1
    far = dist >= window
    j_star = length - 1 - near_distance
    res = {k: np.empty(n_trials) for k in ("far", "near", "coef", "err", "resid")}
    for trial in range(n_trials):
        x = _draw(src, length, d, j_star, key_coherence, value_coherence, f, vocab, embed_scale)
        keys, values = x["keys"], x["values"]
        psi = None
        if scheme == "rope":
            psi = -dist[:, None] * fx[None, :]
        elif scheme.startswith("learned"):
            ang = math.pi * xp.tanh(xp.take(x["table"], x["tokens"], axis=0)) - fx
            psi = _suffix_route(xp, ang, shift)
        elif scheme in ("random_qk", "random_qkv", "accum_alibi"):
            psi = _suffix_route(xp, x["theta_qk"], shift)
        if psi is not None:
            keys = rotate_blocks_xp(keys, psi)
        scores = logit_scale * (keys @ x["q"])
        if scheme in ("alibi", "accum_alibi"):
            scores = scores - alibi_slope * dist
        a = xp.exp(scores - xp.max(scores))
        a = a / xp.sum(a)
        if scheme in ("random_qkv", "learned_qkv"):
            pv = psi if scheme == "learned_qkv" else _suffix_route(xp, x["theta_v"], shift)
            values = rotate_blocks_xp(values, pv)
        target = values[j_star, ...]
        out = a @ values
        far_out = xp.sum(xp.where(far[:, None], a[:, None] * values, 0.0), axis=0)
        res["far"][trial] = float(xp.sum(xp.where(far, a, 0.0)))
        res["near"][trial] = float(a[j_star])
        res["coef"][trial] = float(xp.sum(out * target))
        res["err"][trial] = float(xp.sqrt(xp.sum((out - target) ** 2)))
        res["resid"][trial] = float(xp.sqrt(xp.sum(far_out * far_out)))
    return StylizedResult(
        scheme, length, res["far"], res["near"], res["coef"], res["err"], res["resid"]
    )
