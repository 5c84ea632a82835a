"""Claim AT19 (proofs_checks.claims.at19_stylized): the measured numbers against independent
references, and the τ decision rule."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.claims import at19_stylized as S
from posflow.proofs_checks.kit import Context, get_claim, run_claim


@pytest.fixture(scope="module")
def results():
    ctx = Context(size="quick", seed=0)
    return {cid: run_claim(get_claim(cid), ctx) for cid in ["AT19"]}


def test_tau_decision_by_paired_z_scores():
    qk = [np.array([0.2, 0.21, 0.19, 0.2]), np.array([1.0, 1.01, 0.99, 1.0])]
    worse = [x + 0.1 for x in qk]
    assert S._tau_decision([10, 100], qk, worse, 0.5, 3.0)[3] == "fails"
    assert S._tau_decision([10, 100], worse, qk, 0.5, 3.0)[3] == "holds"


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
