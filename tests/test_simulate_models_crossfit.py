"""posflow.simulate.models.crossfit (and its private _crossfit_fit): one fitted parameter per
predictor, fitted on one half of the windows and scored on the other, against independent
references: hand computations and scipy for the shape metric, the library rollout and kernels for
the profiles, a brute-force scan for the fit, the closed form s/√G for the jackknife of a mean."""

import numpy as np
import pytest
from scipy.stats import wasserstein_distance

from posflow.simulate.compare import spearman, w1_normalised
from posflow.simulate.kernels import alibi_kernel, dense_kernel, uniform_kernel
from posflow.simulate.models import crossfit as CF
from posflow.simulate.models.measure import measured_kernels
from posflow.simulate.models.profiles_bootstrap import PerSequence
from posflow.simulate.models.sinks import sink_aware_kernels, value_norm_kernels
from posflow.simulate.nulls import geometric_recency, linear_ramp, ramp_slope
from posflow.simulate.rollout import influence


def _causal(rng, *shape):
    n = shape[-1]
    A = rng.random(shape) * np.tril(np.ones((n, n))) + 0.05 * np.eye(n)
    return A / A.sum(axis=-1, keepdims=True)


def _data(seed=0, N=6, L=3, H=2, n=9):
    rng = np.random.default_rng(seed)
    return PerSequence(attention=_causal(rng, N, L, n, n), lambdas=rng.uniform(0.1, 0.8, (N, L)),
                       content=rng.normal(0, 2, (N, L, H)), influence=rng.random((N, n)) + 0.01,
                       slopes=np.array([0.3, 0.0]), values=_causal(rng, N, L, n, n))  # fmt: skip


# -- the shape metric ---------------------------------------------------------------------------


def test_centred_w1_by_hand():
    # (½, 0, ½) and δ_1 have the same mean 1: centred at ±1 (½ each) against 0, W1 = 1, / 2
    assert CF.centred_w1([0.5, 0, 0.5], [0, 1, 0]) == pytest.approx(0.5, abs=1e-15)
    # δ_0 against (0, ½, ½, 0): 0 against ±½ after centring, W1 = ½, / 3
    assert CF.centred_w1([1, 0, 0, 0], [0, 0.5, 0.5, 0]) == pytest.approx(1 / 6, abs=1e-15)
    # a point mass at either end is the same shape: 0 (W1 itself is 1)
    assert CF.centred_w1([1, 0, 0, 0, 0], [0, 0, 0, 0, 1]) == 0.0
    assert w1_normalised([1, 0, 0, 0, 0], [0, 0, 0, 0, 1]) == 1.0


def test_centred_w1_is_scipy_of_the_shifted_positions_and_translation_free():
    rng = np.random.default_rng(1)
    n = 12
    j = np.arange(n, dtype=float)
    P, Q = rng.dirichlet(np.ones(n), 5), rng.dirichlet(np.ones(n), 5)
    got = CF.centred_w1(P, Q)
    assert got.shape == (5,)
    for p, q, g in zip(P, Q, got, strict=True):
        ref = wasserstein_distance(j - p @ j, j - q @ j, p, q) / (n - 1)
        assert g == pytest.approx(ref, abs=1e-14)
        # W1 ≤ shape + |Δμ|/(n − 1), and a translate of p has the same shape as p
        assert w1_normalised(p, q) <= g + abs(p @ j - q @ j) / (n - 1) + 1e-14
    p = np.r_[rng.dirichlet(np.ones(6)), np.zeros(6)]
    assert CF.centred_w1(p, np.roll(p, 4)) == pytest.approx(0.0, abs=1e-14)
    assert CF.centred_w1(3 * p, np.roll(p, 4)) == pytest.approx(0.0, abs=1e-14)  # renormalised


@pytest.mark.parametrize(("p", "q", "match"), [
    ([1.0], [1.0], "n >= 2"), ([1, -1, 1], [1, 1, 1], "p"), ([1, 1, 1], [0, 0, 0], "q"),
    ([1, 1], [1, 1, 1], "n"),
])  # fmt: skip
def test_centred_w1_refuses_bad_profiles(p, q, match):
    with pytest.raises(ValueError, match=match):
        CF.centred_w1(p, q)


# -- the one-parameter rollout and its fit ------------------------------------------------------


