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
    cite,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    random_alibi,
    random_causal,
    register,
    rejects,
    reversed_layer_order,
)
from posflow.simulate.compare import mean_position, w1, w1_normalised
from posflow.simulate.kernels import dense_kernel
from posflow.simulate.rollout import influence, rollout_matrix, stationary_profiles

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


def _rel_judge(key, values, refs, tol, label=""):
    """The judge of the edge mass: max |value/ref − 1| over every rollout."""
    err = float(np.max(np.abs(np.asarray(values) / np.maximum(np.asarray(refs), 1e-300) - 1)))
    return at_most(key, err, 0.0, tol, label=label)


def _drop_judge(key, seqs, tol, label=""):
    """The judge of monotonicity in depth: the largest decrease of p^{(T)}(0) over sequences."""
    return at_most(key, max(float(-np.diff(s).min(initial=0.0)) for s in seqs), 0.0, tol,
                   label=label)  # fmt: skip


def _err_judge(key, got, refs, tol, label=""):
    """The judge of a routine against its reference: the largest entry error over all cases."""
    err = max(float(np.max(np.abs(np.asarray(g) - r))) for g, r in zip(got, refs, strict=True))
    return at_most(key, err, 0.0, tol, label=label)


def _last_cases(rng, cases):
    """p(n−1), ∏(1 − λ_t(1 − A_t[n−1,n−1])), the product without its last factor, the
    influence profile and its dense reference, over random rollouts (n < 64, T < 40)."""
    out = []
    for _ in range(cases):
        n, T = int(rng.integers(2, 64)), int(rng.integers(1, 40))
        ks = [_random_kernel(rng, n) for _ in range(T)]
        lam = rng.uniform(0, 1, T)
        p = influence(ks, lam)
        f = [1 - lt * (1 - k.diagonal()[-1]) for k, lt in zip(ks, lam, strict=True)]
        out.append((p[-1], np.prod(f), np.prod(f[:-1]), p, _dense_last_row(ks, lam)))
    last, prod, prod_wrong, prof, dense = zip(*out, strict=True)
    return np.array(last), np.array(prod), np.array(prod_wrong), list(prof), list(dense)


def _stationary(rng, stationary):
    """p^{(T)}(0), T = 1…200, of random stationary kernels, and stationary_profiles against
    dense vector–matrix products at T ∈ {1, 7, 50} (first kernel)."""
    seqs = []
    for s in range(stationary):
        n = int(rng.integers(2, 128))
        K = _random_kernel(rng, n)
        lam = float(rng.uniform(0.01, 1))
        prof = stationary_profiles(K, lam, range(1, 201))
        seqs.append(prof[:, 0])
        if s == 0:
            R = (1 - lam) * np.eye(n) + lam * np.asarray(K.dense())
            ref = [np.linalg.matrix_power(R, T)[-1] for T in (1, 7, 50)]
            err = max(float(np.abs(prof[T - 1] - r).max()) for T, r in zip((1, 7, 50), ref,
                                                                            strict=True))
    return seqs, err


def _input_side(rng, stacks):
    """Layers added at the input side: depth T uses layers L_T (input), …, L_1 (output), and
    p^{(T+1)}(0) = Σ_j p^{(T)}(j) R_{T+1}[j, 0] ≥ p^{(T)}(0) since R[0, 0] = 1. Returns the
    sequences p^{(T)}(0) and p^{(30)}(0) with its dense-product reference."""
    seqs, got, ref = [], [], []
    for _ in range(stacks):
        n, depth = int(rng.integers(4, 40)), 30
        mats = [random_causal(rng, n) for _ in range(depth)]
        layers = [dense_kernel(M) for M in mats]
        lam = rng.uniform(0.05, 1, depth)
        seqs.append([influence(layers[:T][::-1], lam[:T][::-1])[0] for T in range(1, depth + 1)])
        got.append(seqs[-1][-1])
        ref.append(_dense_last_row(layers[::-1], lam[::-1])[0])  # R_{T−1} ⋯ R_0, dense
    dk_err = max(float(np.abs(np.asarray(dense_kernel(M).dense()) - M).max()) for M in mats)
    return seqs, got, ref, dk_err


_TOL_LAST = fp_tol(1e-12, "T ≤ 39 factors, each with relative rounding ≤ 3ε, against a chain of "
                   "T convex steps (≤ 2ε relative each on the last entry): 39·5·2.2e-16 = "
                   "4.3e-14 ≤ 1e-12")
_TOL_DROP = fp_tol(1e-15, "p(0) ≤ 1 changes by a convex step with rounding ≤ 4ε·p(0) ≤ 8.9e-16 "
                   "≤ 1e-15")
