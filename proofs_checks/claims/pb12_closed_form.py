"""Claim PB12 of [A]: the closed form of the uniform-kernel rollout and its n → ∞ limit law."""

from __future__ import annotations

import functools
import math

import numpy as np
import sympy as sp
from scipy import stats

from posflow.proofs_checks.kit import (
    RESIDUAL_STEP,
    Context,
    Evidence,
    Figure,
    Panel,
    Series,
    add_mutant,
    at_most,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    register,
    stat_tol,
)
from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import influence
from posflow.theory import rollout as th

_EPS = float(np.finfo(np.float64).eps)

# ------------------------------------------------------------------------------------------
# PB12: the closed form of the uniform-kernel rollout and its limit law


def _hoeffding_bound(law, x, N):
    """A bound on |Pr(J/N ≤ x) − Pr(X ≤ x)| for J | X ~ Binomial(N, X) (array of x > w).

    Hoeffding: |Pr(Bin(N, y) ≤ xN) − 1[y ≤ x]| ≤ exp(−2N(x − y)²), and the atom of X at 1 adds
    nothing for x < 1, so the gap is ≤ ∫ f(y) e^{−2N(x−y)²} dy. The density f is nonincreasing
    (each term (−ln y)^{k−1} is), so with w = 3/√N: ≤ f(x − w)·√(π/(2N)) + e^{−2Nw²}.
    """
    w = 3.0 / math.sqrt(N)
    return law.pdf(x - w) * math.sqrt(math.pi / (2 * N)) + math.exp(-2 * N * w * w)


def _monte_carlo(rng, lam, n, js, N):
    """E[C(n−1,j) X^j (1−X)^(n−1−j)] at ``js`` by N draws of X = ∏ X_t, X_t = 1 w.p. 1 − λ_t
    else U(0, 1): (means, standard errors)."""
    u = rng.random((N, lam.size))
    lazy = rng.random((N, lam.size)) >= lam
    X = np.where(lazy, 1.0, u).prod(axis=1)
    samples = stats.binom.pmf(js[None, :], n - 1, X[:, None])
    return samples.mean(axis=0), samples.std(axis=0, ddof=1) / math.sqrt(N)


def _cdf_gaps(law, lam, sizes):
    """Per n in ``sizes``: (x_j, F_n(x_j) − F(x_j), Hoeffding bound) on x ∈ [0.1, 0.95]."""
    gaps = {}
    for Nn in sizes:
        p_big = influence(uniform_kernel(Nn), lam)
        x = np.linspace(0.1, 0.95, 86)
        j = np.floor(x * (Nn - 1)).astype(int)
        xj = j / (Nn - 1)
        gap = np.cumsum(p_big)[j] - law.cdf(xj)
        gaps[Nn] = (xj, gap, _hoeffding_bound(law, xj, Nn - 1))
    return gaps


def _gap_measurements(gaps):
    ms = []
    for Nn, (_, gap, bound) in gaps.items():
        ms.append(
            at_most(f"cdf_gap_excess_n{Nn}", float(np.max(np.abs(gap) - bound)), 0.0,
                    fp_tol(1e-12, f"cumulative sums of ≤ {Nn} terms (≤ {Nn}·2.2e-16 = "
                           f"{Nn * _EPS:.1e}) and the incomplete-gamma cdf (≤ 1e-14)"),
                    label=f"max_x (|F_n(x) − F(x)| − Hoeffding bound), n = {Nn}")
        )  # fmt: skip
        ms.append(info(f"cdf_gap_n{Nn}", float(np.abs(gap).max()),
                       label=f"max_x |F_n(x) − F(x)|, n = {Nn}, x ∈ [0.1, 0.95]"))  # fmt: skip
        ms.append(info(f"bound_n{Nn}", float(bound.max()),
                       label=f"largest Hoeffding bound, n = {Nn}"))  # fmt: skip
    return ms


