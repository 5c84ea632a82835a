"""Claims AT7–AT11 (proofs_checks.extrapolation_scores and .extrapolation_tails): the measured
numbers against independent references."""

import math

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import i0

from posflow.proofs_checks.claims._relaxations_at import bounded_logits_violation
from posflow.proofs_checks.claims.at07_09_tails import (
    balanced_score_tail,
    cap_lower_bound,
    i0_series_dominated,
    sharp_tail,
)
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim
from posflow.simulate.orthogonal import SO2BlockLaw, rotate_blocks
from posflow.theory import transport as th

IDS = ["AT7", "AT8", "AT9", "AT10", "AT11"]


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in IDS}


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_judged_tolerances(results, cid):
    res = results[cid]
    assert res.status == "HOLDS", res.error or res.evidence.summary
    for m in res.evidence.measurements:
        if m.judged:
            assert m.tol is not None and m.tol.reason
        if m.tol is not None and m.tol.kind == "statistical":
            assert "comparisons" in m.tol.reason and "level" in m.tol.reason


# -- AT7 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("eps", [0.05, 0.3, 0.7, 0.95])
def test_at7_sphere_tail_in_d3_is_archimedes(eps):
    # d = 3: u₁ is uniform on [−1, 1] (Archimedes), so Pr(|u₁| > ε) = 1 − ε
    assert th.sphere_coordinate_tail(3, eps) == pytest.approx(1 - eps, rel=1e-12)
    assert cap_lower_bound(3, eps) <= 1 - eps
    assert th.levy_tail(3, eps) >= 1 - eps


@pytest.mark.parametrize("d", [4, 9, 32])
def test_at7_cap_lower_bound_against_quadrature(d):
    # density of u₁ ∝ (1 − x²)^((d−3)/2) on [−1, 1]
    def dens(x):
        return (1 - x * x) ** ((d - 3) / 2)

    z = quad(dens, -1, 1)[0]
    for eps in (0.1, 0.4, 0.8):
        tail = 2 * quad(dens, eps, 1)[0] / z
        assert th.sphere_coordinate_tail(d, eps) == pytest.approx(tail, rel=1e-8)
        assert cap_lower_bound(d, eps) <= tail


def test_at7_exponent_table_lies_between_the_bounds(results):
    tab = results["AT7"].evidence.table("exponent_per_dimension")
    i = {c: j for j, c in enumerate(tab.columns)}
    for row in tab.rows:
        exact, upper = row[i["exact exponent/(dε²)"]], row[i["upper bound/(dε²)"]]
        assert 0.5 <= exact <= upper
        d, eps = row[i["d"]], row[i["ε"]]
        assert exact == pytest.approx(
            -math.log(th.sphere_coordinate_tail(d, eps) / 2) / (d * eps * eps), rel=1e-12
        )


# -- AT8 ------------------------------------------------------------------------------------


def test_at8_i0_series_and_grid():
    assert i0_series_dominated()
    x = np.linspace(0, 20, 2001)
    assert np.all(i0(x) <= np.exp(x * x / 4) * (1 + 1e-14))


@pytest.mark.parametrize("x", [0.3, 1.0, 4.0])
def test_at8_mgf_of_a_mixed_block_is_i0(x):
    # E e^{x cos ψ}, ψ uniform: (1/2π)∫ e^{x cos ψ} dψ = I₀(x)
    mgf = quad(lambda p: math.exp(x * math.cos(p)), -math.pi, math.pi)[0] / (2 * math.pi)
    assert mgf == pytest.approx(float(i0(x)), rel=1e-12)
    assert mgf <= math.exp(x * x / 4)


def test_at8_sharp_tail_closed_form():
    rng = np.random.default_rng(3)
    qn, kn = rng.uniform(0, 2, 10), rng.uniform(0, 2, 10)
    t = np.array([0.0, 0.5, 2.0, 5.0])
    want = 2 * np.exp(-(t**2) / np.sum((qn * kn) ** 2))
    np.testing.assert_allclose(sharp_tail(t, qn, kn), want, rtol=1e-14)
    # twice Hoeffding's exponent: sharp = 2 (Hoeffding/2)²
    np.testing.assert_allclose(
        sharp_tail(t, qn, kn), 2 * (th.hoeffding_tail(t, qn, kn) / 2) ** 2, rtol=1e-13
    )