_TOL_DENSE = fp_tol(1e-12, "≤ 39 layers on n ≤ 63 tokens, products of stochastic matrices: each "
                    "entry rounds by ≤ 39·63·2.2e-16 = 5.4e-13 of a row mass ≤ 1 per side: ≤ 1e-12")
_TOL_INPUT = fp_tol(1e-13, "two rollouts of ≤ 30 layers on n ≤ 39 tokens, each entry with rounding "
                    "≤ 30·39·2.2e-16 = 2.6e-13 relative to p(0) ≤ 1; the difference of two: 5e-13, "
                    "rounded down since p(0) < 0.2 here")


def _pb10_controls(last, prod, prod_wrong, seqs, prof, dense):
    """Negative controls: one rollout's product without its last factor, one sequence with a
    late decrease, one dense reference reversed in j (the others right in each)."""
    wrong_seqs = [*seqs[:-1], np.r_[seqs[-1], seqs[-1][-1] - 1e-12]]
    worst = int(np.argmax(np.abs(prod_wrong / prod - 1)))  # where a dropped factor shows most
    wrong_prod = np.where(np.arange(prod.size) == worst, prod_wrong, prod)
    return [
        rejects("edge_judge_control_one_factor_dropped",
                _rel_judge("c", last, wrong_prod, _TOL_LAST),
                "one rollout's product without its last factor (the others right)"),
        rejects("drop_judge_control_late_decrease", _drop_judge("c", wrong_seqs, _TOL_DROP),
                "the last sequence decreases by 1e-12 at its last step (the others right)"),
        rejects("dense_judge_control_one_reversed",
                _err_judge("c", prof, [*dense[:-1], dense[-1][::-1]], _TOL_DENSE),
                "the last dense reference reversed in j (the others right)"),
    ]  # fmt: skip


_PB10_CITES = (
    cite("posflow.simulate.rollout:influence",
         "dense NumPy products e_{n−1}ᵀ R_{T−1} ⋯ R_0 (every entry), and the product formula",
         "max_error_influence_vs_dense", "max_error_p0_vs_dense_product", "max_rel_error_p_last"),
    cite("posflow.simulate.rollout:stationary_profiles",
         "dense matrix powers e_{n−1}ᵀ R^T", "max_error_stationary_vs_dense"),
    cite("posflow.simulate.kernels:dense_kernel", "the matrix it was built from",
         "max_error_dense_kernel"),
)  # fmt: skip


