"""Claim AT11 ([D]): orthogonal transport never changes the logit bound |qᵀPk| ≤ ‖q‖‖k‖.

Random orthogonal P of three laws (Haar, SO(2) blocks, reflections) and whole accumulated
route-score matrices (``orthogonal_scores``, ``so2_scores``, ``householder_scores`` of
:mod:`posflow.simulate.transport`), the route scores first compared with dense products of the
steps, then with the bound; a reflection attains it.
"""

from __future__ import annotations

import functools

import numpy as np

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Table,
    add_mutant,
    at_most,
    claim_rng,
    close,
    fp_tol,
    info,
    register,
)
from posflow.simulate.orthogonal import HouseholderLaw, SO2BlockLaw, haar, so2_matrices
from posflow.simulate.transport import householder_scores, orthogonal_scores, so2_scores


def _dense_scores(q, k, steps, route_shift):
    """s_ij = q_iᵀ M_{i−1+σ} ⋯ M_{j+σ} k_j by explicit products (σ = 0 from_source, 1 path)."""
    n, d = k.shape
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            P = np.eye(d)
            for s in range(j + route_shift, i + route_shift):
                P = steps[s] @ P
            out[i, j] = q[i] @ P @ k[j]
    return out


def _sampled_ratios(rng, d, N):
    """Per law: max |qᵀPk|/(‖q‖‖k‖) for Gaussian q, k; and max |PᵀP − I|, max ‖P‖_op."""
    ratios, orth, op_norm = {}, 0.0, 0.0
    for name, P in (
        ("haar", haar(d, N, seed=rng)),
        ("so2_blocks", SO2BlockLaw(d, "uniform", scale=np.pi).sample(N, seed=rng)),
        ("householder_beta2", HouseholderLaw(d, 2.0).sample(N, seed=rng)),
    ):
        orth = max(orth, float(np.max(np.abs(np.swapaxes(P, 1, 2) @ P - np.eye(d)))))
        # the worst q, k for each P: max |qᵀPk|/(‖q‖‖k‖) = ‖P‖_op, at the top singular pair
        U, _, Vt = np.linalg.svd(P)
        worst = np.einsum("na,nab,nb->n", U[:, :, 0], P, Vt[:, 0, :])
        op_norm = max(op_norm, float(np.max(np.abs(worst))))
        q, k = rng.standard_normal((2, N, d))
        s = np.einsum("na,nab,nb->n", q, P, k)
        ratios[name] = float(
            np.max(np.abs(s) / (np.linalg.norm(q, axis=1) * np.linalg.norm(k, axis=1)))
        )
    return ratios, orth, op_norm


def _route_error(q, k, H, theta, w, refl, norms, n_small):
    """max |route scores − dense products|/(‖q‖‖k‖) over the first ``n_small`` tokens."""
    qs, ks = q[:n_small], k[:n_small]
    low = np.tril(np.ones((n_small, n_small), dtype=bool))
    nn = norms[:n_small, :n_small]
    haar_err = np.abs(orthogonal_scores(qs, ks, H[:n_small]) - _dense_scores(qs, ks, H, 0))
    so2_err = np.abs(
        so2_scores(qs, ks, theta[:n_small]) - _dense_scores(qs, ks, so2_matrices(theta), 0)
    )
    hh_err = np.abs(
        householder_scores(qs[-1], ks, w[:n_small], 2.0, n_small - 1)
        - _dense_scores(qs, ks, refl, 1)[-1]
    )
    return max(
        float(np.max(haar_err[low] / nn[low])),
        float(np.max(so2_err[low] / nn[low])),
        float(np.max(hh_err / nn[-1])),
    )


def _judge_at11(orth, dense_err, op_norm, sampled, routed, attained, d, n, n_small, N):
    fp_ratio = fp_tol(
        1e-12,
        f"a d = {d} dot product and two norms, plus ≤ {n} accumulated steps each orthogonal to "
        f"~{d}·2.2e-16: ≤ {n}·{d}·2.2e-16·2 = 1e-12",
    )
    return [
        at_most(
            "max_orthogonality_error",
            orth,
            0.0,
            fp_tol(1e-13, f"QR / rotation / reflection in d = {d}: ≤ 30·{d}·2.2e-16 = 1e-13"),
            label="max |PᵀP − I| over the sampled P",
        ),
        at_most(
            "max_route_error_vs_dense_products",
            dense_err,
            0.0,
            fp_tol(1e-12, f"≤ {n_small} steps of d = {d} products: ≤ 10·{d}·2.2e-16·20"),
            label="max |route scores − dense products|/(‖q‖‖k‖)",
        ),
        at_most(
            "max_ratio_worst_q_k",
            op_norm,
            1.0,
            fp_ratio,
            label="max over sampled P of |qᵀPk|/(‖q‖‖k‖) at P's top singular pair (= ‖P‖_op)",
        ),
        at_most(
            "max_ratio_sampled_P",
            sampled,
            1.0,
            fp_ratio,
            label="max |qᵀPk|/(‖q‖‖k‖), sampled P, Gaussian q, k",
        ),
        at_most(
            "max_ratio_route_scores",
            routed,
            1.0,
            fp_ratio,
            label="max |s_ij|/(‖q_i‖‖k_j‖), accumulated route scores",
        ),
        close(
            "attained_ratio",
            attained,
            1.0,
            fp_tol(1e-14, f"one reflection and two d = {d} dot products of unit vectors"),
            label="q̂ᵀ(I − 2uuᵀ)k̂ with u ∝ q̂ − k̂",
        ),
        info("samples_per_law", N),
    ]


