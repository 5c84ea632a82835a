"""simulate.models.published: [A]'s comparison at α = 1 against a dense written-out reference."""

import numpy as np
import pytest

from posflow.simulate.models.crossfit import Windows
from posflow.simulate.models.published import (
    PAIRS,
    Published,
    published_comparison,
    published_profiles,
)


def _dense(A, lam, slopes, content, windows=None):
    """The six profiles written out: dense softmax kernels over each band, a vector chain."""
    L, n = lam.size, A.shape[-1]
    gap = np.subtract.outer(np.arange(n), np.arange(n)).astype(float)

    def kernel(t, c):
        w = n if windows is None or windows[t] is None else windows[t]
        z = -slopes[:, None, None] * gap + c[:, None, None] * np.eye(n)
        z = np.where((gap >= 0) & (gap < w), z, -np.inf)
        e = np.exp(z - z.max(-1, keepdims=True))
        return (e / e.sum(-1, keepdims=True)).mean(0)

    def roll(K, lams):
        p = np.eye(n)[-1]
        for t in reversed(range(L)):
            p = (1 - lams[t]) * p + lams[t] * (p @ K[t])
        return p

    one = np.ones(L)
    Ka = [kernel(t, np.zeros(slopes.size)) for t in range(L)]
    Kc = [kernel(t, content[t]) for t in range(L)]
    An = A / A.sum(-1, keepdims=True)
    return {"a": roll(An, one), "b": roll(An, lam), "a_A": roll(Ka, one), "b_A": roll(Ka, lam),
            "a_c": roll(Kc, one), "c": roll(Kc, lam)}  # fmt: skip


def _data(seed=0, N=6, L=4, n=12, H=3):
    rng = np.random.default_rng(seed)
    A = np.tril(rng.random((N, L, n, n)) + 0.05)
    A /= A.sum(-1, keepdims=True)
    return Windows(
        A,
        rng.uniform(0.05, 0.9, (N, L)),
        rng.random((N, n)) + 0.01,
        content=rng.normal(size=(N, L, H)),
        slopes=np.array([0.5, 0.2, 0.0]),
    )


@pytest.mark.parametrize("windows", [None, (None, 5, None, 3)])
@pytest.mark.parametrize("slopes", [np.array([0.5, 0.2, 0.0]), np.zeros(3)])
def test_profiles_equal_the_dense_reference(windows, slopes):
    w = _data()
    A, lam, c = w.attention.mean(0), w.lambdas.mean(0), w.content.mean(0)
    got = published_profiles(A, lam, slopes=slopes, content=c, windows=windows)
    ref = _dense(A, lam, slopes, c, windows)
    assert set(got) == set(ref)
    for k in ref:
        np.testing.assert_allclose(got[k], ref[k], rtol=0, atol=1e-13)


def test_without_alibi_the_kernel_is_the_uniform_causal_one():
    from posflow.simulate.models.bands import uniform_kernels
    from posflow.simulate.rollout import influence

    w = _data()
    A, lam = w.attention.mean(0), w.lambdas.mean(0)
    got = published_profiles(A, lam)
    np.testing.assert_allclose(got["b_A"], influence(uniform_kernels(12, (None,) * 4), lam),
                               atol=1e-14)  # fmt: skip
    assert "c" not in got and "a_c" not in got


def test_replicates_are_the_comparison_without_each_group():
    from posflow.simulate.compare import w1_normalised

    w = _data()
    pub = published_comparison(w)
    assert pub.keys == ("b", "a", "b_A", "a_A", "c", "a_c")
    assert all(v.shape == (7,) for v in pub.w1.values())
    for g in (None, 2):
        keep = np.arange(6) if g is None else np.delete(np.arange(6), g)
        A = w.attention[keep].mean(0)
        ref = _dense(A, w.lambdas[keep].mean(0), w.slopes, w.content[keep].mean(0))
        q = w.influence[keep].mean(0)
        q = q / q.sum()
        r = 0 if g is None else g + 1
        for k, p in ref.items():
            assert pub.w1[k][r] == pytest.approx(w1_normalised(p, q), abs=1e-13)
    est, se, lo, hi = pub.difference("b", "a", 0.95)
    assert lo < est < hi and se > 0


def test_summary_round_trips():
    pub = published_comparison(_data())
    back = Published.from_summary(pub.summary())
    for k in PAIRS:
        np.testing.assert_array_equal(back.w1[k], pub.w1[k])
        np.testing.assert_array_equal(back.profiles[k], pub.profiles[k])
    np.testing.assert_array_equal(back.measured, pub.measured)
    with pytest.raises(ValueError, match=r"d must be a Published\.summary"):
        Published.from_summary({"w1": {}})


def test_bad_inputs_name_the_argument():
    w = _data()
    with pytest.raises(ValueError, match="groups"):
        published_comparison(w, groups=np.zeros(6, dtype=int))
    with pytest.raises(ValueError, match="lam"):
        published_profiles(w.attention.mean(0), np.full(4, 1.5))
    with pytest.raises(ValueError, match="slopes"):
        published_profiles(w.attention.mean(0), w.lambdas.mean(0), slopes=np.ones(2),
                           content=w.content.mean(0))  # fmt: skip
