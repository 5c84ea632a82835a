"""Claims PB1–PB2 (claims.pb01_02_diagonal_identity): the quick runs and the relaxation
``causal`` against hand-computed values."""

import numpy as np
import pytest
from claim_runs import baseline

from posflow.proofs_checks.claims import pb01_02_diagonal_identity as pb


def test_pb1_and_pb2_hold_to_rounding():
    ev1, ev2 = baseline("PB1").evidence, baseline("PB2").evidence
    assert ev1.status == "HOLDS" and ev2.status == "HOLDS"
    assert ev1["max_upper_entry"].value == 0.0  # causal kernels: exact zeros above the diagonal
    assert ev1["max_row_sum_error"].value <= 1e-12
    assert ev2["max_relative_error_vs_dense_product"].value <= 1e-12
    assert ev2["symbolic_identity_3x3_T3"].value is True


def test_causal_violation_by_hand():
    # a causal kernel keeps the identity: v = |error| − 1e-9 < 0
    n = 4
    cesaro = np.tril(np.ones((n, n))) / np.arange(1, n + 1)[:, None]
    ex = {"n": n, "A": cesaro.tolist(), "lambdas": [0.3, 0.7]}
    assert pb.causal_violation(ex) < 0
    # the swap of two tokens, λ ≡ 1 twice: P = A² = I, so P_ii = 1 while the formula gives
    # ∏(1 − 1·(1 − A_ii)) = 0 for the swapped tokens
    swap = {"n": 2, "A": [[0.0, 1.0], [1.0, 0.0]], "lambdas": [1.0, 1.0]}
    assert pb.causal_violation(swap) == pytest.approx(1 - pb.DIAG_TOL, abs=1e-15)
