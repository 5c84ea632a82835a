"""References, judges and mutant factories of claims PB1–PB2
(:mod:`posflow.proofs_checks.claims.pb01_02_diagonal_identity`): dense and exact Fraction
products of the layers, the worst-row, relative, entry-by-entry and zero-residual judges, and
loosened versions of those judges for the mutants."""

from __future__ import annotations

import dataclasses
import functools
from fractions import Fraction

import numpy as np
import sympy as sp

from posflow.proofs_checks.kit import at_most, exact_tol, holds
from posflow.theory import rollout as th


def dense_reference(ks, lam):
    """R_{T−1} ⋯ R_0 as a dense NumPy product, R_t = (1 − λ_t) I + λ_t A_t, shape (n, n)."""
    n = ks[0].n
    P = np.eye(n)
    for K, lt in zip(ks, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * K.dense()) @ P
    return P


def row_errors(got, ref):
    """max_j |got[i, j] − ref[i, j]| for every row i (a vector is one row per entry)."""
    d = np.abs(np.asarray(got, dtype=float) - np.asarray(ref, dtype=float))
    return d.reshape(d.shape[0], -1).max(axis=1) if d.ndim else d.reshape(1)


def worst_judge(key, pairs, tol, label):
    """The judge of PB1's numeric comparisons: the WORST row over every (got, reference) pair,
    max_pairs max_i max_j |got − ref| ≤ 0 + tol."""
    err = max((float(row_errors(g, r).max(initial=0.0)) for g, r in pairs), default=0.0)
    return at_most(key, err, 0.0, tol, label=label)


def rel_judge(key, pairs, tol, label):
    """The judge of PB2's diagonal: the worst RELATIVE error max |got/ref − 1| over every pair
    (entries below 1e-280 skipped: they round to subnormals)."""
    err = 0.0
    for g, r in pairs:
        g, r = np.asarray(g, dtype=float), np.asarray(r, dtype=float)
        mask = np.abs(r) > 1e-280
        err = max(err, float(np.max(np.abs(g[mask] / r[mask] - 1), initial=0.0)))
    return at_most(key, err, 0.0, tol, label=label)


def frac_point(rng, ro, stochastic):
    """Random rational values of a symbolic rollout's free symbols: the kernels' entries (a
    stochastic row's free entries sum to < 1) and λ_t in {1/7, …, 6/7}."""
    n = ro.P.rows
    vals = {s: sp.Rational(int(rng.integers(1, 5)), 4 * n if stochastic else 3)
            for s in ro.entries}  # fmt: skip
    vals.update({lam: sp.Rational(int(rng.integers(1, 7)), 7) for lam in ro.lambdas})
    return vals


def frac_product(As, lams, order=1):
    """R_{T−1} ⋯ R_0 (order=1) or R_0 ⋯ R_{T−1} (order=−1) in exact Fractions, by plain loops
    over lists: R_t = (1 − λ_t) I + λ_t A_t from the kernels' values (lists of lists)."""
    n = len(As[0])
    P = [[Fraction(int(i == j)) for j in range(n)] for i in range(n)]
    for A, lt in zip(As, lams, strict=True):  # R_t·P (order 1) or P·R_t (order −1)
        R = [[(1 - lt) * (i == j) + lt * A[i][j] for j in range(n)] for i in range(n)]
        P = ([[sum(R[i][k] * P[k][j] for k in range(n)) for j in range(n)] for i in range(n)]
             if order == 1 else
             [[sum(P[i][k] * R[k][j] for k in range(n)) for j in range(n)] for i in range(n)])
    return P


def frac(x):
    x = sp.Rational(x)
    return Fraction(int(x.p), int(x.q))


def symbolic_entries(rng, n, T, stochastic):
    """symbolic_rollout's P at a random rational point (non-commuting layers) and the Fraction
    products R_{T−1}⋯R_0 and (reversed) R_0⋯R_{T−1} of the same kernels, as Fraction lists."""
    ro = th.symbolic_rollout(n, T, stochastic=stochastic)
    vals = frac_point(rng, ro, stochastic)
    As = [[[frac(A[i, j].subs(vals)) for j in range(n)] for i in range(n)] for A in ro.kernels]
    lams = [frac(lam.subs(vals)) for lam in ro.lambdas]
    got = [[frac(ro.P[i, j].subs(vals)) for j in range(n)] for i in range(n)]
    return got, frac_product(As, lams), frac_product(As, lams, order=-1), As, lams


def entries_judge(key, got, ref, label):
    """The judge of a symbolic P: the number of entries (ALL n², not only the diagonal or the
    row sums) that differ from the exact reference; must be 0."""
    bad = sum(g != r for grow, rrow in zip(got, ref, strict=True)
              for g, r in zip(grow, rrow, strict=True))  # fmt: skip
    return at_most(key, bad, 0, exact_tol("exact rationals on both sides"), label=label)


def zero_judge(key, residuals, label):
    """The judge of sympy residuals: every expanded residual is identically 0."""
    return holds(key, all(sp.expand(r) == 0 for r in residuals), label=label)


def one_row_wrong(P, by):
    """P with only its last row changed, by moving ``by`` from its last to its first entry (row
    sums unchanged): what a judge of the worst row must see."""
    W = np.array(P, dtype=float, copy=True)
    W[-1, 0] += by
    W[-1, -1] -= by
    return W


def symbolic_reversed(original):
    @functools.wraps(original)
    def symbolic_rollout(n, T, *, stochastic=False):
        ro = original(n, T, stochastic=stochastic)
        P = sp.eye(ro.P.rows)
        for R in ro.R:  # P·R_t: R_0 R_1 ⋯ R_{T−1}
            P = (P * R).applyfunc(sp.expand)
        return dataclasses.replace(ro, P=P)

    return symbolic_rollout


def best_row_judge(original):
    @functools.wraps(original)
    def worst_judge(key, pairs, tol, label):  # the best row taken for the worst
        err = max((float(row_errors(g, r).min(initial=np.inf)) for g, r in pairs), default=0.0)
        return at_most(key, err, 0.0, tol, label=label)

    return worst_judge


def self_judge(original):
    @functools.wraps(original)
    def worst_judge(key, pairs, tol, label):  # each value compared with itself
        return original(key, [(g, g) for g, _ in pairs], tol, label)

    return worst_judge


def absolute_judge(original):
    @functools.wraps(original)
    def rel_judge(key, pairs, tol, label):  # absolute closeness instead of relative
        err = max((float(np.max(np.abs(np.asarray(g) - r), initial=0.0)) for g, r in pairs),
                  default=0.0)  # fmt: skip
        return at_most(key, err, 0.0, tol, label=label)

    return rel_judge


def diag_entries_only(original):
    @functools.wraps(original)
    def entries_judge(key, got, ref, label):  # the diagonal and the row sums only
        n = len(got)
        bad = sum(got[i][i] != ref[i][i] for i in range(n))
        bad += sum(sum(got[i]) != sum(ref[i]) for i in range(n))
        return at_most(key, bad, 0, exact_tol("exact rationals on both sides"), label=label)

    return entries_judge
