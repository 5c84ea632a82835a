"""Relaxations: one assumption of a claim dropped, with a Hypothesis search space and a violation.

Each relaxation draws plain-data examples (dicts of ints, floats and lists, JSON-serialisable)
that satisfy every assumption of its claim except the dropped one, and measures by how much an
example breaks the claim (``violation > 0`` exactly when it does). Importing this module attaches
them to their claims (:func:`posflow.proofs_checks.kit.add_relaxation`):

=====  ===================  ===============================================================
claim  relaxation           what is dropped
=====  ===================  ===============================================================
PB2    causal               causality (A lower-triangular)
PB6    reachability         ε-reachability A_t[i, 0] ≥ ε > 0
PB8    nonnegative_slope    ALiBi slopes m_h ≥ 0
PB11   residual             the residual (λ_t < 1); here λ_t ≡ 1, attention only (the
                            kernel's own diagonal A_ii, i.e. content c and the ALiBi
                            self-weight, is kept)
=====  ===================  ===============================================================
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from posflow.proofs_checks.kit import Relaxation, add_relaxation
from posflow.proofs_checks.kit import examples as ex
from posflow.simulate.kernels import alibi_kernel, dense_kernel, monotonicity_deficit
from posflow.simulate.rollout import constant, diagonal, influence, rollout_matrix

__all__ = [
    "DIAG_TOL",
    "MONOTONE_TOL",
    "PB6_MIN_SUM_LAMBDA",
    "U_TOL",
    "causal_violation",
    "no_residual_examples",
    "noncausal_examples",
    "reachability_kernel",
    "reachability_violation",
    "residual_violation",
    "slope_examples",
    "slope_violation",
    "unreachable_examples",
]

MONOTONE_TOL = 1e-12  # PB8: a CDF deficit up to this is rounding
DIAG_TOL = 1e-9  # PB2: |P_ii - product formula| up to this is rounding
U_TOL = 1e-12  # PB11: an interior dip must be deeper than this to count as a U
PB6_MIN_SUM_LAMBDA = 20.0  # PB6: examples stand for Σλ_t = ∞ with λ T ≥ 20


_floats, _get, _int, _real = ex.floats, ex.get, ex.integer, ex.real


# ------------------------------------------------------------------------------------------
# PB8: ALiBi + content kernels are stochastically monotone for m >= 0 — drop m >= 0


def slope_examples():
    """Examples for PB8 without ``m ≥ 0``: ``{"n", "slopes", "content"}`` (claim PB8).

    ``n`` in [2, 8], 1–3 heads, slopes in [-3, 3] (either sign), content in [-20, 20].
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(2, 8))
        heads = draw(st.integers(1, 3))
        slopes = draw(st.lists(_floats(-3.0, 3.0), min_size=heads, max_size=heads))
        content = draw(st.lists(_floats(-20.0, 20.0), min_size=heads, max_size=heads))
        return {"n": n, "slopes": slopes, "content": content}

    return draw()


def slope_violation(example) -> float:
    """Amount by which an ALiBi + content kernel fails stochastic monotonicity (claim PB8).

    .. math::
        v = \\max_{i < i'} \\max_k \\big(F_{i'}(k) - F_i(k)\\big)_+ - 10^{-12},
        \\qquad F_i(k) = \\sum_{j \\le k} A_{ij}

    with ``A = alibi_kernel(n, slopes, content)`` (head average). ``v > 0`` exactly when the
    deficit exceeds rounding. Cost O(n²·H).
    """
    K = alibi_kernel(_int(example, "n", 1), _get(example, "slopes"), _get(example, "content"))
    return monotonicity_deficit(K) - MONOTONE_TOL


def _describe_slope(example) -> str:
    A = alibi_kernel(example["n"], example["slopes"], example["content"]).dense()
    F = np.cumsum(A, axis=1)
    best = (0.0, 0, 0, 0)
    for i2 in range(1, F.shape[0]):
        for i in range(i2):
            k = int(np.argmax(F[i2] - F[i]))
            best = max(best, (float(F[i2, k] - F[i, k]), i, i2, k))
    d, i, i2, k = best
    if d <= MONOTONE_TOL:
        return f"every later row dominates every earlier one (largest CDF deficit {d:.3g})"
    return (
        f"row {i2} puts more mass on tokens <= {k} than row {i} does: "
        f"F_{i2}({k}) - F_{i}({k}) = {d:.6g} > 0, so the later row does not dominate"
    )


