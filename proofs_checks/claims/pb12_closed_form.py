"""Claim PB12 of [A]: the closed form of the uniform-kernel rollout and its n → ∞ limit law."""

from __future__ import annotations

import functools
import itertools
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
    at_least,
    at_most,
    biased,
    cite,
    close,
    exact_tol,
    fp_tol,
    holds,
    info,
    leaky_residual_step,
    register,
    rejects,
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


def _gap_judges(gaps):
    """The judge of the limit: max_x (|F_n(x) − F(x)| − Hoeffding bound) ≤ 0 at every n."""
    return [m for m in _gap_measurements(gaps) if m.judged]


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


def _mc_judge(key, mean, ref, sd, N, z, label=""):
    """The Monte Carlo judge: |mean − ref| ≤ z·sd/√N (a two-sided z interval)."""
    se = sd / math.sqrt(N)
    return close(key, float(mean), float(ref),
                 stat_tol(z * se, f"{N} samples of X; standard error {se:.2e} × z = {z:.2f} "
                          "(two-sided, family-wise level 1e-3 over 5 positions, Bonferroni; "
                          "5 comparisons)"), label=label)  # fmt: skip


def _mc_no_sqrt_n(original):
    @functools.wraps(original)
    def judge(key, mean, ref, sd, N, z, label=""):
        return original(key, mean, ref, sd, 1, z, label)

    return judge


def _rational_rollout(n, lams):
    """e_{n−1}ᵀ R_{T−1} ⋯ R_0 for the uniform kernel U_ij = 1/(i+1), j ≤ i, in sympy Rationals."""
    U = sp.Matrix(n, n, lambda i, j: sp.Rational(1, i + 1) if j <= i else 0)
    p = sp.Matrix([[0] * (n - 1) + [1]])
    for lam in lams[::-1]:
        p = p * ((1 - lam) * sp.eye(n) + lam * U)
    return list(p)


def _law_direct(lams, x):
    """Pr(K = k) by brute force over the 2^T subsets of non-lazy layers, and at x the cdf
    Σ_k Pr(K=k) e^{−y} Σ_{i<k} y^i/i! and the density Σ_k Pr(K=k) y^{k−1}/(k−1)!, y = −ln x."""
    T = len(lams)
    pk = [sp.Integer(0)] * (T + 1)
    for bits in itertools.product((0, 1), repeat=T):
        pk[sum(bits)] += sp.Mul(*[lam if b else 1 - lam for lam, b in zip(lams, bits, strict=True)])
    y = -np.log(x)
    cdf = sum(float(pk[k]) * np.exp(-y) * sum(y**i / math.factorial(i) for i in range(k))
              for k in range(1, T + 1))  # fmt: skip
    pdf = sum(float(pk[k]) * y ** (k - 1) / math.factorial(k - 1) for k in range(1, T + 1))
    return pk, cdf, pdf


def _law_comparisons(law, lam_exact, exact, numeric, se, js, N, z):
    """influence_exact against a rational dense product, limit_law against brute force, the
    Hoeffding bound against its integral, and the negative controls of the judges."""
    from scipy import integrate

    x = np.array([0.05, 0.3, 0.7, 0.95])
    pk, cdf, pdf = _law_direct(lam_exact, x)
    small = th.influence_exact(8, lam_exact)
    ref = _rational_rollout(8, lam_exact)
    ints = [integrate.quad(lambda y, x=x: float(law.pdf(y)) * math.exp(-2 * 3999 * (x - y) ** 2),
                           0, 1, points=[x])[0] for x in (0.1, 0.3, 0.7, 0.95)]  # fmt: skip
    slack = _hoeffding_bound(law, np.array([0.1, 0.3, 0.7, 0.95]), 3999) - np.array(ints)
    one_wrong = exact.copy()
    one_wrong[-1] += 1e-10
    sd = se[0] * math.sqrt(N)
    return [
        holds("influence_exact_vs_rational_product",
              all(sp.nsimplify(a) == b for a, b in zip(small, ref, strict=True)),
              label="influence_exact(8, λ) = e_7ᵀ R_3⋯R_0 in sympy Rationals, entry by entry"),
        holds("limit_law_pmf_vs_brute_force", list(law.pmf) == pk,
              label="limit_law Pr(K = k) = the sum over the 2^4 subsets of layers, exactly"),
        at_most("limit_law_cdf_pdf_error_vs_direct",
                float(max(np.abs(law.cdf(x) - cdf).max(), np.abs(law.pdf(x) / pdf - 1).max())),
                0.0, fp_tol(1e-13, "gammaincc and a 4-term float sum, xlogy/gammaln and "
                            "y^(k−1)/(k−1)!: ≤ 20 roundings relative to values ≤ 10"),
                label="max |limit_law cdf − direct sum|, |pdf/direct − 1| at x ∈ (0.05 … 0.95)"),
        at_least("hoeffding_bound_minus_integral", float(slack.min()), 0.0,
                 fp_tol(1e-12, "quad to 1.5e-8 relative of an integral ≤ 1e-4"),
                 label="min over x of f(x − w)√(π/2N) + e^{−2Nw²} − ∫ f(y) e^{−2N(x−y)²} dy"),
        info("hoeffding_bound_slack_max", float(slack.max())),
        rejects("exact_judge_control_last_entry_moved",
                _exact_judge("c", one_wrong, numeric),
                "the closed form's last entry moved by 1e-10 (the others right)"),
        rejects("mc_judge_control_bias_2z",
                _mc_judge("c", biased(exact[js[0]], se[0], 2 * z), exact[js[0]], sd, N, z),
                f"the estimate at j = {js[0]} moved by 2z = {2 * z:.1f} standard errors"),
        rejects("gap_judge_control_one_point_twice_the_bound",
                _gap_judges({4000: (x, np.r_[0.0, 0.0, 0.0, 1e-2], np.full(4, 5e-3))}),
                "a cdf gap of twice the bound (1e-2 against 5e-3) at the last x only"),
    ]  # fmt: skip


