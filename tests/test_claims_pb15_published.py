"""Claim PB15 ([A], as published): the per-model judge on hand-made comparisons, the setting and
what a run outside it decides, the U statement, the dense reference, and the check end to end on
the stored studies (in [A]'s setting) with the live runs reported beside them."""

import numpy as np
import pytest

from posflow.proofs_checks.claims import pb15_published as P
from posflow.proofs_checks.claims import pb15_refs as R
from posflow.proofs_checks.kit import FAILS, HOLDS, INCONCLUSIVE, Evidence, Scope, scoped
from posflow.proofs_checks.kit._registry import Context, get_claim
from posflow.simulate.models.published import PAIRS, Published

N_POS = 40


def _u(depth=0.6):
    """A U-shaped profile over N_POS positions, dipping ``depth`` below its lower end."""
    x = np.linspace(-1, 1, N_POS)
    p = 1 - depth * (1 - x**2)
    return p / p.sum()


def _pub(diff: float, noise=1e-3, measured=None, G=8, seed=0):
    """A Published whose W1(x) − W1(rival) replicates sit at ``diff`` ± noise for every pair."""
    rng = np.random.default_rng(seed)
    w1, prof = {}, {}
    meas = _u() if measured is None else measured
    for x, r in PAIRS.items():
        w1[r] = np.full(G + 1, 0.5)
        w1[x] = 0.5 + diff + noise * np.concatenate([[0.0], rng.standard_normal(G)])
        prof[x] = np.tile(_u(), (G + 1, 1))
        prof[r] = np.tile(np.eye(N_POS)[0], (G + 1, 1))
    m = np.tile(meas, (G + 1, 1)) * (1 + 1e-3 * rng.standard_normal((G + 1, N_POS)))
    return Published(tuple(w1), np.arange(G), w1, prof, m / m.sum(1, keepdims=True))


SC_IN = Scope("m", "1M", "float32", "text", 256, "64 windows")
SC_OUT = Scope("m", "1M", "float32", "text", 64, "16 windows")


def test_registered_as_the_papers_claim():
    c = get_claim("PB15")
    assert c.check is P.pb15 and c.source == "[A]"
    assert get_claim("PB20").source == "[ours]"


def test_setting_names_what_differs():
    assert P.SETTING.differences(SC_IN) == []
    assert P.SETTING.differences(SC_OUT) == ["n = 64, not [A]'s 256"]
    toy = Scope("toy", "1", "f", "t", 256, "4 windows", steps="300")
    assert P.SETTING.differences(toy) == ["a model trained here, not a pretrained LM"]


@pytest.mark.parametrize(("diff", "want"), [(-0.2, HOLDS), (0.2, FAILS), (0.0, INCONCLUSIVE)])
def test_each_kernel_is_judged_by_its_jackknife_interval(diff, want):
    ms, _, status, level = P.judge_model("m", "M", _pub(diff), 4, SC_IN)
    assert set(status) == set(PAIRS) and all(s == want for s in status.values())
    assert level == pytest.approx(1 - 0.05 / 4)  # 3 kernels + the U statement, this model only
    assert Evidence(ms).status == want


def test_a_measured_profile_that_is_no_u_fails_where_the_prediction_is_one():
    flat = np.linspace(1, 2, N_POS)
    ms, _, status, _ = P.judge_model("m", "M", _pub(-0.2, measured=flat / flat.sum()), 4, SC_IN)
    assert all(s == FAILS for s in status.values())
    assert Evidence(ms)["m.u_measured_dip"].passed is False


def test_outside_the_setting_a_failing_model_is_reported_not_deciding():
    ms, _, status, _ = P.judge_model("m", "M", _pub(0.2), 4, SC_OUT)
    got, gaps = scoped(ms, SC_OUT, P.SETTING)
    assert gaps and all(s == FAILS for s in status.values())
    assert all(m.test == "info" for m in got)


def test_u_decision_follows_the_interval_of_the_interior_dip():
    G = 8
    rng = np.random.default_rng(1)
    deep = np.tile(_u(0.6), (G + 1, 1)) * (1 + 1e-3 * rng.standard_normal((G + 1, N_POS)))
    assert P.u_decision(deep, 0.99).decision == HOLDS
    shallow = np.tile(_u(0.02), (G + 1, 1))
    assert P.u_decision(shallow, 0.99).decision == FAILS
    # an interior dip of 0.15, but the deepest point next to an end: not [A]'s U
    edge = np.tile(np.r_[1.0, 0.2, np.full(N_POS - 3, 0.85), 1.0], (G + 1, 1))
    d = P.u_decision(edge, 0.99)
    assert d.decision == HOLDS and d.blocked


def test_dense_reference_equals_the_library_on_measured_like_data():
    from types import SimpleNamespace

    from posflow.simulate.models.published import published_comparison

    rng = np.random.default_rng(3)
    N, L, n, H = 5, 3, 10, 2
    A = np.tril(rng.random((N, L, n, n)) + 0.1)
    A /= A.sum(-1, keepdims=True)
    data = SimpleNamespace(attention=A, lambdas=rng.uniform(0.1, 0.9, (N, L)),
                           influence=rng.random((N, n)) + 0.01, content=rng.normal(size=(N, L, H)),
                           slopes=np.array([0.4, 0.0]), values=None, windows=(None, 4, None))
    pub = published_comparison(data)
    ref = R.dense_reference(data)
    for k, v in ref.items():
        assert pub.w1[k][0] == pytest.approx(v, abs=1e-13)


def test_pb15_on_the_stored_studies_alone(monkeypatch):
    """Without torch (no live model) the stored studies at n = 256 decide: HOLDS on both."""
    monkeypatch.setattr(P, "optional_torch", lambda: None)
    ev = P.pb15(Context())
    assert ev.status == HOLDS, ev.summary
    assert set(ev.scopes) == {"smollm2_study", "gemma3_study"}
    assert all(sc.n == 256 for sc in ev.scopes.values())
    assert "in [A]'s setting" in ev["smollm2_study.verdict"].value
    assert ev["smollm2_study.published_vs_study"].passed
    assert ev.absent == ("torch",)


def test_with_no_run_in_the_setting_the_claim_is_inconclusive(monkeypatch):
    from posflow.proofs_checks.kit import info

    monkeypatch.setattr(P, "STUDIES", {})
    part = ("m", "M", _pub(0.2), 4, SC_OUT, info("m.ref", 0.0))  # a failing model, n = 64
    monkeypatch.setattr(P, "_live", lambda ctx: iter([part]))
    ev = P.pb15(Context())
    assert ev.status == INCONCLUSIVE and "not run in [A]'s setting" in ev["in_setting"].note
    assert ev["m.verdict"].value.startswith("FAILS") and "outside [A]'s setting" in (
        ev["m.verdict"].value)
    monkeypatch.setattr(P, "_live", lambda ctx: iter(()))
    assert P.pb15(Context()).status == INCONCLUSIVE  # no model at all
