"""simulate.models.layerwise: rollouts from every layer to the top (PB19) against dense products."""

import numpy as np
import pytest

from posflow.simulate.kernels import dense_kernel, uniform_kernel
from posflow.simulate.models import layerwise as lw
from posflow.simulate.rollout import influence


def random_causal(rng, L, n):
    A = np.tril(rng.random((L, n, n)) + 0.05)
    return A / A.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize(("L", "n", "seed"), [(1, 5, 0), (4, 7, 1), (9, 12, 2)])
def test_each_row_is_the_dense_product_from_its_layer_to_the_top(L, n, seed):
    """Row t against e_{n−1}ᵀ R_{L−1}⋯R_t with R_s = (1 − λ_s)I + λ_s A_s as dense matrices;
    float64 rounding: L matrix-vector products of row-stochastic matrices, ≤ 4 L n ε."""
    rng = np.random.default_rng(seed)
    A, lam = random_causal(rng, L, n), rng.random(L)
    got = lw.layerwise_profiles(A, lam)
    for t in range(L):
        P = np.eye(n)
        for s in range(L - 1, t - 1, -1):
            P = P @ ((1 - lam[s]) * np.eye(n) + lam[s] * A[s])
        np.testing.assert_allclose(got[t], P[-1], rtol=0, atol=4 * L * n * 2.2e-16)
    np.testing.assert_allclose(got[0], influence([dense_kernel(a) for a in A], lam), rtol=0,
                               atol=4 * L * n * 2.2e-16)  # fmt: skip
    np.testing.assert_allclose(got.sum(axis=1), 1.0, rtol=0, atol=4 * L * n * 2.2e-16)


def test_kernel_objects_and_the_identity_at_zero_mixing():
    lam = np.array([0.0, 0.5, 0.0])
    got = lw.layerwise_profiles([uniform_kernel(4)] * 3, lam)
    assert got[2].tolist() == [0.0, 0.0, 0.0, 1.0]  # λ = 0: the residual keeps e_{n−1}
    np.testing.assert_allclose(got[1], [0.125, 0.125, 0.125, 0.625], rtol=0, atol=1e-16)
    np.testing.assert_array_equal(got[0], got[1])


def test_w1_per_layer_and_the_geometric_null():
    """A rollout equal to the measured rows scores 0; the geometric null, fitted to each row's
    mean position, scores 0 on rows that are themselves geometric."""
    n = 16
    j = np.arange(n)
    geo = np.stack([0.7 ** (n - 1 - j), 0.9 ** (n - 1 - j)])
    geo /= geo.sum(axis=1, keepdims=True)
    out = lw.layerwise_w1(geo, 3 * geo)  # measured rows are normalised
    np.testing.assert_allclose(out["rollout"], 0.0, atol=1e-15)
    np.testing.assert_allclose(out["geometric"], 0.0, atol=1e-12)
    np.testing.assert_allclose(out["mean_position"], geo @ j, rtol=1e-14)
    flat = np.full((2, n), 1 / n)
    assert (lw.layerwise_w1(flat, geo)["rollout"] > 0.05).all()


@pytest.mark.parametrize(("call", "words"), [
    (lambda: lw.layerwise_profiles([], []), "at least one layer"),
    (lambda: lw.layerwise_profiles(np.tril(np.ones((2, 3, 3))) / [[1], [2], [3]], [0.5]),
     r"shape \(2,\)"),
    (lambda: lw.layerwise_profiles([uniform_kernel(3)], [1.5]), r"\[0, 1\]"),
    (lambda: lw.layerwise_profiles([uniform_kernel(3), uniform_kernel(4)], [0.1, 0.1]),
     "n = 3"),
    (lambda: lw.layerwise_w1(np.ones((2, 3)), np.ones((3, 3))), "same shape"),
    (lambda: lw.layerwise_w1(np.ones((1, 3)), np.zeros((1, 3))), "not all zero"),
])  # fmt: skip
def test_bad_input_names_the_rule(call, words):
    with pytest.raises(ValueError, match=words):
        call()


# -- layerwise_crossfit: entry t is crossfit on the layers t … L − 1 ----------------------------


