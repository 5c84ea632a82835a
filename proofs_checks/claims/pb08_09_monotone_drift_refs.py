"""Claims PB8 and PB9: independent references for the routines their checks run, and the
negative controls of their judges.

References: ALiBi kernels entry by entry from the softmax definition (slopes 2^{−8(h+1)/H} written
out), CDF deficits by brute force over every row pair, rollouts by dense matrix products, drifts
by direct sums of k e^{−mk}, the stated limit formula and sympy's derivative of it at points.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import (
    Figure,
    Panel,
    Series,
    at_most,
    fp_tol,
    holds,
    random_alibi,
    rejects,
)
from posflow.simulate.kernels import (
    alibi_kernel,
    alibi_slopes,
    monotonicity_deficit,
    uniform_kernel,
)
from posflow.simulate.rollout import rollout_matrix
from posflow.theory import rollout as th

__all__ = [
    "best_row_judge",
    "brute_deficit",
    "deficit_judge",
    "exact_deficit",
    "exact_judge",
    "first_kernel_judge",
    "pb8_comparisons",
    "pb8_controls",
    "pb9_comparisons",
    "rel_judge",
    "softmax_kernel",
]

_EPS = float(np.finfo(np.float64).eps)


def softmax_kernel(n, slopes, content):
    """Head average of softmax_{j≤i}(c [i=j] − m (i−j)), entry by entry."""
    A = np.zeros((n, n))
    for m, c in zip(np.atleast_1d(slopes), np.atleast_1d(content), strict=True):
        for i in range(n):
            logits = np.array([c if j == i else -m * (i - j) for j in range(i + 1)])
            w = np.exp(logits - logits.max())
            A[i, : i + 1] += w / w.sum()
    return A / np.atleast_1d(slopes).size


def brute_deficit(A):
    """max over all pairs i < i' and all k of F_{i'}(k) − F_i(k), clipped at 0."""
    F = np.cumsum(np.asarray(A, dtype=float), axis=1)
    n = F.shape[0]
    return max([0.0] + [float((F[b] - F[a]).max()) for a in range(n) for b in range(a + 1, n)])


def exact_deficit(n: int, q: Fraction, ec: Fraction) -> Fraction:
    """The largest CDF deficit of the single-head kernel with e^{-m} = q, e^{c} = ec, exactly."""
    rows = []
    for i in range(n):
        w = [q ** (i - j) for j in range(i)] + [ec]
        z = sum(w)
        rows.append([x / z for x in w] + [Fraction(0)] * (n - i - 1))
    F = [[sum(r[: k + 1]) for k in range(n)] for r in rows]
    return max(
        [Fraction(0)]
        + [F[b][k] - F[a][k] for a in range(n) for b in range(a + 1, n) for k in range(n)]
    )


# ------------------------------------------------------------------------------------------
# judges


def deficit_judge(key, kernels, tol, label=""):
    """The monotonicity judge of PB8: the largest ``monotonicity_deficit`` over ``kernels``."""
    return at_most(key, max(monotonicity_deficit(K) for K in kernels), 0.0, tol, label=label)


def exact_judge(key, grid, n, tol, label=""):
    """The exact judge of PB8: every rational single-head kernel of ``grid`` has deficit 0."""
    return holds(key, max(exact_deficit(n, q, ec) for q, ec in grid) == 0, tol, label=label)


def rel_judge(key, values, refs, tol, label=""):
    """The judge of PB9's drifts: the worst relative error max |value/ref − 1|."""
    err = float(np.max(np.abs(np.asarray(values, float) / np.asarray(refs, float) - 1)))
    return at_most(key, err, 0.0, tol, label=label)


def first_kernel_judge(original):
    """A loosened PB8 judge: only the first kernel is looked at."""

    @functools.wraps(original)
    def judge(key, kernels, tol, label=""):
        return at_most(key, monotonicity_deficit(next(iter(kernels))), 0.0, tol, label=label)

    return judge


def best_row_judge(original):
    """A loosened PB9 judge: the best row instead of the worst."""

    @functools.wraps(original)
    def judge(key, values, refs, tol, label=""):
        err = float(np.min(np.abs(np.asarray(values, float) / np.asarray(refs, float) - 1)))
        return at_most(key, err, 0.0, tol, label=label)

    return judge


# ------------------------------------------------------------------------------------------
# PB8


