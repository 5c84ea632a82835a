"""``posflow counterexample``: list, search, replay and export from the command line; every bad
input (including a replay record too large to re-check) is one line and exit code 2."""

import json
import subprocess
import sys
import textwrap

import pytest
from cli_usage import assert_usage_error, read_only_folder, run

from posflow.proofs_checks.cli import counterexample as cx_cli
from posflow.proofs_checks.kit._counterexamples import replay, save_record, search
from posflow.proofs_checks.kit._registry import all_claims
from posflow.simulate import _validate


@pytest.fixture(scope="module")
def found():
    """The seed-0 searches the CLI tests compare with (a few seconds)."""
    return {
        cid: search(cid, name, seed=0, max_examples=200)
        for cid, name in (("PB8", "nonnegative_slope"), ("PB2", "causal"), ("PB11", "residual"))
    }


def test_cli_list(capsys):
    code, out, err = run(capsys, "counterexample", "pb8", "--list")
    assert code == 0 and err == ""
    assert "nonnegative_slope" in out and "m_h ≥ 0" in out
    code, out, _ = run(capsys, "counterexample", "PB6", "--list", "--json")
    rec = json.loads(out)
    assert rec["id"] == "PB6" and rec["relaxations"][0]["name"] == "reachability"
    assert "reachability" in rec["relaxations"][0]["drops"]


def test_cli_relax_json_shape(capsys, found):
    code, out, err = run(capsys, "counterexample", "PB8", "--relax", "nonnegative_slope", "--json")
    assert code == 0 and err == ""
    rec = json.loads(out)
    assert {"id", "relaxed", "found", "example"} <= set(rec)
    assert rec["id"] == "PB8" and rec["relaxed"] == "nonnegative_slope" and rec["found"] is True
    assert rec["example"] == found["PB8"].example
    assert rec["violation"] == pytest.approx(found["PB8"].violation, rel=0, abs=0)


def test_cli_relax_human_out_replay_export(capsys, tmp_path, found):
    rec_file, test_file = tmp_path / "r.json", tmp_path / "test_x.py"
    code, out, _ = run(
        capsys,
        "counterexample",
        "PB11",
        "--relax",
        "residual",
        "--out",
        str(rec_file),
        "--export",
        str(test_file),
    )
    assert code == 0
    assert "counterexample after" in out and "violation" in out and "no U" in out
    assert json.loads(rec_file.read_text())["example"] == found["PB11"].example
    assert "replay(RECORD)" in test_file.read_text()
    code, out, _ = run(capsys, "counterexample", "PB11", "--replay", str(rec_file))
    assert code == 0 and "still violates" in out
    code, out, _ = run(capsys, "counterexample", "PB11", "--replay", str(rec_file), "--json")
    assert json.loads(out)["violates"] is True


def test_cli_reports_when_nothing_is_found(capsys):
    code, out, _ = run(
        capsys,
        "counterexample",
        "PB8",
        "--relax",
        "nonnegative_slope",
        "--max-examples",
        "1",
        "--seed",
        "3",
        "--json",
    )
    rec = json.loads(out)
    assert code == 0
    if not rec["found"]:  # one draw may or may not break the claim; never an invented example
        assert rec["example"] is None
    else:
        assert replay(rec) > 0


@pytest.mark.parametrize(
    "argv, match",
    [
        (["counterexample", "PB999", "--list"], "unknown claim ID"),
        (["counterexample", "PB8", "--relax", "nope"], "no relaxation 'nope'"),
        (["counterexample", "PB8"], "give --list"),
        (["counterexample", "PB8", "--list", "--relax", "causal"], "not allowed with"),
        (["counterexample", "PB8", "--replay", "/nonexistent.json"], "no such file"),
        (
            ["counterexample", "PB8", "--relax", "nonnegative_slope", "--max-examples", "0"],
            "max_examples",
        ),
        (["counterexample", "PB8", "--list", "--seed", "x"], "invalid int"),
        (["counterexample", "PB8", "--list", "--out", "x.json"], "--out"),
    ],
)
def test_cli_bad_arguments_one_line_exit_2(capsys, argv, match):
    code, _out, err = run(capsys, *argv)
    assert code == 2
    assert match in err and err.count("\n") == 1