# ------------------------------------------------------------------------------------------
# PB2: P_ii = prod_t (1 - λ_t (1 - A[i,i])) — drop causality


def noncausal_examples():
    """Examples for PB2 without causality: ``{"n", "A", "lambdas"}`` (claim PB2).

    ``n`` in [2, 5]; ``A`` a nonnegative row-stochastic ``n x n`` matrix (any entries above the
    diagonal; a row of zero weights becomes ``e_i``); 1–4 values ``λ_t`` in [0, 1].
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(2, 5))
        row = st.lists(_floats(0.0, 1.0), min_size=n, max_size=n)
        raw = draw(st.lists(row, min_size=n, max_size=n))
        A = []
        for i, r in enumerate(raw):
            s = math.fsum(r)
            A.append([x / s for x in r] if s > 0 else [float(j == i) for j in range(n)])
        lambdas = draw(st.lists(_floats(0.0, 1.0), min_size=1, max_size=4))
        return {"n": n, "A": A, "lambdas": lambdas}

    return draw()


def causal_violation(example) -> float:
    """Largest error of the diagonal product formula for one shared kernel (claim PB2).

    .. math::
        v = \\max_i \\Big| P_{ii} - \\prod_t \\big(1 - \\lambda_t (1 - A_{ii})\\big) \\Big|
            - 10^{-9},\\qquad P = R_{T-1} \\cdots R_0,\\ R_t = (1-\\lambda_t) I + \\lambda_t A

    ``P`` is the dense rollout (one vector chain per row), the product is
    :func:`posflow.simulate.rollout.diagonal`. ``A`` must be nonnegative and row-stochastic, shape
    (n, n); it need not be causal. Cost O(T·n³).
    """
    n = _int(example, "n", 1)
    K = dense_kernel(_get(example, "A"), causal=False)
    if K.n != n:
        raise ValueError(f"example['A'] must be {n} x {n} (n = {n}); got {K.n} x {K.n}")
    lam = _get(example, "lambdas")
    P = rollout_matrix(K, lam)
    return float(np.max(np.abs(np.diag(P) - diagonal(K, lam)))) - DIAG_TOL


def _describe_causal(example) -> str:
    K = dense_kernel(example["A"], causal=False)
    P = rollout_matrix(K, example["lambdas"])
    formula = diagonal(K, example["lambdas"])
    i = int(np.argmax(np.abs(np.diag(P) - formula)))
    if abs(P[i, i] - formula[i]) <= DIAG_TOL:
        return f"the product formula matches the rollout diagonal (row {i} worst)"
    return (
        f"row {i}: the rollout gives P_ii = {P[i, i]:.6g} but the product formula gives "
        f"{formula[i]:.6g}; mass leaves token {i} and comes back through later tokens"
    )


# ------------------------------------------------------------------------------------------
# PB6: collapse <=> Σλ = ∞, given δ_t >= δ > 0 and ε-reachability — drop reachability


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
        slope = draw(_floats(0.0, 3.0))
        content = draw(_floats(-5.0, 5.0))
        lam = draw(_floats(0.1, 1.0))
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
    n = _int(example, "n", 2)
    rows = _get(example, "self_rows")
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
    A = alibi_kernel(n, _real(example, "slope"), _real(example, "content")).dense()
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
    lam, T = _real(example, "lam"), _int(example, "T", 1)
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


# ------------------------------------------------------------------------------------------
# PB11: finite depth gives U-shaped profiles — drop the residual (λ ≡ 1)


def no_residual_examples():
    """Examples for PB11 with λ ≡ 1: ``{"n", "slopes", "content", "T"}`` (claim PB11).

    ``n`` in [3, 12], 1–3 heads with slopes in [0, 3] and content in [-10, 10], depth ``T`` in
    [2, 12] (a multi-layer rollout with intermediate Σλ_t = T).
    """

    @st.composite
    def draw(draw):
        n = draw(st.integers(3, 12))
        heads = draw(st.integers(1, 3))
        slopes = draw(st.lists(_floats(0.0, 3.0), min_size=heads, max_size=heads))
        content = draw(st.lists(_floats(-10.0, 10.0), min_size=heads, max_size=heads))
        T = draw(st.integers(2, 12))
        return {"n": n, "slopes": slopes, "content": content, "T": T}

    return draw()


def _attention_only_profile(example) -> np.ndarray:
    n = _int(example, "n", 3)
    K = alibi_kernel(n, _get(example, "slopes"), _get(example, "content"))
    return influence(K, np.ones(_int(example, "T", 1)))


def residual_violation(example) -> float:
    """How far the attention-only profile is from a U (claim PB11).

    With ``p = e_{n-1}^T A^T`` (λ ≡ 1) for ``A = alibi_kernel(n, slopes, content)``:

    .. math::
        \\mathrm{dip} = \\min\\big(p(0), p(n-1)\\big) - \\min_{0<j<n-1} p(j),
        \\qquad v = 10^{-12} - \\mathrm{dip}.

    ``v > 0`` exactly when the attention-only profile has no interior point below both ends
    (dip ≤ 1e-12: monotone, flat, or collapsed onto token 0), not even the weakest dip. Needs
    n ≥ 3. Cost O(T·n·H).

    What a violation shows, precisely: *this* attention-only kernel has no dip at depth T. The
    kernel's own diagonal is kept: with diagonal content c the kernel is itself lazy,
    ``A = (1 − κ_i) I + κ_i A_0`` row by row, and where diagonal content alone makes a dip the
    example is *not* a violation (v < 0). So a counterexample shows that dropping the residual
    can remove the U; it does not show that every U needs the residual.
    """
    p = _attention_only_profile(example)
    dip = min(p[0], p[-1]) - p[1:-1].min()
    return U_TOL - float(dip)


def _describe_residual(example) -> str:
    p = _attention_only_profile(example)
    j = int(np.argmin(p[1:-1])) + 1
    d = np.diff(p)
    if min(p[0], p[-1]) - p[j] > U_TOL:
        shape = "an interior minimum below both ends (a U)"
    elif (d <= 0).all():
        shape = "nonincreasing (primacy toward token 0), so no U"
    elif (d >= 0).all():
        shape = "nondecreasing (recency), so no U"
    else:
        shape = "no interior minimum below both ends, so no U"
    A_diag = alibi_kernel(p.size, example["slopes"], example["content"]).diagonal()
    return (
        f"attention only (λ ≡ 1, T = {example['T']}): p(0) = {p[0]:.6g}, "
        f"p(n-1) = {p[-1]:.6g}, least interior p({j}) = {p[j]:.6g}, global argmin "
        f"{int(np.argmin(p))}; {shape}. The kernel's own diagonal (content "
        f"{example['content']}, largest self-weight A_ii = {float(A_diag[1:].max()):.4g}) is "
        "kept and makes no dip here: this attention-only kernel has no U, which does not mean "
        "that every U needs the residual (diagonal content alone can make one)"
    )


add_relaxation(
    "PB8",
    Relaxation(
        "nonnegative_slope",
        "ALiBi slopes m_h ≥ 0",
        slope_examples,
        slope_violation,
        _describe_slope,
    ),
)
add_relaxation(
    "PB2",
    Relaxation(
        "causal",
        "causality: every A_t lower-triangular",
        noncausal_examples,
        causal_violation,
        _describe_causal,
    ),
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
add_relaxation(
    "PB11",
    Relaxation(
        "residual",
        "the residual (λ_t < 1): here λ_t ≡ 1, attention only, the kernel's own diagonal "
        "(content, ALiBi self-weight) kept; a U that diagonal content alone makes is no "
        "violation",
        no_residual_examples,
        residual_violation,
        _describe_residual,
    ),
)
