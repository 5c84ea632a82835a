"""Claim PB6 of [A]: the dichotomy, collapse ⇔ Σλ_t = ∞ (given δ_t ≥ δ > 0 and
ε-reachability), numeric against symbolic (PB4 is in
:mod:`posflow.proofs_checks.claims.pb04_no_collapse`, PB5 and PB7 in
:mod:`posflow.proofs_checks.claims.pb05_07_collapse_rates`).

PB6's relaxation ``reachability`` drops ε-reachability: tokens that attend only to themselves
keep mass off token 0 however large Σλ_t grows.
"""

from __future__ import annotations

import math

import numpy as np
import sympy as sp
from hypothesis import strategies as st

from posflow.proofs_checks.claims import pb06_dichotomy_refs as refs
from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    PALETTE,
    RESIDUAL_STEP,
    SUMMABILITY_TEST,
    Context,
    Evidence,
    Figure,
    Panel,
    Relaxation,
    Series,
    Table,
    add_mutant,
    add_relaxation,
    at_most,
    cite,
    fp_tol,
    holds,
    info,
    negated_result,
    param_tol,
    quiet,
    quiet_log,
    register,
    rejects,
    scaled_argument,
    sensitivity,
    swapped_residual_weights,
    undecided,
)
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.kernels import alibi_kernel, dense_kernel, uniform_kernel
from posflow.simulate.rollout import constant, influence, power_decay
from posflow.theory import rollout as th

__all__ = [
    "PB6_MIN_SUM_LAMBDA",
    "pb6",
    "reachability_kernel",
    "reachability_violation",
    "unreachable_examples",
]

PB6_MIN_SUM_LAMBDA = 20.0  # PB6: examples stand for Σλ_t = ∞ with λ T ≥ 20


_BETAS = (0.5, 1.0, 1.1, 1.2, 1.5, 2.0)
_HORIZON = 1  # decades over which the drift of the decade ratio is extrapolated (a parameter)
_HORIZON_REASON = (
    "the decade ratio r_K = Δy_K/Δy_{K−1} of y = −log(1 − P) tends to 10^{1−β} (ratio test: "
    "collapse ⇔ lim r ≥ 1) but drifts at finite depth; the classifier calls collapse when r and "
    "r − h·(r_{K−1} − r_K) are both ≥ 1, no collapse when both are < 1, else goes a decade deeper"
)


def _classify(ratios, h):
    """'collapse', 'no collapse' or None from decade ratios r_1..r_K (needs ≥ 2)."""
    if len(ratios) < 2:
        return None
    r, drift = ratios[-1], ratios[-2] - ratios[-1]
    ext = r - h * drift
    if min(r, ext) >= 1:
        return "collapse"
    if max(r, ext) < 1:
        return "no collapse"
    return None


def _dichotomy_curve(K, beta, K_max):
    """y(T) = −log Σ_{j≥1} p_T(j) at T = 1, √10, 10, …, 10^K_max (half decades) for
    λ_t = 0.5/(t+1)^β."""
    Ts = sorted({round(10 ** (k / 2)) for k in range(2 * K_max + 1)})
    lam = power_decay(0.5, beta, Ts[-1])
    ys = [-quiet_log(influence(K, lam[:T])[1:].sum()) for T in Ts]
    return Ts, ys


def _first_decision(Ts, ys, h, K_budget):
    """The classifier with horizon h at depths 10^3, …, 10^K_budget of a computed curve:
    (decision or None, depth used, decade ratios up to that depth)."""
    for K_max in range(3, K_budget + 1):
        dec = [ys[Ts.index(10**k)] for k in range(K_max + 1)]
        inc = np.diff(dec)
        ratios = [float(inc[k] / inc[k - 1]) if inc[k - 1] > 0 else math.inf
                  for k in range(1, len(inc))]  # fmt: skip
        got = _classify(ratios, h)
        if got is not None:
            return got, 10**K_max, ratios
    return None, 10**K_max, ratios


def _horizon_verdict(calls):
    """FAILS when a β is classified against the p-series rule (collapse ⇔ β ≤ 1), else
    INCONCLUSIVE when a β is undecided, else HOLDS."""
    want = ["collapse" if b <= 1 else "no collapse" for b in _BETAS]
    if any(c not in ("undecided", w) for c, w in zip(calls, want, strict=True)):
        return FAILS
    return INCONCLUSIVE if "undecided" in calls else HOLDS


