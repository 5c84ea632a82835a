"""Claims AT1–AT19 of [B]: every check runs (quick) with its measured numbers, those numbers agree
with independent references (plain loops, closed forms written out here), the AT relaxations
break exactly where they should, and the figures are written as PNGs."""

import json
import math

import numpy as np
import pytest

from posflow.proofs_checks import counterexamples
from posflow.proofs_checks.extrapolation_common import (
    loglog_slope,
    mean_se,
    phase_paths,
    z_limit,
)
from posflow.proofs_checks.registry import STATUSES, Context, get_claim, run_claim
from posflow.proofs_checks.relaxations_at import (
    bounded_logits_violation,
    commuting_expectation,
    commuting_violation,
    spectral_gap_violation,
    zero_mean_violation,
)
from posflow.simulate.orthogonal import SO2BlockLaw

IDS = [f"AT{k}" for k in range(1, 20)]
KEYS = {
    "AT1": ("mc_cos_by_L", "exact_cos_by_L", "max_abs_z", "z_limit"),
    "AT2": ("laws", "z_limit"),
    "AT3": ("cases", "z_limit"),
    "AT4": ("sympy_d3", "betas"),
    "AT5": ("window_theory", "ks_at_distance_W", "ks_random_far_distance"),
    "AT6": ("blocks_mixed_below_0.1_exact", "per_block", "W_0_W_1_W_2"),
    "AT7": ("kappa_over_d", "dims"),
    "AT8": ("cases",),
    "AT9": ("by_M", "scaled_spread"),
    "AT10": ("bound_values", "numeric_minimisation", "lowest_found_minus_bound"),
    "AT11": ("max_ratio", "attained_ratio"),
    "AT12": ("schemes", "worst_case_degradation_length_K_e^{2λ}"),
    "AT13": ("sup_far_mass_by_L", "shared_prefix_far_mass_by_L", "stylized_alibi_far_mass_by_L"),
    "AT14": ("cases",),
    "AT15": ("slope_with_rotation", "slope_without_rotation", "slope_exact"),
    "AT16": ("blocks_outside_trained_phases_by_distance", "gamma_rope"),
    "AT17": ("ks_p_values", "circular_means_slow_block"),
    "AT18": ("max_abs_error",),
    "AT19": (
        "far_mass_per_scheme_per_L",
        "far_residual_ratio_qkv_over_qk_at_Lmax",
        "output_error_ratio_qkv_over_qk_at_Lmax",
    ),
}
FIGURES = {"AT1", "AT6", "AT13", "AT15", "AT19"}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    ctx = Context(size="quick", out=out, seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in IDS}


@pytest.mark.parametrize("cid", IDS)
def test_every_at_claim_runs_with_its_measured_numbers(results, cid):
    r = results[cid]
    assert r.error == "", r.error
    assert r.status in STATUSES
    for key in KEYS[cid]:
        assert key in r.evidence.measured, key
    json.dumps(r.evidence.measured, allow_nan=False)  # plain, finite JSON data
    assert r.evidence.summary