def test_cli_replay_of_another_claims_record(capsys, tmp_path, found):
    f = save_record(found["PB2"], tmp_path / "pb2.json")
    code, _, err = run(capsys, "counterexample", "PB8", "--replay", str(f))
    assert code == 2 and "not PB8" in err


# ------------------------------------------------------------------------------------------
# seeds, output paths


def test_a_negative_seed_is_one_line(capsys):
    argv = ["counterexample", "PB8", "--relax", "nonnegative_slope", "--seed", "-1"]
    assert_usage_error(capsys, argv, "--seed", "integer >= 0")


def test_export_into_a_folder(capsys, tmp_path, found):
    """``--export dir/`` writes test_cx_<id>_<relaxation>.py into the folder (made if needed)."""
    rec = save_record(found["PB8"], tmp_path / "r.json")
    target = tmp_path / "regress"
    argv = ["counterexample", "PB8", "--replay", rec, "--export", f"{target}/"]
    code, _, err = run(capsys, *argv)
    assert code == 0, err
    assert [p.name for p in target.iterdir()] == ["test_cx_pb8_nonnegative_slope.py"]
    code, _, err = run(capsys, *argv[:-1], target)  # an existing folder, without the slash
    assert code == 0, err
    assert len(list(target.iterdir())) == 1


def test_bad_output_paths_are_refused_before_searching(capsys, tmp_path, monkeypatch):
    def no_search(*a, **k):
        raise AssertionError("searched before checking the output paths")

    monkeypatch.setattr("posflow.proofs_checks.kit.search", no_search)
    base = ["counterexample", "PB8", "--relax", "nonnegative_slope"]
    assert_usage_error(capsys, [*base, "--out", tmp_path], "--out", "is a folder")
    assert_usage_error(capsys, [*base, "--export", tmp_path / "t.txt"], "--export", ".py")
    f = tmp_path / "file"
    f.write_text("")
    assert_usage_error(capsys, [*base, "--export", f"{f}/"], "--export", "is a file")
    assert_usage_error(capsys, [*base, "--out", f / "r.json"], "--out", "not a folder")
    with read_only_folder(tmp_path) as ro:
        assert_usage_error(capsys, [*base, "--out", ro / "r.json"], "--out", "cannot write")
        assert_usage_error(capsys, [*base, "--export", f"{ro}/new/"], "--export", "cannot write")
        assert_usage_error(capsys, [*base, "--export", ro / "t.py"], "--export", "cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "read-only"]


def test_out_with_replay_is_refused(capsys, tmp_path, found):
    rec = save_record(found["PB8"], tmp_path / "r.json")
    argv = ["counterexample", "PB8", "--replay", rec, "--out", tmp_path / "o.json"]
    assert_usage_error(capsys, argv, "--out", "--replay")


# ------------------------------------------------------------------------------------------
# replay records come from files: junk and sizes are refused before anything is built


def record(tmp_path, example, cid="PB8", relaxed="nonnegative_slope"):
    f = tmp_path / "rec.json"
    f.write_text(json.dumps({"id": cid, "relaxed": relaxed, "found": True, "example": example}))
    return f


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\xff", ("--replay", "not UTF-8")),
        (b'"a string"', ("--replay", "JSON object")),
        (b"[1, 2]", ("--replay", "JSON object")),
        (b'{"id": "PB8", "example": {"n": NaN}}', ("--replay", "NaN")),
        (b"{" * 10 + b"[" * 100_000, ("--replay",)),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, ("--replay", "nested too deeply")),
        (b'{"id": "PB8", "relaxed": "nonnegative_slope", "found": false, "example": null}',
         ("--replay", "found is false")),
        (b'{"id": "PB8", "relaxed": "nonnegative_slope", "example": {"n": 3}}',
         ("--replay", "slopes")),
        (b"{}", ("--replay", "rec.json", "not a search record", "'id', 'relaxed', 'example'")),
        (b'{"id": "PB8"}', ("--replay", "not a search record", "'relaxed', 'example'")),
        (b'{"id": "PB8", "relaxed": "nonneg', ("--replay", "rec.json", "cut short",
                                               "inside a string", "truncated")),
        (b'{"id": "PB8", "rel\n', ("--replay", "rec.json", "cut short", "inside a string")),
        (b'{"id": "PB8", "example": {"n": [1, 2', ("--replay", "cut short", "inside a list",
                                                   "missing ']}}'")),
        (b'{"id": "PB8" "x": 1}', ("--replay", "rec.json", "not JSON", "line 1, column 14")),
    ],
)  # fmt: skip
def test_bad_replay_files_are_one_line(capsys, tmp_path, content, words):
    f = tmp_path / "rec.json"
    f.write_bytes(content)
    assert_usage_error(capsys, ["counterexample", "PB8", "--replay", f], *words)


