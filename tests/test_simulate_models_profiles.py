"""The profiles pipeline (posflow.simulate.models.profiles, profiles_bootstrap) against
independent references: the batched metrics against scipy, the batched rollouts and the library
profiles against dense hand kernels through posflow.simulate.rollout, the nulls against their
definition, one-sequence measurements against a batched one."""

import numpy as np
import pytest

from posflow.simulate.compare import spearman, w1_normalised
from posflow.simulate.models import profiles as PR
from posflow.simulate.models.profiles_bootstrap import (
    PerSequence,
    batched_rollouts,
    bootstrap,
    measure_per_sequence,
)


def test_batched_metrics_equal_the_library_row_by_row():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(40), size=12)
    q = rng.dirichlet(np.ones(40), size=12)
    q[3] = p[3]  # identical rows
    q[5, :10] = q[5, 10:20]  # ties in the ranks
    w = PR.batched_w1(p, q)
    r = PR.batched_spearman(p, q)
    for k in range(12):
        assert abs(w[k] - w1_normalised(p[k], q[k])) < 1e-14
        assert abs(r[k] - spearman(p[k], q[k])) < 1e-12
    assert w[3] == 0.0 and abs(r[3] - 1) < 1e-12


def _fake_data(rng, N=6, L=3, H=2, n=9):
    A = rng.random((N, L, n, n)) * np.tril(np.ones((n, n)))
    A /= A.sum(axis=-1, keepdims=True)
    return PerSequence(
        attention=A,
        lambdas=rng.uniform(0.05, 0.9, (N, L)),
        content=rng.normal(0, 2, (N, L, H)),
        influence=rng.random((N, n)) + 0.01,
        slopes=np.array([0.0, 0.7])[:H],
        values=rng.random((N, L, n, n)) * np.tril(np.ones((n, n))),
    )


@pytest.mark.parametrize("windows", [None, (3, None, 5)])
def test_batched_rollouts_equal_the_library_rollout(windows):
    """Also with sliding windows: the batched banded uniform and content kernels against the
    library's (posflow.simulate.models.bands, itself checked against closed forms)."""
    from posflow.simulate.kernels import dense_kernel
    from posflow.simulate.models.bands import content_kernels, uniform_kernels
    from posflow.simulate.rollout import influence

    def sink_by_hand(M):  # rows i ≥ 1: A[i, 0] moved onto the diagonal
        M = M.copy()
        for i in range(1, M.shape[0]):
            M[i, i] += M[i, 0]
            M[i, 0] = 0.0
        return dense_kernel(M)

    rng = np.random.default_rng(7)
    data = _fake_data(rng)
    data.windows = windows
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    W = rng.multinomial(N, np.full(N, 1 / N), size=5) / N
    perm = np.array([2, 0, 1])
    got = batched_rollouts(data, W, perm, chunk=2)  # chunks of 2 replicates
    wins = (None,) * L if windows is None else windows
    for b, w in enumerate(W):
        A = np.tensordot(w, data.attention, axes=1)
        lam = w @ data.lambdas
        c = np.tensordot(w, data.content, axes=1)
        V = np.tensordot(w, data.values, axes=1)
        ks = [dense_kernel(A[t]) for t in range(L)]
        kc = content_kernels(n, data.slopes, c, wins)
        ref = {
            "b": influence(ks, lam),
            "a": influence(ks, np.ones(L)),
            "shuffled": influence(ks, lam[perm]),
            "uniform": influence(uniform_kernels(n, wins), lam),
            "c": influence(kc, lam),
            "a_c": influence(kc, np.ones(L)),
            "d": influence([dense_kernel(M / M.sum(1, keepdims=True)) for M in V], lam),
            "e": influence([sink_by_hand(A[t]) for t in range(L)], lam),
        }
        assert set(ref) == set(PR.PREDICTED) | {"uniform", "shuffled"}
        for k, v in ref.items():  # float64 rollouts of L = 3 layers by two routes
            np.testing.assert_allclose(got[k][b], v, rtol=0, atol=1e-14, err_msg=k)
        g = w @ data.influence
        np.testing.assert_allclose(got["measured"][b], g / g.sum(), atol=1e-15)
        np.testing.assert_allclose(got["lambdas"][b], lam, atol=1e-15)


def test_bootstrap_replicate_zero_is_the_full_sample_and_the_library_agrees():
    data = _fake_data(np.random.default_rng(1))
    bs = bootstrap(data, 50, seed=0)
    assert bs.library_gap < 1e-13
    assert bs.measured.shape == (51, 9) and bs.lambdas.shape == (51, 3)
    np.testing.assert_allclose(bs.lambdas[0], data.lambdas.mean(axis=0), atol=1e-15)
    # the nulls are fitted to each replicate's measured mean position
    mu = bs.measured @ np.arange(9)
    np.testing.assert_allclose(bs.profiles["geometric"] @ np.arange(9), mu, atol=1e-8)
    assert not (bs.perm == np.arange(3)).any()
    again = bootstrap(data, 50, seed=0)
    np.testing.assert_array_equal(again.w1["b"], bs.w1["b"])  # seeded