def _windows(seed=0, N=6, L=3, n=6):
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    A = np.stack([random_causal(rng, L, n) for _ in range(N)])
    G = rng.random((N, L, n)) + 0.05
    return SimpleNamespace(attention=A, lambdas=rng.uniform(0.1, 0.7, (N, L)),
                           influence=rng.random((N, n)) + 0.05, content=rng.normal(0, 1, (N, L, 2)),
                           values=A * rng.uniform(0.5, 2.0, A.shape), slopes=np.zeros(2),
                           layer_influence=G / G.sum(axis=-1, keepdims=True))  # fmt: skip


def test_layerwise_crossfit_entry_t_is_crossfit_of_the_top_layers():
    """Entry t against crossfit on Windows sliced here (layers t…L−1, influence at layer t):
    the same float64 operations, so equal to the last bit; only the asked rollouts and nulls."""
    from posflow.simulate.models.crossfit import Windows, crossfit

    data = _windows()
    got = lw.layerwise_crossfit(data, rollouts=("b", "d"), seed=3)
    assert len(got) == 3
    for t, cf in enumerate(got):
        ref = crossfit(Windows(data.attention[:, t:], data.lambdas[:, t:],
                               data.layer_influence[:, t], data.values[:, t:]), seed=3,
                       rollouts=("b", "d"))  # fmt: skip
        assert cf.keys == ("b", "d", "geometric", "linear") == ref.keys
        for m in cf.metrics:
            for k in cf.metrics[m]:
                np.testing.assert_array_equal(cf.metrics[m][k], ref.metrics[m][k])


def test_layerwise_crossfit_bands_the_rollout_from_layer_t_with_windows_t_on():
    """With sliding windows (data.windows, one per layer), entry t is crossfit of the layers
    t…L−1 with their windows[t:]: to the last bit, and unlike the unbanded one."""
    from posflow.simulate.models.crossfit import Windows, crossfit

    data = _windows(seed=2)
    data.windows = (2, None, 3)
    keys = ("c", "uniform", "b")
    got = lw.layerwise_crossfit(data, rollouts=keys, seed=1)
    del data.windows
    plain = lw.layerwise_crossfit(data, rollouts=keys, seed=1)
    windows = (2, None, 3)
    for t, cf in enumerate(got):
        ref = crossfit(Windows(data.attention[:, t:], data.lambdas[:, t:],
                               data.layer_influence[:, t], None, data.content[:, t:],
                               data.slopes, windows=windows[t:]), seed=1,
                       rollouts=keys)  # fmt: skip
        for m in cf.metrics:
            for k in cf.metrics[m]:
                np.testing.assert_array_equal(cf.metrics[m][k], ref.metrics[m][k])
        np.testing.assert_array_equal(cf.metrics["w1"]["b"], plain[t].metrics["w1"]["b"])
    # layer 0 and layer 2 slide: the entries that include them differ from the unbanded ones
    for t in (0, 2):
        assert np.abs(got[t].profiles["uniform"] - plain[t].profiles["uniform"]).max() > 1e-3


def test_layerwise_crossfit_with_lambdas_and_a_changed_top_layer():
    """``lambdas`` replaces data.lambdas; the top entry depends on the top layer only."""
    data = _windows(seed=1)
    lam = np.full_like(data.lambdas, 0.3)
    a = lw.layerwise_crossfit(data, rollouts=("b",), lambdas=lam)
    data.attention[:, 0] = np.eye(6)  # layer 0 changed: the top entry cannot see it
    b = lw.layerwise_crossfit(data, rollouts=("b",), lambdas=lam)
    np.testing.assert_array_equal(a[-1].metrics["w1"]["b"], b[-1].metrics["w1"]["b"])
    assert not np.array_equal(a[0].metrics["w1"]["b"], b[0].metrics["w1"]["b"])


@pytest.mark.parametrize(("change", "match"), [
    (lambda d: setattr(d, "layer_influence", None), "layer_influence=True"),
    (lambda d: setattr(d, "layer_influence", d.layer_influence[:, :2]), r"shape \(N, L, n\)"),
])  # fmt: skip
def test_layerwise_crossfit_refuses_data_without_layer_influence(change, match):
    data = _windows()
    change(data)
    with pytest.raises(ValueError, match=match):
        lw.layerwise_crossfit(data)


def test_crossfit_refuses_unknown_rollouts():
    from posflow.simulate.models.crossfit import crossfit

    data = _windows()
    for bad in (("b", "z"), ()):
        with pytest.raises(ValueError, match="rollouts must name some of"):
            crossfit(data, rollouts=bad)


