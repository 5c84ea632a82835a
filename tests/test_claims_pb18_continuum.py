"""Claim PB18 (claims.pb18_continuum): the judged numbers recomputed independently."""

import numpy as np
import pytest

from posflow.proofs_checks.claims.pb18_continuum import LAM, pb18
from posflow.proofs_checks.kit import Context
from posflow.simulate.compare import w1_normalised
from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import constant, influence
from posflow.theory import rollout as th


@pytest.fixture(scope="module")
def ev():
    return pb18(Context())


def test_pb18_holds_with_the_first_order_rate(ev):
    assert ev.status == "HOLDS"
    rows = ev.table("rate").rows
    T, ml, w, ratio, c = rows[-1]
    pT = influence(uniform_kernel(64), constant(LAM / T, T))
    assert w == pytest.approx(w1_normalised(pT, th.continuum_profile(64, LAM)), rel=1e-12)
    assert ratio == pytest.approx(w / ml) and ev["first_order_rate"].value == ratio
    assert c == pytest.approx(ev["first_order_constant_c"].value)
    assert ev["fitted_exponent"].value == pytest.approx(1.0, abs=0.01)
    assert [r[0] for r in ev.table("sensitivity").rows] == [0.001, 0.003, 0.01, 0.03, 0.1]


def test_pb18_figure_has_the_three_panels(ev):
    (fig,) = ev.figures
    assert [p.title.split(":")[0] for p in fig.panels][:2] == ["profiles", "rate"]
    np.testing.assert_allclose(sum(fig.panels[0].series[-1].y), 1.0, atol=1e-14)


# -- issue 23: cited routines, negative controls of the judges, new mutants ------------------


def test_pb18_comparisons_and_controls(ev):
    for key in ("rate_judge_control_5pct_off", "exponent_judge_control_sqrt_rate",
                "zero_judge_control_wrong_identity"):
        assert ev[key].role == "control" and ev[key].passed, key
    assert ev["continuum_profile_vs_poisson_gamma"].value <= 1e-14
    assert ev["correction_vs_richardson_differences"].value <= 1e-12


def test_pb18_poisson_gamma_reference_sums_to_one():
    from posflow.proofs_checks.claims import pb18_continuum as m

    p = m._poisson_gamma_profile(6, LAM)
    assert p.sum() == pytest.approx(1.0, abs=1e-14)
    assert p[-1] >= np.exp(-LAM)  # the atom at x = 1 sits on the last token


@pytest.mark.parametrize("name", ["rate-judge-10x-slack", "correction-1%-high"])
def test_pb18_new_mutants_are_killed(name):
    from posflow.proofs_checks.kit import Context, get_claim, run_claim
    from posflow.proofs_checks.kit import _mutants as mut

    claim = get_claim("PB18")
    (m,) = [m for m in mut.mutants_of("PB18") if m.name == name]
    kill = mut.run_mutant(claim, m, Context(), run_claim(claim, Context()))
    assert kill.status == "FAILS" and kill.killed
