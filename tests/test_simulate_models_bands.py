"""posflow.simulate.models.bands: constructed kernels banded to each layer's sliding window.

References: an entry-by-entry loop with exact row sums (math.fsum), the closed forms
1/min(i + 1, w) of the banded uniform kernel and softmax over the band of [A]'s content heads,
and, end to end, a tiny random Gemma 3 (tests/tiny_lms.py: n = 12 tokens, windows of 4 keys in
layers 0 and 2) measured beyond its window, where every kernel the rollouts of
measure_per_sequence + crossfit + layerwise_crossfit + measured_profiles + the bootstrap + the
grouped study are given is zero outside each layer's band; with every window None (or ≥ n) the
results are bit for bit those without windows.
"""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from posflow.simulate.kernels import alibi_kernel, uniform_kernel
from posflow.simulate.models import bands as B

EPS = 2.0**-52


def _causal(rng, *shape):
    """Random causal row-stochastic matrices with a positive diagonal."""
    n = shape[-1]
    A = rng.random(shape) * np.tril(np.ones((n, n))) + 0.05 * np.eye(n)
    return A / A.sum(axis=-1, keepdims=True)


def loop_band(K, windows):
    """The reference: entry by entry, each banded row divided by its exact in-band sum."""
    n = K.shape[-1]
    K = np.broadcast_to(K if K.ndim == 3 else K[None], (len(windows), n, n))
    out = np.array(K)
    for t, w in enumerate(windows):
        if w is None or w >= n:
            continue
        for i in range(w, n):
            s = math.fsum(K[t, i, j] for j in range(i - w + 1, i + 1))
            for j in range(n):
                out[t, i, j] = K[t, i, j] / s if 0 <= i - j < w else 0.0
    return out


def outside(n, w):
    """Mask of the entries a query does not see: j > i, or i − j ≥ w (None: only j > i)."""
    i = np.arange(n)
    gap = i[:, None] - i[None, :]
    return (gap < 0) if w is None else (gap < 0) | (gap >= w)


@st.composite
def kernels_and_windows(draw):
    n = draw(st.integers(1, 12))
    L = draw(st.integers(1, 4))
    windows = draw(st.lists(st.one_of(st.none(), st.integers(1, n + 2)), min_size=L,
                            max_size=L))  # fmt: skip
    seed = draw(st.integers(0, 2**32 - 1))
    shared = draw(st.booleans())  # one (n, n) kernel for every layer
    rng = np.random.default_rng(seed)
    K = _causal(rng, n, n) if shared else _causal(rng, L, n, n)
    return K, windows


@given(kernels_and_windows())
def test_band_is_the_loop_reference_stochastic_causal_and_zero_outside(case):
    K, windows = case
    got = B.band(K, windows)
    L, n = len(windows), K.shape[-1]
    assert got.shape == (L, n, n)
    # in-band sums of ≤ 12 terms: NumPy's sum and math.fsum differ by ≤ 12 ε relatively
    np.testing.assert_allclose(got, loop_band(K, windows), rtol=16 * EPS, atol=0)
    Kb = np.broadcast_to(K, (L, n, n))
    for t, w in enumerate(windows):
        assert (got[t][outside(n, w)] == 0.0).all()  # causal and banded: exact zeros
        np.testing.assert_allclose(got[t].sum(axis=1), 1.0, rtol=0, atol=2 * n * EPS)
        top = n if w is None else min(w, n)
        np.testing.assert_array_equal(got[t, :top], Kb[t, :top])  # rows i < w untouched


def test_band_leaves_unbanded_layers_without_a_copy():
    rng = np.random.default_rng(0)
    K = _causal(rng, 3, 6, 6)
    assert B.band(K, [None, 6, 9]) is K  # None or w ≥ n: unchanged, not copied
    one = _causal(rng, 6, 6)
    view = B.band(one, [None, None])
    assert view.shape == (2, 6, 6) and np.shares_memory(view, one)
    got = B.band(K, [None, 2, 6])
    assert got is not K and np.array_equal(got[[0, 2]], K[[0, 2]])


def test_uniform_rows_become_one_over_min_of_i_plus_one_and_w():
    for n, w in [(12, 4), (12, 5), (100, 7), (600, 512), (600, 100), (1000, 333)]:
        i = np.arange(n)
        ref = np.where(~outside(n, w), 1.0 / np.minimum(i + 1, w)[:, None], 0.0)
        ks = B.uniform_kernels(n, [w, None, w])
        assert ks[0] is ks[2] and ks[1].n == n
        np.testing.assert_array_equal(np.asarray(ks[0].dense()), ref)  # exactly, from the formula
        np.testing.assert_array_equal(np.asarray(ks[1].dense()), uniform_kernel(n).dense())
        # band() of the uniform kernel: rows of w equal terms summed pairwise, ≤ log2(n) ε
        np.testing.assert_allclose(B.band(uniform_kernel(n).dense(), [w])[0], ref,
                                   rtol=math.log2(n) * EPS, atol=0)  # fmt: skip