def test_scaled_rollout_is_the_library_rollout_with_clipped_lambdas():
    rng = np.random.default_rng(2)
    K = _causal(rng, 4, 10, 10)
    lam = np.array([0.2, 0.5, 0.9, 0.05])
    ks = [dense_kernel(M) for M in K]
    for a in (0.0, 0.7, 1.0, 1.6, 40.0):
        ref = influence(ks, np.clip(a * lam, 0, 1))
        assert np.abs(CF.scaled_rollout(K, lam, a) - ref).max() < 1e-14
    batch = CF.scaled_rollout(K, lam, [0.0, 0.7, 40.0])
    assert batch.shape == (3, 10)
    assert np.abs(batch[1] - CF.scaled_rollout(K, lam, 0.7)).max() < 1e-15
    assert batch[0].tolist() == [0.0] * 9 + [1.0]  # α = 0: no mixing, all on the last token
    assert np.abs(batch[2] - influence(ks, np.ones(4))).max() < 1e-14  # clipped at 1
    with pytest.raises(ValueError, match="alpha"):
        CF.scaled_rollout(K, lam, -1.0)
    with pytest.raises(ValueError, match="kernels"):
        CF.scaled_rollout(K[:3], lam, 1.0)
    with pytest.raises(ValueError, match="lambdas"):
        CF.scaled_rollout(K, -lam, 1.0)


def test_fit_scale_is_the_first_alpha_that_reaches_the_mean():
    rng = np.random.default_rng(3)
    n = 10
    K = _causal(rng, 3, n, n)
    lam = np.array([0.3, 0.6, 0.2])
    j = np.arange(n)
    top = 1 / lam.min()
    scan = np.linspace(0, top, 2001)
    means = CF.scaled_rollout(K, lam, scan) @ j
    mu = 0.5 * (means.min() + n - 1)
    a, ok = CF.fit_scale(K, lam, mu)
    assert ok and abs(CF.scaled_rollout(K, lam, a) @ j - mu) < 1e-9 * (n - 1)
    assert (means[scan < a - 1e-9] > mu).all()  # no smaller α reaches it (brute-force scan)
    assert CF.fit_scale(K, lam, n - 1.0) == (0.0, True)
    # a mean below what the family reaches: the α of the least mean, unmatched
    a, ok = CF.fit_scale(K, lam, 0.0)
    assert not ok and CF.scaled_rollout(K, lam, a) @ j <= means.min() + 1e-9
    assert CF.fit_scale(K, np.zeros(3), 3.0) == (0.0, False)  # nothing mixes
    with pytest.raises(ValueError, match="mean"):
        CF.fit_scale(K, lam, n + 1.0)
    with pytest.raises(ValueError, match="grid"):
        CF.fit_scale(K, lam, 3.0, grid=2)


def test_the_nulls_at_a_fixed_parameter_are_the_fitted_nulls():
    n = 16
    for mu in (2.0, 7.5, 12.0):
        p, r = geometric_recency(n, mu)
        assert np.abs(p - _fixed("geometric", n, float(r))).max() < 1e-12
        s = float(ramp_slope(n, mu))
        assert np.abs(linear_ramp(n, mu) - _fixed("linear", n, s)).max() < 1e-15


def _fixed(kind, n, x):
    from posflow.simulate.models._crossfit_fit import geometric_profile, ramp_profile

    return geometric_profile(n, x) if kind == "geometric" else ramp_profile(n, x)


# -- the jackknife ------------------------------------------------------------------------------


def test_jackknife_of_a_mean_is_the_standard_error():
    x = np.array([1.0, 4.0, 2.0, 8.0, 5.0])
    G = x.size
    reps = np.r_[x.mean(), [(x.sum() - v) / (G - 1) for v in x]]
    est, se, lo, hi = CF.jackknife_interval(reps, 0.95)
    assert est == x.mean() and se == pytest.approx(x.std(ddof=1) / np.sqrt(G), rel=1e-14)
    assert hi - est == pytest.approx(2.7764451051977987 * se, rel=1e-12)  # t_{0.975, 4}
    assert est - lo == pytest.approx(hi - est, rel=1e-14)
    assert all(np.isnan(CF.jackknife_interval([1.0, np.nan, 2.0], 0.9)))
    with pytest.raises(ValueError, match="confidence"):
        CF.jackknife_interval(reps, 1.0)
    with pytest.raises(ValueError, match="replicates"):
        CF.jackknife_interval([1.0, 2.0], 0.9)


