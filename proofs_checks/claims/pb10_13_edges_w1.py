"""Claims PB10 and PB13 of [A]: the edge masses of a rollout, and the W1 conventions of this code.
"""

from __future__ import annotations

import functools

import numpy as np

from posflow.proofs_checks.kit import (
    CHAIN,
    RESIDUAL_STEP,
    Context,
    Evidence,
    add_mutant,
    at_most,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    random_alibi,
    random_causal,
    register,
    reversed_layer_order,
)
from posflow.simulate.compare import mean_position, w1, w1_normalised
from posflow.simulate.kernels import dense_kernel
from posflow.simulate.rollout import constant, influence, rollout_matrix, stationary_profiles

# ------------------------------------------------------------------------------------------
# PB10: edge masses


def _dense_last_row(ks, lam):
    """e_{n−1}ᵀ R_{T−1} ⋯ R_0 by dense NumPy matrix products (``ks[0]`` the input layer)."""
    n = ks[0].n
    P = np.eye(n)
    for K, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * np.asarray(K.dense())) @ P
    return P[-1]


def _random_kernel(rng, n):
    """A random ALiBi+content or Dirichlet kernel, each with probability 1/2."""
    return random_alibi(rng, n) if rng.random() < 0.5 else dense_kernel(random_causal(rng, n))


def _worst_last(rng, cases):
    """max |p(n−1)/∏(1 − λ_t(1 − A_t[n−1,n−1])) − 1| over random rollouts (n < 64, T < 40)."""
    worst = 0.0
    for _ in range(cases):
        n, T = int(rng.integers(2, 64)), int(rng.integers(1, 40))
        ks = [_random_kernel(rng, n) for _ in range(T)]
        lam = rng.uniform(0, 1, T)
        p = influence(ks, lam)
        prod = np.prod([1 - lt * (1 - k.diagonal()[-1]) for k, lt in zip(ks, lam, strict=True)])
        worst = max(worst, abs(p[-1] - prod) / max(prod, 1e-300))
    return worst


def _worst_stationary_drop(rng, stationary):
    """The largest decrease of p^{(T)}(0) from T to T + 1 (T ≤ 200), stationary kernels."""
    worst = 0.0
    for _ in range(stationary):
        n = int(rng.integers(2, 128))
        K = _random_kernel(rng, n)
        lam = float(rng.uniform(0.01, 1))
        p0 = stationary_profiles(K, lam, range(1, 201))[:, 0]
        worst = max(worst, float(-np.diff(p0).min(initial=0.0)))
    return worst


def _worst_input_side(rng, stacks):
    """Layers added at the input side: depth T uses layers L_T (input), …, L_1 (output), and
    p^{(T+1)}(0) = Σ_j p^{(T)}(j) R_{T+1}[j, 0] ≥ p^{(T)}(0) since R[0, 0] = 1. Returns the
    largest decrease of p^{(T)}(0) and the largest error of p^{(30)}(0) against dense products."""
    worst_drop = worst_dense = 0.0
    for _ in range(stacks):
        n, depth = int(rng.integers(4, 40)), 30
        layers = [dense_kernel(random_causal(rng, n)) for _ in range(depth)]
        lam = rng.uniform(0.05, 1, depth)
        p0 = [influence(layers[:T][::-1], lam[:T][::-1])[0] for T in range(1, depth + 1)]
        worst_drop = max(worst_drop, float(-np.diff(p0).min(initial=0.0)))
        ref = _dense_last_row(layers[::-1], lam[::-1])  # R_{T−1} ⋯ R_0 by dense products
        worst_dense = max(worst_dense, abs(p0[-1] - ref[0]))
    return worst_drop, worst_dense


