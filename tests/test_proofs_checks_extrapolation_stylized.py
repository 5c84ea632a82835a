"""Claims AT12, AT13, AT19 (proofs_checks.extrapolation_stylized):
the measured numbers against independent references."""

import math

import pytest

from posflow.proofs_checks.registry import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT12", "AT13", "AT19"]}


def test_at13_alibi_supremum_by_the_closed_form(results):
    m = results["AT13"].evidence.measured
    mm, W, lam = m["m_W_lam"]
    closed = math.exp(2 * lam) / (math.exp(2 * lam) + math.exp(mm * W) - 1)
    assert m["sup_far_mass_L_infinity"] == pytest.approx(closed, rel=1e-12)
    for v in m["sup_far_mass_by_L"].values():
        assert v == pytest.approx(closed, abs=1e-9)


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
