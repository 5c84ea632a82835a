"""The cross-fitted retrieval profile (claim PB17, issue 41): α fitted on other contexts than the
ones scored, the bootstrap refitting it, α = 1 and the measured influence's own ρ beside it."""

import numpy as np
import pytest
from scipy.stats import spearmanr

from posflow.simulate.models import retrieval_fit as RF
from posflow.simulate.models.crossfit import Windows, fit_scale, scaled_rollout
from posflow.simulate.models.retrieval import RetrievalTask

L, N_TOK, K, ELL, PRE = 4, 27, 4, 5, 4  # prompt: 4 preamble tokens, 4 lines of 5, 3 query


def _task(C):
    n0 = N_TOK - 3
    return RetrievalTask(K=K, context_ids=np.zeros((C, n0), int),
                         query_ids=np.zeros((C, K, 3), int), value_ids=np.zeros((C, K, 3), int),
                         line_starts=PRE + ELL * np.arange(K), line_length=ELL,
                         preamble_length=PRE, keys=[], values=[], seed=0)  # fmt: skip


def _kernels(rng, C):
    A = np.tril(rng.random((C, L, N_TOK, N_TOK)) ** 3)
    return A / A.sum(axis=-1, keepdims=True)


def _data(C=8, seed=0):
    rng = np.random.default_rng(seed)
    A = _kernels(rng, C)
    lam = rng.uniform(0.2, 0.6, (C, L))
    g = rng.random((C, N_TOK)) * np.linspace(0.1, 1.0, N_TOK)
    x = rng.normal(size=(C, K)) + np.linspace(0.0, 1.5, K)
    return x, Windows(A, lam, g, values=A), _task(C)


def test_a_known_alpha_is_recovered_in_every_direction_and_replicate():
    # every context has the same kernels and λ, and the influence of the rollout at α0: each
    # half, resampled or not, fits α0, so the interval collapses onto it
    rng = np.random.default_rng(1)
    C, a0 = 6, 0.7
    A = np.repeat(_kernels(rng, 1), C, axis=0)
    lam = np.repeat(rng.uniform(0.2, 0.6, (1, L)), C, axis=0)
    S = A[0].copy()  # the sink-aware kernel of rollout "e"
    i = np.arange(1, N_TOK)
    S[:, i, i] += S[:, i, 0]
    S[:, i, 0] = 0.0
    g = np.repeat(scaled_rollout(S, lam[0], a0)[None], C, axis=0)
    x = rng.normal(size=(C, K))
    fit = RF.crossfit_retrieval(x, Windows(A, lam, g), _task(C), rollout="e", splits=3,
                                resamples=20)  # fmt: skip
    assert np.allclose(fit.alpha, a0, atol=1e-10) and fit.matched.all()
    est, lo, hi, dropped = fit.interval("alpha", 0.95)
    assert est == pytest.approx(a0, abs=1e-10) and hi - lo < 1e-9 and dropped == 0
    # the fitted rollout is the measured influence here, so its ρ is the ceiling's
    assert np.allclose(fit.rho["fitted"], fit.rho["ceiling"])


def test_split_zero_by_hand_with_fit_scale_and_scipy():
    x, w, task = _data()
    fit = RF.crossfit_retrieval(x, w, task, rollout="b", splits=2, resamples=10, seed=3)
    h1, h2 = fit.halves[0]
    j = np.arange(N_TOK)

    def pooled(rows):
        Ap = w.attention[rows].mean(axis=0)
        g = w.influence[rows].mean(axis=0)
        return Ap / Ap.sum(-1, keepdims=True), w.lambdas[rows].mean(axis=0), g / g.sum()

    for d, (f, s) in enumerate(((h1, h2), (h2, h1))):
        Af, lf, gf = pooled(f)
        a, _ = fit_scale(Af, lf, float(gf @ j))
        assert fit.alpha[0, d] == pytest.approx(a, rel=1e-12)
        As, ls, gs = pooled(s)
        curve = x[s].mean(axis=0)
        for name, p in (("fitted", scaled_rollout(As, ls, a)), ("unit", scaled_rollout(As, ls, 1)),
                        ("ceiling", gs)):  # fmt: skip
            lines = [p[b : b + ELL].sum() for b in task.line_starts]
            assert fit.rho[name][0, d] == pytest.approx(spearmanr(curve, lines).statistic)


def test_halves_are_disjoint_and_each_replicate_resamples_within_them():
    x, w, task = _data(C=9)
    fit = RF.crossfit_retrieval(x, w, task, splits=4, resamples=12, seed=2)
    for h1, h2 in fit.halves:
        assert h1.size == 4 and h2.size == 5 and not set(h1) & set(h2)
        assert sorted([*h1, *h2]) == list(range(9))
    for r, row in enumerate(fit.rows):
        h1, h2 = fit.halves[r % 4]
        assert set(row[:4]) <= set(h1) and set(row[4:]) <= set(h2)
    assert len({tuple(r) for r in fit.rows}) > 4  # resampled, not the halves themselves
    assert fit.boot["alpha"].shape == (12,) and np.isfinite(fit.boot["alpha"]).all()


