"""Moments of route phases, route products and far scores (paper [B], claims AT1, AT2, AT5).

Re-exported by :mod:`posflow.simulate.transport`. Monte Carlo means come with their standard
errors s/√N (sample standard deviation, ``ddof=1``); the score moments are exact.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from posflow.simulate.orthogonal import phase_paths

__all__ = [
    "PhaseMoments",
    "phase_path_moments",
    "route_product_moments",
    "so2_far_score_moments",
    "so2_score_moments",
]


def _mean_se(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return x.mean(axis=0), x.std(axis=0, ddof=1) / np.sqrt(x.shape[0])


class PhaseMoments(NamedTuple):
    """Monte Carlo moments of the route phase Σ_{l≤L} θ_l, one row per checkpoint L.

    ``steps`` (n_L,) the checkpoints, ascending; ``cos``, ``cos_se``, ``sin``, ``sin_se``
    (n_L, d/2): the means of cos Σθ and sin Σθ per block and their standard errors.
    """

    steps: list[int]
    cos: np.ndarray
    cos_se: np.ndarray
    sin: np.ndarray
    sin_se: np.ndarray


def phase_path_moments(law, n_routes: int, checkpoints, rng) -> PhaseMoments:
    """Means of cos Σθ and sin Σθ over ``n_routes`` routes at every checkpoint (claim AT1).

    Parameters
    ----------
    law : SO2BlockLaw
        The angle law of the d/2 blocks.
    n_routes : int
        Number of routes N (≥ 2); one path per route, read at each checkpoint.
    checkpoints : iterable of int
        Route lengths L ≥ 1.
    rng : numpy.random.Generator
        Drawn as by :func:`posflow.simulate.orthogonal.phase_paths` (one draw per step).

    Returns
    -------
    PhaseMoments
        Arrays of shape (n_L, d/2), rows in ascending L. Cost O(max L · N · d).
    """
    paths = phase_paths(law, n_routes, checkpoints, rng)
    steps = sorted(paths)
    moments = [(*_mean_se(np.cos(paths[s])), *_mean_se(np.sin(paths[s]))) for s in steps]
    cos, cos_se, sin, sin_se = (np.array([m[i] for m in moments]) for i in range(4))
    return PhaseMoments(steps, cos, cos_se, sin, sin_se)


def route_product_moments(law, n_routes: int, max_steps: int, seed):
    """Mean route product Ê[M_L ⋯ M_1] and its entrywise standard error for L = 1 … max_steps.

    Parameters
    ----------
    law : StepLaw
        i.i.d. steps of size d (``law.sample(N, seed=...)``, shape (N, d, d)).
    n_routes : int
        Number of routes N (≥ 2), each a product of i.i.d. steps, the new step on the left.
    max_steps : int
        Largest route length L (≥ 1).
    seed : numpy.random.Generator
        One ``law.sample`` draw per step, in order of L.

    Returns
    -------
    mean, se : ndarray, shape (max_steps, d, d)
        Row L − 1 holds Ê[M_L ⋯ M_1] and its standard errors (AT2: against (E M)^L).
        Cost O(max_steps · N · d³).
    """
    d = law.d
    P = np.broadcast_to(np.eye(d), (n_routes, d, d)).copy()
    mean, se = np.empty((max_steps, d, d)), np.empty((max_steps, d, d))
    for step in range(max_steps):
        P = law.sample(n_routes, seed=seed) @ P  # the new step on the left: M_L ⋯ M_1
        mean[step], se[step] = _mean_se(P)
    return mean, se


def so2_score_moments(log_c, log_c2, weights, distances):
    """Exact mean and variance of s = Σ_b w_b cos ψ_b(D) for each distance D (claim AT5).

    ψ_b(D) is a sum of D i.i.d. symmetric angles, independent over blocks:
    E cos ψ_b = c_b^D, E cos² ψ_b = (1 + c_b(2)^D)/2, with c_b = E cos θ_b and c_b(2) = E cos 2θ_b
    (for Unif[−f_b, f_b]: c_b = sin f_b/f_b, c_b(2) = sin 2f_b/(2f_b)).

    Parameters
    ----------
    log_c, log_c2 : array_like, shape (B,)
        ln c_b and ln c_b(2).
    weights : array_like, shape (B,)
        w_b (for a key equal to the query, ‖q_b‖²).
    distances : array_like of int, shape (n_D,)

    Returns
    -------
    mean, var : ndarray, shape (n_D,)
    """
    D = np.asarray(distances, dtype=float)[:, None]
    m1 = np.exp(D * log_c)  # (n_D, B)
    m2 = np.exp(D * log_c2)
    mean = m1 @ weights
    var = (weights**2 * ((1 + m2) / 2 - m1**2)).sum(axis=1)
    return mean, var


def so2_far_score_moments(log_c, log_c2, weights, lo: int, hi: int) -> tuple[float, float]:
    """Exact mean and variance of s at a random distance D ~ Unif{lo, …, hi} (claim AT5).

    The mixture over D of :func:`so2_score_moments` (same arguments): mean μ = avg_D E s(D),
    variance avg_D Var s(D) + avg_D (E s(D) − μ)². Returns two floats. Cost O((hi − lo)·B).
    """
    mean, var = so2_score_moments(log_c, log_c2, weights, np.arange(lo, hi + 1))
    mu = float(mean.mean())
    return mu, float(var.mean() + ((mean - mu) ** 2).mean())