def test_one_sequence_at_a_time_equals_one_batched_measurement():
    pytest.importorskip("torch")
    import torch

    from posflow.simulate.models.lm import LM, LMConfig
    from posflow.simulate.models.measure import measure

    model = LM(LMConfig(n_layer=2, n_head=2, d_model=16), seed=2).double()
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (5, 12)))
    per = measure_per_sequence(model, ids)
    m = measure(model, ids, value_norms=True)
    np.testing.assert_allclose(per.values.mean(0), m.value_weights, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(per.lambdas.mean(0), m.lambdas, atol=1e-14)
    np.testing.assert_allclose(per.attention.mean(0), m.attention.mean(1), atol=1e-14)
    np.testing.assert_allclose(per.content.mean(0), m.content("sqrt_d")[1], atol=1e-12)
    g = per.influence.mean(0)
    np.testing.assert_allclose(g / g.sum(), m.influence, atol=1e-14)
    np.testing.assert_allclose(per.slopes, m.slopes)


# -- names, colours, intervals, library profiles, nulls ------------------------------------------


def test_one_name_label_and_distinct_colour_per_profile():
    keys = (*PR.PREDICTED, *PR.NULLS)
    assert set(PR.LABELS) == set(keys) == set(PR.NAMES)
    colours = [PR.COLORS[k] for k in (*keys, "measured")]
    assert len(set(colours)) == len(colours)  # one distinct colour per profile
    for k in keys:  # by key or by the name posflow measure prints
        assert PR.color(k) == PR.color(PR.NAMES[k]) == PR.COLORS[k]
        assert PR.line_style(PR.NAMES[k]) == ("--" if k in PR.NULLS else "-")
    assert PR.color("no such profile") is None
    assert PR.KEY_OF_NAME["residual"] == "b" and PR.NAMES["c"] == "residual_content"


def test_percentile_interval_leaves_out_replicate_zero():
    x = np.concatenate([[100.0], np.arange(1001.0)])  # replicate 0 far outside
    lo, hi = PR.percentile_interval(x, 0.9)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(np.arange(1001.0), [0.05, 0.95])))


def test_rollout_profiles_equal_dense_hand_kernels():
    from posflow.simulate.kernels import alibi_kernel, dense_kernel, uniform_kernel
    from posflow.simulate.rollout import influence

    rng = np.random.default_rng(11)
    d = _fake_data(rng, N=1)
    A, V, c, lam = d.attention[0], d.values[0], d.content[0], d.lambdas[0]
    L, n = lam.size, A.shape[-1]
    perm = np.array([1, 2, 0])
    got = PR.rollout_profiles(A, lam, values=V, content=c, slopes=d.slopes, perm=perm)

    def last_row(Ms, lam):  # e_{n−1}ᵀ R_{L−1} ⋯ R_0 by dense products
        p = np.eye(n)[-1]
        for t in range(L - 1, -1, -1):
            p = (1 - lam[t]) * p + lam[t] * p @ Ms[t]
        return p

    sink = A.copy()
    for t in range(L):
        for i in range(1, n):
            sink[t, i, i] += sink[t, i, 0]
            sink[t, i, 0] = 0.0
    U = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    Kc = [alibi_kernel(n, d.slopes, c[t]).dense() for t in range(L)]
    ref = {
        "a": last_row(A, np.ones(L)),
        "b": last_row(A, lam),
        "c": last_row(Kc, lam),
        "a_c": last_row(Kc, np.ones(L)),
        "d": last_row(V / V.sum(-1, keepdims=True), lam),
        "e": last_row(sink, lam),
        "uniform": last_row([U] * L, lam),
        "shuffled": last_row(A, lam[perm]),
    }
    assert set(got) == set(ref)
    for k, v in ref.items():
        np.testing.assert_allclose(got[k], v, atol=1e-13, err_msg=k)
    assert influence(uniform_kernel(n), lam) == pytest.approx(ref["uniform"], abs=1e-13)
    assert dense_kernel(A[0]).n == n
    only = PR.rollout_profiles(A, lam)  # without values, content, perm: a, b, uniform, e
    assert set(only) == {"a", "b", "uniform", "e"}