# -- cross-fitting end to end -------------------------------------------------------------------


def _reference(data, cf, d, windows=None):
    """Direction d (0: H₁ → H₂, 1: H₂ → H₁) recomputed with the library: pooled halves by plain
    means, library kernels (uniform and content banded to ``windows`` by
    posflow.simulate.models.bands) and rollout, λ scaled by the reported α."""
    from posflow.simulate.models.bands import content_kernels, uniform_kernels

    fit, score = (cf.halves[0], cf.halves[1]) if d == 0 else (cf.halves[1], cf.halves[0])

    def pooled(rows):
        A = data.attention[rows].mean(0)
        g = data.influence[rows].mean(0)
        return (A, np.clip(data.lambdas[rows].mean(0), 0, 1), data.values[rows].mean(0),
                data.content[rows].mean(0), g / g.sum())  # fmt: skip

    def profiles(P, params):
        A, lam, V, c, _ = P
        L, n = lam.size, A.shape[-1]
        if windows is None:
            kc = [alibi_kernel(n, data.slopes, c[t]) for t in range(L)]
            ku = uniform_kernel(n)
        else:
            kc, ku = content_kernels(n, data.slopes, c, windows), uniform_kernels(n, windows)
        ks = measured_kernels(A)
        full = np.ones(L)
        base = {"a": (ks, full), "b": (ks, lam), "c": (kc, lam), "a_c": (kc, full),
                "d": (value_norm_kernels(V), lam), "e": (sink_aware_kernels(A), lam),
                "uniform": (ku, lam), "shuffled": (ks, lam[cf.perm])}  # fmt: skip
        return {k: influence(K, np.clip(params[k] * lam_k, 0, 1))
                for k, (K, lam_k) in base.items()}  # fmt: skip

    F, S = pooled(fit), pooled(score)
    params = {k: cf.params[k][d] for k in cf.keys}
    return profiles(F, params), profiles(S, params), F[-1], S[-1]


def test_crossfit_scores_on_one_half_what_it_fitted_on_the_other():
    data = _data()
    cf = CF.crossfit(data, seed=0)
    n = data.influence.shape[1]
    j = np.arange(n)
    assert set(cf.keys) == set(CF.KEYS) and sorted(np.concatenate(cf.halves)) == list(range(6))
    scores = {m: {k: [] for k in cf.keys} for m in CF.METRICS}
    for d in (0, 1):
        on_fit, on_score, p_fit, p_score = _reference(data, cf, d)
        assert np.abs(cf.measured[d] - p_score).max() < 1e-14
        for k in CF.ROLLOUT_KEYS:
            assert cf.params[k].shape == (2,)  # one parameter per direction, like every null
            if cf.matched[k][d]:  # fitted on the other half: its mean position is that half's
                assert abs(on_fit[k] @ j - p_fit @ j) < 1e-8
            assert np.abs(cf.profiles[k][d] - on_score[k]).max() < 1e-13
        r, s = cf.params["geometric"][d], cf.params["linear"][d]
        assert abs(r - geometric_recency(n, p_fit @ j)[1]) < 1e-12
        assert abs(s - ramp_slope(n, p_fit @ j)) < 1e-15
        for k in cf.keys:
            p = cf.profiles[k][d]
            scores["w1"][k].append(w1_normalised(p, p_score))
            scores["shape"][k].append(wasserstein_distance(j - p @ j, j - p_score @ j, p, p_score)
                                      / (n - 1))  # fmt: skip
            scores["spearman"][k].append(spearman(p, p_score))
            scores["first"][k].append(p[0])
            scores["last"][k].append(p[-1])
    for m in CF.METRICS:
        for k in cf.keys:
            assert cf.metrics[m][k][0] == pytest.approx(np.mean(scores[m][k]), abs=1e-12), (m, k)
    assert cf.metrics["first"]["measured"][0] == pytest.approx(cf.measured[:, 0].mean(), abs=0)


