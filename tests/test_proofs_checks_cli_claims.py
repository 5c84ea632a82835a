"""``posflow claims``: the catalog as a table, JSON and exactly CLAIMS.md."""

import json
from pathlib import Path

from cli_usage import assert_usage_error, run

from posflow.proofs_checks.cli import main
from posflow.proofs_checks.kit import _catalog as catalog
from posflow.proofs_checks.kit import _registry as registry

ROOT = Path(__file__).resolve().parents[1]


def test_markdown_is_the_committed_catalog(capsys):
    code, out, err = run(capsys, "claims", "--markdown")
    assert code == 0 and err == ""
    assert out == (ROOT / "CLAIMS.md").read_text(encoding="utf-8")


def test_json_records_follow_the_registry(capsys):
    code, out, _ = run(capsys, "claims", "PB", "--json")
    recs = json.loads(out)
    pb = [c for c in registry.all_claims() if c.id.startswith("PB")]
    assert code == 0 and [r["id"] for r in recs] == [c.id for c in pb]
    assert recs == catalog.records(pb)
    drops = {"name": "nonnegative_slope", "drops": "ALiBi slopes m_h ≥ 0"}
    assert recs[7]["id"] == "PB8" and recs[7]["relaxations"] == [drops]


def test_table_names_the_check(capsys):
    code, out, _ = run(capsys, "claims", "AT18")
    assert code == 0 and "AT18" in out and "at18" in out and "AT17" not in out


def test_unknown_id_and_clashing_formats_are_one_line(capsys):
    assert_usage_error(capsys, ["claims", "PB99"], "ID", "PB99")
    assert_usage_error(capsys, ["claims", "--json", "--markdown"], "--markdown")


def test_report_links_each_claim_to_its_catalog_entry(tmp_path, capsys):
    assert main(["verify", "PB1", "PB13", "--out", str(tmp_path / "r")]) == 0
    index = (tmp_path / "r" / "index.md").read_text(encoding="utf-8")
    for cid in ("PB1", "PB13"):  # the ID to its evidence, "catalog" to its CLAIMS.md entry
        assert f"[{cid}](#evidence-{cid.lower()}) ([catalog](CLAIMS.md#{cid.lower()}))" in index
    assert (tmp_path / "r" / "CLAIMS.md").read_text(encoding="utf-8") == catalog.to_markdown()
