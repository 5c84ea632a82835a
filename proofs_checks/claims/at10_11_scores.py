"""Claims AT7–AT11 of [B]: concentration of far scores, the far-mass bound, the logit bound.

The concentration claims AT7 (Lévy), AT8 (the I₀ sub-Gaussian tail of mixed SO(2) blocks) and
AT9 (the score gap) live in :mod:`posflow.proofs_checks.claims.at07_09_tails`, imported here so
they register. This module holds AT10 — the far-mass lower bound against sympy, its closed form,
its attaining corner and a numeric minimisation — and AT11 — the logit bound |qᵀPk| ≤ ‖q‖‖k‖
for random orthogonal transports and accumulated route scores, with the route scores compared
with dense products. The stylized-model claims AT12, AT13 live in
:mod:`posflow.proofs_checks.claims.at19_stylized`.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.optimize import minimize

from posflow.proofs_checks.kit import (
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    Table,
    add_mutant,
    at_least,
    at_most,
    claim_rng,
    close,
    fp_tol,
    holds,
    info,
    register,
)
from posflow.simulate.orthogonal import HouseholderLaw, SO2BlockLaw, haar, so2_matrices
from posflow.simulate.transport import householder_scores, orthogonal_scores, so2_scores
from posflow.theory import transport as th


def _far_mass_and_grad(x, K):
    """ρ_D and its gradient in the logits x = (near K, far M), in log space."""
    shift = x.max()
    e = np.exp(x - shift)
    near, far = e[:K].sum(), e[K:].sum()
    total = near + far
    rho = far / total
    grad = np.concatenate([-e[:K] * far, e[K:] * near]) / total**2
    return rho, grad


# the digest's values at λ = 3, K = 4 (papers/B_transport.md §5.1 [CHK]) and their last digit
_DIGEST_M = np.array([10, 100, 1000, 10_000, 100_000])
_DIGEST = np.array([0.0062, 0.0584, 0.383, 0.861, 0.984])
_DIGEST_UNIT = np.array([1e-4, 1e-4, 1e-3, 1e-3, 1e-3])

_FP_MASS = (
    "ρ_D as expit(lse(far) − lse(near)) with |logits| ≤ 3 and ≤ 45 terms: lse rounding "
    "≤ 45·2.2e-16 = 1e-14, expit' ≤ 1/4; 1e-13 covers it"
)


@register(
    "AT10",
    "[B]",
    "far-mass lower bound: with K near and M far logits in [-λ, λ], ρ_D ≥ M/(M + K e^{2λ}), "
    "attained, → 1 as M → ∞",
    assumptions=("every logit in [-λ, λ]",),
)
def at10(ctx: Context) -> Evidence:
    """Claim AT10: ρ_D ≥ M/(M + K e^{2λ}) for logits in [-λ, λ], attained, → 1.

    sympy (``far_mass_derivation``); ``far_mass_lower_bound`` against the direct formula and the
    digest's printed values at λ = 3, K = 4; ``far_mass`` at ``far_mass_minimiser`` equals the
    bound; L-BFGS-B from random starts and a random search over the box for three (K, M, λ)
    find nothing lower and reach the bound.
    """
    rng = claim_rng(ctx, 10)
    der = th.far_mass_derivation()
    lam, K = 3.0, 4
    bounds = np.asarray(th.far_mass_lower_bound(_DIGEST_M, K, lam))
    direct = _DIGEST_M / (_DIGEST_M + K * np.exp(2 * lam))
    formula_err = float(np.max(np.abs(bounds / direct - 1)))
    digest_err = float(np.max(np.abs(bounds - _DIGEST) / _DIGEST_UNIT))
    starts = 40 if ctx.full else 8
    n_random = 20_000 if ctx.full else 5_000
    rows, attain_err, opt_err, rand_gap = [], 0.0, 0.0, np.inf
    for k, m, lm in ((3, 12, 2.0), (1, 5, 0.5), (5, 40, 1.0), (K, 10, lam)):
        b = float(th.far_mass_lower_bound(m, k, lm))
        attain_err = max(attain_err, abs(float(th.far_mass(*th.far_mass_minimiser(m, k, lm))) - b))
        box = [(-lm, lm)] * (k + m)
        found = min(
            minimize(
                _far_mass_and_grad,
                rng.uniform(-lm, lm, k + m),
                args=(k,),
                jac=True,
                method="L-BFGS-B",
                bounds=box,
            ).fun
            for _ in range(starts)
        )
        x = rng.uniform(-lm, lm, size=(n_random, k + m))
        rand_min = float(np.min(th.far_mass(x[:, :k], x[:, k:])))
        opt_err = max(opt_err, abs(float(found) - b))
        rand_gap = min(rand_gap, rand_min - b)
        rows.append([k, m, lm, b, float(found), rand_min])
    Ms = np.logspace(0, 6, 61)
    panel = Panel(
        f"K = {K}, λ = {lam:g}",
        "M (far tokens)",
        "min ρ_D",
        [
            Series("M/(M + K e^(2λ))", Ms, th.far_mass_lower_bound(Ms, K, lam)),
            Series("digest [B]", _DIGEST_M, _DIGEST, "markers"),
        ],
        logx=True,
        hlines=[(1.0, "limit 1")],
    )
    return Evidence(
        [
            holds(
                "sympy_proven",
                der.proven,
                label="sympy: ∂ρ/∂far > 0, ∂ρ/∂near < 0, corner = bound, ↑ in M, ↓ in λ, → 1",
            ),
            at_most(
                "max_relative_error_vs_direct_formula",
                formula_err,
                0.0,
                fp_tol(1e-13, "expit(ln M − ln K − 2λ) vs M/(M + K e^(2λ)): ≤ 10 roundings"),
                label="max |far_mass_lower_bound/(M/(M + K e^(2λ))) − 1|",
            ),
            at_most(
                "max_digest_error_in_last_digit",
                digest_err,
                0.5,
                fp_tol(
                    1e-12,
                    "the digest rounds to its last printed digit (the bound 0.5 is half a unit); "
                    "1e-12 covers the division by that unit",
                ),
                label="max |bound − digest value| in units of the digest's last digit",
            ),
            at_most(
                "max_attainment_error",
                attain_err,
                0.0,
                fp_tol(1e-13, _FP_MASS),
                label="max |far_mass(far_mass_minimiser) − bound|",
            ),
            at_least(
                "min_random_search_minus_bound",
                rand_gap,
                0.0,
                fp_tol(1e-13, _FP_MASS),
                label="min over random logits of ρ_D − bound",
            ),
            at_most(
                "max_optimiser_minus_bound",
                opt_err,
                0.0,
                fp_tol(
                    1e-13,
                    "L-BFGS-B stops on the box corner (the projected gradient "
                    "never vanishes inside); " + _FP_MASS,
                ),
                label="max |L-BFGS-B minimum − bound|",
            ),
            holds(
                "increasing_in_M",
                bool(np.all(np.diff(bounds) > 0)),
                label="bound increasing in M at λ = 3, K = 4",
            ),
            info("bound_at_M_1e5", float(bounds[-1])),
        ],
        figures=[
            Figure("AT10_far_mass", f"AT10: far-mass lower bound, K = {K}, λ = {lam:g}", [panel])
        ],
        tables=[
            Table(
                "numeric_minimisation",
                "smallest far mass found in the box [-λ, λ]^(K+M)",
                ["K", "M", "λ", "bound", "L-BFGS-B min", "random-search min"],
                rows,
            )
        ],
        setup=f"sympy derivation; λ = {lam:g}, K = {K}, M = 10…10⁵; L-BFGS-B from {starts} "
        f"random starts and {n_random:,} uniform random points per (K, M, λ).",
    )


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
    qs, ks = q[:n_small], k[:n_small]
    low = np.tril(np.ones((n_small, n_small), dtype=bool))
    nn = norms[:n_small, :n_small]
    dense_err = max(
        float(
            np.max(
                np.abs(orthogonal_scores(qs, ks, H[:n_small]) - _dense_scores(qs, ks, H, 0))[low]
                / nn[low]
            )
        ),
        float(
            np.max(
                np.abs(
                    so2_scores(qs, ks, theta[:n_small])
                    - _dense_scores(qs, ks, so2_matrices(theta), 0)
                )[low]
                / nn[low]
            )
        ),
        float(
            np.max(
                np.abs(
                    householder_scores(qs[-1], ks, w[:n_small], 2.0, n_small - 1)
                    - _dense_scores(qs, ks, refl, 1)[-1]
                )
                / nn[-1]
            )
        ),
    )
    # the bound is attained: the reflection through (q̂ - k̂) maps k̂ onto q̂
    qh, kh = q[0] / np.linalg.norm(q[0]), k[0] / np.linalg.norm(k[0])
    u = (qh - kh) / np.linalg.norm(qh - kh)
    attained = float(qh @ HouseholderLaw(d, 2.0, w=u).mean() @ kh)
    sampled = max(ratios[x] for x in ("haar", "so2_blocks", "householder_beta2"))
    routed = max(ratios[x] for x in routes)
    fp_ratio = fp_tol(
        1e-12,
        f"a d = {d} dot product and two norms, plus ≤ {n} accumulated steps each orthogonal to "
        f"~{d}·2.2e-16: ≤ {n}·{d}·2.2e-16·2 = 1e-12",
    )
    return Evidence(
        [
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
        ],
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


def _bound_single_lambda(original):
    @functools.wraps(original)
    def far_mass_lower_bound(M, K, lam):
        return original(M, K, np.asarray(lam, dtype=float) / 2)

    return far_mass_lower_bound


def _corner_swapped(original):
    @functools.wraps(original)
    def far_mass_minimiser(M, K, lam):
        near, far = original(M, K, lam)
        return -near, -far

    return far_mass_minimiser


def _hard_max_far_mass(original):
    @functools.wraps(original)
    def far_mass(near_logits, far_logits):
        near, far = np.asarray(near_logits, float), np.asarray(far_logits, float)
        return 1.0 / (1.0 + np.exp(near.max(axis=-1) - far.max(axis=-1)))

    return far_mass


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


_MASS = "posflow.theory._transport_mass"
# fmt: off
add_mutant("AT10", "bound-with-e^lambda", f"{_MASS}:far_mass_lower_bound", _bound_single_lambda,
           "the bound written M/(M + K e^λ): the factor 2 of the exponent lost")
add_mutant("AT10", "corner-swapped", f"{_MASS}:far_mass_minimiser", _corner_swapped,
           "the minimiser returns near logits −λ and far logits +λ (the maximising corner)")
add_mutant("AT10", "hard-max-far-mass", f"{_MASS}:far_mass", _hard_max_far_mass,
           "ρ_D from the largest near and far logits instead of their log-sum-exp")
add_mutant("AT11", "symmetric-so2-block", "posflow.simulate.orthogonal:so2_matrices",
           _symmetric_so2, "a sign slip makes every block [[c, −s], [−s, c]] (not a rotation)")
add_mutant("AT11", "householder-beta-doubled", "posflow.simulate.transport:householder_scores",
           _householder_beta_doubled,
           "the reflection applied as I − 2β wwᵀ with β ∈ [0, 2] (β convention mixed up)")
# fmt: on