def test_windows_band_the_uniform_and_content_kernels():
    """With per-layer windows (from the data, as Measurement.windows) the profiles are the
    library rollouts through the banded uniform and content kernels; the measured kernels
    are taken as given."""
    data = _data(seed=4)
    data.windows = (3, None, 5)
    cf = CF.crossfit(data, seed=0)
    assert CF.Windows.of(data).windows == (3, None, 5)
    plain = CF.crossfit(_data(seed=4), seed=0)
    for d in (0, 1):
        _, on_score, _, _ = _reference(data, cf, d, windows=data.windows)
        for k in CF.ROLLOUT_KEYS:  # uniform: band() against the exact 1/min(i + 1, w), ulps
            assert np.abs(cf.profiles[k][d] - on_score[k]).max() < 1e-13, k
    for k in ("c", "a_c", "uniform"):
        assert np.abs(cf.profiles[k] - plain.profiles[k]).max() > 1e-3, k
    for k in ("a", "b", "d", "e", "shuffled"):
        np.testing.assert_array_equal(cf.profiles[k], plain.profiles[k])
    for bad in ((3, None), (0, None, 2), (3, "x", 2)):
        data.windows = bad
        with pytest.raises(ValueError, match="windows"):
            CF.crossfit(data)


def test_each_jackknife_replicate_is_the_crossfit_without_its_group():
    data = _data(N=8)
    groups = np.array([0, 0, 1, 1, 2, 2, 3, 4])
    cf = CF.crossfit(data, groups=groups, halves=([0, 3], [1, 2, 4]))
    assert cf.metrics["w1"]["b"].shape == (6,)
    keep = groups != 2
    sub = PerSequence(*(getattr(data, f)[keep] if f != "slopes" else data.slopes
                        for f in ("attention", "lambdas", "content", "influence", "slopes",
                                  "values")))  # fmt: skip
    ref = CF.crossfit(sub, groups=groups[keep], halves=([0, 3], [1, 4]))
    g = list(cf.groups).index(2) + 1
    for m in CF.METRICS:
        for k in cf.keys:
            assert cf.metrics[m][k][g] == pytest.approx(ref.metrics[m][k][0], abs=1e-13)
    e, se, lo, hi = cf.difference("w1", "b", "geometric", 0.9)
    ref = CF.jackknife_interval(cf.metrics["w1"]["b"] - cf.metrics["w1"]["geometric"], 0.9)
    assert (e, se, lo, hi) == ref and lo <= e <= hi


def test_windows_weights_count_like_repeated_windows_and_lambdas_can_be_replaced():
    data = _data()
    twice = np.repeat(np.arange(6), [2, 1, 1, 1, 1, 1])
    rep = CF.Windows(data.attention[twice], data.lambdas[twice], data.influence[twice],
                     data.values[twice], data.content[twice], data.slopes)  # fmt: skip
    w = CF.Windows.of(data)
    w.weights = np.array([2.0, 1, 1, 1, 1, 1])
    a = CF.crossfit(w, groups=np.arange(6), halves=([0, 1, 2], [3, 4, 5]))
    b = CF.crossfit(rep, groups=twice, halves=([0, 1, 2], [3, 4, 5]))
    assert np.abs(a.metrics["w1"]["e"] - b.metrics["w1"]["e"]).max() < 1e-13
    other = np.clip(data.lambdas * 1.3, 0, 1)  # e.g. λ with the MLP update counted
    c = CF.crossfit(data, lambdas=other)
    assert np.abs(c.metrics["w1"]["b"] - CF.crossfit(CF.Windows.of(data, other)).metrics["w1"]
                  ["b"]).max() == 0  # fmt: skip
    assert c.metrics["w1"]["geometric"][0] == CF.crossfit(data).metrics["w1"]["geometric"][0]


def test_without_content_or_values_only_the_rollouts_they_allow():
    d = _data()
    w = CF.Windows(d.attention, d.lambdas, d.influence)
    assert set(CF.crossfit(w).keys) == set(CF.KEYS) - {"c", "a_c", "d"}


@pytest.mark.parametrize(("kw", "match"), [
    ({"lambdas": np.zeros((6, 2))}, "lambdas"), ({"lambdas": np.full((6, 3), np.nan)}, "lambdas"),
    ({"groups": np.array([0, 0, 1, 1, 2, 2])}, "groups"), ({"groups": np.zeros(5, int)}, "groups"),
    ({"perm": [0, 0, 1]}, "perm"), ({"seed": -1}, "seed"),
    ({"halves": ([0], [1, 2, 3, 4, 5])}, "halves"),
])  # fmt: skip
def test_bad_input_is_refused_naming_the_argument(kw, match):
    with pytest.raises(ValueError, match=match):
        CF.crossfit(_data(), **kw)
    bad = _data()
    bad.influence[2] = 0.0
    with pytest.raises(ValueError, match="influence"):
        CF.crossfit(bad)


