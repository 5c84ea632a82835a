"""posflow.simulate.models.predict: rollout predictions (a), (b), (c) and their distances (PB15)."""

import math

import numpy as np
import pytest
from scipy import stats

pytest.importorskip("torch")

from posflow.simulate.models.measure import Measurement
from posflow.simulate.models.predict import compare_profiles, predict_profiles

L, H, n, d = 3, 2, 7, 16


def causal_softmax(logits):
    z = np.where(np.triu(np.ones(logits.shape[-2:], bool), 1), -np.inf, logits)
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def synthetic(slopes, seed=0):
    rng = np.random.default_rng(seed)
    qk = rng.normal(0, 3, (L, H, n, n))
    A = causal_softmax(rng.normal(0, 1, (L, H, n, n)))
    lam = rng.uniform(0.05, 0.9, L)
    return Measurement(
        "posflow", n, 4, H, d, lam, 0 * lam, None, A, qk, None, None, slopes, num_layers=L
    )


def last_row(kernels, lam):
    P = np.eye(n)
    for K, lt in zip(kernels, lam, strict=True):
        P = ((1 - lt) * np.eye(n) + lt * K) @ P
    return P[-1]


@pytest.mark.parametrize("slopes", [None, np.array([0.5, 0.125])])
def test_predictions_equal_dense_matrix_products(slopes):
    m = synthetic(slopes)
    got = predict_profiles(m)
    A = m.attention.mean(1)
    np.testing.assert_allclose(got["attention_only"], last_row(A, np.ones(L)), atol=1e-13)
    np.testing.assert_allclose(got["residual"], last_row(A, m.lambdas), atol=1e-13)
    # (c): per head softmax(c[i=j] − m(i−j)), c = (mean diag − mean strictly lower)/√d
    i = np.arange(n)
    low = np.tril_indices(n, -1)
    m_h = np.zeros(H) if slopes is None else slopes
    Kc = []
    for t in range(L):
        heads = []
        for h in range(H):
            S = m.qk[t, h] / math.sqrt(d)
            c = np.diag(S).mean() - S[low].mean()
            heads.append(causal_softmax(c * np.eye(n) - m_h[h] * (i[:, None] - i)))
        Kc.append(np.mean(heads, axis=0))
    np.testing.assert_allclose(got["residual_content"], last_row(Kc, m.lambdas), atol=1e-13)
    raw = predict_profiles(m, content_scale="raw")["residual_content"]
    assert np.abs(raw - got["residual_content"]).max() > 1e-6  # the scale matters


@pytest.mark.parametrize("slopes", [None, np.array([0.5, 0.125])])
def test_content_kernels_are_banded_to_the_measured_windows(slopes):
    """With m.windows = (3, None, 5): (c) through each head's softmax over the band
    i − w < j ≤ i, by hand; (a) and (b) are the measured kernels as before."""
    m = synthetic(slopes, seed=2)
    plain = predict_profiles(m)
    m.windows = (3, None, 5)
    got = predict_profiles(m)
    i = np.arange(n)
    gap = i[:, None] - i
    low = np.tril_indices(n, -1)
    m_h = np.zeros(H) if slopes is None else slopes
    Kc = []
    for t, w in enumerate(m.windows):
        w = n if w is None else w
        heads = []
        for h in range(H):
            S = m.qk[t, h] / math.sqrt(d)
            c = np.diag(S).mean() - S[low].mean()
            z = np.where(gap < w, c * np.eye(n) - m_h[h] * gap, -np.inf)  # off the band: -inf
            heads.append(causal_softmax(z))
        Kc.append(np.mean(heads, axis=0))
    np.testing.assert_allclose(got["residual_content"], last_row(Kc, m.lambdas), atol=1e-13)
    assert np.abs(got["residual_content"] - plain["residual_content"]).max() > 1e-4
    for k in ("attention_only", "residual"):
        np.testing.assert_array_equal(got[k], plain[k])
    m.windows = (None, None, None)  # every layer global: the same bits as without windows
    again = predict_profiles(m)
    for k in plain:
        np.testing.assert_array_equal(again[k], plain[k])


def test_compare_uses_normalised_w1_and_spearman():
    rng = np.random.default_rng(1)
    p, q, meas = rng.uniform(size=(3, 20))
    out = compare_profiles({"p": p, "q": q}, meas)
    pos = np.arange(20)
    for name, v in (("p", p), ("q", q)):
        w = stats.wasserstein_distance(pos, pos, v / v.sum(), meas / meas.sum()) / 19
        assert out[name]["w1"] == pytest.approx(w, rel=1e-12)
        assert out[name]["spearman"] == pytest.approx(stats.spearmanr(v, meas).statistic)
    same = compare_profiles({"d": meas}, meas)["d"]
    assert same["w1"] == 0.0 and same["spearman"] == pytest.approx(1.0)


def test_bad_inputs():
    m = synthetic(None)
    with pytest.raises(ValueError, match="content_scale must be one of"):
        predict_profiles(m, content_scale="half")
    m.lambdas = None
    with pytest.raises(ValueError, match="lambdas were not measured"):
        predict_profiles(m)
    m = synthetic(None)
    m.attention = None
    with pytest.raises(ValueError, match="attention was not measured"):
        predict_profiles(m)