def _horizon_sensitivity(curves, K_budget):
    """The verdict at other extrapolation horizons h (table, one column per β)."""

    def calls(h):
        return [_first_decision(*curves[b], h, K_budget)[0] or "undecided" for b in _BETAS]

    return sensitivity(
        "sensitivity_ratio_extrapolation_decades", "h", (0, 1, 2, 3),
        lambda h: _horizon_verdict(calls(h)),
        title="Verdict against the classifier's extrapolation horizon h (decades)",
        note=f"each β at the first depth 10^3 … 10^{K_budget} where the classifier "
             "decides; 'undecided' = still drifting at the depth budget.",
        extra=calls, extra_columns=tuple(f"β = {b:g}" for b in _BETAS), verdict_last=True,
    )  # fmt: skip


def _pb6_comparison(beta, got, want, depth, ratios):
    """The numeric call against the symbolic one, or undecided at the depth budget."""
    key, lab = f"beta{beta:g}", f"β = {beta:g}"
    if got is None:
        return undecided(f"{key}_numeric", ratios[-1],
                         f"decade ratio still drifting at T = {depth} (the depth "
                         f"budget): r = {ratios[-1]:.3g}, previous {ratios[-2]:.3g}",
                         label=f"{lab}: numeric classification")  # fmt: skip
    return _match_judge(f"{key}_numeric_matches_symbolic", got, want,
                        f"{lab}: numeric '{got}' = symbolic '{want}'")


def _match_judge(key, got, want, label):
    """The judge of the dichotomy: the classifier's decision equals the expected one."""
    return holds(key, got == want,
                 param_tol("ratio_extrapolation_decades", _HORIZON, _HORIZON_REASON),
                 label=label)  # fmt: skip


def _classifier_controls(K_budget):
    """The classifier and its judge on series known to diverge (b = 0.8, 0.9) or converge
    (b = 1.3, 2): the right call is accepted, the wrong one rejected; the summability test on
    the harmonic series and on Σ(t+1)^{−3/2}."""
    ms = []
    for b in (0.8, 0.9, 1.3, 2.0):
        right = "collapse" if b <= 1 else "no collapse"
        wrong = "no collapse" if b <= 1 else "collapse"
        got = _first_decision(*refs.series_curve(b, K_budget), _HORIZON, K_budget)[0]
        ms += [
            _match_judge(f"classifier_known_series_b{b:g}", got, right,
                         f"Σ 0.5/(t+1)^{b:g}: classifier '{got}' = known '{right}'"),
            rejects(f"match_judge_control_series_b{b:g}", _match_judge("c", got, wrong, "c"),
                    f"Σ 0.5/(t+1)^{b:g} claimed '{wrong}'"),
        ]  # fmt: skip
    known = {("1/2", "1"): True, ("1/2", "3/2"): False, ("1/5", None): True}
    ms.append(holds("summability_test_known_series",
                    all(th.power_decay_collapses(*k) is v for k, v in known.items()),
                    label="theory.collapses: harmonic and constant diverge, Σ(t+1)^(−3/2) "
                          "converges"))  # fmt: skip
    return ms


def _figure_pb6(n, series):
    return Figure(
        "PB6_dichotomy",
        f"Dichotomy: $\\lambda_t = 0.5/(t+1)^\\beta$, uniform kernel, n = {n}",
        [Panel("mass off token 0 against depth", "depth T",
               "$-\\log \\sum_{j \\geq 1} P[n-1, j]$", series, logx=True, logy=True)],
        caption="Bounded curves (β > 1) flatten; β ≤ 1 keep growing (β = 1 like log T).",
    )  # fmt: skip


_CITES = (
    cite("posflow.theory.rollout:power_decay_collapses",
         "the p-series rule Σ(t+1)^(−β) = ∞ ⇔ β ≤ 1 (and the harmonic and constant series)",
         "symbolic_vs_p_series_rule", "summability_test_known_series"),
    cite("posflow.simulate.rollout:influence",
         "e_(n−1) times a dense NumPy product R_99⋯R_0", "influence_vs_dense_product"),
    cite("posflow.simulate.rollout:power_decay", "the direct formula 0.5/(t+1)^β",
         "power_decay_vs_direct_formula"),
)  # fmt: skip


