"""Claims AT12, AT13, AT19 (proofs_checks.extrapolation_stylized):
the measured numbers against independent references."""

import math

import numpy as np
import pytest
from scipy import integrate

from posflow.proofs_checks.claims import at19_stylized as S
from posflow.proofs_checks.kit._registry import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT12", "AT13", "AT19"]}


def test_far_logit_mgf_by_quadrature():
    d, lam = 96, 8.0
    dens = lambda u: (1 - u * u) ** ((d - 3) / 2)  # noqa: E731
    num = integrate.quad(lambda u: math.exp(lam * u) * dens(u), -1, 1)[0]
    assert S.far_sum_mgf(lam, d) == pytest.approx(num / integrate.quad(dens, -1, 1)[0], rel=1e-9)


def test_near_mass_reference_is_a_probability_falling_like_one_over_m():
    a, b = S.near_mass_reference("rope", 8192), S.near_mass_reference("rope", 65536)
    assert 0 < b["near_mass"] < a["near_mass"] < 1 and b["planted"] < b["near_mass"]
    # for large M the prediction is ≈ K e^Δ / (M E e^s): the product with M settles
    assert b["near_mass"] * (65536 - 64) == pytest.approx(a["near_mass"] * (8192 - 64), rel=0.1)


def test_value_ratio_reference_against_a_dense_sum():
    L = 64 + 40
    M = L - 64
    f = 10_000.0 ** (-2 * np.arange(48) / 96)
    c = np.sin(f) / f
    n = np.arange(M)
    dense = np.mean([np.sum(c[b] ** np.abs(n[:, None] - n[None, :])) / M**2 for b in range(48)])
    assert S.value_ratio_reference(L) == pytest.approx(dense + S._cv2() / M, rel=1e-12)
    fast = np.zeros(48)
    fast[0] = 1.0
    assert S.value_ratio_reference(L, fast) < S.value_ratio_reference(L)


def test_crossing_interpolates_in_log_length():
    L, b = S._crossing([100, 10_000], [0.0, 1.0], 0.5)
    assert L == pytest.approx(1000.0) and b == (0, 1)
    assert math.isnan(S._crossing([1, 2], [0.1, 0.2], 0.5)[0])
    qk = [np.array([0.2, 0.21, 0.19, 0.2]), np.array([1.0, 1.01, 0.99, 1.0])]
    worse = [x + 0.1 for x in qk]
    assert S._tau_decision([10, 100], qk, worse, 0.5, 3.0)[3] == "fails"
    assert S._tau_decision([10, 100], worse, qk, 0.5, 3.0)[3] == "holds"


def test_at12_holds_with_every_scheme_judged(results):
    ev = results["AT12"].evidence
    assert ev.status == "HOLDS", ev.summary
    for s in ("rope", "random_qk", "learned"):
        m = ev[f"{s}_L8192_near_mass"]
        assert m.tol.kind == "statistical" and "Bonferroni" in m.tol.reason
        assert ev.measured[f"{s}_L512_near_mass"] > ev.measured[f"{s}_L8192_near_mass"]
    assert len(ev.table("near_signal").rows) == 18


def test_at13_alibi_supremum_by_the_closed_form(results):
    ev = results["AT13"].evidence
    assert ev.status == "HOLDS", ev.summary
    m, W, lam = 0.25, 16, 1.0
    closed = math.exp(2 * lam) / (math.exp(2 * lam) + math.exp(m * W) - 1)
    assert ev.measured["sup_far_mass_L_infinity"] == pytest.approx(closed, rel=1e-12)
    assert ev["sup_L512_vs_closed_form"].value == pytest.approx(closed, abs=1e-9)
    for L in (512, 2048, 8192):
        assert ev[f"stylized_alibi_L{L}_far_mass"].value < 1e-3


def test_at19_value_side_and_tau(results):
    ev = results["AT19"].evidence
    assert ev.status in ("HOLDS", "INCONCLUSIVE"), ev.summary
    assert ev.measured["qkv_far_mass_equals_qk"] == 0.0
    r = ev.measured["far_residual_ratio_at_Lmax"]
    assert 0.5 < r < 1.0  # value rotation helps, but slow blocks keep most of the residual
    assert ev.measured["output_error_ratio_floor"] > 1 / math.sqrt(2) - 0.05
    taus = [row[0] for row in ev.table("tau_sensitivity").rows]
    assert S.TAU in taus and len(taus) >= 3
    blocks = ev.table("value_blocks").rows
    assert all(row[2] < row[3] < row[4] for row in blocks)  # fast < all < slow


def test_stylized_sweep_is_shared_by_at12_and_at19():
    ctx = Context()
    a = S._sweep(ctx, "random_qk")
    assert S._sweep(ctx, "random_qk")[8192] is a[8192]
