"""References and loosened judges (for the mutants) of claim PB6
(:mod:`posflow.proofs_checks.claims.pb06_dichotomy`): series known to diverge or converge, a
dense product of the layers."""

from __future__ import annotations

import numpy as np

from posflow.simulate.rollout import influence, power_decay


def series_curve(b, K_budget):
    """y(T) = Σ_{t<T} 0.5/(t+1)^b at the classifier's half decades: a series KNOWN to diverge
    (b ≤ 1) or converge (b > 1), the stand-in of −log(1 − P) (which grows like ε·Σλ_t)."""
    Ts = sorted({round(10 ** (k / 2)) for k in range(2 * K_budget + 1)})
    c = np.cumsum(0.5 / np.arange(1, Ts[-1] + 1) ** b)
    return Ts, [float(c[T - 1]) for T in Ts]


def dense_check(K, beta):
    """y(T = 100) from influence against e_(n−1) times a dense product R_99⋯R_0 (float)."""
    lam = power_decay(0.5, beta, 100)
    A, n = K.dense(), K.n
    p = np.eye(1, n, n - 1)[0]
    for lt in lam[::-1]:
        p = p @ ((1 - lt) * np.eye(n) + lt * A)
    return float(np.abs(influence(K, lam) - p).max()), (lam, [0.5 / (t + 1) ** beta
                                                              for t in range(100)])


def any_decision(original):
    def match_judge(key, got, want, label):  # any decision accepted, not only the right one
        return original(key, got, got if got is not None else want, label)

    return match_judge


def flipped_classifier(original):
    def classify(ratios, h):  # the ratio test read the wrong way round
        got = original(ratios, h)
        return {"collapse": "no collapse", "no collapse": "collapse"}.get(got)

    return classify
