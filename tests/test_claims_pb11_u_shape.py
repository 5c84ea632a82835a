"""Claim PB11 (claims.pb11_u_shape) and the kit's U test: stored references from a dense rollout,
dips and sensitivity, and the residual relaxation."""

import numpy as np
import pytest
from claim_runs import results_fixture
from shape_refs import dense_last_row, softmax_kernel

from posflow.proofs_checks import kit
from posflow.proofs_checks.claims import pb11_u_shape as pb11

IDS = ["PB11"]


results = results_fixture(IDS)


def test_every_claim_holds(results):
    for cid in IDS:
        assert results[cid].status == "HOLDS", (cid, results[cid].evidence.summary)


def test_pb11_stored_references_from_a_dense_rollout():
    slopes32 = [2.0 ** (-8.0 * (h + 1) / 32) for h in range(32)]
    cases = {
        "bloom-7b1 slopes (32 heads), c = 0": (slopes32, [0.0] * 32),
        "bloom-7b1 slopes, c = 2": (slopes32, [2.0] * 32),
        "single head m = 0.05, c = 0": ([0.05], [0.0]),
    }
    for name, (m, c) in cases.items():
        p = dense_last_row(softmax_kernel(256, m, c), 0.1, 32)
        p0, k, plast = pb11.PB11_REFERENCE[name]
        assert p[0] == pytest.approx(p0, abs=1e-13)
        assert int(np.argmin(p)) == k and p[-1] == pytest.approx(plast, abs=1e-13)


def test_valley_rejects_minima_at_the_ends():
    n = 256
    j = np.arange(n, dtype=float)
    v = np.abs(j - 128) + 10  # a symmetric V: a U
    assert kit.is_u(v)
    near_start = np.abs(j - 3) + 10  # argmin at j = 3: within the 13-token margin
    k, depth, away = kit.valley(near_start)
    assert k == 3 and depth > 0.2 and not away and not kit.is_u(near_start)
    near_end = np.abs(j - 254) + 10
    assert not kit.is_u(near_end)
    shallow = 1.0 - 0.01 * np.exp(-((j - 128) ** 2) / 50)  # dip 1 %: below U_MIN_DEPTH
    assert kit.valley(shallow)[0] == 128 and not kit.is_u(shallow)


def test_pb11_reports_dips_and_sensitivity(results):
    ev = results["PB11"].evidence
    sens = ev.table("pb11_u_sensitivity")
    row = [r for r in sens.rows if r[0] == kit.U_MIN_DEPTH and r[1] == kit.U_END_MARGIN]
    assert len(row) == 1 and row[0][-1] == "HOLDS"
    assert ev["u_cells_bloom_c0"].value == row[0][2]
    val = ev.table("pb11_valleys")
    assert all(0 < r[4] < 255 for r in val.rows)
    # a dip at j = 1-5 or 254 never counts as a U
    assert not any(r[7] for r in val.rows if r[4] <= 5 or r[4] >= 250)
    assert ev["u_in_plane"].tol.kind == "parameter"
    fig = results["PB11"].evidence.figures[0]
    assert all(p.xlabel.startswith("Σλ") for p in fig.panels)


def test_pb11_relaxation_is_not_fooled_by_diagonal_content():
    # diagonal content alone (c = 2, λ ≡ 1) makes a U here: not a counterexample
    ex = {"n": 12, "slopes": [0.2], "content": [2.0], "T": 6}
    assert pb11.residual_violation(ex) < 0
    A = softmax_kernel(12, [0.2], [2.0])
    p = np.linalg.matrix_power(A, 6)[-1]
    assert kit.is_u(p)
    # the same kernel without content has no dip at all: a counterexample
    assert pb11.residual_violation(dict(ex, content=[0.0])) > 0
