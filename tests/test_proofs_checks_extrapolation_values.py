"""Claims AT14, AT15, AT16, AT17 (proofs_checks.extrapolation_values and _values_drift):
the measured numbers against independent references."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.claims import at14_15_values as ev_mod
from posflow.proofs_checks.claims._relaxations_at import (
    commuting_expectation,
    commuting_violation,
    zero_mean_violation,
)
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim
from posflow.simulate.orthogonal import SO2BlockLaw
from posflow.simulate.transport import so2_value_output
from posflow.theory import transport as th

IDS = ["AT14", "AT15", "AT16", "AT17"]


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in IDS}


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_reasoned_tolerances(results, cid):
    r = results[cid]
    assert r.error == "", r.error
    ev = r.evidence
    assert ev.status == "HOLDS", ev.summary
    for m in ev.measurements:
        if m.judged and m.test != "true":
            assert m.tol.kind in ("exact", "floating-point", "statistical"), m.key
            assert m.tol.reason, m.key
    assert any(m.role == "control" for m in ev.measurements)


def test_at14_digest_moment_by_the_geometric_sum(results):
    ev = results["AT14"].evidence
    c, M = math.sin(1.0), 200
    # (1/M²) Σ_{j,k} c^{|j−k|}, summed by a plain loop over lags
    exact = (M + 2 * sum((M - lag) * c**lag for lag in range(1, M))) / M**2
    assert ev["digest_mc_vs_exact"].reference == pytest.approx(exact, rel=1e-12)
    assert ev["digest_exact_vs_closed_form"].reference == pytest.approx(exact, rel=1e-12)
    _, mc, se, ex, bound, coherent, _ = ev.table("AT14_cases").rows[0]
    assert ex == pytest.approx(exact, rel=1e-12)
    assert bound == pytest.approx((1 + c) / ((1 - c) * M), rel=1e-12)
    assert coherent == pytest.approx(1.0, rel=1e-12)
    assert abs(mc - exact) <= 4.5 * se  # 4000 draws; z_limit(6) = 4.41
    assert ev["control_unrotated_is_coherent"].value == pytest.approx(1.0, abs=1e-12)
    assert ev["digest_mc_vs_exact"].tol.kind == "statistical"


def test_at14_double_sum_against_two_tokens_by_hand():
    rng = np.random.default_rng(1)
    a, z = rng.standard_normal(2), rng.standard_normal((2, 1, 2))
    c, dist = 0.37, np.array([5, 2])
    by_hand = (
        a[0] ** 2 * np.sum(z[0] ** 2)
        + a[1] ** 2 * np.sum(z[1] ** 2)
        + 2 * a[0] * a[1] * c**3 * float(z[0, 0] @ z[1, 0])
    )
    assert ev_mod._dense_moment(a, z, dist, c) == pytest.approx(by_hand, rel=1e-12)
    assert th.value_side_expectation(a, z, dist, c) == pytest.approx(by_hand, rel=1e-12)


def test_at14_dense_transport_is_the_explicit_route_product():
    rng = np.random.default_rng(2)
    n, B = 6, 2
    w, v, theta = rng.random(n), rng.standard_normal((n, 2 * B)), rng.uniform(-1, 1, (n, B))
    o = np.zeros(2 * B)
    for j in range(n):  # route j → n−1 from the source: steps j … n−2, as 2×2 matrices
        for b in range(B):
            R = np.eye(2)
            for s in range(j, n - 1):
                t = theta[s, b]
                R = np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) @ R
            o[[b, b + B]] += w[j] * (R @ v[j, [b, b + B]])
    assert ev_mod._dense_transport(w, v, theta) == pytest.approx(o, abs=1e-13)
    assert so2_value_output(w[None], v, theta)[0] == pytest.approx(o, abs=1e-13)


def test_at14_stacked_draws_equal_one_call_per_draw():
    M, gap, trials, scales = 7, 3, 5, np.array([0.8, 1.5])
    rng = np.random.default_rng(3)
    w, v = rng.random(M), rng.standard_normal((M, 4))
    batched = ev_mod._far_residual_sq(scales, w, v, gap, trials, np.random.default_rng(4))
    n = M + gap
    theta = SO2BlockLaw(4 * trials, "uniform", scale=np.tile(scales, trials)).sample_angles(
        n, np.random.default_rng(4)
    )
    wf, vf = np.zeros((1, n)), np.zeros((n, 4))
    wf[0, :M], vf[:M] = w, v
    one = [np.sum(so2_value_output(wf, vf, theta[:, 2 * t : 2 * t + 2]) ** 2) for t in range(5)]
    assert batched == pytest.approx(one, rel=1e-12)


def test_at15_exact_curve_and_its_limit(results):
    ev = results["AT15"].evidence
    c = math.sin(1.0)
    rows = ev.table("AT15_by_M").rows
    Ms = [r[0] for r in rows]
    rms = []
    for M in Ms:  # E‖·‖² = (1/M²) Σ_{j,k} c^{|j-k|}, summed by a plain loop over lags
        s = M + 2 * sum((M - lag) * c**lag for lag in range(1, M))
        rms.append(math.sqrt(s) / M)
    assert [r[3] for r in rows] == pytest.approx(rms, rel=1e-9)
    assert [r[4] for r in rows] == pytest.approx([1.0] * len(Ms), abs=1e-12)
    assert ev["slope_exact"].value == pytest.approx(np.polyfit(np.log(Ms), np.log(rms), 1)[0])
    B, M = 2 * c / (1 - c) ** 2, Ms[-1]
    assert ev["exact_limit_gap"].value == pytest.approx(B * (1 - c**M) / M, rel=1e-6)
    assert ev["slope_mc_vs_exact"].tol.kind == "statistical"
    assert abs(ev["slope_mc"].value + 0.5) < 0.05  # the digest's −0.5 ± 0.05, as a sanity test
    fig = ev.figures[0]
    assert fig.name == "AT15_value_scaling" and fig.panels[0].logx and fig.panels[0].logy


def test_at16_blocks_outside_training_by_a_plain_loop(results):
    ev = results["AT16"].evidence
    for D, count, count64 in ev.table("AT16_outside_training").rows:
        expect = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if 512 * f < 2 * math.pi and math.fmod(D * f, 2 * math.pi) > 512 * f:
                expect += 1
        assert count == count64 == expect
        assert ev[f"outside_training_D{D}"].role == ("control" if D < 512 else "test")
    assert ev["unwrapped_blocks"].value == sum(
        512 * 10000.0 ** (-2 * b / 96) < 2 * math.pi for b in range(48)
    )
    assert ev["spectral_gap_rope"].value == pytest.approx(0.0, abs=1e-15)
    assert ev["route_mean_decay"].value == pytest.approx(0.0, abs=1e-14)
    assert ev["control_uniform_route_mean"].value < 0.2


def test_at17_exact_mean_directions(results):
    ev = results["AT17"].evidence
    f = 0.003
    for n in (512, 8192):
        drift = math.remainder(n * f, 2 * math.pi)  # arg(e^{if} sin f/f)^n = n·f mod 2π
        assert ev[f"positive_uniform_direction_n{n}"].reference == pytest.approx(drift, abs=1e-12)
        assert ev[f"uniform_direction_n{n}"].reference == 0.0
        assert ev[f"uniform_direction_n{n}"].role == "control"
    rows = {(r[0], r[1]): r for r in ev.table("AT17_mean_directions").rows}
    for n in (512, 8192):  # exact concentration |φ|^n = (sin f/f)^n for both laws
        for law in ("positive_uniform", "uniform"):
            assert rows[law, n][6] == pytest.approx((math.sin(f) / f) ** n, rel=1e-12)
    assert ev["ks_positive_slow_512_vs_8192"].value > 0.9  # the two laws barely overlap


def test_at17_relaxation_positive_mean_drifts():
    drift = {"law": "uniform_positive", "f": 0.01, "n": 100}
    c = math.sin(0.01) / 0.01
    assert zero_mean_violation(drift) == pytest.approx(c**100 * math.sin(1.0) - 1e-12, rel=1e-9)
    assert zero_mean_violation({"law": "uniform", "f": 0.01, "n": 100}) <= 0
    mixed = {"law": "uniform_positive", "f": 1.0, "n": 2000}  # |φ|^n ≈ 1e-150
    assert zero_mean_violation(mixed) <= 0


def test_at14_relaxation_monte_carlo_agrees_with_the_exact_moment():
    ex = {
        "d": 3,
        "p": 0.4,
        "weights": [0.7, -0.3, 0.5],
        "values": [[1.0, 0.0, 0.5], [0.2, -1.0, 0.3], [1.0, 1.0, 1.0]],
        "distances": [1, 3, 4],
        "seed": 7,
        "samples": 4000,
    }
    exact, bound = commuting_expectation(ex)
    a, v, n, c = np.array(ex["weights"]), np.array(ex["values"]), ex["distances"], 0.6
    direct = sum(
        a[j] * a[k] * c ** abs(n[j] - n[k]) * (v[j] @ v[k]) for j in range(3) for k in range(3)
    )
    assert exact == pytest.approx(direct, rel=1e-12)
    assert bound == pytest.approx(1.6 / 0.4 * np.sum(a**2 * np.sum(v**2, axis=1)), rel=1e-12)
    assert commuting_violation(ex) <= 0  # the bound survives non-commuting steps
    assert commuting_violation(ex) == commuting_violation(dict(ex))  # deterministic


def test_at14_relaxation_flags_an_excess_over_the_bound(monkeypatch):
    # Lazy Haar steps cannot beat the true bound (E M = c I), so no honest example breaks it;
    # the sign logic is checked against a deliberately halved bound instead.
    from posflow.proofs_checks.claims import _relaxations_at as relaxations_at

    ex = {
        "d": 2,
        "p": 1.0,
        "weights": [1.0, 0.5],
        "values": [[1.0, 0.0], [0.0, 2.0]],
        "distances": [2, 5],
        "seed": 0,
        "samples": 256,
    }
    exact, bound = commuting_expectation(ex)  # p = 1: E M = 0, both equal Σ a_j²‖v_j‖² = 2
    assert exact == pytest.approx(2.0) and bound == pytest.approx(2.0)
    assert commuting_violation(ex) <= 0
    real = relaxations_at.commuting_expectation
    monkeypatch.setattr(relaxations_at, "commuting_expectation", lambda e: (real(e)[0], 1.0))
    assert commuting_violation(ex) > 0
