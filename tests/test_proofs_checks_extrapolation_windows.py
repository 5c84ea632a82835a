"""Claims AT5, AT6 (proofs_checks.extrapolation_windows):
the measured numbers against independent references."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.claims.at05_06_windows import _far_law, _score_moments
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx).evidence for cid in ["AT5", "AT6"]}


def _law_96():
    f = 10000.0 ** (-2 * np.arange(48) / 96)
    return f, np.log(np.sin(f) / f), np.log(np.sin(2 * f) / (2 * f))


def test_at5_holds_and_the_far_law_differs_between_lengths(results):
    ev = results["AT5"]
    assert ev.status == "HOLDS", ev.summary
    # the exact far-score means at a random far distance differ (slow blocks mix only at 65536)
    assert ev["far_exact_mean_L512"].value - ev["far_exact_mean_L65536"].value > 0.2
    # the global window of γ = max_b sin f_b/f_b exceeds every context length
    assert ev["global_window"].value > 10**9


def test_at5_score_moments_by_a_plain_monte_carlo():
    # s = Σ_b w_b cos ψ_b(D), ψ_b a sum of D uniforms on [−f_b, f_b]: mean and variance
    f, lc, lc2 = _law_96()
    w = np.full(48, 1 / 48)
    (mean,), (var,) = _score_moments(lc, lc2, w, [64])
    rng = np.random.default_rng(3)
    psi = rng.uniform(-f, f, size=(64, 20000, 48)).sum(axis=0)
    s = np.cos(psi) @ w
    assert s.mean() == pytest.approx(mean, abs=5 * math.sqrt(var / s.size))
    assert s.var() == pytest.approx(var, rel=0.1)
    assert mean == pytest.approx(np.mean((np.sin(f) / f) ** 64), rel=1e-12)


def test_at5_far_law_is_the_mixture_over_distances():
    f, lc, lc2 = _law_96()
    w = np.full(48, 1 / 48)
    mu, var = _far_law(lc, lc2, w, 27, 511)
    means = [np.mean((np.sin(f) / f) ** D) for D in range(27, 512)]
    assert mu == pytest.approx(np.mean(means), rel=1e-12)
    assert var >= np.var(means)


def test_at5_fixed_distance_tolerance_is_statistical(results):
    m = results["AT5"]["fixed_mean_L65536"]
    assert m.tol.kind == "statistical"
    assert "128 samples" not in m.tol.reason and "2 contexts × 64 queries" in m.tol.reason
    assert "family-wise" in m.tol.reason


def test_at6_block_counts_by_a_plain_loop(results):
    ev = results["AT6"]
    counts = {}
    for n in (512, 8192, 65536):
        c = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if n * math.log(math.sin(f) / f) < math.log(0.1):
                c += 1
        counts[n] = c
    assert counts == {512: 10, 8192: 17, 65536: 23}
    for n, c in counts.items():
        assert ev[f"blocks_mixed_{n}"].value == c
        assert ev[f"blocks_mixed_float64_{n}"].value == c
    assert [round(ev[f"W_{b}"].value, 1) for b in range(3)] == [26.7, 39.6, 58.6]
    assert ev.status == "HOLDS", ev.summary


def test_at6_table_has_every_block(results):
    t = results["AT6"].table("per_block")
    assert len(t.rows) == 48
    b, f, W, approx = t.rows[0][:4]
    assert (b, f) == (0, 1.0)
    assert W == pytest.approx(math.log(100) / -math.log(math.sin(1.0)), rel=1e-12)
    assert approx == pytest.approx(6 * math.log(100), rel=1e-12)