@pytest.mark.parametrize(
    ("cid", "relaxed", "example", "words"),
    [
        ("PB8", "nonnegative_slope", {"n": 10**9, "slopes": [-1.0], "content": [0.0]},
         ("n = 1000000000", "GiB")),
        ("PB6", "reachability",
         {"n": 4, "self_rows": [1], "slope": 0.5, "content": 0.0, "lam": 0.5, "T": 10**12},
         ("T = 1000000000000",)),
        ("PB11", "residual", {"n": 10**9, "slopes": [0.5], "content": [0.0], "T": 2},
         ("n = 1000000000",)),
        ("PB2", "causal", {"n": 3000, "A": [[1.0]], "lambdas": [0.5] * 10},
         ("n = 3000", "operations")),
        ("AT14", "commuting",
         {"d": 4, "p": 0.5, "weights": [1.0], "values": [[1.0, 0, 0, 0]],
          "distances": [10**9], "seed": 0, "samples": 10**4}, ("samples = 10000",)),
    ],
)  # fmt: skip
def test_replays_too_large_for_memory_are_refused(capsys, tmp_path, monkeypatch, cid, relaxed,
                                                 example, words):  # fmt: skip
    monkeypatch.setattr(_validate, "available_memory", lambda: 8 * 2**30)
    f = record(tmp_path, example, cid, relaxed)
    assert_usage_error(capsys, ["counterexample", cid, "--replay", f], "--replay", *words)


def test_n_1e9_replay_is_refused_without_allocating(tmp_path):
    """Under a 1.5 GiB address-space limit (far below the 8 GB one ALiBi table of n = 1e9
    needs) the replay is refused by the size check, not by a MemoryError or the kernel."""
    f = record(tmp_path, {"n": 10**9, "slopes": [-1.0], "content": [0.0]})
    code = textwrap.dedent(f"""
        import resource, sys
        from posflow.proofs_checks.cli import main
        limit = 1536 * 2**20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        sys.exit(main(["counterexample", "PB8", "--replay", {str(f)!r}]))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False,
                       cwd=tmp_path, timeout=300)  # fmt: skip
    assert r.returncode == 2, r.stderr
    assert r.stderr.count("\n") == 1 and "n = 1000000000" in r.stderr, r.stderr
    assert "MemoryError" not in r.stderr and "Traceback" not in r.stderr


def test_every_relaxation_has_a_replay_cost():
    """A new relaxation must state its replay cost, or replays of it are bounded crudely."""
    from posflow.proofs_checks.kit import _registry as registry

    registry._load()
    pairs = {(cid, name) for cid, rels in registry._PENDING_RELAXATIONS.items() for name in rels}
    pairs |= {(c.id, name) for c in all_claims() for name in c.relaxations}
    assert pairs <= set(cx_cli.REPLAY_COSTS), pairs - set(cx_cli.REPLAY_COSTS)


def test_replay_costs_admit_every_strategy_draw(capsys, tmp_path, found):
    """The bounds never refuse what a search can find: the recorded examples replay."""
    for res in found.values():
        f = save_record(res, tmp_path / f"{res.claim_id}.json")
        code, out, err = run(capsys, "counterexample", res.claim_id, "--replay", f, "--json")
        assert code == 0, err
        assert json.loads(out)["violation"] == pytest.approx(replay(res))


def test_a_search_writes_nothing_in_the_working_directory(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, _ = run(capsys, "counterexample", "PB2", "--relax", "causal", "--max-examples",
                       "20", "--json")  # fmt: skip
    assert code == 0 and json.loads(out)["found"]
    assert list(tmp_path.iterdir()) == []  # no .hypothesis/ (nor anything else)
    again = search("PB2", "causal", seed=0, max_examples=20)  # the library alike, and the same
    assert again.as_record()["example"] == json.loads(out)["example"]
    assert list(tmp_path.iterdir()) == []
