"""The far residual of value transport (paper [B], claims AT14, AT15): Monte Carlo draws of
‖Σ_far a_j P_j v_j‖² and the references the checks compare them with.

* :func:`planar_pairs` — values in half-split pairing as per-block planar vectors (the layout of
  :mod:`posflow.theory.transport`'s value-side moments);
* :func:`far_residual_sq` — ‖Σ_j a_j P_{j→i} v_j‖² for many independent draws of
  θ ~ Unif[−s_b, s_b], through :func:`posflow.simulate.transport.so2_value_output`;
* :func:`unrotated_residual_sq` — the same sum without value rotation (zero angles);
* :func:`route_sum_value_output` — Σ_j a_j R(Σ_{s=j}^{n−2} θ_s) v_j with every route angle
  summed directly (an independent reference for ``so2_value_output``);
* :func:`lazy_haar_residual_sq` — ‖Σ_j a_j P_j v_j‖² for non-commuting lazy Haar O(d) steps.

Everything is NumPy float64; the far tokens are the first M of n = M + gap tokens and the query
is the last one.
"""

from __future__ import annotations

import numpy as np

from posflow.simulate.orthogonal import SO2BlockLaw, haar
from posflow.simulate.transport import so2_value_output

__all__ = [
    "far_residual_sq",
    "lazy_haar_residual_sq",
    "planar_pairs",
    "route_sum_value_output",
    "unrotated_residual_sq",
]


def planar_pairs(values) -> np.ndarray:
    """Values in half-split pairing as per-block planar vectors.

    Parameters
    ----------
    values : array_like, shape (M, d)
        d even; block b pairs coordinates b and b + d/2.

    Returns
    -------
    ndarray, shape (M, d/2, 2)
        ``out[j, b] = (values[j, b], values[j, b + d/2])``.
    """
    v = np.asarray(values)
    h = v.shape[1] // 2
    return np.stack([v[:, :h], v[:, h:]], axis=-1)


def far_residual_sq(scales, weights, values, gap: int, trials: int, rng) -> np.ndarray:
    """‖Σ_{j<M} a_j P_{j→n−1} v_j‖² for ``trials`` independent draws of θ_b ~ Unif[−s_b, s_b].

    The context has n = M + gap tokens, the query is the last one and the far tokens are the
    first M (token j at distance n − 1 − j). All draws go through one
    :func:`~posflow.simulate.transport.so2_value_output` call per chunk: trial t's block b is
    block t·B + b of a wide value vector (SO(2) blocks rotate independently), with angles from
    one wide :class:`~posflow.simulate.orthogonal.SO2BlockLaw`. Cost O(trials·n·d).

    Parameters
    ----------
    scales : ndarray, shape (B,)
        Half-widths s_b of the uniform angle law of each block.
    weights : ndarray, shape (M,)
        Far weights a_j.
    values : ndarray, shape (M, d), d = 2B
        Far values v_j in half-split pairing.
    gap : int
        Tokens between the last far token and the query (the query included).
    trials : int
        Independent draws.
    rng : numpy.random.Generator
        Source of the angles (consumed in chunks of draws).

    Returns
    -------
    ndarray, shape (trials,)
        The squared residual of each draw.
    """
    M, d = values.shape
    B, n = d // 2, M + gap
    w = np.zeros((1, n))
    w[0, :M] = weights
    out = []
    chunk = max(1, int(4e6 // (n * d)))
    for t0 in range(0, trials, chunk):
        t = min(chunk, trials - t0)
        v = np.zeros((n, 2 * B * t))
        v[:M, : B * t] = np.tile(values[:, :B], t)
        v[:M, B * t :] = np.tile(values[:, B:], t)
        theta = SO2BlockLaw(2 * B * t, "uniform", scale=np.tile(scales, t)).sample_angles(n, rng)
        o = so2_value_output(w, v, theta)[0]
        x, y = o[: B * t].reshape(t, B), o[B * t :].reshape(t, B)
        out.append(np.sum(x * x + y * y, axis=1))
    return np.concatenate(out)


def unrotated_residual_sq(weights, values, gap: int) -> float:
    """‖Σ_j a_j v_j‖² through :func:`~posflow.simulate.transport.so2_value_output` with zero
    angles (no value rotation); the layout of :func:`far_residual_sq`.

    Parameters
    ----------
    weights : ndarray, shape (M,)
    values : ndarray, shape (M, d)
    gap : int

    Returns
    -------
    float
    """
    M, d = values.shape
    n = M + gap
    w = np.zeros((1, n))
    w[0, :M] = weights
    v = np.zeros((n, d))
    v[:M] = values
    return float(np.sum(so2_value_output(w, v, np.zeros((n, d // 2))) ** 2))


def route_sum_value_output(weights, values, theta) -> np.ndarray:
    """o = Σ_j a_j R(Σ_{s=j}^{n−2} θ_s) v_j for the query n − 1, every route angle summed directly.

    An independent reference for :func:`~posflow.simulate.transport.so2_value_output` (route
    ``"from_source"``, half-split pairing). Cost O(n²·B).

    Parameters
    ----------
    weights : ndarray, shape (n,)
    values : ndarray, shape (n, 2B)
    theta : ndarray, shape (n, B)
        Step angles θ_s of each block.

    Returns
    -------
    ndarray, shape (2B,)
    """
    n, B = theta.shape
    o = np.zeros(2 * B)
    for j in range(n):
        psi = theta[j : n - 1].sum(axis=0)
        c, s = np.cos(psi), np.sin(psi)
        x1, x2 = values[j, :B], values[j, B:]
        o[:B] += weights[j] * (x1 * c - x2 * s)
        o[B:] += weights[j] * (x1 * s + x2 * c)
    return o


def lazy_haar_residual_sq(d: int, p: float, weights, values, distances, samples: int, seed: int):
    """‖Σ_j a_j P_j v_j‖² for ``samples`` routes of lazy Haar O(d) steps (non-commuting).

    Each step is Haar on O(d) (:func:`~posflow.simulate.orthogonal.haar`) with probability p,
    else the identity; P_j is the product of the n_j steps nearest the query (the new step on
    the right). The Haar steps are drawn first, then the lazy coins, from one
    ``numpy.random.default_rng(seed)``. Cost O(samples·max n_j·d³).

    Parameters
    ----------
    d : int
    p : float
        Chance that a step is Haar (E M = (1 − p) I).
    weights : ndarray, shape (M,)
    values : ndarray, shape (M, d)
    distances : ndarray of int, shape (M,)
        Route lengths n_j ≥ 1.
    samples : int
    seed : int

    Returns
    -------
    ndarray, shape (samples,)
    """
    a, v, n = weights, values, distances
    rng = np.random.default_rng(seed)
    steps = haar(d, samples * int(n.max()), seed=rng).reshape(samples, int(n.max()), d, d)
    lazy = rng.random((samples, int(n.max()))) >= p
    steps[lazy] = np.eye(d)
    P = np.broadcast_to(np.eye(d), (samples, d, d)).copy()
    total = np.zeros((samples, d))
    for dist in range(1, int(n.max()) + 1):
        P = P @ steps[:, dist - 1]
        for j in np.flatnonzero(n == dist):
            total += a[j] * (P @ v[j])
    return np.sum(total * total, axis=1)