def test_same_seed_same_fit_and_another_seed_other_splits():
    x, w, task = _data()
    a = RF.crossfit_retrieval(x, w, task, splits=2, resamples=10, seed=5)
    b = RF.crossfit_retrieval(x, w, task, splits=2, resamples=10, seed=5)
    c = RF.crossfit_retrieval(x, w, task, splits=2, resamples=10, seed=6)
    assert np.array_equal(a.alpha, b.alpha) and np.array_equal(a.boot["fitted"], b.boot["fitted"])
    assert not all(np.array_equal(p[0], q[0]) for p, q in zip(a.halves, c.halves, strict=True))


def test_the_ceiling_is_one_when_the_curve_is_the_measured_influence():
    _, w, task = _data()
    g = w.influence / w.influence.sum(axis=1, keepdims=True)
    # one shared curve: the line masses of the mean influence (any half has the same ranks)
    g[:] = g.mean(axis=0)
    x = np.repeat(np.array([[g[0, b : b + ELL].sum() for b in task.line_starts]]), 8, axis=0)
    x = x + np.arange(8)[:, None] * 0.0
    w2 = Windows(w.attention, w.lambdas, g)
    fit = RF.crossfit_retrieval(x, w2, task, splits=2, resamples=10)
    assert np.allclose(fit.rho["ceiling"], 1.0)
    assert fit.interval("ceiling", 0.9)[1:3] == pytest.approx((1.0, 1.0))


def test_fitting_on_the_scored_half_changes_the_alpha_of_each_direction(monkeypatch):
    x, w, task = _data()
    fit = RF.crossfit_retrieval(x, w, task, splits=1, resamples=10)
    monkeypatch.setattr(RF, "_sides", lambda h1, h2: ((h2, h2), (h1, h1)))
    ins = RF.crossfit_retrieval(x, w, task, splits=1, resamples=10)
    assert np.allclose(ins.alpha[0], fit.alpha[0, ::-1]) and not np.allclose(ins.alpha, fit.alpha)


def test_half_splits():
    hs = RF.half_splits(7, 3, 0)
    assert len(hs) == 3 and all(h1.size == 3 and h2.size == 4 for h1, h2 in hs)
    assert all(np.array_equal(a[0], b[0]) for a, b in zip(hs, RF.half_splits(7, 3, 0),
                                                            strict=True))  # fmt: skip
    with pytest.raises(ValueError, match="C"):
        RF.half_splits(3, 1, 0)
    with pytest.raises(TypeError, match="splits"):
        RF.half_splits(8, 1.5, 0)
    with pytest.raises(ValueError, match="seed"):
        RF.half_splits(8, 1, -1)


def test_bad_input_names_the_argument():
    x, w, task = _data()
    with pytest.raises(TypeError, match="task"):
        RF.crossfit_retrieval(x, w, object())
    with pytest.raises(ValueError, match="per_context"):
        RF.crossfit_retrieval(x[:, :3], w, task)
    with pytest.raises(ValueError, match="per_context"):
        RF.crossfit_retrieval(x[:3], w, task)
    with pytest.raises(ValueError, match="per_context"):
        RF.crossfit_retrieval(np.where(x > 0, np.nan, x), w, task)
    with pytest.raises(ValueError, match="rollout"):
        RF.crossfit_retrieval(x, w, task, rollout="z")
    with pytest.raises(ValueError, match="splits"):
        RF.crossfit_retrieval(x, w, task, splits=0)
    with pytest.raises(ValueError, match="resamples"):
        RF.crossfit_retrieval(x, w, task, resamples=5)
    with pytest.raises(TypeError, match="seed"):
        RF.crossfit_retrieval(x, w, task, seed=1.0)
    with pytest.raises(ValueError, match="data"):
        RF.crossfit_retrieval(x[:6], w, _task(6))
    with pytest.raises(ValueError, match="values"):
        RF.crossfit_retrieval(x, Windows(w.attention, w.lambdas, w.influence), task, rollout="d")
    with pytest.raises(ValueError, match="influence"):
        RF.crossfit_retrieval(x, Windows(w.attention, w.lambdas, -w.influence), task)
    fit = RF.crossfit_retrieval(x, w, task, splits=1, resamples=10)
    with pytest.raises(ValueError, match="confidence"):
        fit.interval("fitted", 1.5)
    with pytest.raises(ValueError, match="name"):
        fit.interval("rho", 0.9)


def test_pooling_a_resample_counts_repeated_contexts_as_crossfit_does():
    from posflow.simulate.models.crossfit import _checked, _pool

    _, w, _ = _data()
    w = _checked(Windows(w.attention, w.lambdas, w.influence, values=w.values,
                         content=np.ones((8, L, 2)), slopes=np.zeros(2)))  # fmt: skip
    rows = np.array([0, 0, 3, 5, 5, 5])
    want, got = _pool(w, rows), RF._pool_rows(w, rows)
    assert set(want) == set(got)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=0, atol=1e-15)