@register(
    "AT11",
    "[D]",
    "orthogonal transport never changes the logit bound: |qᵀPk| ≤ ‖q‖‖k‖",
    assumptions=("P orthogonal",),
)
def at11(ctx: Context) -> Evidence:
    """Claim AT11: |qᵀPk| ≤ ‖q‖‖k‖ for orthogonal P (the logit bound does not depend on P).

    Random P of three laws (Haar, SO(2) blocks, reflections) checked orthogonal, and whole
    accumulated score matrices (``orthogonal_scores``, ``so2_scores``, ``householder_scores``),
    first against dense products of the steps, then against the bound; a reflection attains 1.
    """
    rng = claim_rng(ctx, 11)
    d, N = 16, (100_000 if ctx.full else 10_000)
    ratios, orth, op_norm = _sampled_ratios(rng, d, N)
    # whole score matrices through accumulated route products
    n, n_small = 128, 10
    q, k = rng.standard_normal((2, n, d))
    norms = np.outer(np.linalg.norm(q, axis=1), np.linalg.norm(k, axis=1))
    H = haar(d, n, rng)
    theta = SO2BlockLaw(d).sample_angles(n, seed=rng)
    w = rng.standard_normal((n, d))
    w /= np.linalg.norm(w, axis=1, keepdims=True)
    refl = np.eye(d) - 2.0 * w[:, :, None] * w[:, None, :]
    routes = {
        "route_haar_scores": orthogonal_scores(q, k, H),
        "route_so2_scores": so2_scores(q, k, theta),
        "route_householder_scores": householder_scores(q[-1], k, w, 2.0, n - 1),
    }
    for name, s in routes.items():
        ratios[name] = float(np.max(np.abs(s) / (norms if s.ndim == 2 else norms[-1])))
    dense_err = _route_error(q, k, H, theta, w, refl, norms, n_small)
    # the bound is attained: the reflection through (q̂ - k̂) maps k̂ onto q̂
    qh, kh = q[0] / np.linalg.norm(q[0]), k[0] / np.linalg.norm(k[0])
    u = (qh - kh) / np.linalg.norm(qh - kh)
    attained = float(qh @ HouseholderLaw(d, 2.0, w=u).mean() @ kh)
    sampled = max(ratios[x] for x in ("haar", "so2_blocks", "householder_beta2"))
    routed = max(ratios[x] for x in routes)
    return Evidence(
        _judge_at11(orth, dense_err, op_norm, sampled, routed, attained, d, n, n_small, N),
        tables=[
            Table(
                "max_ratio",
                "max |qᵀPk|/(‖q‖‖k‖) per law",
                ["law", "max ratio"],
                [[k_, v] for k_, v in ratios.items()],
            )
        ],
        setup=f"d = {d}; {N:,} random P per law (Haar O(d), SO(2) blocks Unif[−π, π], "
        f"reflections I − 2wwᵀ) with Gaussian q, k; route scores over n = {n} tokens "
        f"(Haar, RoPE-law SO(2) blocks, reflections), the first {n_small} against dense "
        "products.",
    )


# ------------------------------------------------------------------------------------------
# mutants


def _symmetric_so2(original):
    @functools.wraps(original)
    def so2_matrices(angles, pairing="half"):
        m = original(angles, pairing)
        h = m.shape[-1] // 2
        i = np.arange(h)
        i1, i2 = (i, i + h) if pairing == "half" else (2 * i, 2 * i + 1)
        m[..., i2, i1] = -m[..., i2, i1]  # [[c, −s], [−s, c]]: symmetric, not a rotation
        return m

    return so2_matrices


def _householder_beta_doubled(original):
    @functools.wraps(original)
    def householder_scores(q, k, w, beta, query_pos, route="path"):
        shift = 0 if route == "from_source" else 1
        q, k, w = (np.asarray(x, dtype=float) for x in (q, k, w))
        b = np.broadcast_to(np.asarray(beta, dtype=float), (k.shape[0],))
        u, us = q, [q] * (query_pos + 1)
        for t in range(query_pos - 1 + shift, shift - 1, -1):
            u = u - 2.0 * b[t] * (w[t] @ u) * w[t]  # I − 2β wwᵀ: the β ∈ [0, 1] convention
            us[t - shift] = u
        return np.sum(np.stack(us) * k[: query_pos + 1], axis=1)

    return householder_scores


# fmt: off
add_mutant("AT11", "symmetric-so2-block", "posflow.simulate.orthogonal:so2_matrices",
           _symmetric_so2, "a sign slip makes every block [[c, −s], [−s, c]] (not a rotation)")
add_mutant("AT11", "householder-beta-doubled", "posflow.simulate.transport:householder_scores",
           _householder_beta_doubled,
           "the reflection applied as I − 2β wwᵀ with β ∈ [0, 2] (β convention mixed up)")
# fmt: on
