"""Claims AT1, AT2, AT3, AT4 (proofs_checks.extrapolation_mixing):
the measured numbers against independent references."""

import math

import numpy as np
import pytest
from scipy import stats

from posflow.proofs_checks.claims._relaxations_at import _describe_gap, spectral_gap_violation
from posflow.proofs_checks.claims.at01_04_mixing import FAMILY_LEVEL, family_reason
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim
from posflow.proofs_checks.kit._stats import z_limit


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx).evidence for cid in ["AT1", "AT2", "AT3", "AT4"]}


@pytest.mark.parametrize("cid", ["AT1", "AT2", "AT3", "AT4"])
def test_claims_hold_on_the_quick_run(results, cid):
    assert results[cid].status == "HOLDS", results[cid].summary


def test_at1_monte_carlo_matches_sinc_power(results):
    ev = results["AT1"]
    t = ev.table("decay")
    scales = [float(c.split("=")[1]) for c in t.columns[1:5]]
    n = ev["samples_N"].value
    for row in t.rows:
        L = int(row[0])
        exact, mc = row[1:5], row[5:9]
        for a, e, m in zip(scales, exact, mc, strict=True):
            assert e == pytest.approx((math.sin(a) / a) ** L, rel=1e-12)
            # Var cos ≤ 1, so 6/√N is at least 6 standard errors
            assert m == pytest.approx(e, abs=6 / math.sqrt(n))
    assert ev["max_z_cos"].tol.kind == "statistical"
    assert ev["max_z_cos"].tol.value == pytest.approx(z_limit(2 * len(t.rows) * 4))


def test_at2_gamma_is_the_largest_block_characteristic(results):
    ev = results["AT2"]
    rows = {r[0]: r for r in ev.table("laws").rows}
    so2 = next(v for k, v in rows.items() if k.startswith("SO(2)"))
    assert so2[1] == pytest.approx(math.sin(0.5) / 0.5, rel=1e-14)
    hh = next(v for k, v in rows.items() if k.startswith("Householder"))
    assert hh[1] == pytest.approx(1 - 1 / 4, rel=1e-14)
    assert ev["haar_spectral_gap"].value is True


def test_at3_chi2_limit_is_the_per_test_quantile(results):
    ev = results["AT3"]
    n_cmp = 4 + 64 + 1024 + 64 + 4
    for row in ev.table("cases").rows:
        d = int(row[0].split("(")[1].rstrip(")"))
        assert row[3] == pytest.approx(stats.chi2.isf(FAMILY_LEVEL / n_cmp, d * d), rel=1e-12)
        assert row[2] <= row[3]
    assert "family-wise" in ev["O(8)_chi2"].tol.reason


def test_at3_haar_mean_statistic_is_chi2_by_an_independent_draw():
    # N d ‖Ê M‖_F² over independent Haar means: its average over repeats is d² (χ²_{d²} mean)
    from posflow.simulate.orthogonal import haar

    rng = np.random.default_rng(7)
    d, N, R = 3, 200, 400
    T = [N * d * np.sum(haar(d, N, seed=rng).mean(axis=0) ** 2) for _ in range(R)]
    assert np.mean(T) == pytest.approx(d * d, abs=5 * math.sqrt(2 * d * d / R))


def test_at4_rows_match_the_closed_form(results):
    ev = results["AT4"]
    for b, factor, _z, _eig, defect, orth, is_orth in ev.table("betas").rows:
        assert factor == pytest.approx(1 - b / 6, rel=1e-15)
        assert defect == pytest.approx(b * abs(2 - b), abs=1e-12)
        assert orth is is_orth is (b in (0.0, 2.0))


def test_family_reason_names_samples_comparisons_and_level():
    text = family_reason(12, "N = 10 draws")
    assert "N = 10 draws" in text and "12" in text and f"{z_limit(12):.2f}" in text
    assert f"{FAMILY_LEVEL:.1e}" in text


def test_at2_relaxation_gamma_is_the_laws_own():
    rope = {"law": "deterministic", "params": [0.3, 1.0], "L": 100, "eps": 0.01}
    assert spectral_gap_violation(rope) == pytest.approx(1 - 0.01 - 1e-12, rel=1e-12)
    assert "no finite mixing window" in _describe_gap(rope)
    # with a gap: after W = ⌈ln(1/ε)/ln(1/γ)⌉ steps, γ^W ≤ ε, so no violation
    gap = {"law": "uniform", "params": [1.0, 2.0], "L": 10, "eps": 0.01}
    gamma = math.sin(1.0)
    W = math.ceil(math.log(100) / -math.log(gamma))
    assert spectral_gap_violation(gap) == pytest.approx(gamma**W - 0.01 - 1e-12, rel=1e-9)
    assert spectral_gap_violation(gap) <= 0
    # γ within rounding of 1 but a gap (a = 1e-9): the window is taken from ln γ itself
    tiny = {"law": "uniform", "params": [1e-9], "L": 10, "eps": 0.01}
    assert spectral_gap_violation(tiny) <= 0
    # a = 0 is a degenerate law without a gap: θ ≡ 0
    flat = {"law": "normal", "params": [0.0, 1.0], "L": 7, "eps": 0.25}
    assert spectral_gap_violation(flat) == pytest.approx(0.75 - 1e-12, rel=1e-12)
    with pytest.raises(ValueError, match="eps"):
        spectral_gap_violation({"law": "uniform", "params": [1.0], "L": 3})