def pb8_comparisons(rng):
    """monotonicity_deficit, alibi_kernel, alibi_slopes and rollout_matrix against brute force,
    entry-by-entry softmax, the slope formula and dense products."""
    fp16 = fp_tol(3e-14, "kernels of ≤ 24 tokens by two softmax routes: entries within ~4ε; "
                  "CDF sums of ≤ 24 terms: 24·4·2.2e-16 = 2.1e-14 ≤ 3e-14")
    slopes, content = np.array([0.3, 1.1, 0.0]), np.array([2.0, -4.0, 0.5])
    ref = softmax_kernel(24, slopes, content)
    K = alibi_kernel(24, slopes, content)
    kern_err = float(np.abs(np.asarray(K.dense()) - ref).max())
    anti = softmax_kernel(10, [-0.7, 0.2], [3.0, -1.0])  # non-monotone
    def_err = max(abs(monotonicity_deficit(M) - brute_deficit(M)) for M in (ref, anti))
    slope_err = max(float(np.abs(alibi_slopes(H) - 2.0 ** (-8.0 * (np.arange(H) + 1) / H)).max())
                    for H in (8, 32, 112))  # fmt: skip
    ks = [random_alibi(rng, 20, slope_max=2.0, content_abs=10.0) for _ in range(5)]
    lam = rng.uniform(0, 1, 5)
    P = np.eye(20)
    for k, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(20) + lt * np.asarray(k.dense())) @ P
    roll_err = float(np.abs(rollout_matrix(ks, lam) - P).max())
    return [
        at_most("max_deficit_error_vs_brute_force", def_err, 0.0, fp16,
                label="max |monotonicity_deficit − brute force over row pairs| (a monotone and "
                "a non-monotone kernel)"),
        at_most("max_alibi_kernel_error_vs_softmax", kern_err, 0.0, fp16,
                label="max |alibi_kernel − entry-by-entry softmax|, 3 heads, n = 24"),
        at_most("max_alibi_slopes_error_vs_formula", slope_err, 0.0,
                fp_tol(4 * _EPS, "2^x in float64: a few ulps of values ≤ 1"),
                label="max |alibi_slopes(H) − 2^{−8(h+1)/H}|, H ∈ {8, 32, 112}"),
        at_most("max_rollout_matrix_error_vs_dense", roll_err, 0.0,
                fp_tol(1e-13, "5 products of 20×20 stochastic matrices: each entry rounds by ≤ "
                       f"5·20·2.2e-16 = {100 * _EPS:.1e} per side ≤ 1e-13"),
                label="max |rollout_matrix − dense R_4⋯R_0|, n = 20"),
    ]  # fmt: skip


