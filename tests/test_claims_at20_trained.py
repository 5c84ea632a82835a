"""claims.at20_trained: the check AT20 on a hand-made store whose answer is known (HOLDS), on a
missing store (INCONCLUSIVE), and on the committed store (its verdicts follow from the judge)."""

import math

import pytest
from test_claims_at20_judge import write_store

from posflow.proofs_checks.claims import at20_judge as J
from posflow.proofs_checks.claims import at20_trained as AT
from posflow.proofs_checks.kit import HOLDS, INCONCLUSIVE, Context


def test_at20_on_a_hand_made_store(tmp_path, monkeypatch):
    monkeypatch.setattr(AT, "COMMITTED_STORE", tmp_path / "none")
    ev = AT.at20(Context())
    assert ev.status == INCONCLUSIVE and "posflow extrapolate" in ev.summary
    write_store(tmp_path / "s")
    monkeypatch.setattr(AT, "COMMITTED_STORE", tmp_path / "s")
    ev = AT.at20(Context())
    assert ev.status == HOLDS, ev.summary
    for key in ("nested_prefix_control", "pairing_control", "ratio_table_vs_raw_nats",
                "equal_step_budgets", "shared_windows"):  # fmt: skip
        assert ev[key].passed, key
    assert ev["sub_claim_alibi_flat"].test == "at_most"
    assert ev.measured["angle_mean_learned_qk"] == pytest.approx(0.0)
    assert ev.measured["cpu_hours"] == pytest.approx(21 * 1.5 / 3600)
    ratios = ev.table("ratios")
    rope = next(r for r in ratios.rows if r[0] == "RoPE")
    assert rope[2] == pytest.approx(math.exp(4.0)) and rope[3] == pytest.approx(500 / math.exp(4))
    assert rope[-1].startswith(f"{math.exp(2.0):.3f}")
    assert {r[0] for r in ev.table("sensitivity").rows} == set(J._SENS)
    fig = AT.extrapolation_figure(AT.load_seed_store(tmp_path / "s"))
    assert sum(s.kind == "band" for s in fig.panels[0].series) == 7


def test_at20_on_the_committed_store_follows_from_its_statistics():
    st = AT.load_seed_store(AT.COMMITTED_STORE)
    if st is None:
        pytest.skip("no committed store")
    ev = AT.at20(Context())
    assert ev["ratio_table_vs_raw_nats"].passed and ev["equal_step_budgets"].passed
    subs = {s["name"]: s for s in AT.judge(st)}
    for name, sub in subs.items():
        m = ev[f"sub_claim_{name}"]
        assert (m.test == "undecided") == (sub["status"] == INCONCLUSIVE)
        if m.judged:
            assert m.passed == (sub["status"] == HOLDS)
