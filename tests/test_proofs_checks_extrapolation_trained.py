"""proofs_checks.extrapolation_trained: claim AT20 judged from a run store (no torch needed)."""

import json
import math

import pytest

from posflow.proofs_checks import extrapolation_trained as AT
from posflow.proofs_checks.registry import FAILS, HOLDS, INCONCLUSIVE, Context


def paper_rows():
    return [
        {"scheme": s, "train_len": AT.PAPER_TRAIN_LEN, "eval_len": L, "ppl": p}
        for s, d in AT.PAPER_B.items()
        for L, p in d.items()
    ]


def write_store(path, rows, steps=None, nats=False):
    path.mkdir(parents=True, exist_ok=True)
    (path / "meta.json").write_text("{}")
    for s in {r["scheme"] for r in rows}:
        mine = [dict(r, nats=math.log(r["ppl"])) if nats else r for r in rows if r["scheme"] == s]
        blob = {"scheme": s, "rows": mine}
        if steps is not None:
            blob["train"] = {"steps": steps}
        (path / f"{s}.json").write_text(json.dumps(blob))


def test_ratio_table_divides_by_the_training_length():
    r = AT.ratio_table(paper_rows())
    assert r["rope"][1] == 1.0
    assert abs(r["rope"][16] - 381.82 / 23.54) < 1e-12  # [B]'s 16.22 at 8K / 512
    assert abs(r["random_qkv"][128] - 38.54 / 24.18) < 1e-12  # [B]'s 1.59
    with pytest.raises(ValueError, match="training length"):
        AT.ratio_table([{"scheme": "rope", "train_len": 8, "eval_len": 16, "ppl": 2.0}])


def test_the_papers_own_numbers_satisfy_every_rule_but_one_seed_cannot_decide():
    subs = AT.judge(paper_rows())
    assert [s["name"] for s in subs] == [
        "alibi_flat", "random_qkv_le_qk", "rotations_much_below_rope", "learned_near_train",
        "rotation_only_degrades",
    ]  # fmt: skip
    assert all(s["rule"] == HOLDS for s in subs), subs
    assert all(s["status"] == INCONCLUSIVE and "no record" in s["reason"] for s in subs)
    assert subs[0]["numbers"]["factor"] == 128
    assert abs(subs[0]["numbers"]["alibi"] - 22.84 / 23.87) < 1e-12
    # with equal steps and enough seeds the rule decides
    budget = {s: {"steps": 1000, "seeds": 3} for s in AT.PAPER_B}
    assert all(s["status"] == HOLDS for s in AT.judge(paper_rows(), budget))
    budget["rope"]["steps"] = 500
    st = {s["name"]: s for s in AT.judge(paper_rows(), budget)}
    assert st["alibi_flat"]["status"] == HOLDS
    assert st["rotations_much_below_rope"]["status"] == INCONCLUSIVE
    assert "unequal step budgets" in st["rotations_much_below_rope"]["reason"]


def test_each_rule_can_fail_and_missing_schemes_are_inconclusive():
    rows = paper_rows()
    for r in rows:
        if r["scheme"] == "alibi" and r["eval_len"] == 65536:
            r["ppl"] = 1.2 * 23.87  # ratio 1.2 > FLAT_TOL
        if r["scheme"] == "random_qkv" and r["eval_len"] == 65536:
            r["ppl"] = 8 * 24.18  # Q/K/V worse than Q/K (7.49)
    st = {s["name"]: s["rule"] for s in AT.judge(rows)}
    assert st["alibi_flat"] == FAILS and st["random_qkv_le_qk"] == FAILS
    assert st["rotations_much_below_rope"] == HOLDS
    assert {s["name"]: s["rule"] for s in AT.judge(rows, flat=1.25)}["alibi_flat"] == HOLDS
    st = {s["name"]: s["rule"] for s in AT.judge([r for r in rows if r["scheme"] != "rope"])}
    assert st["rotations_much_below_rope"] == INCONCLUSIVE and st["alibi_flat"] == FAILS


def test_at20_on_the_committed_store_is_inconclusive_with_the_reasons():
    ev = AT.at20(Context())
    assert ev.status == INCONCLUSIVE, ev.summary
    assert ev["stored_ppl_vs_exp_nats"].passed and ev["ratio_table_vs_exp_delta_nats"].passed
    assert ev.measured["steps_min"] == 1232 and ev.measured["steps_max"] == 4896
    assert ev.measured["seeds_per_scheme"] == 1
    for m in ev.undecided:
        assert "1 seed(s) per scheme" in m.note
        if m.key != "sub_claim_alibi_flat":  # one scheme: no budget to compare
            assert "unequal step budgets" in m.note
    # the sub-claim statistic recomputed from the stored perplexities
    rows = AT.read_store(AT.COMMITTED_STORE)
    ppl = {(r["scheme"], r["eval_len"]): r["ppl"] for r in rows}
    qkv = ppl["random_qkv", 4096] / ppl["random_qkv", 64]
    qk = ppl["random_qk", 4096] / ppl["random_qk", 64]
    assert ev["sub_claim_random_qkv_le_qk"].value == pytest.approx(qkv / qk, rel=1e-12)
    ratios = ev.table("ratios")
    rope = next(r for r in ratios.rows if r[0] == "RoPE")
    assert rope[3] == pytest.approx(AT.UNIGRAM_PPL / ppl["rope", 64], rel=1e-12)
    params = {r[0] for r in ev.table("tolerance_sensitivity").rows}
    assert params == {"FLAT_TOL", "QKV_SLACK", "MUCH_LESS", "NEAR_TOL"}


def test_at20_reads_a_store_and_plots(tmp_path, monkeypatch):
    monkeypatch.setattr(AT, "COMMITTED_STORE", tmp_path / "store")
    ev = AT.at20(Context())
    assert ev.status == INCONCLUSIVE and "posflow extrapolate" in ev.summary
    write_store(tmp_path / "store", paper_rows(), steps=1000, nats=True)
    ev = AT.at20(Context())
    assert ev.status == INCONCLUSIVE, ev.summary  # one seed: no interval
    assert ev["stored_ppl_vs_exp_nats"].passed
    assert len([m for m in ev.measurements if m.key.startswith("sub_claim_")]) == 5
    assert all("1 seed" in m.note for m in ev.undecided)
    assert AT.read_store(tmp_path / "store") == sorted(
        [dict(r, ppl=r["ppl"]) for r in paper_rows()], key=lambda r: (r["scheme"], r["eval_len"])
    )
    png = AT.plot_extrapolation(paper_rows(), tmp_path / "x.png")
    assert png.is_file()
    (tmp_path / "store" / "broken.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"broken\.json"):
        AT.read_store(tmp_path / "store")


def test_plot_refuses_empty_rows(tmp_path):
    with pytest.raises(ValueError, match="no results"):
        AT.plot_extrapolation([], tmp_path / "x.png")