def test_content_kernels_are_each_heads_softmax_over_the_band():
    n, w = 11, 4
    slopes = np.array([0.0, 0.5, 1.3])
    content = np.array([[2.0, -1.0, 0.5], [0.0, 3.0, -2.0]])
    ks = B.content_kernels(n, slopes, content, [w, None])
    # unbanded layer: the structured kernel itself
    np.testing.assert_array_equal(np.asarray(ks[1].dense()),
                                  alibi_kernel(n, slopes, content[1]).dense())  # fmt: skip
    ref = np.zeros((n, n))
    for h in range(3):  # softmax_{i − w < j ≤ i}(c_h [i = j] − m_h (i − j)), entry by entry
        for i in range(n):
            js = range(max(0, i - w + 1), i + 1)
            z = [content[0, h] * (i == j) - slopes[h] * (i - j) for j in js]
            top = max(z)
            Z = math.fsum(math.exp(x - top) for x in z)
            for j, x in zip(js, z, strict=True):
                ref[i, j] += math.exp(x - top) / Z / 3
    np.testing.assert_allclose(np.asarray(ks[0].dense()), ref, rtol=0, atol=1e-15)
    # the band of the head average is not the average of the banded heads
    avg = B.band(alibi_kernel(n, slopes, content[0]).dense(), [w])[0]
    assert np.abs(avg - ref).max() > 1e-3
    same = B.content_kernels(n, slopes, content)  # no windows: alibi_kernel for every layer
    for t in range(2):
        np.testing.assert_array_equal(np.asarray(same[t].dense()),
                                      alibi_kernel(n, slopes, content[t]).dense())  # fmt: skip


@pytest.mark.parametrize(("windows", "match"), [
    (None, "windows must be a sequence"), ("ab", "windows must be a sequence"),
    (3, "windows must be a sequence"), ([], "windows must hold at least one"),
    ([0, None], "windows must hold integers >= 1"), ([2, True], "windows must hold integers"),
    ([1.5, None], "windows must hold integers"), ([2], "windows must hold one window per layer"),
    ([2, 2, 2], "windows must hold one window per layer"),
])  # fmt: skip
def test_bad_windows_are_refused_by_name(windows, match):
    K = _causal(np.random.default_rng(1), 2, 5, 5)
    with pytest.raises(ValueError, match=match):
        B.band(K, windows)


def test_bad_kernels_are_refused_by_name():
    with pytest.raises(ValueError, match="kernels must have shape"):
        B.band(np.ones((3, 4)), [None])
    with pytest.raises(ValueError, match="kernels must have shape"):
        B.band(np.ones(4), [None])
    K = np.tril(np.ones((4, 4)))
    K[3, 2:] = 0.0  # row 3 has no mass on keys 2, 3: nothing left inside a window of 2
    with pytest.raises(ValueError, match="kernels of layer 0 have a row with no positive"):
        B.band(K, [2])
    assert B.check_windows(np.array([3, 4]), 2) == (3, 4)
    with pytest.raises(ValueError, match="content must have shape"):
        B.content_kernels(4, [0.0], [0.0], None)


# -- end to end: a tiny Gemma 3 measured beyond its window ---------------------------------------


def _record(monkeypatch):
    """Every kernel stack the rollouts are given, as dense (L', n, n) arrays: crossfit's fit and
    scoring, and posflow.simulate.rollout.influence (profiles, predict, the study)."""
    import posflow.simulate.rollout as R
    from posflow.simulate.models import crossfit as CF
    from posflow.simulate.models import predict as P

    seen = []

    def wrap(f, dense):
        def g(kernels, lambdas, *a, **kw):
            seen.append(dense(kernels, lambdas))
            return f(kernels, lambdas, *a, **kw)

        return g

    def as_stack(kernels, lambdas):
        ks = [kernels] * len(lambdas) if hasattr(kernels, "dense") else list(kernels)
        return np.stack([np.asarray(k.dense()) for k in ks])

    for mod in (CF,):
        monkeypatch.setattr(mod, "fit_scale", wrap(mod.fit_scale, lambda K, lam: np.asarray(K)))
        monkeypatch.setattr(mod, "scaled_rollout",
                            wrap(mod.scaled_rollout, lambda K, lam: np.asarray(K)))  # fmt: skip
    monkeypatch.setattr(R, "influence", wrap(R.influence, as_stack))
    monkeypatch.setattr(P, "influence", wrap(P.influence, as_stack))
    return seen


def _banded(stacks, windows, n):
    """Every stack of L' layers (the top L' of the model) is zero outside each layer's band."""
    assert stacks
    for K in stacks:
        for t, w in enumerate(windows[len(windows) - K.shape[0]:]):
            assert (K[t][outside(n, w)] == 0.0).all(), (K.shape, t, w)