@pytest.mark.parametrize("cid", sorted(FIGURES))
def test_figures_are_pngs(results, cid):
    figs = results[cid].evidence.figures
    assert len(figs) == 1
    with open(figs[0], "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_no_figures_without_an_output_folder():
    r = get_claim("AT15").check(Context(size="quick"))
    assert r.figures == []


def test_at1_monte_carlo_matches_sinc_power(results):
    m = results["AT1"].evidence.measured
    n = m["samples_N"]
    for L, row in m["mc_cos_by_L"].items():
        for a, mc in zip(m["scales_a"], row, strict=True):
            # Var cos ≤ 1, so 5/√N is at least 5 standard errors
            assert mc == pytest.approx((math.sin(a) / a) ** int(L), abs=5 / math.sqrt(n))
            assert m["exact_cos_by_L"][L][m["scales_a"].index(a)] == pytest.approx(
                (math.sin(a) / a) ** int(L), rel=1e-12
            )


def test_at6_block_counts_by_a_plain_loop(results):
    m = results["AT6"].evidence.measured
    counts = {}
    for n in (512, 8192, 65536):
        c = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if n * math.log(math.sin(f) / f) < math.log(0.1):
                c += 1
        counts[str(n)] = c
    assert counts == {"512": 10, "8192": 17, "65536": 23}
    assert m["blocks_mixed_below_0.1_exact"] == counts
    assert m["blocks_mixed_below_0.1_float64"] == counts
    assert [round(w, 1) for w in m["W_0_W_1_W_2"]] == [26.7, 39.6, 58.6]
    assert results["AT6"].status == "HOLDS"


def test_at10_bound_values_by_the_direct_formula(results):
    m = results["AT10"].evidence.measured
    for M, b in zip(m["M"], m["bound_values"], strict=True):
        assert b == pytest.approx(M / (M + m["K"] * math.exp(2 * m["lam"])), rel=1e-13)
    for row in m["numeric_minimisation"]:
        direct = row["M"] / (row["M"] + row["K"] * math.exp(2 * row["lam"]))
        assert row["optimiser_min"] == pytest.approx(direct, abs=1e-9)
        assert row["random_search_min"] >= direct - 1e-12
    assert results["AT10"].status == "HOLDS"


def test_at13_alibi_supremum_by_the_closed_form(results):
    m = results["AT13"].evidence.measured
    mm, W, lam = m["m_W_lam"]
    closed = math.exp(2 * lam) / (math.exp(2 * lam) + math.exp(mm * W) - 1)
    assert m["sup_far_mass_L_infinity"] == pytest.approx(closed, rel=1e-12)
    for v in m["sup_far_mass_by_L"].values():
        assert v == pytest.approx(closed, abs=1e-9)


def test_at14_digest_moment_by_the_geometric_sum(results):
    case = next(iter(results["AT14"].evidence.measured["cases"].values()))
    c, M = math.sin(1.0), 200
    exact = (1 + c) / ((1 - c) * M) - 2 * c * (1 - c**M) / (M**2 * (1 - c) ** 2)
    assert case["exact"] == pytest.approx(exact, rel=1e-10)
    assert case["bound"] == pytest.approx((1 + c) / ((1 - c) * M), rel=1e-12)
    assert case["coherent"] == pytest.approx(1.0, rel=1e-12)
    assert abs(case["mc_mean"] - exact) <= 4 * case["mc_se"]


def test_at15_slopes_and_the_exact_curve(results):
    m = results["AT15"].evidence.measured
    assert m["slope_with_rotation"] == pytest.approx(-0.5, abs=0.05)
    assert m["slope_without_rotation"] == pytest.approx(0.0, abs=0.05)
    c = math.sin(1.0)
    rms = []
    for M in m["M"]:  # E‖·‖² = (1/M²) Σ_{j,k} c^{|j-k|}, summed by a plain loop over lags
        s = M + 2 * sum((M - lag) * c**lag for lag in range(1, M))
        rms.append(math.sqrt(s) / M)
    assert m["exact_with_rotation"] == pytest.approx(rms, rel=1e-9)
    assert m["slope_exact"] == pytest.approx(np.polyfit(np.log(m["M"]), np.log(rms), 1)[0])


def test_at16_blocks_outside_training_by_a_plain_loop(results):
    m = results["AT16"].evidence.measured
    for D in (1024, 8192):
        count = 0
        for b in range(48):
            f = 10000.0 ** (-2 * b / 96)
            if 512 * f < 2 * math.pi and math.fmod(D * f, 2 * math.pi) > 512 * f:
                count += 1
        assert m["blocks_outside_trained_phases_by_distance"][str(D)] == count


def test_at19_verdict_follows_the_stated_threshold(results):
    r = results["AT19"]
    m = r.evidence.measured
    for s in ("rope", "random_qk", "random_qkv"):
        far = m["far_mass_per_scheme_per_L"][s]
        assert far["65536"] > far["512"]
    alibi = m["far_mass_per_scheme_per_L"]["alibi"]
    assert max(alibi.values()) < 1e-3
    ratio = m["far_residual_ratio_qkv_over_qk_at_Lmax"]
    assert ratio < 1.0  # value rotation helps ...
    if ratio > m["much_smaller_threshold"]:  # ... but "≪" needs at most half
        assert r.status == "FAILS"
        assert "does not hold" in r.evidence.summary


def test_stylized_sweep_is_shared_by_at12_at13_at19(results):
    near = results["AT12"].evidence.measured["schemes"]["rope"]
    far = results["AT19"].evidence.measured["far_mass_per_scheme_per_L"]["rope"]
    assert len(near["L"]) == len(far)


# ---------------------------------------------------------------------------------------------
# relaxations


def test_at10_relaxation_breaks_only_outside_the_box():
    breaking = {"near_logits": [1.0], "far_logits": [0.0], "lam": 0.0}
    assert bounded_logits_violation(breaking) == pytest.approx(
        0.5 - 1 / (1 + math.e) - 1e-12, rel=1e-12
    )
    inside = {"near_logits": [0.5, -0.2], "far_logits": [0.1, -0.5, 0.3], "lam": 0.5}
    assert bounded_logits_violation(inside) <= 0
    corner = {"near_logits": [2.0, 2.0], "far_logits": [-2.0] * 5, "lam": 2.0}
    assert -2e-12 <= bounded_logits_violation(corner) <= 0


def test_at2_relaxation_deterministic_angles_do_not_decay():
    rope = {"law": "deterministic", "params": [0.3, 1.0], "L": 100, "gamma": 0.99}
    assert spectral_gap_violation(rope) == pytest.approx(1 - 0.99**100 - 1e-12, rel=1e-12)
    gap = {"law": "uniform", "params": [1.0, 2.0], "L": 10, "gamma": math.sin(1.0)}
    assert spectral_gap_violation(gap) <= 0
    too_fast = {"law": "uniform", "params": [1.0], "L": 10, "gamma": 0.5}
    assert spectral_gap_violation(too_fast) > 0


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
    from posflow.proofs_checks import relaxations_at

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


@pytest.mark.parametrize(
    ("cid", "name", "found"),
    [
        ("AT10", "bounded_logits", True),
        ("AT2", "spectral_gap", True),
        ("AT17", "zero_mean", True),
        ("AT14", "commuting", False),
    ],
)
def test_counterexample_searches(cid, name, found):
    res = counterexamples.search(cid, name, seed=0, max_examples=25)
    assert res.found is found
    if found:
        assert counterexamples.replay(res) > 0
        assert counterexamples.describe(res)


def test_relaxations_are_attached_to_their_claims():
    assert set(get_claim("AT10").relaxations) == {"bounded_logits"}
    assert set(get_claim("AT2").relaxations) == {"spectral_gap"}
    assert set(get_claim("AT17").relaxations) == {"zero_mean"}
    assert set(get_claim("AT14").relaxations) == {"commuting"}


def test_relaxations_reject_bad_examples():
    with pytest.raises(ValueError, match="near_logits"):
        bounded_logits_violation({"near_logits": [], "far_logits": [0.0], "lam": 1.0})
    with pytest.raises(ValueError, match="gamma"):
        spectral_gap_violation({"law": "deterministic", "params": [0.1], "L": 3})
    with pytest.raises(ValueError, match="law"):
        zero_mean_violation({"law": "cauchy", "f": 0.1, "n": 3})
    with pytest.raises(ValueError, match="distances"):
        commuting_violation(
            {
                "d": 2,
                "p": 0.5,
                "weights": [1.0, 1.0],
                "values": [[1.0, 0.0], [0.0, 1.0]],
                "distances": [3, 3],
                "seed": 0,
                "samples": 64,
            }
        )
    with pytest.raises(TypeError, match="example"):
        zero_mean_violation([0.1, 3])


# ---------------------------------------------------------------------------------------------
# helpers


def test_z_limit_is_the_bonferroni_level_of_four_standard_errors():
    from scipy.stats import norm

    assert z_limit(1) == 4.0
    for n in (10, 100, 1000):
        assert 2 * n * norm.sf(z_limit(n)) == pytest.approx(2 * norm.sf(4.0), rel=1e-9)
    assert z_limit(10) < z_limit(100) < z_limit(1000)
    with pytest.raises(ValueError, match="n_comparisons"):
        z_limit(0)


def test_mean_se_and_loglog_slope():
    m, se = mean_se(np.array([1.0, 2.0, 3.0, 4.0]))
    assert m == 2.5 and se == pytest.approx(np.std([1, 2, 3, 4], ddof=1) / 2)
    x = np.array([1.0, 10.0, 100.0, 1000.0])
    p, b, s = loglog_slope(x, 3 * x**-0.5)
    assert p == pytest.approx(-0.5) and math.exp(b) == pytest.approx(3) and s < 1e-12
    with pytest.raises(ValueError, match="x"):
        mean_se(np.array([1.0]))
    with pytest.raises(ValueError, match="3 points"):
        loglog_slope([1.0, 2.0], [1.0, 2.0])


def test_phase_paths_accumulate_the_law():
    law = SO2BlockLaw(2, "rope", scale=0.25)  # deterministic: Σθ = L·0.25
    paths = phase_paths(law, 3, [1, 4], np.random.default_rng(0))
    assert paths[4] == pytest.approx(np.full((3, 1), 1.0))
    with pytest.raises(ValueError, match="checkpoints"):
        phase_paths(law, 3, [0], np.random.default_rng(0))