@register(
    "PB10",
    "[D]",
    "edge masses: p(n−1) = ∏(1 − λ_t(1 − A_t[n−1,n−1])); p(0) nondecreasing "
    "in depth for stationary kernels (and for any kernels when layers are added at the input "
    "side)",
    assumptions=("causal kernels",),
)
def pb10(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 10)
    cases = 60 if ctx.full else 25
    stationary = 20 if ctx.full else 8
    stacks = 10 if ctx.full else 5
    worst_last = _worst_last(rng, cases)
    worst_drop = _worst_stationary_drop(rng, stationary)
    worst_input_drop, worst_dense = _worst_input_side(rng, stacks)
    return Evidence(
        [
            at_most("max_rel_error_p_last", worst_last, 0.0,
                    fp_tol(1e-12, "T ≤ 39 factors, each with relative rounding ≤ 3ε, against a "
                           "chain of T convex steps (≤ 2ε relative each on the last entry): "
                           "39·5·2.2e-16 = 4.3e-14 ≤ 1e-12"),
                    label="max |p(n−1)/∏(1 − λ_t(1 − A_t[n−1,n−1])) − 1|"),
            at_most("max_decrease_p0_stationary", worst_drop, 0.0,
                    fp_tol(1e-15, "p(0) ≤ 1 changes by a convex step with rounding ≤ 4ε·p(0) ≤ "
                           "8.9e-16 ≤ 1e-15"),
                    label="max decrease of p^{(T)}(0) from T to T + 1, stationary kernels"),
            at_most("max_decrease_p0_input_side", worst_input_drop, 0.0,
                    fp_tol(1e-13, "two rollouts of ≤ 30 layers on n ≤ 39 tokens, each entry with "
                           "rounding ≤ 30·39·2.2e-16 = 2.6e-13 relative to p(0) ≤ 1; the "
                           "difference of two: 5e-13, rounded down since p(0) < 0.2 here"),
                    label="max decrease of p^{(T)}(0) when a layer is added at the input side"),
            at_most("max_error_p0_vs_dense_product", worst_dense, 0.0,
                    fp_tol(1e-13, "30 layers on n ≤ 39 tokens, products of stochastic matrices: "
                           "each entry rounds by ≤ 30·39·2.2e-16 = 2.6e-13 of a row mass ≤ 1, "
                           "p(0) < 0.4 here, so ≤ 1e-13"),
                    label="max |p^{(30)}(0) − (R_29⋯R_0)[n−1, 0]| (dense NumPy product)"),
            info("random_rollouts", cases),
            info("stationary_kernels", stationary),
            info("input_side_stacks", stacks),
        ],
        setup=f"{cases} rollouts of random ALiBi+content or Dirichlet layers (n < 64, T < 40); "
        f"{stationary} stationary kernels over 200 layers; {stacks} stacks of 30 Dirichlet "
        "layers (n < 40) grown at the input side.",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------
# PB13: the W1 conventions of this code


@register(
    "PB13",
    "[convention]",
    "W1 conventions: W1(δ_0, q) = Σ_j j q(j); for p ⪯_st q, W1 = E_q − E_p; "
    "normalised W1 = W1/(n−1)",
    assumptions=("profiles on positions 0..n−1",),
)
def pb13(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 13)
    cases = 200 if ctx.full else 60
    e1 = e2 = e3 = e4 = 0.0
    in_range = ordered = True
    for _ in range(cases):
        n = int(rng.integers(2, 300))
        q = rng.exponential(size=n)
        q /= q.sum()
        delta0 = np.zeros(n)
        delta0[0] = 1.0
        ref_mean = float(np.arange(n) @ q)
        e1 = max(e1, abs(w1(delta0, q) - ref_mean))
        e4 = max(e4, abs(mean_position(q) - ref_mean))
        # stochastically ordered pair: two rows of a monotone rollout, i < i'
        P = rollout_matrix(
            random_alibi(rng, n, slope_max=2.0, content_abs=10.0),
            constant(float(rng.uniform(0.1, 1)), int(rng.integers(1, 8))),
        )
        i, k = sorted(rng.choice(n, 2, replace=False))
        Fi, Fk = np.cumsum(P[i]), np.cumsum(P[k])
        ordered &= bool((Fk <= Fi + 1e-12).all())
        e2 = max(e2, abs(w1(P[i], P[k]) - (mean_position(P[k]) - mean_position(P[i]))))
        wn = w1_normalised(q, delta0)
        in_range &= 0.0 <= wn <= 1.0
        e3 = max(e3, abs(wn * (n - 1) - ref_mean))
    fp = fp_tol(1e-10, "positions ≤ 300 times weights summing to 1, ≤ 300 terms each rounded: "
                "300·300·2.2e-16 = 2e-11 ≤ 1e-10")  # fmt: skip
    return Evidence(
        [
            at_most("max_err_W1_delta0", e1, 0.0, fp,
                    label="max |W1(δ_0, q) − Σ_j j q(j)| (sum computed here)"),
            at_most("max_err_mean_position", e4, 0.0, fp,
                    label="max |mean_position(q) − Σ_j j q(j)|"),
            holds("pairs_are_ordered", ordered, fp_tol(1e-12, "CDFs compared to 1e-12"),
                  label="premise: the rollout row pairs are stochastically ordered"),
            at_most("max_err_ordered_pairs", e2, 0.0, fp,
                    label="max |W1(p, q) − (E_q − E_p)| over ordered pairs"),
            at_most("max_err_normalisation", e3, 0.0, fp,
                    label="max |(n−1)·W1_normalised(q, δ_0) − Σ_j j q(j)|"),
            holds("normalised_in_unit_interval", in_range, label="W1_normalised ∈ [0, 1]"),
            info("cases", cases),
        ],
        setup=f"{cases} random profiles (Exp(1) weights, n < 300) and ordered pairs from rows "
        "i < i' of ALiBi+content rollouts (≤ 7 layers).",
    )  # fmt: skip


# ------------------------------------------------------------------------------------------
# mutants: small realistic breaks each claim above must catch


def _positions_from_one(original):
    @functools.wraps(original)
    def mean(p):
        return original(p) + 1.0

    return mean


def _normalised_by_n(original):
    @functools.wraps(original)
    def normalised(p, q):
        n = np.asarray(p).size
        return original(p, q) * (n - 1) / n

    return normalised


add_mutant("PB10", "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")
add_mutant("PB10", "reversed-layer-order", CHAIN, reversed_layer_order(),
           "the layer product taken as R_0 ⋯ R_{T−1} instead of R_{T−1} ⋯ R_0")
add_mutant("PB13", "normalised-by-n", "posflow.simulate.compare:w1_normalised", _normalised_by_n,
           "normalised W1 divides by n instead of n − 1")
add_mutant("PB13", "positions-from-1", "posflow.simulate.compare:mean_position",
           _positions_from_one, "mean position counts tokens from 1 instead of 0")