def test_gemma3_beyond_its_window_every_kernel_is_banded(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    import tiny_lms

    from posflow.simulate.models import crossfit as CF
    from posflow.simulate.models.layerwise import layerwise_crossfit
    from posflow.simulate.models.measure import measure
    from posflow.simulate.models.profiles import measured_profiles
    from posflow.simulate.models.profiles_bootstrap import bootstrap, measure_per_sequence
    from posflow.simulate.models.study import measure_groups, study_summary

    n, W = tiny_lms.n, tiny_lms.W
    windows = tiny_lms.WINDOWS["gemma3_text"]
    assert W < n and windows == (W, None, W)
    model = tiny_lms.build("gemma3_text", seed=3).to(torch.float64)
    ids = tiny_lms.ids(seed=4, count=6)
    data = measure_per_sequence(model, ids, layer_influence=True)  # no refusal beyond W
    assert data.windows == windows
    seen = _record(monkeypatch)

    cf = CF.crossfit(data, seed=0)
    assert set(cf.keys) == set(CF.KEYS)
    _banded(seen, windows, n)
    # the constructed kernels were banded, not merely the measured ones: the uniform kernel of
    # a sliding layer has the last row 1/W on its band (band() of 1/(i+1): within a few ulp)
    last = np.r_[np.zeros(n - W), np.full(W, 1 / W)]
    assert any(np.allclose(K[0, -1], last, rtol=4 * EPS, atol=0) for K in seen)
    seen.clear()
    lw = layerwise_crossfit(data, rollouts=CF.ROLLOUT_KEYS)  # layers t … L − 1: windows[t:]
    assert len(lw) == 3 and {K.shape[0] for K in seen} == {1, 2, 3}
    _banded(seen, windows, n)
    seen.clear()

    bs = bootstrap(data, 20, seed=0)  # batched (independent) against the banded library
    assert bs.library_gap < 1e-13
    _banded(seen, windows, n)
    seen.clear()

    m = measure(model, ids, value_norms=True)
    assert m.windows == windows
    got = measured_profiles(m, seed=0)
    assert {"residual_content", "uniform", "sink_aware", "value_norm"} <= set(got)
    _banded(seen, windows, n)
    assert len(seen) == 7  # (a), (b), (c), (d), (e), uniform, shuffled
    seen.clear()

    stg = measure_groups(model, ids, 3, seed=1)
    assert stg.windows == windows and CF.Windows.of_groups(stg).windows == windows
    study_summary(stg)
    _banded(seen, windows, n)


def test_with_every_window_none_or_beyond_n_the_results_are_unchanged_bit_for_bit():
    """windows None, all None and all ≥ n give the same bits (the path without windows)."""
    from types import SimpleNamespace

    from posflow.simulate.models import crossfit as CF
    from posflow.simulate.models.layerwise import layerwise_crossfit
    from posflow.simulate.models.profiles import rollout_profiles
    from posflow.simulate.models.profiles_bootstrap import PerSequence, bootstrap

    rng = np.random.default_rng(5)
    N, L, H, n = 6, 3, 2, 9
    fields = dict(attention=_causal(rng, N, L, n, n), lambdas=rng.uniform(0.1, 0.8, (N, L)),
                  content=rng.normal(0, 2, (N, L, H)), influence=rng.random((N, n)) + 0.01,
                  slopes=np.array([0.3, 0.0]), values=_causal(rng, N, L, n, n),
                  layer_influence=rng.dirichlet(np.ones(n), (N, L)))  # fmt: skip
    runs = []
    for windows in (None, (None,) * L, (n, n + 3, None)):
        data = PerSequence(**fields, windows=windows)
        cf = CF.crossfit(data, seed=1)
        lw = layerwise_crossfit(SimpleNamespace(**fields, windows=windows),
                                rollouts=("c", "uniform"))  # fmt: skip
        bs = bootstrap(data, 10, seed=2)
        lib = rollout_profiles(fields["attention"][0], fields["lambdas"][0],
                               values=fields["values"][0], content=fields["content"][0],
                               slopes=fields["slopes"], perm=np.array([1, 2, 0]),
                               windows=windows)  # fmt: skip
        runs.append((cf.metrics, cf.profiles, [x.metrics for x in lw], bs.profiles, bs.w1, lib))

    def flat(x):
        if isinstance(x, dict):
            return [v for k in sorted(x) for v in flat(x[k])]
        if isinstance(x, list | tuple):
            return [v for y in x for v in flat(y)]
        return [np.asarray(x)]

    ref = flat(runs[0])
    for other in runs[1:]:
        got = flat(other)
        assert len(got) == len(ref)
        for a, b in zip(ref, got, strict=True):
            np.testing.assert_array_equal(a, b)