@register(
    "PB10",
    "[D]",
    "edge masses: p(n−1) = ∏(1 − λ_t(1 − A_t[n−1,n−1])); p(0) nondecreasing "
    "in depth for stationary kernels (and for any kernels when layers are added at the input "
    "side)",
    assumptions=("causal kernels",),
    compares=_PB10_CITES,
)
def pb10(ctx: Context) -> Evidence:
    """Claim PB10: the edge masses of a rollout.

    ``influence`` against the product formula for p(n−1) and against dense products;
    ``stationary_profiles`` (p(0) nondecreasing in T) against dense matrix powers; layers added
    at the input side with ``dense_kernel`` layers. Negative controls: the edge-mass judge with
    one factor dropped in one rollout, the depth judge with one late decrease, the dense judge
    with one reference reversed in j.
    """
    rng = np.random.default_rng(ctx.seed + 10)
    cases = 60 if ctx.full else 25
    stationary = 20 if ctx.full else 8
    stacks = 10 if ctx.full else 5
    last, prod, prod_wrong, prof, dense = _last_cases(rng, cases)
    seqs, stat_err = _stationary(rng, stationary)
    in_seqs, got0, ref0, dk_err = _input_side(rng, stacks)
    return Evidence(
        [
            _rel_judge("max_rel_error_p_last", last, prod, _TOL_LAST,
                       label="max |p(n−1)/∏(1 − λ_t(1 − A_t[n−1,n−1])) − 1|"),
            _drop_judge("max_decrease_p0_stationary", seqs, _TOL_DROP,
                        label="max decrease of p^{(T)}(0) from T to T + 1, stationary kernels"),
            _drop_judge("max_decrease_p0_input_side", in_seqs, _TOL_INPUT,
                        label="max decrease of p^{(T)}(0) when a layer is added at the input "
                        "side"),
            _err_judge("max_error_p0_vs_dense_product", got0, ref0, _TOL_DENSE,
                       label="max |p^{(30)}(0) − (R_29⋯R_0)[n−1, 0]| (dense NumPy product)"),
            _err_judge("max_error_influence_vs_dense", prof, dense, _TOL_DENSE,
                       label="max |influence − e_{n−1}ᵀ R_{T−1}⋯R_0| (dense), every entry"),
            at_most("max_error_stationary_vs_dense", stat_err, 0.0,
                    fp_tol(1e-13, "≤ 50 convex steps on n < 128 against dense matrix powers "
                           "(≤ 6 products): 50·128·2.2e-16 = 1.4e-12 worst case per entry, "
                           "observed ≤ 1e-15; 1e-13"),
                    label="max |stationary_profiles − e_{n−1}ᵀ R^T| (dense), T ∈ {1, 7, 50}"),
            at_most("max_error_dense_kernel", dk_err, 0.0, fp_tol(1e-15, "row sums ≈ 1: "
                    "renormalising changes entries by ≤ a few ε"),
                    label="max |dense_kernel(M).dense() − M|"),
            *_pb10_controls(last, prod, prod_wrong, seqs, prof, dense),
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


def _w1_mean_judge(key, pairs, tol, label=""):
    """The judge of W1 = E_q − E_p: the largest |W1(p, q) − (E_q − E_p)| over pairs."""
    err = max(abs(w1(p, q) - (mean_position(q) - mean_position(p))) for p, q in pairs)
    return at_most(key, err, 0.0, tol, label=label)


def _ordered_judge(key, pairs, tol, label=""):
    """The premise judge: every pair is stochastically ordered, F_q ≤ F_p (to 1e-12)."""
    ok = all(bool((np.cumsum(q) <= np.cumsum(p) + 1e-12).all()) for p, q in pairs)
    return holds(key, ok, tol, label=label)


def _w1_itself(original):
    @functools.wraps(original)
    def judge(key, pairs, tol, label=""):
        err = max(abs(w1(p, q) - w1(p, q)) for p, q in pairs)
        return at_most(key, err, 0.0, tol, label=label)

    return judge


def _pb13_cases(rng, cases):
    """Random profiles (Exp(1) weights, n < 300) and ordered pairs from rows i < i' of
    ALiBi+content rollouts: the errors of W1(δ_0, q), (n−1)·W1_normalised(q, δ_0),
    mean_position, W1 against the CDF sum and rollout_matrix against R^T; whether W1_normalised
    stayed in [0, 1]; the pairs."""
    e1 = e3 = e4 = e5 = e6 = 0.0
    in_range, pairs = True, []
    for _ in range(cases):
        n = int(rng.integers(2, 300))
        q = rng.exponential(size=n)
        q /= q.sum()
        r = rng.exponential(size=n)
        r /= r.sum()
        delta0 = np.zeros(n)
        delta0[0] = 1.0
        ref_mean = float(np.arange(n) @ q)
        e1 = max(e1, abs(w1(delta0, q) - ref_mean))
        e4 = max(e4, abs(mean_position(q) - ref_mean))
        e5 = max(e5, abs(w1(q, r) - float(np.abs(np.cumsum(q) - np.cumsum(r))[:-1].sum())))
        # stochastically ordered pair: two rows of a monotone rollout, i < i'
        K, lam, T = (random_alibi(rng, n, slope_max=2.0, content_abs=10.0),
                     float(rng.uniform(0.1, 1)), int(rng.integers(1, 8)))  # fmt: skip
        P = rollout_matrix(K, np.full(T, lam))
        if n <= 64:
            R = (1 - lam) * np.eye(n) + lam * np.asarray(K.dense())
            e6 = max(e6, float(np.abs(P - np.linalg.matrix_power(R, T)).max()))
        i, k = sorted(rng.choice(n, 2, replace=False))
        pairs.append((P[i], P[k]))
        wn = w1_normalised(q, delta0)
        in_range &= 0.0 <= wn <= 1.0
        e3 = max(e3, abs(wn * (n - 1) - ref_mean))
    return e1, e3, e4, e5, e6, in_range, pairs


_PB13_CITES = (
    cite("posflow.simulate.compare:w1", "the direct sum Σ_k |F_p(k) − F_q(k)|, and Σ_j j q(j) "
         "for W1(δ_0, q)", "max_err_W1_vs_cdf_sum", "max_err_W1_delta0"),
    cite("posflow.simulate.compare:mean_position", "the direct sum Σ_j j q(j)",
         "max_err_mean_position"),
    cite("posflow.simulate.compare:w1_normalised", "Σ_j j q(j)/(n − 1) for W1(q, δ_0)",
         "max_err_normalisation"),
    cite("posflow.simulate.rollout:rollout_matrix", "dense products (R)^T of the kernel",
         "max_err_rollout_matrix_vs_dense"),
)  # fmt: skip


@register(
    "PB13",
    "[convention]",
    "W1 conventions: W1(δ_0, q) = Σ_j j q(j); for p ⪯_st q, W1 = E_q − E_p; "
    "normalised W1 = W1/(n−1)",
    assumptions=("profiles on positions 0..n−1",),
    compares=_PB13_CITES,
)
def pb13(ctx: Context) -> Evidence:
    """Claim PB13: the W1 conventions of this code.

    ``w1`` against Σ_k |F_p − F_q| and Σ_j j q(j); ``mean_position`` and ``w1_normalised``
    against direct sums; ordered pairs from rows of ``rollout_matrix`` (against dense
    products). Negative controls: a pair with crossing CDFs, last, must fail both the
    ordering premise and W1 = E_q − E_p.
    """
    rng = np.random.default_rng(ctx.seed + 13)
    cases = 200 if ctx.full else 60
    e1, e3, e4, e5, e6, in_range, pairs = _pb13_cases(rng, cases)
    fp = fp_tol(1e-10, "positions ≤ 300 times weights summing to 1, ≤ 300 terms each rounded: "
                "300·300·2.2e-16 = 2e-11 ≤ 1e-10")  # fmt: skip
    fp_ord = fp_tol(1e-12, "CDFs compared to 1e-12")
    crossing = [*pairs, (np.array([0.5, 0.0, 0.5]), np.array([0.0, 1.0, 0.0]))]
    return Evidence(
        [
            at_most("max_err_W1_delta0", e1, 0.0, fp,
                    label="max |W1(δ_0, q) − Σ_j j q(j)| (sum computed here)"),
            at_most("max_err_W1_vs_cdf_sum", e5, 0.0, fp,
                    label="max |W1(q, r) − Σ_k |F_q(k) − F_r(k)|| over random pairs"),
            at_most("max_err_mean_position", e4, 0.0, fp,
                    label="max |mean_position(q) − Σ_j j q(j)|"),
            _ordered_judge("pairs_are_ordered", pairs, fp_ord,
                           label="premise: the rollout row pairs are stochastically ordered"),
            _w1_mean_judge("max_err_ordered_pairs", pairs, fp,
                           label="max |W1(p, q) − (E_q − E_p)| over ordered pairs"),
            at_most("max_err_normalisation", e3, 0.0, fp,
                    label="max |(n−1)·W1_normalised(q, δ_0) − Σ_j j q(j)|"),
            at_most("max_err_rollout_matrix_vs_dense", e6, 0.0,
                    fp_tol(1e-13, "≤ 7 products of n ≤ 64 stochastic matrices: 7·64·2.2e-16 = "
                           "1e-13"),
                    label="max |rollout_matrix − R^T| (dense matrix power), n ≤ 64"),
            holds("normalised_in_unit_interval", in_range, label="W1_normalised ∈ [0, 1]"),
            rejects("ordered_judge_control_crossing_pair",
                    _ordered_judge("c", crossing, fp_ord),
                    "a last pair (½, 0, ½), (0, 1, 0) whose CDFs cross"),
            rejects("w1_mean_judge_control_crossing_pair", _w1_mean_judge("c", crossing, fp),
                    "a last pair (½, 0, ½), (0, 1, 0): equal means, W1 = 1"),
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


def _first_sequence_only(original):
    @functools.wraps(original)
    def judge(key, seqs, tol, label=""):
        return original(key, list(seqs)[:1], tol, label)

    return judge


def _w1_last_cdf_kept(original):
    @functools.wraps(original)
    def w1_(p, q):
        a, b = np.asarray(p, float), np.asarray(q, float)
        return original(p, q) + abs(a[0] / a.sum() - b[0] / b.sum())

    return w1_


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
add_mutant("PB10", "drop-judge-first-sequence-only",
           "posflow.proofs_checks.claims.pb10_13_edges_w1:_drop_judge", _first_sequence_only,
           "the depth judge looks at the first sequence only")
add_mutant("PB13", "w1-judge-compares-with-itself",
           "posflow.proofs_checks.claims.pb10_13_edges_w1:_w1_mean_judge", _w1_itself,
           "the W1 = E_q − E_p judge compares W1 with itself")
add_mutant("PB13", "w1-off-by-one-position", "posflow.simulate.compare:w1", _w1_last_cdf_kept,
           "W1 counts the gap |p(0) − q(0)| at position 0 twice")
add_mutant("PB13", "normalised-by-n", "posflow.simulate.compare:w1_normalised", _normalised_by_n,
           "normalised W1 divides by n instead of n − 1")
add_mutant("PB13", "positions-from-1", "posflow.simulate.compare:mean_position",
           _positions_from_one, "mean position counts tokens from 1 instead of 0")
