"""Tests of posflow.simulate.models.study: grouped measurement and jackknife intervals (PB15)."""

import numpy as np
import pytest
from conftest import tiny_gqa_llama

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from posflow.simulate.models.measure import measure  # noqa: E402
from posflow.simulate.models.study import (  # noqa: E402
    PROFILES,
    measure_groups,
    study_summary,
)
from posflow.simulate.rollout import influence  # noqa: E402


@pytest.fixture(scope="module")
def llama():
    return tiny_gqa_llama()


@pytest.fixture(scope="module")
def ids():
    return np.random.default_rng(3).integers(0, 300, size=(6, 12))


@pytest.fixture(scope="module")
def study(llama, ids):
    return measure_groups(llama, ids, 3, seed=1)


def test_groups_pool_to_the_one_pass_measurement(llama, ids, study):
    m = measure(llama, ids, value_norms=True, layer_influence=True)
    P = study.pooled(range(3))
    np.testing.assert_allclose(P["A"], m.attention.mean(axis=1), rtol=0, atol=1e-14)
    np.testing.assert_allclose(P["V"], m.value_weights, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(P["lambdas"], m.lambdas, rtol=0, atol=1e-14)
    np.testing.assert_allclose(P["measured"], m.influence, rtol=1e-12, atol=0)
    np.testing.assert_allclose(P["c"], m.content("sqrt_d")[1], rtol=1e-12, atol=1e-14)
    assert study.num_sequences == 6 and study.groups == 3
    assert sorted(study.perm.tolist()) == [0, 1] and (study.perm != np.arange(2)).all()


def test_jackknife_by_hand(study):
    """se² = (G−1)/G Σ (θ_(−g) − θ̄)², recomputed here from leave-one-out profiles (b)."""
    from posflow.simulate.compare import w1_normalised
    from posflow.simulate.models.measure import measured_kernels

    s = study_summary(study, confidence=0.9)
    G = 3
    vals = []
    for g in range(G):
        keep = [h for h in range(G) if h != g]
        A = sum(study.attention[h] for h in keep) / 2
        lam = np.concatenate([study.lambdas[h] for h in keep]).mean(axis=0)
        gi = np.concatenate([study.influence[h] for h in keep]).mean(axis=0)
        vals.append(w1_normalised(influence(measured_kernels(A), lam), gi / gi.sum()))
    vals = np.array(vals)
    se = np.sqrt((G - 1) / G * ((vals - vals.mean()) ** 2).sum())
    est, se_got, lo, hi = s["stats"]["w1.b"]
    assert se_got == pytest.approx(se, rel=1e-10, abs=1e-15)
    q = 2.919985580355516  # scipy.stats.t.ppf(0.95, 2)
    assert lo == pytest.approx(est - q * se, abs=1e-12)
    assert hi == pytest.approx(est + q * se, abs=1e-12)
    assert set(s["profiles"]) == {*PROFILES, "measured"}
    for p in s["profiles"].values():
        assert abs(sum(p) - 1) < 1e-12
    best = s["best"]
    assert s["stats"][f"w1.{best}"][0] == min(s["stats"][f"w1.{k}"][0] for k in "abcde")
    assert s["differences"][best][:2] == [0.0, 0.0]


def test_sink_aware_profile_matches_a_hand_kernel(study):
    """(e) equals the rollout through A with column 0 moved onto the diagonal (rows i ≥ 1)."""
    from posflow.simulate.kernels import dense_kernel

    s = study_summary(study)
    P = study.pooled(range(3))
    ks = []
    for M in P["A"]:
        M = np.tril(M).copy()
        for i in range(1, M.shape[0]):
            M[i, i] += M[i, 0]
            M[i, 0] = 0.0
        ks.append(dense_kernel(M / M.sum(axis=1, keepdims=True)))
    np.testing.assert_allclose(s["profiles"]["e"], influence(ks, P["lambdas"]), atol=1e-15)


def test_a_study_beyond_a_sliding_window_bands_its_uniform_and_content_kernels(study):
    """Tiny Gemma 3 at n = 12 beyond its 4-key windows (layers 0 and 2): the study keeps the
    measured windows, and its uniform and (c) profiles are the rollouts through the banded
    kernels of posflow.simulate.models.bands (checked there against closed forms)."""
    import tiny_lms

    from posflow.simulate.models.bands import content_kernels, uniform_kernels

    assert study.windows == (None, None)  # the Llama study: every layer global
    model = tiny_lms.build("gemma3_text", seed=2)
    st = measure_groups(model, tiny_lms.ids(seed=3, count=6), 3, seed=0)
    W, n = tiny_lms.W, tiny_lms.n
    assert st.windows == (W, None, W) and st.n == n
    s = study_summary(st)
    P = st.pooled(range(3))
    for k, ks in (("uniform", uniform_kernels(n, st.windows)),
                  ("c", content_kernels(n, st.slopes, P["c"], st.windows))):  # fmt: skip
        ref = influence(ks, P["lambdas"])  # the same library calls: to the last bit
        np.testing.assert_array_equal(s["profiles"][k], ref)
        plain = influence(uniform_kernels(n, (None,) * 3) if k == "uniform"
                          else content_kernels(n, st.slopes, P["c"]), P["lambdas"])  # fmt: skip
        assert np.abs(ref - plain).max() > 1e-4  # the band matters


def test_bad_groups(llama, ids):
    with pytest.raises(ValueError, match="groups must be an integer >= 2"):
        measure_groups(llama, ids, 1)
    with pytest.raises(ValueError, match="divisible by groups = 4"):
        measure_groups(llama, ids, 4)


def test_best_profile_averages_w1_over_the_stored_lengths():
    from posflow.simulate.models.study import best_profile

    def run(**w1):
        return {"stats": {f"w1.{k}": [v, 0, v, v] for k, v in w1.items()}}

    store = {"runs": {"128": run(a=0.5, b=0.4, c=0.3, d=0.2, e=0.25),
                      "256": run(a=0.5, b=0.4, c=0.3, d=0.4, e=0.25)}}  # fmt: skip
    best, mean = best_profile(store)
    assert best == "e" and mean["d"] == pytest.approx(0.3) and mean["e"] == pytest.approx(0.25)
    with pytest.raises(ValueError, match="at least one run"):
        best_profile({"runs": {}})


def test_the_stored_study_is_consistent():
    """The committed study: jackknife intervals hold the estimate; profiles are distributions;
    the named best profile has the least W1 at its length."""
    from posflow.simulate.models.study import stored_study

    store = stored_study()
    if store is None:
        pytest.skip("no stored study")
    assert store["runs"]
    for n, r in store["runs"].items():
        assert r["n"] == int(n) and r["sequences"] >= 64 and r["groups"] >= 2
        for est, se, lo, hi in r["stats"].values():
            assert se >= 0 and lo <= est <= hi
        for p in r["profiles"].values():
            assert len(p) == int(n) and abs(sum(p) - 1) < 1e-9 and min(p) >= 0
        w = {k: r["stats"][f"w1.{k}"][0] for k in "abcde"}
        assert r["best"] == min(w, key=w.get)
