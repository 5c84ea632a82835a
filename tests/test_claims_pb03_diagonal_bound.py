"""Claim PB3 (claims.pb03_diagonal_bound): measured numbers against independent references
(the digest's reproduced value, a direct Fraction computation)."""

import numpy as np
import pytest
from claim_runs import baseline

from posflow.simulate.rollout import power_decay


@pytest.fixture(scope="module")
def results():
    class _Runs(dict):
        def __missing__(self, cid):  # each claim's quick seed-0 run, once per test process
            return baseline(cid)

    return _Runs()


def test_pb3_reproduces_the_digest_example(results):
    ev = results["PB3"].evidence
    assert ev.status == "HOLDS"
    # uniform kernel n = 64, λ_t = 0.5/(t+1)², T = 100: min P_ii = 0.3675 (papers/A §6.3)
    exact = ev["uniform_n64_T100_min_Pii_exact"].value
    assert exact == pytest.approx(0.3675, abs=5e-5)
    d = 1 - 1 / np.arange(1, 65)
    direct = np.prod(1 - np.outer(power_decay(0.5, 2.0, 100), d), axis=0).min()
    assert exact == pytest.approx(direct, rel=1e-12)


def test_pb3_exact_sides_match_an_independent_fraction_computation():
    # theory.diagonal_bound's middle/lower against a direct Fraction product on one rollout
    from fractions import Fraction

    from posflow.proofs_checks.kit import random_layers
    from posflow.theory import rollout as th

    ks, lam = random_layers(np.random.default_rng(5), 6, 7)
    db = th.diagonal_bound([k.diagonal() for k in ks], lam, exact="rational")
    mid = low = Fraction(1)
    for k, lt in zip(ks, lam, strict=True):
        d = max(1 - Fraction(float(a)) for a in k.diagonal())
        mid *= 1 - Fraction(float(lt)) * d
        low *= 1 - Fraction(float(lt))
    assert db.middle == mid and db.lower == low
    assert db.min_diagonal >= db.middle >= db.lower


# -- issue 23: cited routines, negative controls of the judges, new mutants ------------------


def _killed(results, cid, name):
    from posflow.proofs_checks.kit import Context, get_claim
    from posflow.proofs_checks.kit import _mutants as mut

    (m,) = [m for m in mut.mutants_of(cid) if m.name == name]
    kill = mut.run_mutant(get_claim(cid), m, Context(), results[cid])
    return kill.status == "FAILS" and kill.killed


def test_pb3_comparisons_and_controls(results):
    ev = results["PB3"].evidence
    assert ev["total_mixing_vs_direct_loop"].value <= 1e-13
    assert ev["exact_sides_vs_fractions_mismatched"].value == 0
    assert ev["rollout_matrix_vs_dense_product"].value <= 1e-12
    assert ev["max_log_middle_plus_total_mixing"].value <= 0  # log(1 − x) ≤ −x
    for key in ("chain_judge_control_one_row_below", "chain_judge_control_best_row_bound",
                "mix_judge_control_one_case_wrong", "rel_judge_control_tiny_entry_doubled"):
        assert ev[key].role == "control" and ev[key].passed, key


def test_total_mixing_against_a_hand_sum():
    from posflow.simulate.kernels import uniform_kernel
    from posflow.simulate.rollout import total_mixing

    # uniform n = 4: δ = max_i (1 − 1/(i+1)) = 3/4; Σλ = 0.5 + 0.25
    assert total_mixing(uniform_kernel(4), [0.5, 0.25]) == pytest.approx(0.75 * 0.75, rel=1e-15)


@pytest.mark.parametrize("name", ["judge-best-row", "judge-self-comparison",
                                  "total-mixing-delta-min"])  # fmt: skip
def test_pb3_new_mutants_are_killed(results, name):
    assert _killed(results, "PB3", name)