# -- what the jackknife t judge can see: the minimum detectable difference and the power --------

ALPHA_120 = 0.05 / 120  # SmolLM2's per-comparison level (30 layers × 2 rollouts × 2 nulls)


@pytest.mark.parametrize(("df", "alpha", "power"), [(15, ALPHA_120, 0.8), (31, 0.05 / 12, 0.8),
                                                    (5, 0.05, 0.9), (63, 0.01, 0.5)])  # fmt: skip
def test_mdd_is_the_two_t_quantiles_times_se(df, alpha, power):
    """Closed form at points, the quantiles written out through scipy.stats.t; the MDD is the
    advantage the shifted-t power reaches ``power`` at (exactly: the quantile and the cdf are
    inverses, to ~1e-12)."""
    from scipy import stats

    se = np.array([0.0, 0.004, 0.03])
    want = (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(power, df)) * se
    got = lw.detectable_difference(se, df, alpha, power)
    np.testing.assert_allclose(got, want, rtol=1e-14, atol=0)
    assert isinstance(lw.detectable_difference(0.03, df, alpha, power), float)
    np.testing.assert_allclose(lw.detection_power(got[1:], se[1:], df, alpha), power, atol=1e-12)


def test_power_is_the_shifted_t_and_rises_with_the_effect():
    from scipy import stats

    d = np.linspace(-0.1, 0.3, 41)
    got = lw.detection_power(d, 0.03, 15, ALPHA_120)
    want = stats.t.cdf(d / 0.03 - stats.t.ppf(1 - ALPHA_120 / 2, 15), 15)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    assert (np.diff(got) > 0).all() and got[0] < ALPHA_120 and got[-1] > 0.99
    # a zero standard error sees every positive advantage and nothing else
    np.testing.assert_array_equal(lw.detection_power([-0.1, 0.0, 0.1], 0.0, 15, 0.05), [0, 0, 1])
    assert lw.detection_power(0.01, [[0.01], [0.02]], 15, 0.05).shape == (2, 1)


def test_the_shifted_t_mdd_is_close_to_the_exact_power_of_a_t_test():
    """The exact power at the MDD of a t test of normal data (scipy.stats.nct) lies within
    0.045 below the target for df ≥ 15 and Bonferroni families of ≤ 360 comparisons (the
    figures of detectable_difference's docstring: 0.768 at df = 15, m = 120; 0.786 at df = 31)."""
    from scipy import stats

    for df in (15, 20, 31, 63):
        for m in (1, 12, 72, 120, 360):
            a = 0.05 / m
            mdd = lw.detectable_difference(1.0, df, a)
            exact = stats.nct.sf(stats.t.ppf(1 - a / 2, df), df, mdd)
            assert 0.755 <= exact <= 0.8 + 1e-3, (df, m, exact)
    exact = stats.nct.sf(stats.t.ppf(1 - ALPHA_120 / 2, 15), 15,
                         lw.detectable_difference(1.0, 15, ALPHA_120))  # fmt: skip
    assert round(exact, 3) == 0.768


@pytest.mark.parametrize(("call", "match"), [
    (lambda: lw.detectable_difference(-0.1, 15, 0.05), "se"),
    (lambda: lw.detectable_difference([0.1, np.nan], 15, 0.05), "se"),
    (lambda: lw.detectable_difference(0.1, 0, 0.05), "df"),
    (lambda: lw.detectable_difference(0.1, 2.5, 0.05), "df"),
    (lambda: lw.detectable_difference(0.1, True, 0.05), "df"),
    (lambda: lw.detectable_difference(0.1, 15, 1.0), "alpha"),
    (lambda: lw.detectable_difference(0.1, 15, 0.05, power=0.0), "power"),
    (lambda: lw.detection_power(np.inf, 0.1, 15, 0.05), "effect"),
    (lambda: lw.detection_power([0.1, 0.2], [0.1, 0.2, 0.3], 15, 0.05), "broadcast"),
    (lambda: lw.detection_power(0.1, 0.1, 15, -0.5), "alpha"),
])  # fmt: skip
def test_bad_input_to_the_power_routines_names_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_numpy_scalars_are_accepted():
    a = lw.detectable_difference(np.float32(0.03), np.int64(15), np.float64(0.05), np.float64(0.8))
    assert a == pytest.approx(lw.detectable_difference(0.03, 15, 0.05), rel=1e-7)