def test_rollout_profiles_band_the_constructed_kernels_to_the_windows():
    """Uniform rows 1/min(i + 1, w) and each head's softmax over the band, by hand; the measured
    kernels are taken as given (a measured model's are zero outside the band already)."""
    rng = np.random.default_rng(12)
    d = _fake_data(rng, N=1)
    A, V, c, lam = d.attention[0], d.values[0], d.content[0], d.lambdas[0]
    L, n, H = lam.size, A.shape[-1], c.shape[1]
    windows = (4, None, 2)
    got = PR.rollout_profiles(A, lam, values=V, content=c, slopes=d.slopes, windows=windows)
    plain = PR.rollout_profiles(A, lam, values=V, content=c, slopes=d.slopes)

    def last_row(Ms, lam):
        p = np.eye(n)[-1]
        for t in range(L - 1, -1, -1):
            p = (1 - lam[t]) * p + lam[t] * p @ Ms[t]
        return p

    i = np.arange(n)
    U, Kc = [], []
    for t, w in enumerate(windows):
        w = n if w is None else w
        inside = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < w)
        U.append(np.where(inside, 1.0 / np.minimum(i + 1, w)[:, None], 0.0))
        K = np.zeros((n, n))
        for h in range(H):  # softmax over the band of c_h [i = j] − m_h (i − j)
            z = np.where(inside, c[t, h] * np.eye(n) - d.slopes[h] * (i[:, None] - i), -np.inf)
            e = np.exp(z - z.max(axis=1, keepdims=True))
            K += e / e.sum(axis=1, keepdims=True) / H
        Kc.append(K)
    for k, ref in (("uniform", last_row(U, lam)), ("c", last_row(Kc, lam)),
                   ("a_c", last_row(Kc, np.ones(L)))):  # fmt: skip
        np.testing.assert_allclose(got[k], ref, rtol=0, atol=1e-14, err_msg=k)
        assert np.abs(got[k] - plain[k]).max() > 1e-3  # the band matters
    for k in ("a", "b", "d", "e"):
        np.testing.assert_array_equal(got[k], plain[k])
    with pytest.raises(ValueError, match="windows"):
        PR.rollout_profiles(A, lam, windows=(4, None))


def test_null_profiles_have_the_measured_mean_position():
    rng = np.random.default_rng(5)
    meas = rng.dirichlet(np.ones(12), size=4)
    got = PR.null_profiles(meas)
    mu = meas @ np.arange(12)
    for k in ("geometric", "linear"):
        assert got[k].shape == (4, 12)
        np.testing.assert_allclose(got[k].sum(1), 1.0, atol=1e-12)
    np.testing.assert_allclose(got["geometric"] @ np.arange(12), mu, atol=1e-8)
    # the ramp reaches the mean where its slope is not clipped to [−1, 1]
    free = np.abs(got["slope"]) < 1
    np.testing.assert_allclose((got["linear"] @ np.arange(12))[free], mu[free], atol=1e-10)
    r = got["ratio"]
    ref = r[:, None] ** (11 - np.arange(12))
    np.testing.assert_allclose(got["geometric"], ref / ref.sum(1, keepdims=True), rtol=1e-9)


def test_measured_profiles_are_the_predictions_plus_the_nulls():
    torch = pytest.importorskip("torch")
    from posflow.simulate.models.lm import LM, LMConfig
    from posflow.simulate.models.measure import measure
    from posflow.simulate.models.predict import predict_profiles, predict_sink_profiles
    from posflow.simulate.nulls import derangement
    from posflow.simulate.rollout import influence

    model = LM(LMConfig(n_layer=3, n_head=2, d_model=16), seed=3).double()
    ids = torch.from_numpy(np.random.default_rng(1).integers(0, 256, (4, 10)))
    m = measure(model, ids, value_norms=True)
    got = PR.measured_profiles(m, seed=2)
    ref = {**predict_profiles(m), **predict_sink_profiles(m)}
    assert list(got) == [*ref, "geometric", "linear", "uniform", "shuffled"]
    for k, v in ref.items():
        np.testing.assert_array_equal(got[k], v)
    perm = derangement(3, [2, 15])
    np.testing.assert_allclose(got["shuffled"], influence(m.kernels(), m.lambdas[perm]))
    mu = m.influence @ np.arange(10)
    assert got["geometric"] @ np.arange(10) == pytest.approx(mu, abs=1e-8)
    assert all(PR.color(k) is not None for k in got)


def test_measured_profiles_beyond_a_sliding_window_band_the_uniform_null():
    """Gemma 3 at n = 12 beyond its 4-key windows (layers 0 and 2): measured, no refusal; the
    uniform null is the rollout through 1/min(i + 1, w) in the sliding layers."""
    torch = pytest.importorskip("torch")
    import tiny_lms

    from posflow.simulate.kernels import dense_kernel, uniform_kernel
    from posflow.simulate.models.measure import measure
    from posflow.simulate.rollout import influence

    model = tiny_lms.build("gemma3_text").to(torch.float64)
    m = measure(model, tiny_lms.ids(count=3), value_norms=True)
    n, W = m.n, tiny_lms.W
    assert m.windows == (W, None, W) and W < n
    got = PR.measured_profiles(m, seed=0)
    i = np.arange(n)
    inside = (i[:, None] >= i[None, :]) & (i[:, None] - i[None, :] < W)
    Uw = dense_kernel(np.where(inside, 1.0 / np.minimum(i + 1, W)[:, None], 0.0))
    ref = influence([Uw, uniform_kernel(n), Uw], m.lambdas)
    np.testing.assert_allclose(got["uniform"], ref, rtol=0, atol=1e-15)
    assert np.abs(got["uniform"] - influence(uniform_kernel(n), m.lambdas)).max() > 1e-3
    per = measure_per_sequence(model, tiny_lms.ids(count=2))
    assert per.values.ndim == 4 and per.windows == (W, None, W)
