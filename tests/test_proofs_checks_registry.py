"""The registry, the report and `posflow verify` (exit codes, JSON shape, report files)."""

import json

import pytest

from posflow.proofs_checks.cli import main
from posflow.proofs_checks.kit import _registry as registry
from posflow.proofs_checks.kit._evidence import info
from posflow.proofs_checks.kit._registry import Context, Evidence


def test_ids_are_ordered_and_selectable():
    ids = [c.id for c in registry.all_claims()]
    pb = [i for i in ids if i.startswith("PB")]
    assert pb[:14] == [f"PB{k}" for k in range(1, 15)]
    assert [c.id for c in registry.select(["pb3", "PB1", "PB3"])] == ["PB3", "PB1"]
    with pytest.raises(ValueError, match="unknown claim ID"):
        registry.get_claim("PB0")


def test_evidence_needs_a_judged_measurement():
    with pytest.raises(ValueError, match="judged"):
        Evidence([info("n", 3)])


def test_crash_becomes_error_and_exit_1(monkeypatch, capsys):
    def boom(ctx):
        raise RuntimeError("kaboom")

    claim = registry.Claim("PB999", "[test]", "a check that crashes", (), boom)
    monkeypatch.setitem(registry._REGISTRY, "PB999", claim)
    r = registry.run_claim(claim, Context())
    assert r.status == "ERROR" and "kaboom" in r.error
    assert main(["verify", "PB999", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out[0]["status"] == "ERROR"


def test_verify_json_shape_and_report(tmp_path, capsys):
    code = main(["verify", "PB2", "PB13", "--json", "--out", str(tmp_path)])
    assert code == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in records] == ["PB2", "PB13"]
    for r in records:
        assert {"id", "status", "statement", "measured", "figures"} <= set(r)
        assert r["status"] in ("HOLDS", "FAILS", "INCONCLUSIVE")
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["id"] for r in saved] == ["PB2", "PB13"]
    index = (tmp_path / "index.md").read_text()
    assert index.startswith("# posflow verification report") and "PB13" in index


def test_verify_table_output(capsys):
    assert main(["verify", "PB13"]) == 0
    out = capsys.readouterr().out
    assert "PB13" in out and "HOLDS" in out


def test_verify_report_opens_with_figures(tmp_path, capsys):
    assert main(["verify", "PB9", "--out", str(tmp_path)]) == 0
    index = (tmp_path / "index.md").read_text()
    assert index.index("## Figures") < index.index("## Verdicts")
    (png,) = (tmp_path / "figures").glob("PB9-*.png")  # drawn by the report from the spec
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"figures/{png.name}" in index
    assert (tmp_path / "index.html").read_text().count("data:image/png;base64,") == 1


def test_quick_and_full_are_exclusive(capsys):
    assert main(["verify", "--quick", "--full"]) == 2
    assert "not allowed" in capsys.readouterr().err
