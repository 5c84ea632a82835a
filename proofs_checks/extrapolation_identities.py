"""Claim AT18 of [B]: the implementation identities of accumulated transport.

Every fast path of :mod:`posflow.simulate.transport` (suffix-sum angles, inverse output rotation,
zero-initialised learned angles, the PaTH key-cache update, absolute frames) is compared with
dense route products P_{j→i} built step by step by :func:`posflow.simulate.transport.route_product`.
"""

from __future__ import annotations

import numpy as np

from posflow.proofs_checks._common import verdict
from posflow.proofs_checks.extrapolation_common import claim_rng, plain
from posflow.proofs_checks.registry import Context, LegacyEvidence, register
from posflow.simulate.orthogonal import rope_frequencies, rotate_blocks, so2_matrices
from posflow.simulate.transport import (
    frame_prefix,
    householder_scores,
    householder_step,
    orthogonal_scores,
    route_product,
    so2_scores,
    so2_value_output,
    suffix_angles,
)

TOL_AT18 = 1e-10


def _dense_scores(q, k, steps, route="from_source"):
    n = k.shape[0]
    s = np.full((n, n), np.nan)
    for i in range(n):
        for j in range(i + 1):
            s[i, j] = q[i] @ route_product(steps, j, i, route) @ k[j]
    return s


@register(
    "AT18",
    "[B]",
    "implementation identities: suffix-sum rotation of q, k equals the explicit route product; "
    "value rotation with the inverse output rotation equals Σ a_ij R(φ_j - φ_i) v_j; "
    "zero-initialised learned angles reproduce RoPE; the PaTH update k ← k - β(k·w)w equals H k",
    assumptions=("float64",),
)
def at18(ctx: Context) -> LegacyEvidence:
    """Claim AT18: the fast implementations equal dense route products to 1e-10.

    Suffix-sum rotations, ``so2_scores``, inverse output rotation of values,
    ``so2_value_output``, zero-initialised learned angles vs RoPE, the PaTH key-cache update
    and ``householder_scores``, absolute frames on both route conventions.
    """
    rng = claim_rng(ctx, 18)
    n, d = (64, 8) if ctx.full else (40, 8)
    q, k, v = rng.standard_normal((3, n, d))
    theta = rng.uniform(-1, 1, (n, d // 2))
    steps = so2_matrices(theta)
    low = np.tril_indices(n)
    err = {}
    # (1) suffix sums: (R(φ_i) q_i)·(R(φ_j) k_j) = q_iᵀ M_{i-1}⋯M_j k_j
    phi = suffix_angles(theta)
    suffix = rotate_blocks(q, phi) @ rotate_blocks(k, phi).T
    dense = _dense_scores(q, k, steps)
    err["suffix_sum_scores"] = float(np.abs(suffix - dense)[low].max())
    err["so2_scores"] = float(np.abs(so2_scores(q, k, theta) - dense)[low].max())
    # (2) values: R(-φ_i) Σ_j a_ij R(φ_j) v_j = Σ_j a_ij P_{j→i} v_j
    a = np.tril(rng.exponential(size=(n, n)))
    a /= a.sum(axis=1, keepdims=True)
    inverse_out = rotate_blocks(a @ rotate_blocks(v, phi), -phi)
    dense_out = np.array(
        [sum(a[i, j] * route_product(steps, j, i) @ v[j] for j in range(i + 1)) for i in range(n)]
    )
    err["value_inverse_rotation"] = float(np.abs(inverse_out - dense_out).max())
    err["so2_value_output"] = float(np.abs(so2_value_output(a, v, theta) - dense_out).max())
    # (3) zero-initialised learned angles θ = π tanh(0) - f_b give RoPE's relative rotation
    f = rope_frequencies(d)
    learned = np.broadcast_to(np.pi * np.tanh(0.0) - f, (n, d // 2))
    pos = np.arange(n)[:, None]
    rope = rotate_blocks(q, pos * f) @ rotate_blocks(k, pos * f).T
    err["zero_init_learned_vs_rope"] = float(np.abs(so2_scores(q, k, learned) - rope)[low].max())
    # (4) PaTH: k ← k - β (k·w) w is H k; iterated over t = j+1 … i it gives the path route
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
    dense_path = _dense_scores(q, k, H, "path")[i]
    err["path_cache_scores"] = float(np.abs(cache @ q[i] - dense_path).max())
    err["householder_scores"] = float(
        np.abs(householder_scores(q[i], k, w, beta, i) - dense_path).max()
    )
    # (5) absolute frames for orthogonal steps: P_{j→i} = G_i G_jᵀ on both route conventions
    for route in ("from_source", "path"):
        G = frame_prefix(steps, route)
        frames = np.max(
            [
                np.abs(G[i] @ G[j].T - route_product(steps, j, i, route)).max()
                for i, j in zip(*low, strict=True)
            ]
        )
        err[f"frames_{route}"] = float(frames)
        err[f"orthogonal_scores_{route}"] = float(
            np.abs(orthogonal_scores(q, k, steps, route) - _dense_scores(q, k, steps, route))[
                low
            ].max()
        )
    worst = max(err.values())
    return LegacyEvidence(
        verdict(worst <= TOL_AT18),
        plain({"n": n, "d": d, "tolerance": TOL_AT18, "max_abs_error": err}),
        summary=f"{len(err)} identities against dense route products (n = {n}, d = {d}): worst "
        f"error {worst:.1e} ≤ {TOL_AT18:g}",
    )