@register(
    "PB6",
    "[A]",
    "dichotomy: collapse ⇔ Σλ_t = ∞ (given δ_t ≥ δ > 0 and ε-reachability)",
    assumptions=("δ_t ≥ δ > 0", "A_t[i,0] ≥ ε > 0 (ε-reachability)"),
    compares=_CITES,
)
@quiet
def pb6(ctx: Context) -> Evidence:
    """Claim PB6: the ratio classifier on −log(1 − P[n−1,0]) (``influence``, checked against a
    dense product) against ``th.power_decay_collapses`` (checked against the p-series rule) for
    λ_t = 0.5/(t+1)^β (``power_decay``, checked against its formula). Negative controls: the
    classifier's judge on series known to diverge / converge, claimed the wrong way."""
    n = 64
    K = dense_kernel(uniform_kernel(n).dense())  # the uniform kernel as a matrix (fast steps)
    K_budget = 5 if ctx.full else 4
    ms, series, rows, curves = [], [], [], {}
    for beta in _BETAS:
        sym = th.power_decay_collapses("1/2", str(sp.nsimplify(beta)))
        want = None if sym is None else ("collapse" if sym else "no collapse")
        Ts, ys = _dichotomy_curve(K, beta, K_budget)
        curves[beta] = (Ts, ys)
        # depth adaptive to β: the first depth 10^3, 10^4, … at which the classifier decides
        got, depth, ratios = _first_decision(Ts, ys, _HORIZON, K_budget)
        ms.append(holds(f"beta{beta:g}_symbolic_decided", sym is not None,
                        label=f"β = {beta:g}: theory.collapses decides Σλ_t"))  # fmt: skip
        ms.append(_pb6_comparison(beta, got, want, depth, ratios))
        rows.append([beta, want or "undecided", got or "undecided", depth, ratios[-1],
                     10 ** (1 - beta)])  # fmt: skip
        series.append(Series(f"β = {beta:g}", Ts, ys, kind="line",
                             color=PALETTE[len(series) % len(PALETTE)]))  # fmt: skip
    tables = [
        Table("classification", "Numeric vs symbolic collapse, λ_t = 0.5/(t+1)^β",
              ["β", "symbolic", "numeric", "depth used", "last decade ratio",
               "asymptotic ratio 10^{1−β}"], rows),
        _horizon_sensitivity(curves, K_budget),
    ]  # fmt: skip
    dense_err, sched = refs.dense_check(K, 1.0)
    want_all = [r[1] == ("collapse" if r[0] <= 1 else "no collapse") for r in rows]
    ms += [
        holds("symbolic_vs_p_series_rule", all(want_all),
              label="theory.collapses = the p-series rule (collapse ⇔ β ≤ 1) for every β"),
        at_most("influence_vs_dense_product", dense_err, 0.0,
                fp_tol(3e-12, "100 convex steps of ≤ n + 4 = 68 terms on entries ≤ 1: "
                              "100·68·2.2e-16 = 1.5e-12"),
                label="β = 1, T = 100: max |influence − e_(n−1)R_99⋯R_0 (dense)|"),
        at_most("power_decay_vs_direct_formula",
                float(np.max(np.abs(sched[0] / np.array(sched[1]) - 1))), 0.0,
                fp_tol(1e-15, "one power and one division: 2ε"),
                label="β = 1: max |power_decay/(0.5/(t+1)) − 1|"),
        *_classifier_controls(K_budget),
    ]  # fmt: skip
    return Evidence(
        [*ms, info("n", n), info("depth_budget", 10**K_budget)],
        figures=[_figure_pb6(n, series)],
        tables=tables,
        setup=f"uniform kernel n = {n} (as a dense matrix), λ_t = 0.5/(t+1)^β for β ∈ {_BETAS}; "
        f"y = −log Σ_{{j≥1}} P[n−1,j] at half decades; decade ratios of y classify, starting at "
        f"T = 10^3 and adding decades up to 10^{K_budget} until decided (h = {_HORIZON}).",
    )


# -- mutants: small realistic breaks the claim above must catch -----------------------------------
add_mutant("PB6", "residual-weights-swapped", RESIDUAL_STEP, swapped_residual_weights,
           "the residual step computes λ p + (1 − λ) p A "
           "(λ read as the residual weight)")  # fmt: skip
add_mutant("PB6", "summability-test-inverted", SUMMABILITY_TEST, negated_result,
           "theory.collapses' comparison tests conclude the opposite way")  # fmt: skip
add_mutant("PB6", "power-decay-beta-halved", "posflow.simulate.rollout:power_decay",
           scaled_argument(1, 0.5, "beta"),
           "the schedule uses (t+1)^{−β/2} (e.g. a square root taken twice)")  # fmt: skip


_ME = "posflow.proofs_checks.claims.pb06_dichotomy"
add_mutant("PB6", "judge-accepts-any-decision", f"{_ME}:_match_judge", refs.any_decision,
           "the dichotomy's judge accepts any decision the classifier makes")  # fmt: skip
add_mutant("PB6", "classifier-flipped", f"{_ME}:_classify", refs.flipped_classifier,
           "the ratio classifier calls collapse where the ratio says no collapse")  # fmt: skip


# -- relaxation: collapse <=> Σλ = ∞, given δ_t >= δ > 0 and ε-reachability — drop reachability ---


