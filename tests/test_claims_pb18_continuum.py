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
