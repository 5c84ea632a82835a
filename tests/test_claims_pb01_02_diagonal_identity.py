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


# -- issue 23: cited routines, negative controls of the judges, new mutants ------------------


def _killed(cid, name):
    from posflow.proofs_checks.kit import Context, get_claim
    from posflow.proofs_checks.kit import _mutants as mut

    (m,) = [m for m in mut.mutants_of(cid) if m.name == name]
    kill = mut.run_mutant(get_claim(cid), m, Context(), baseline(cid))
    return kill.status == "FAILS" and kill.killed


def test_pb1_pb2_compare_every_entry_and_control_their_judges():
    ev1, ev2 = baseline("PB1").evidence, baseline("PB2").evidence
    assert ev1["symbolic_P_entries_mismatched"].value == 0
    assert ev2["symbolic_P_entries_mismatched"].value == 0
    assert ev1["reversed_order_entries_differing"].value > 0  # the layers do not commute
    assert ev1["max_error_vs_dense_product"].value <= 1e-12
    for ev, keys in ((ev1, ["worst_judge_control_one_row_wrong",
                            "entries_judge_control_reversed_order",
                            "zero_judge_control_non_stochastic"]),
                     (ev2, ["zero_judge_control_wrong_formula",
                            "entries_judge_control_entry_moved_in_row",
                            "rel_judge_control_one_entry_wrong",
                            "rel_judge_control_tiny_entry_doubled"])):  # fmt: skip
        for key in keys:
            assert ev[key].role == "control" and ev[key].passed, key


def test_fraction_product_is_the_matrix_product_in_layer_order():
    from fractions import Fraction

    from posflow.proofs_checks.claims.pb01_02_diagonal_identity_refs import frac_product

    A0 = [[Fraction(1), Fraction(0)], [Fraction(1, 2), Fraction(1, 2)]]
    A1 = [[Fraction(1), Fraction(0)], [Fraction(1, 3), Fraction(2, 3)]]
    lams = [Fraction(1), Fraction(1)]
    P = np.array(frac_product([A0, A1], lams), dtype=object)
    assert (P == np.array(A1, dtype=object).dot(np.array(A0, dtype=object))).all()
    Q = np.array(frac_product([A0, A1], lams, order=-1), dtype=object)
    assert (Q == np.array(A0, dtype=object).dot(np.array(A1, dtype=object))).all()


@pytest.mark.parametrize(("cid", "name"), [
    ("PB1", "symbolic-P-reversed"), ("PB1", "judge-best-row"), ("PB1", "judge-self-comparison"),
    ("PB1", "entries-judge-diagonal-only"), ("PB2", "symbolic-P-reversed"),
    ("PB2", "entries-judge-diagonal-only"), ("PB2", "judge-absolute-error")])  # fmt: skip
def test_pb1_pb2_new_mutants_are_killed(cid, name):
    assert _killed(cid, name)