def unreachable_examples():
    """Examples for PB6 without ε-reachability (claim PB6).

    Keys ``n`` in [3, 8]; ``self_rows``, 1 to n-2 tokens in 1..n-1 that attend only to
    themselves (``A[i, i] = 1``, so ``A[i, 0] = 0``); ``slope`` in [0, 3] and ``content`` in
    [-5, 5] of the single-head ALiBi rows of every other token (so ``δ > 0``); a constant
    ``lam`` in [0.1, 1] over ``T`` layers with ``lam·T >= 20`` (a finite stand-in for
    Σλ_t = ∞), ``T <= 400``.
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(3, 8))
        rows = st.lists(st.integers(1, n - 1), min_size=1, max_size=n - 2, unique=True)
        self_rows = sorted(draw(rows))
        slope = draw(ex.floats(0.0, 3.0))
        content = draw(ex.floats(-5.0, 5.0))
        lam = draw(ex.floats(0.1, 1.0))
        T = draw(st.integers(math.ceil(PB6_MIN_SUM_LAMBDA / lam), 400))
        return {
            "n": n,
            "self_rows": self_rows,
            "slope": slope,
            "content": content,
            "lam": lam,
            "T": T,
        }

    return draw()


def reachability_kernel(example) -> tuple[np.ndarray, list[int]]:
    """The kernel of a PB6 example and the tokens that reach token 0 (claim PB6).

    ``A`` is the single-head ALiBi kernel ``softmax_{j<=i}(c [i=j] - m (i-j))`` with rows
    ``self_rows`` replaced by ``e_i``. Returns ``(A, others)``: ``A`` of shape (n, n) (causal,
    row-stochastic), ``others`` the tokens ``i >= 1`` not in ``self_rows`` (nonempty, so that
    ``δ = max_i (1 - A[i, i]) > 0``).
    """
    n = ex.integer(example, "n", 2)
    rows = ex.get(example, "self_rows")
    if (
        not isinstance(rows, list)
        or len(set(rows)) != len(rows)
        or not all(isinstance(i, int) and not isinstance(i, bool) and 1 <= i <= n - 1 for i in rows)
    ):
        raise ValueError(
            f"example['self_rows'] must be a list of distinct tokens in 1..{n - 1}; got {rows!r}"
        )
    others = [i for i in range(1, n) if i not in rows]
    if not others:
        raise ValueError(
            "example['self_rows'] must leave a token i >= 1 that attends beyond itself "
            "(δ > 0); every token is self-only"
        )
    A = alibi_kernel(n, ex.real(example, "slope"), ex.real(example, "content")).dense()
    for i in rows:
        A[i] = 0.0
        A[i, i] = 1.0
    return A, others


def reachability_violation(example) -> float:
    """How far the last token stays from collapse, beyond the reachability bound (claim PB6).

    With ``p = e_{n-1}^T R^T``, ``R = (1 - λ) I + λ A`` (constant λ over T layers) and
    ``ε = min_{i ∈ others} A[i, 0]`` the reachability of the tokens that do reach token 0:

    .. math::
        v = \\big(1 - p(0)\\big) - e^{-\\varepsilon \\lambda T}.

    Under ε-reachability for every token, ``1 - P[i, 0] <= exp(-ε Σλ_t)`` (PB5), and it tends
    to 0 as Σλ_t → ∞ (PB6). ``v > 0`` says that bound fails for the profile: a token that
    attends only to itself absorbs mass that never reaches token 0. Cost O(T·n²).
    """
    A, others = reachability_kernel(example)
    lam, T = ex.real(example, "lam"), ex.integer(example, "T", 1)
    p = influence(dense_kernel(A), constant(lam, T))
    eps = float(min(A[i, 0] for i in others))
    return float(math.fsum(p[1:])) - math.exp(-eps * lam * T)


def _describe_reachability(example) -> str:
    A, others = reachability_kernel(example)
    lam, T = example["lam"], example["T"]
    p = influence(dense_kernel(A), constant(lam, T))
    eps = float(min(A[i, 0] for i in others))
    rest, bound = math.fsum(p[1:]), math.exp(-eps * lam * T)
    return (
        f"tokens {example['self_rows']} attend only to themselves (A[i, 0] = 0); with "
        f"Σλ = {lam * T:.4g} the last token keeps 1 - p(0) = {rest:.6g} off token 0, "
        f"{'above' if rest > bound else 'within'} exp(-ε Σλ) = {bound:.6g} (ε = {eps:.4g}, "
        f"the least A[i, 0] of the other tokens)"
    )


add_relaxation(
    "PB6",
    Relaxation(
        "reachability",
        "ε-reachability: A_t[i, 0] ≥ ε > 0 for every token i",
        unreachable_examples,
        reachability_violation,
        _describe_reachability,
    ),
)
