"""Claim AT15 (proofs_checks.claims.at15_value_scaling): the measured numbers against
independent references."""

import math

import numpy as np
import pytest
from claim_runs import holds_with_reasoned_tolerances, results_fixture

IDS = ["AT15"]


results = results_fixture(IDS)


@pytest.mark.parametrize("cid", IDS)
def test_claim_holds_with_reasoned_tolerances(results, cid):
    holds_with_reasoned_tolerances(results[cid])


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


# -- issue 23: closed forms, negative controls, mutants ---------------------------------------


def test_at15_closed_forms_and_controls(results):
    ev = results["AT15"].evidence
    for key in ("exact_vs_closed_form", "c_vs_sin_a_over_a"):
        assert ev[key].judged and ev[key].passed and ev[key].value <= 1e-11, key
    for key in ("formula_judge_control_extra_c", "formula_judge_control_shifted",
                "mc_judge_control_biased"):  # fmt: skip
        assert ev[key].role == "control" and ev[key].passed, key


def test_at15_closed_form_by_a_loop():
    import math

    from posflow.proofs_checks.claims.at15_value_scaling import _closed

    c, M = math.sin(1.0), 37
    loop = sum(c ** abs(j - k) for j in range(M) for k in range(M)) / M**2
    assert _closed(c, M) == pytest.approx(loop, rel=1e-13)


@pytest.mark.parametrize("name", ["mc-judge-doubled-z", "sinc-without-pi"])
def test_at15_new_mutants_are_killed(results, name):
    from posflow.proofs_checks.kit import Context, get_claim, mutants_of
    from posflow.proofs_checks.kit._mutants import run_mutant

    (m,) = [m for m in mutants_of("AT15") if m.name == name]
    kill = run_mutant(get_claim("AT15"), m, Context(), results["AT15"])
    assert kill.killed, (name, kill.status, kill.error)