@register(
    "PB12",
    "[D, ours]",
    "closed form for the uniform kernel: p(j) = C(n−1,j) E[X^j "
    "(1−X)^{n−1−j}], X = ∏X_t; n → ∞ limit: atom ∏(1−λ_t) at 1 plus density "
    "Σ_k Pr(K=k)(−ln x)^{k−1}/(k−1)!",
    assumptions=("uniform causal kernel",),
)
def pb12(ctx: Context) -> Evidence:
    rng = np.random.default_rng(ctx.seed + 12)
    lam_exact = [sp.Rational(1, 3), sp.Rational(1, 2), sp.Rational(1, 5), sp.Rational(3, 4)]
    lam = np.array([float(x) for x in lam_exact])
    n, N, alpha, sizes = 128, (400_000 if ctx.full else 100_000), 1e-3, (4000, 64000)
    js = np.array([0, 5, 40, 100, n - 2])
    exact = np.array([float(x) for x in th.influence_exact(n, lam_exact)])
    law = th.limit_law(lam_exact)
    numeric = influence(uniform_kernel(n), lam)
    err_exact = float(np.abs(exact - numeric).max())
    mc, se = _monte_carlo(rng, lam, n, js, N)
    z = float(stats.norm.ppf(1 - alpha / (2 * js.size)))
    atom_ok = law.atom == sp.Mul(*[1 - x for x in lam_exact])
    gaps = _cdf_gaps(law, lam, sizes)
    ms = [
        at_most("max_abs_error_exact_vs_numeric", err_exact, 0.0,
                fp_tol(1e-13, "exact rationals rounded once (ε·p ≤ 2.2e-16) against 4 layers of "
                       f"reversed cumulative sums of ≤ {n} terms: 4·{n}·2.2e-16 = "
                       f"{4 * n * _EPS:.1e} ≤ 1e-13"),
                label=f"max_j |p(j) closed form (rationals) − numeric rollout|, n = {n}"),
        holds("atom_is_product", atom_ok, exact_tol("sympy Rationals"),
              label="limit-law atom = ∏(1 − λ_t) exactly"),
    ]  # fmt: skip
    for j, m_j, s_j, e_j in zip(js, mc, se, exact[js], strict=True):
        ms.append(
            close(f"monte_carlo_p{j}", float(m_j), float(e_j),
                  stat_tol(z * float(s_j), f"{N} samples of X; standard error {s_j:.2e} × "
                           f"z = {z:.2f} (two-sided, family-wise level {alpha:g} over "
                           f"{js.size} positions, Bonferroni)"),
                  label=f"Monte Carlo E[C(n−1,j) X^j (1−X)^(n−1−j)] at j = {j} vs closed form")
        )  # fmt: skip
    ms += _gap_measurements(gaps)
    ms += [info("atom", float(law.atom)), info("monte_carlo_samples", N)]
    return Evidence(
        ms,
        figures=[_pb12_figure(n, numeric, exact, law, gaps)],
        setup=f"λ = (1/3, 1/2, 1/5, 3/4); closed form (sympy Rationals) vs the rollout at n = {n}; "
        f"{N} Monte Carlo draws of X at j ∈ {js.tolist()}; the discrete cdf of j/(n−1) against the "
        f"limit law at n ∈ {sizes} for x ∈ [0.1, 0.95], held to the Hoeffding bound "
        "f(x − 3/√n)·√(π/(2n)) + e^{−18} (→ 0 as n → ∞).",
    )


def _pb12_figure(n, numeric, exact, law, gaps) -> Figure:
    j = np.arange(n)
    xs = np.linspace(0.002, 0.998, 300)
    p1 = Panel(
        f"profile, n = {n}", "token position j", "p(j)",
        [Series("numeric rollout", j, numeric, color="profile"),
         Series("closed form (Hausdorff)", j, exact, color="exact", style="--")],
        logy=True,
    )  # fmt: skip
    big = max(gaps)
    xb, _, _ = gaps[big]
    p_big = influence(uniform_kernel(big), [float(v) for v in law.lambdas])
    p2 = Panel(
        "limit law", "x = j/(n−1)", "cdf",
        [Series(f"discrete cdf, n = {big}", xb,
                np.cumsum(p_big)[np.floor(xb * (big - 1)).astype(int)], kind="markers",
                color="profile"),
         Series("limit law Pr(X ≤ x)", xs, law.cdf(xs), color="exact")],
        hlines=[(1 - float(law.atom), "1 − atom")],
    )  # fmt: skip
    res = []
    for (Nn, (x, gap, bound)), col in zip(gaps.items(), ("#0072B2", "#D55E00"), strict=True):
        res.append(Series(f"F_n − F, n = {Nn}", x, gap, kind="markers", color=col))
        res.append(Series(f"± Hoeffding bound, n = {Nn}", x, np.zeros_like(x), kind="band",
                          lo=-bound, hi=bound, color=col))  # fmt: skip
    p3 = Panel("residual against the limit law", "x", "F_n(x) − F(x)", res)
    return Figure(
        "PB12_closed_form",
        "uniform kernel, λ = (1/3, 1/2, 1/5, 3/4)",
        [p1, p2, p3],
        caption="Left: the rollout equals the Hausdorff closed form. Middle: the discrete cdf of "
        "j/(n−1) and the limit law (atom ∏(1 − λ_t) at 1). Right: the residual with the "
        "Hoeffding band that shrinks like n^{−1/2}.",
    )


# ------------------------------------------------------------------------------------------
# mutants


def _law_drops_last_layer(original):
    @functools.wraps(original)
    def law(lambdas, **kw):
        return original(list(lambdas)[:-1], **kw)

    return law


add_mutant("PB12", "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
add_mutant("PB12", "limit-law-drops-a-layer", "posflow.theory._hausdorff:limit_law",
           _law_drops_last_layer, "the limit law built without the last layer")  # fmt: skip