def test_at8_tail_table_is_under_the_sharp_bound(results):
    tab = results["AT8"].evidence.table("tails")
    for _, _, mc, sharp, hoeffding in tab.rows:
        assert sharp <= hoeffding
        assert mc <= sharp + 4 * math.sqrt(max(sharp, 1e-4) / 20_000)  # N = 20,000, 4 SE


# -- AT9 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("d", [16, 32])
def test_at9_exact_law_against_monte_carlo(d):
    rng = np.random.default_rng(7)
    N = 200_000
    q = np.zeros(d)
    q[: d // 2] = np.sqrt(2 / d)
    s = rotate_blocks(q, SO2BlockLaw(d, "uniform", scale=np.pi).sample_angles(N, seed=rng)) @ q
    t = np.array([0.05, 0.2, 0.4, 0.6])
    p = balanced_score_tail(t, d)
    mc = (np.abs(s)[:, None] >= t).mean(0)
    se = np.sqrt(p * (1 - p) / N)
    assert np.all(np.abs(mc - p) <= 4 * se + 1 / N)  # 4 SE each, N = 200,000


def test_at9_exact_law_basic_properties():
    t = np.linspace(0, 1, 101)
    p = balanced_score_tail(t, 32)
    assert p[0] == pytest.approx(1.0, abs=1e-12)
    assert p[-1] == pytest.approx(0.0, abs=1e-12)
    assert np.all(np.diff(p) <= 1e-13)
    # variance of s is Σ c_b²/2 = 1/d: ∫ 2t Pr(|s| ≥ t) dt = E s²
    tt = np.linspace(0, 1, 2_001)
    second = np.trapezoid(2 * tt * balanced_score_tail(tt, 32), tt)
    assert second == pytest.approx(1 / 32, rel=1e-5)  # trapezoid, h = 5e-4
    with pytest.raises(ValueError, match="d must be"):
        balanced_score_tail(0.1, 8)


def test_at9_table_medians(results):
    tab = results["AT9"].evidence.table("by_M")
    medians = [r[tab.columns.index("exact median")] for r in tab.rows]
    levels = [r[tab.columns.index("union median level")] for r in tab.rows]
    assert np.all(np.diff(medians) > 0)
    assert all(m < lv < 1 for m, lv in zip(medians, levels, strict=True))
    for r in tab.rows:  # √(2 ln(4M)/d) with d = 32
        assert r[tab.columns.index("union median level")] == pytest.approx(
            math.sqrt(2 * math.log(4 * r[0]) / 32), rel=1e-12
        )


# -- AT10 -----------------------------------------------------------------------------------


def test_at10_minimisation_reaches_the_direct_formula(results):
    tab = results["AT10"].evidence.table("numeric_minimisation")
    for K, M, lam, bound, opt, rand in tab.rows:
        direct = M / (M + K * math.exp(2 * lam))
        assert bound == pytest.approx(direct, rel=1e-13)
        assert opt == pytest.approx(direct, abs=1e-9)
        assert rand >= direct - 1e-12


def test_at10_relaxation_breaks_only_outside_the_box():
    breaking = {"near_logits": [1.0], "far_logits": [0.0], "lam": 0.0}
    assert bounded_logits_violation(breaking) == pytest.approx(
        0.5 - 1 / (1 + math.e) - 1e-12, rel=1e-12
    )
    inside = {"near_logits": [0.5, -0.2], "far_logits": [0.1, -0.5, 0.3], "lam": 0.5}
    assert bounded_logits_violation(inside) <= 0
    corner = {"near_logits": [2.0, 2.0], "far_logits": [-2.0] * 5, "lam": 2.0}
    assert -2e-12 <= bounded_logits_violation(corner) <= 0


# -- AT11 -----------------------------------------------------------------------------------


def test_at11_ratios(results):
    ev = results["AT11"].evidence
    assert ev["max_ratio_worst_q_k"].value == pytest.approx(1.0, abs=1e-12)  # ‖P‖_op = 1
    assert ev["attained_ratio"].value == pytest.approx(1.0, abs=1e-14)
    rows = dict(ev.table("max_ratio").rows)
    assert set(rows) >= {"haar", "so2_blocks", "householder_beta2", "route_so2_scores"}
    assert all(0 < v <= 1 + 1e-12 for v in rows.values())
