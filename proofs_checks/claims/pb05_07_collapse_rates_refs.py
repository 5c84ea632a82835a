"""Dense references, the dense-product judge and its loosened versions (for the mutants) of
claims PB5 and PB7 (:mod:`posflow.proofs_checks.claims.pb05_07_collapse_rates`)."""

from __future__ import annotations

import math

import numpy as np

from posflow.proofs_checks.kit import at_most


def dense_judge(key, pairs, tol, label):
    """The judge of a rollout against its dense reference: the worst entry of the worst
    (got, reference) pair, max |got − ref| ≤ 0 + tol."""
    err = max(float(np.max(np.abs(np.asarray(g) - r))) for g, r in pairs)
    return at_most(key, err, 0.0, tol, label=label)


def one_hot(p, by):
    out = np.zeros_like(np.asarray(p, dtype=float))
    out.flat[-1] = by
    return out


def dense_power(K, lam):
    """R_{T−1}⋯R_0 by dense NumPy products of K's matrix."""
    A, n = K.dense(), K.n
    P = np.eye(n)
    for lt in lam:
        P = ((1 - lt) * np.eye(n) + lt * A) @ P
    return P


def dense_last_row(As):
    """e_{n−1} A_{T−1} ⋯ A_0 by dense NumPy vector–matrix products, shape (n,)."""
    n = As[0].shape[0]
    ref = np.eye(1, n, n - 1)[0]
    for A in As[::-1]:
        ref = ref @ A
    return ref


def self_dense_judge(original):
    def dense_judge(key, pairs, tol, label):  # each value compared with itself
        return original(key, [(g, g) for g, _ in pairs], tol, label)

    return dense_judge


def first_pair_judge(original):
    def dense_judge(key, pairs, tol, label):  # only the first rollout judged
        return original(key, pairs[:1], tol, label)

    return dense_judge


def finite_max_abs(ys) -> float:
    return max((abs(y) for y in ys if math.isfinite(y)), default=0.0)


def ls_weights(x):
    """Least-squares slope weights w (slope = Σ w_k y_k) for abscissae x."""
    x = np.asarray(x, dtype=float)
    d = x - x.mean()
    return d / (d @ d)