def _exact_judge(key, exact, numeric, label=""):
    """The judge of the closed form: max_j |exact − numeric|."""
    return at_most(key, float(np.abs(np.asarray(exact) - numeric).max()), 0.0,
                   fp_tol(1e-13, "exact rationals rounded once (ε·p ≤ 2.2e-16) against 4 layers "
                          "of reversed cumulative sums of ≤ 128 terms: 4·128·2.2e-16 = 1.1e-13; "
                          "1e-13 as the terms are ≤ 1 and most far smaller"),
                   label=label)  # fmt: skip


_CITES = (
    cite("posflow.theory.rollout:influence_exact",
         "a dense product of the uniform kernel in sympy Rationals (n = 8), and Monte Carlo "
         "draws of X", "influence_exact_vs_rational_product", "monte_carlo_p40"),
    cite("posflow.theory.rollout:limit_law",
         "brute force over the 2^T subsets for Pr(K = k); direct finite sums for the cdf and "
         "density; ∏(1 − λ_t) for the atom",
         "limit_law_pmf_vs_brute_force", "limit_law_cdf_pdf_error_vs_direct", "atom_is_product"),
    cite("posflow.simulate.rollout:influence", "the rational closed form rounded once",
         "max_abs_error_exact_vs_numeric"),
    cite("posflow.simulate.kernels:uniform_kernel", "the rational closed form (via influence)",
         "max_abs_error_exact_vs_numeric"),
)  # fmt: skip


@register(
    "PB12",
    "[ours]",
    "closed form for the uniform kernel: p(j) = C(n−1,j) E[X^j "
    "(1−X)^{n−1−j}], X = ∏X_t; n → ∞ limit: atom ∏(1−λ_t) at 1 plus density "
    "Σ_k Pr(K=k)(−ln x)^{k−1}/(k−1)!",
    assumptions=("uniform causal kernel",),
    compares=_CITES,
    basis="derived here ([D]) for [A]'s rollout through the uniform causal kernel",
)
def pb12(ctx: Context) -> Evidence:
    """Claim PB12: the Hausdorff closed form of the uniform-kernel rollout and its limit law.

    ``influence_exact`` against a rational dense product and Monte Carlo draws of X;
    ``influence`` of ``uniform_kernel`` against it; ``limit_law`` against brute force over
    subsets and direct sums, and the discrete cdf held to a Hoeffding bound (compared with its
    integral). Negative controls: the closed-form, Monte Carlo and gap judges reject one wrong
    entry, a 2z bias and a gap of twice the bound at one point.
    """
    rng = np.random.default_rng(ctx.seed + 12)
    lam_exact = [sp.Rational(1, 3), sp.Rational(1, 2), sp.Rational(1, 5), sp.Rational(3, 4)]
    lam = np.array([float(x) for x in lam_exact])
    n, N, alpha, sizes = 128, (400_000 if ctx.full else 100_000), 1e-3, (4000, 64000)
    js = np.array([0, 5, 40, 100, n - 2])
    exact = np.array([float(x) for x in th.influence_exact(n, lam_exact)])
    law = th.limit_law(lam_exact)
    numeric = influence(uniform_kernel(n), lam)
    mc, se = _monte_carlo(rng, lam, n, js, N)
    z = float(stats.norm.ppf(1 - alpha / (2 * js.size)))
    atom_ok = law.atom == sp.Mul(*[1 - x for x in lam_exact])
    gaps = _cdf_gaps(law, lam, sizes)
    ms = [
        _exact_judge("max_abs_error_exact_vs_numeric", exact, numeric,
                     label=f"max_j |p(j) closed form (rationals) − numeric rollout|, n = {n}"),
        holds("atom_is_product", atom_ok, exact_tol("sympy Rationals"),
              label="limit-law atom = ∏(1 − λ_t) exactly"),
    ]  # fmt: skip
    for j, m_j, s_j, e_j in zip(js, mc, se, exact[js], strict=True):
        ms.append(_mc_judge(f"monte_carlo_p{j}", m_j, e_j, s_j * math.sqrt(N), N, z,
                            label=f"Monte Carlo E[C(n−1,j) X^j (1−X)^(n−1−j)] at j = {j} vs "
                            "closed form"))  # fmt: skip
    ms += _law_comparisons(law, lam_exact, exact, numeric, se, js, N, z)
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


def _exact_drops_last_layer(original):
    @functools.wraps(original)
    def exact(n, lambdas, **kw):
        return original(n, list(lambdas)[:-1], **kw)

    return exact


def _law_drops_last_layer(original):
    @functools.wraps(original)
    def law(lambdas, **kw):
        return original(list(lambdas)[:-1], **kw)

    return law


add_mutant("PB12", "leaky-attention-branch", RESIDUAL_STEP, leaky_residual_step(1e-6),
           "the attention branch of each step loses 1e-6 of its mass")  # fmt: skip
add_mutant("PB12", "mc-judge-drops-sqrt-n",
           "posflow.proofs_checks.claims.pb12_closed_form:_mc_judge", _mc_no_sqrt_n,
           "the Monte Carlo judge uses the sample sd, not sd/√N")  # fmt: skip
add_mutant("PB12", "influence-exact-drops-a-layer", "posflow.theory._hausdorff:influence_exact",
           _exact_drops_last_layer, "the closed form built without the last layer")  # fmt: skip
add_mutant("PB12", "limit-law-drops-a-layer", "posflow.theory._hausdorff:limit_law",
           _law_drops_last_layer, "the limit law built without the last layer")  # fmt: skip