def test_a_grouped_study_crossfits_like_its_windows_grouped():
    from posflow.simulate.models.study import GroupedStudy

    d = _data(N=8)
    st = GroupedStudy(9, d.slopes)
    for g in range(4):  # groups of two windows: their means, per-sequence λ and influence
        r = slice(2 * g, 2 * g + 2)
        st.attention.append(d.attention[r].mean(0))
        st.value_weights.append(d.values[r].mean(0))
        st.content.append(d.content[r].mean(0))
        st.lambdas.append(d.lambdas[r])
        st.influence.append(d.influence[r])
    halves = ([0, 3], [1, 2])
    a = CF.crossfit(CF.Windows.of_groups(st), halves=halves)
    b = CF.crossfit(d, groups=np.repeat(np.arange(4), 2), halves=halves)
    for m in CF.METRICS:
        assert np.abs(a.metrics[m]["d"] - b.metrics[m]["d"]).max() < 1e-12, m
    st.windows = d.windows = (4, None, 2)  # the study's windows band the uniform and content
    a = CF.crossfit(CF.Windows.of_groups(st), halves=halves)
    b = CF.crossfit(d, groups=np.repeat(np.arange(4), 2), halves=halves)
    for m in CF.METRICS:
        for k in ("c", "uniform"):
            assert np.abs(a.metrics[m][k] - b.metrics[m][k]).max() < 1e-12, (m, k)


def test_every_split_is_the_crossfit_with_its_own_halves_and_the_interval_adds_their_variance():
    """splits = S: split s is the full-sample cross-fit with halves from rng([seed, 24, s]); the
    interval averages the S statistics and adds s²/S to the seeded split's jackknife variance."""
    from scipy import stats

    data = _data(N=8)
    cf = CF.crossfit(data, seed=3, splits=4)
    one = CF.crossfit(data, seed=3)
    uniq = np.arange(8)
    for s in range(4):
        if s == 0:
            ref = one
        else:
            order = np.random.default_rng([3, 24, s]).permutation(uniq)
            ref = CF.crossfit(data, seed=3, halves=(order[:4], order[4:]))
        for k in cf.keys:
            assert cf.splits["w1"][k][s] == pytest.approx(ref.metrics["w1"][k][0], abs=1e-13)
            assert cf.splits["param"][k][s] == pytest.approx(ref.metrics["param"][k][0],
                                                             abs=1e-13)  # fmt: skip
    d = cf.splits["w1"]["b"] - cf.splits["w1"]["geometric"]
    reps = one.metrics["w1"]["b"] - one.metrics["w1"]["geometric"]
    se_jack = CF.jackknife_interval(reps, 0.9)[1]
    se = np.sqrt(se_jack**2 + np.var(d, ddof=1) / 4)
    lo, hi = stats.t.interval(0.9, 7, loc=d.mean(), scale=se)
    e, se_got, lo_got, hi_got = cf.difference("w1", "b", "geometric", 0.9)
    assert (e, se_got, lo_got, hi_got) == pytest.approx((d.mean(), se, lo, hi), abs=1e-14)
    assert cf.interval("param", "b", 0.9)[0] == pytest.approx(cf.splits["param"]["b"].mean())


@pytest.mark.parametrize(("kw", "match"), [
    ({"splits": 0}, "splits must be an integer >= 1"), ({"splits": 2.0}, "splits"),
    ({"splits": 2, "halves": ([0, 1, 2], [3, 4, 5])}, "give halves or splits")])
def test_bad_splits_are_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        CF.crossfit(_data(), **kw)


def test_split_interval_refuses_one_split_and_keeps_nan():
    with pytest.raises(ValueError, match="splits must have shape"):
        CF.split_interval([0.1, 0.2, 0.3], [0.1], 0.9)
    assert np.isnan(CF.split_interval([0.1, 0.2, 0.3], [0.1, np.nan], 0.9)[0])
