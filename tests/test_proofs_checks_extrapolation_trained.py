"""proofs_checks.extrapolation_trained: claim AT20 judged from a run store (no torch needed)."""

import json

import pytest

from posflow.proofs_checks import extrapolation_trained as AT
from posflow.proofs_checks.registry import FAILS, HOLDS, INCONCLUSIVE, Context


def paper_rows():
    return [
        {"scheme": s, "train_len": AT.PAPER_TRAIN_LEN, "eval_len": L, "ppl": p}
        for s, d in AT.PAPER_B.items()
        for L, p in d.items()
    ]


def write_store(path, rows):
    path.mkdir(parents=True, exist_ok=True)
    (path / "meta.json").write_text("{}")
    for s in {r["scheme"] for r in rows}:
        mine = [r for r in rows if r["scheme"] == s]
        (path / f"{s}.json").write_text(json.dumps({"scheme": s, "rows": mine}))


def test_ratio_table_divides_by_the_training_length():
    r = AT.ratio_table(paper_rows())
    assert r["rope"][1] == 1.0
    assert abs(r["rope"][16] - 381.82 / 23.54) < 1e-12  # [B]'s 16.22 at 8K / 512
    assert abs(r["random_qkv"][128] - 38.54 / 24.18) < 1e-12  # [B]'s 1.59
    with pytest.raises(ValueError, match="training length"):
        AT.ratio_table([{"scheme": "rope", "train_len": 8, "eval_len": 16, "ppl": 2.0}])


def test_the_papers_own_numbers_satisfy_every_sub_claim():
    subs = AT.judge(paper_rows())
    assert [s["name"] for s in subs] == [
        "alibi_flat", "random_qkv_le_qk", "rotations_much_below_rope", "learned_near_train",
        "rotation_only_degrades",
    ]  # fmt: skip
    assert all(s["status"] == HOLDS for s in subs), subs
    assert subs[0]["numbers"]["factor"] == 128
    assert abs(subs[0]["numbers"]["alibi"] - 22.84 / 23.87) < 1e-12


def test_each_sub_claim_can_fail_and_missing_schemes_are_inconclusive():
    rows = paper_rows()
    for r in rows:
        if r["scheme"] == "alibi" and r["eval_len"] == 65536:
            r["ppl"] = 1.2 * 23.87  # ratio 1.2 > FLAT_TOL
        if r["scheme"] == "random_qkv" and r["eval_len"] == 65536:
            r["ppl"] = 8 * 24.18  # Q/K/V worse than Q/K (7.49)
    st = {s["name"]: s["status"] for s in AT.judge(rows)}
    assert st["alibi_flat"] == FAILS and st["random_qkv_le_qk"] == FAILS
    assert st["rotations_much_below_rope"] == HOLDS
    st = {s["name"]: s["status"] for s in AT.judge([r for r in rows if r["scheme"] != "rope"])}
    assert st["rotations_much_below_rope"] == INCONCLUSIVE and st["alibi_flat"] == FAILS


def test_at20_reads_the_store_and_plots(tmp_path, monkeypatch):
    monkeypatch.setattr(AT, "COMMITTED_STORE", tmp_path / "store")
    ev = AT.at20(Context(out=tmp_path / "out"))
    assert ev.status == INCONCLUSIVE and "posflow extrapolate" in ev.summary
    write_store(tmp_path / "store", paper_rows())
    ev = AT.at20(Context(out=tmp_path / "out"))
    assert ev.status == HOLDS, ev.summary
    assert ev.figures and (tmp_path / "out" / "figures" / "at20_extrapolation.png").is_file()
    assert len(ev.measured["sub_claims"]) == 5
    assert AT.read_store(tmp_path / "store") == sorted(
        paper_rows(), key=lambda r: (r["scheme"], r["eval_len"])
    )
    (tmp_path / "store" / "broken.json").write_text("[1]")
    with pytest.raises(ValueError, match=r"broken\.json"):
        AT.read_store(tmp_path / "store")


def test_plot_refuses_empty_rows(tmp_path):
    with pytest.raises(ValueError, match="no results"):
        AT.plot_extrapolation([], tmp_path / "x.png")
