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


def test_verify_report_shows_each_figure_with_its_claim(tmp_path, capsys):
    assert main(["verify", "PB9", "--out", str(tmp_path)]) == 0
    index = (tmp_path / "index.md").read_text()
    assert index.index("## Verdicts") < index.index("### PB9") < index.index("figures/PB9-")
    (png,) = (tmp_path / "figures").glob("PB9-*.png")  # drawn by the report from the spec
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"figures/{png.name}" in index
    assert (tmp_path / "index.html").read_text().count("data:image/png;base64,") == 1


def test_quick_and_full_are_exclusive(capsys):
    assert main(["verify", "--quick", "--full"]) == 2
    assert "not allowed" in capsys.readouterr().err


@pytest.fixture
def no_claim_runs(monkeypatch):
    """Make running any claim fail the test: bad arguments must be refused before."""

    def ran(claim, ctx):
        raise AssertionError(f"claim {claim.id} ran before the arguments were checked")

    monkeypatch.setattr(registry, "run_claim", ran)


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        # an empty list would have meant "every claim" (38 checks)
        (
            dict(ids=[]),
            ValueError,
            r"ids must name at least one claim; omit ids \(or pass None\) to check every claim",
        ),
        (dict(ids=()), ValueError, "ids must name at least one claim"),
        (dict(ids=[3]), TypeError, r"ids must be strings \(claim IDs such as 'PB3'\); got 3"),
        (dict(ids=["PB3", None]), TypeError, "ids must be strings"),
        (dict(ids=3), TypeError, "ids must be a sequence of claim IDs"),
        (dict(ids=["PB0"]), ValueError, "unknown claim ID"),
        (
            dict(ids=["PB13"], out="/proc/x"),
            ValueError,
            r"out '/proc/x': cannot write in '/proc'",
        ),
        (dict(ids=["PB13"], out=3), TypeError, "out must be a folder path"),
    ],
)
def test_posflow_verify_refuses_bad_arguments_before_running(no_claim_runs, kwargs, exc, match):
    import posflow

    with pytest.raises(exc, match=match):
        posflow.verify(**kwargs)


def test_posflow_verify_refuses_a_file_as_out(no_claim_runs, tmp_path):
    import posflow

    f = tmp_path / "a.txt"
    f.write_text("x", encoding="utf-8")
    with pytest.raises(ValueError, match=r"out '.*a.txt' is a file, not a folder"):
        posflow.verify(["PB13"], out=f)
    with pytest.raises(ValueError, match=r"out '.*a.txt.b': '.*a.txt' is a file, not a folder"):
        posflow.verify(["PB13"], out=f / "b")


def test_posflow_verify_writes_a_new_folder(tmp_path):
    import posflow

    out = tmp_path / "new" / "report"
    (r,) = posflow.verify(["PB13"], out=out)
    assert r.claim.id == "PB13" and r.status == "HOLDS"
    assert (out / "results.json").is_file() and (out / "index.md").is_file()