def pb8_controls(fp, grid, n_exact):
    """The deficit judge on kernels of which only the last is not monotone (m = −1, c = 5),
    and the exact judge with a negative-slope kernel (e^{−m} = 2) added last."""
    kernels = [alibi_kernel(8, 0.5, 1.0), alibi_kernel(8, 0.0, -3.0), alibi_kernel(8, -1.0, 5.0)]
    return [
        rejects("deficit_judge_control_last_kernel_not_monotone",
                deficit_judge("c", kernels, fp),
                "three kernels, only the last (m = −1, c = 5) not monotone"),
        rejects("exact_judge_control_negative_slope",
                exact_judge("c", [*grid, (Fraction(2), Fraction(100))], n_exact, fp),
                "the rational grid with e^{−m} = 2 (m = −ln 2 < 0), e^c = 100 added last"),
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------
# PB9


def _direct_drift(i, m, c):
    """μ(i) = Σ_{k=1}^{i} k e^{−mk} / (e^c + Σ_{k=1}^{i} e^{−mk}) by a direct loop."""
    w = [math.exp(-m * k) for k in range(1, i + 1)]
    return sum(k * x for k, x in zip(range(1, i + 1), w, strict=True)) / (math.exp(c) + sum(w))


def _stated_limit(m, c):
    q = math.exp(-m)
    return q / ((1 - q) * (math.exp(c) * (1 - q) + q))


def pb9_comparisons(cases, rows, fp_rel):
    """alibi_drift, alibi_drift_limit, alibi_drift_limit_dc and uniform_kernel against direct
    sums, the stated formula and sympy's derivative of it at points; the relative-error judge
    on the closed form at row i + 1 (one row off) must reject."""
    got = [th.alibi_drift(i, m, c) for m, c in cases for i in rows]
    direct = [_direct_drift(i, m, c) for m, c in cases for i in rows]
    lim = [float(th.alibi_drift_limit(m, c)) for m, c in cases]
    m_s, c_s = sp.symbols("m c", positive=True)
    q = sp.exp(-m_s)
    stated = q / ((1 - q) * (sp.exp(c_s) * (1 - q) + q))
    d_ref = sp.diff(stated, c_s)
    dc = th.alibi_drift_limit_dc(m_s, c_s).derivative
    pts = [(0.1, 0.5), (1.0, 3.0), (2.0, 0.01)]
    dc_err = max(abs(float(dc.subs({m_s: a, c_s: b}) / d_ref.subs({m_s: a, c_s: b})) - 1)
                 for a, b in pts)  # fmt: skip
    n = 200
    U = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    one_wrong = list(direct)
    one_wrong[0] = _direct_drift(rows[0] + 1, *cases[0])
    return [
        rel_judge("alibi_drift_rel_error_vs_direct_sum", got, direct, fp_rel,
                  label=f"max |alibi_drift/(Σ k e^(−mk) / (e^c + Σ e^(−mk))) − 1|, i ∈ {rows}"),
        rel_judge("alibi_drift_limit_rel_error_vs_stated", lim,
                  [_stated_limit(m, c) for m, c in cases],
                  fp_tol(1e-13, "a closed form of ≤ 6 operations: ≤ 10 roundings ≈ 2e-15, "
                         "the 1 − q cancellation at m = 0.05 adds 20×: 1e-13"),
                  label="max |alibi_drift_limit / (q/((1 − q)(e^c(1 − q) + q))) − 1|"),
        at_most("d_mu_dc_rel_error_vs_sympy_diff", dc_err, 0.0,
                fp_tol(1e-13, "both sides evaluated by sympy in float at 15 digits: 1e-13"),
                label="max |∂μ_∞/∂c (theory) / d/dc of the stated formula − 1| at 3 points"),
        at_most("uniform_kernel_error_vs_formula",
                float(np.abs(np.asarray(uniform_kernel(n).dense()) - U).max()), 0.0,
                fp_tol(_EPS, "1/(i+1) rounded once"),
                label=f"max |uniform_kernel − 1/(i+1) on j ≤ i|, n = {n}"),
        rejects("rel_judge_control_one_row_off_by_one",
                rel_judge("c", got, one_wrong, fp_rel),
                f"the direct sum at (m, c) = {cases[0]} taken at row {rows[0] + 1} instead of "
                f"{rows[0]} (the other {len(got) - 1} right)"),
    ]  # fmt: skip


# ------------------------------------------------------------------------------------------
# the figure of PB9 and the mutant factories


def numeric_drift(A):
    """μ(i) = Σ_j A_ij (i − j) of a dense kernel."""
    i = np.arange(A.shape[0])
    return (A * (i[:, None] - i[None, :])).sum(axis=1)


def drift_figure() -> Figure:
    nf = 120
    i = np.arange(1, nf)
    K = uniform_kernel(nf).dense()
    series = [
        Series("causal mask: i/2", i, numeric_drift(K)[1:], color="attention_only"),
        Series("+ residual λ = 0.3: 0.3·i/2", i, 0.3 * numeric_drift(K)[1:], color="residual",
               style="--"),
    ]  # fmt: skip
    for c, col in ((0.0, "#E69F00"), (3.0, "#009E73"), (-3.0, "#CC79A7")):
        mu = numeric_drift(alibi_kernel(nf, 0.1, c).dense())[1:]
        lim = float(th.alibi_drift_limit(0.1, c))
        series.append(Series(f"ALiBi m = 0.1, c = {c:+g}", i, mu, color=col))
        series.append(Series(f"its limit $\\mu_\\infty$ = {lim:.2f}", [1, nf - 1], [lim, lim],
                             color=col, style=":"))  # fmt: skip
    return Figure(
        "PB9_drift",
        "the four forces as drift terms (n = 120)",
        [Panel("drift toward token 0", "token position i", "drift $\\mu(i)$", series, logy=True,
               legend="shared")],
        caption="ALiBi drifts (solid) saturate at their limits μ_∞(m, c) (dotted, same colour); "
        "c > 0 lowers the limit, c < 0 raises it; the causal mask alone grows like i/2.",
    )  # fmt: skip


def transposed_detector(original):
    @functools.wraps(original)
    def deficit(K):
        M = np.asarray(K.dense() if hasattr(K, "dense") else K, dtype=np.float64)
        return original(M.T)

    return deficit


def slopes_from_zero(original):
    @functools.wraps(original)
    def slopes(num_heads):
        return original(num_heads) * 2.0 ** (8.0 / num_heads)

    return slopes


def drift_off_by_one(original):
    @functools.wraps(original)
    def drift(i, m, c=0.0):
        return original(i + 1, m, c)

    return drift
