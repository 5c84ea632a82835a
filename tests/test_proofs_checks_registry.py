"""The registry, the report and `posflow verify` (exit codes, JSON shape, report files)."""

import json
import re

import pytest

from posflow.proofs_checks.cli import main
from posflow.proofs_checks.kit import _frames as frames
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


# -- results as pandas frames --


def test_to_dataframe_has_one_row_per_claim_with_the_records_values(monkeypatch, tmp_path):
    import pandas as pd

    import posflow

    def boom(ctx):
        raise RuntimeError("kaboom")

    monkeypatch.setitem(registry._REGISTRY, "PB999",
                        registry.Claim("PB999", "[D]", "a check that crashes", (), boom))
    results = posflow.verify(["PB13", "PB999"], out=tmp_path)
    assert isinstance(results, registry.Results) and isinstance(results, list)
    df = results.to_dataframe()
    assert df.index.tolist() == ["PB13", "PB999"] and df.index.name == "id"
    assert df.columns.tolist() == list(frames._CLAIM_COLUMNS)
    for r in results:
        row, ms = df.loc[r.claim.id], (r.evidence.measurements if r.evidence else [])
        judged = [m for m in ms if m.judged]
        assert (row.status, row.statement, row.source) == (r.status, r.claim.statement,
                                                           r.claim.source)  # fmt: skip
        assert (row.expected, row.as_expected) == (r.expected, r.as_expected)
        assert (row.measurements, row.judged) == (len(ms), len(judged))
        assert row.failed == sum(m.passed is False for m in judged)
        assert row.seconds == round(r.seconds, 3) and row.timing == r.timing
        assert row.summary == (r.evidence.summary if r.evidence else "")
    assert df.loc["PB999", "error"].endswith("kaboom") and pd.isna(df.loc["PB13", "error"])
    # the JSON the report wrote gives the same frame, from a path or from the loaded records
    saved = tmp_path / "results.json"
    pd.testing.assert_frame_equal(frames.results_frame(saved), df)
    pd.testing.assert_frame_equal(frames.results_frame(json.loads(saved.read_text())), df)


def test_to_dataframe_of_measurements_matches_the_evidence(tmp_path):
    import math

    import pandas as pd

    import posflow

    results = posflow.verify(["PB2", "PB13"], out=tmp_path)
    df = results.to_dataframe(measurements=True)
    ms = [(r.claim.id, m) for r in results for m in r.evidence.measurements]
    assert len(df) == len(ms) > 2
    assert df.columns.tolist() == ["id", *frames._MEASUREMENT_COLUMNS]
    for (_, row), (cid, m) in zip(df.iterrows(), ms, strict=True):
        assert (row.id, row.key, row.label, row.test, row.role) == (cid, m.key, m.label, m.test,
                                                                    m.role)  # fmt: skip
        same = row.value == m.value or (isinstance(m.value, float) and math.isnan(m.value))
        assert same and (pd.isna(row.passed) if m.passed is None else row.passed == m.passed)
        if m.tol is not None:
            assert (row.tolerance, row.tolerance_kind, row.tolerance_reason) == (
                m.tol.value, m.tol.kind, m.tol.reason)
        else:
            assert pd.isna(row.tolerance_kind) and pd.isna(row.tolerance)
    pd.testing.assert_frame_equal(
        frames.results_frame(tmp_path / "results.json", measurements=True), df)


def test_results_frame_refuses_what_is_not_results_and_names_pandas(tmp_path, monkeypatch):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="is not JSON"):
        frames.results_frame(bad)
    with pytest.raises(ValueError, match="records of posflow verify --json"):
        frames.results_frame([{"id": "PB1"}])
    with pytest.raises(ValueError, match="Result objects or records"):
        frames.results_frame([3])
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)  # import pandas now fails
    with pytest.raises(ImportError, match=r"pip install pandas"):
        registry.Results().to_dataframe()


def test_a_claim_has_one_source():
    """A claim is a paper's, as the paper states it, or posflow's own — never both."""
    from posflow.proofs_checks.kit import all_claims, register

    assert all(re.fullmatch(r"\[(A|B|W|D|ours|convention)\]", c.source) for c in all_claims())
    for bad in ("[A, ours]", "[A, D]", "A", "[X]"):
        with pytest.raises(ValueError, match="source of ZZ1 must be one tag"):
            register("ZZ1", bad, "a statement")
    with pytest.raises(TypeError, match="basis"):
        register("ZZ1", "[A]", "a statement", basis=3)
