"""``posflow verify``: provenance of every record, timing labels, --threads, --isolate, and bad
input (one line, exit 2) before any check runs."""

import datetime
import json
import platform
import re

import numba
import numpy as np
import pytest
from cli_usage import assert_usage_error, read_only_folder, run

from posflow.proofs_checks.kit import _registry as registry
from posflow.proofs_checks.kit import _report as report
from posflow.simulate import _threads


@pytest.fixture
def keep_threads(monkeypatch):
    for var in _threads._ENV_VARS:
        monkeypatch.setenv(var, "1")
    before = numba.get_num_threads()
    yield
    _threads.set_threads(max(before, 1))


@pytest.fixture
def no_checks(monkeypatch):
    """Fail the test if any check starts (bad input must be refused before)."""

    def refuse(claim, ctx):
        raise AssertionError(f"{claim.id} ran before the arguments were checked")

    monkeypatch.setattr(registry, "run_claim", refuse)


def test_json_records_carry_provenance_and_timing(capsys, keep_threads, monkeypatch):
    monkeypatch.setattr(registry, "_CHECKS_RUN", [0])  # as in a new process
    code, out, err = run(capsys, "verify", "PB13", "PB2", "--json", "--threads", "1", "--seed", "3")
    assert code == 0, err
    recs = json.loads(out)
    assert [r["id"] for r in recs] == ["PB13", "PB2"]
    prov = recs[0]["provenance"]
    assert recs[1]["provenance"] == prov
    assert prov["posflow"] == report._version("posflow")
    assert re.fullmatch(r"[0-9a-f]{40}", prov["git_commit"])  # the tests run from a checkout
    assert isinstance(prov["git_dirty"], bool)
    assert prov["seed"] == 3 and prov["size"] == "quick" and prov["threads"] == 1
    date = datetime.datetime.fromisoformat(prov["date"])
    assert date.utcoffset() == datetime.timedelta(0)
    assert abs(datetime.datetime.now(datetime.UTC) - date) < datetime.timedelta(hours=1)
    assert prov["platform"] == platform.platform() and prov["python"] == platform.python_version()
    assert prov["numpy"] == np.__version__ and prov["numba"] == numba.__version__
    assert prov["timing"] == "checks in sequence in one process"
    assert recs[0]["timing"].startswith("alone") and recs[1]["timing"].startswith("after 1 check")
    assert all(r["seconds"] > 0 for r in recs)
    assert numba.get_num_threads() == 1  # --threads was applied


def test_report_folder_records_provenance(capsys, tmp_path, keep_threads):
    code, _, err = run(capsys, "verify", "PB13", "--out", tmp_path / "rep", "--threads", "1")
    assert code == 0, err
    saved = json.loads((tmp_path / "rep" / "results.json").read_text())
    assert saved[0]["provenance"]["threads"] == 1 and saved[0]["timing"]
    index = (tmp_path / "rep" / "index.md").read_text()
    assert "## Provenance" in index and saved[0]["provenance"]["git_commit"] in index
    assert "| timing |" in index and report.TIMING_NOTE in index


def test_the_table_names_version_seed_and_threads(capsys, keep_threads):
    code, out, _ = run(capsys, "verify", "PB13", "--threads", "1", "--seed", "2")
    assert code == 0
    assert "seed 2" in out and "1 thread" in out and "posflow" in out


def test_isolate_measures_each_check_alone(capsys, keep_threads):
    code, out, err = run(capsys, "verify", "PB13", "--isolate", "--json", "--threads", "1")
    assert code == 0, err
    (rec,) = json.loads(out)
    assert rec["status"] == "HOLDS" and rec["timing"] == "alone (own process)"
    assert rec["provenance"]["timing"] == "each check alone in its own process"


@pytest.mark.parametrize("change", [False, True])
def test_a_change_of_code_during_the_run_is_reported(capsys, tmp_path, keep_threads, monkeypatch,
                                                     change):  # fmt: skip
    """A source file written while the checks run (here: by the check itself) is named on
    stderr and in the provenance of every record and of the report; the exit code stays the
    verdicts'. Without a change nothing is added."""
    import posflow.proofs_checks.kit as kit

    base = {"sources": {"/p/c.py": (1, 1)}, "libraries": {}}
    after = {"sources": {"/p/c.py": (1, 2)}, "libraries": {}} if change else base
    calls = []
    states = iter([base, after])
    monkeypatch.setattr(kit, "code_state", lambda: calls.append(1) or next(states))
    code, out, err = run(capsys, "verify", "PB13", "--json", "--threads", "1",
                         "--out", tmp_path / "rep")  # fmt: skip
    assert code == 0 and len(calls) == 2
    prov = json.loads(out)[0]["provenance"]
    index = (tmp_path / "rep" / "index.md").read_text()
    if change:
        assert prov["changed_during_run"] == ["posflow source files (c.py)"]
        assert "warning: posflow source files (c.py) changed while the checks ran" in err
        assert "- changed during the run: posflow source files (c.py): the verdicts" in index
    else:
        assert "changed_during_run" not in prov and "warning" not in err
        assert "changed during the run" not in index


def test_git_commit_is_absent_without_git(monkeypatch):
    monkeypatch.setenv("PATH", "")
    assert report.git_commit() == {}
    prov = report.provenance(seed=0, size="quick", threads=1)
    assert "git_commit" not in prov and prov["posflow"]


def test_git_commit_is_absent_when_the_package_is_not_tracked(monkeypatch):
    class Untracked:
        returncode, stdout, stderr = 1, "", "error: pathspec did not match"

    monkeypatch.setattr(report.subprocess, "run", lambda *a, **k: Untracked())
    assert report.git_commit() == {}


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--seed", "-1"], ("--seed", "integer >= 0")),
        (["--seed", "1e3"], ("--seed", "invalid int")),
        (["--threads", "0"], ("--threads", "integer >= 1")),
        (["--threads", "two"], ("--threads",)),
        (["PB999"], ("ID", "unknown claim ID 'PB999'")),
        (["--quick", "--full"], ("--full", "not allowed")),
        (["--mutants", "--isolate"], ("--mutants", "--isolate")),
    ],
)
def test_bad_arguments_are_one_line(capsys, no_checks, argv, words):
    assert_usage_error(capsys, ["verify", *argv], *words)


def test_bad_output_folders_are_refused_before_any_check(capsys, tmp_path, no_checks):
    f = tmp_path / "file"
    f.write_text("")
    assert_usage_error(capsys, ["verify", "PB13", "--out", f], "--out", "is a file, not a folder")
    assert_usage_error(capsys, ["verify", "PB13", "--out", f / "sub"], "--out", "is a file")
    with read_only_folder(tmp_path) as ro:
        assert_usage_error(capsys, ["verify", "PB13", "--out", ro], "--out", "cannot write")
        assert_usage_error(capsys, ["verify", "PB13", "--out", ro / "r"], "--out", "cannot write")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "read-only"]


def test_mutants_prints_the_kill_table(capsys):
    code, out, _ = run(capsys, "verify", "PB1", "--mutants", "--json")
    rows = json.loads(out)
    assert code == 0 and {r["mutant"] for r in rows} >= {"reversed-layer-order"}
    for r in rows:
        assert r["claim"] == "PB1" and r["baseline"] == "HOLDS" and r["status"] == "FAILS"
        assert r["killed"] and r["newly_failed"]
    code, out, _ = run(capsys, "verify", "PB1", "--mutants")
    assert code == 0 and "mutants killed" in out and "reversed-layer-order" in out


def test_a_surviving_mutant_exits_1(capsys, monkeypatch):
    from posflow.proofs_checks.kit import _mutants as mutants

    harmless = mutants.Mutant(
        "identity", "posflow.simulate.rollout:influence", lambda f: f, "changes nothing"
    )
    monkeypatch.setitem(mutants._MUTANTS, "PB2", {"identity": harmless})
    code, out, _ = run(capsys, "verify", "PB2", "--mutants", "--json")
    (row,) = json.loads(out)
    assert code == 1 and row["killed"] is False and row["status"] == "HOLDS"


@pytest.mark.parametrize("with_out", [False, True], ids=["no-out", "out"])
def test_ctrl_c_is_one_line_exit_130_and_keeps_the_finished_claims(capsys, keep_threads,
                                                                    monkeypatch, tmp_path,
                                                                    with_out):  # fmt: skip
    from posflow.proofs_checks import kit

    real, done = kit.run_claim, []

    def interrupted_after_one(claim, ctx):
        if done:
            raise KeyboardInterrupt
        done.append(claim.id)
        return real(claim, ctx)

    monkeypatch.setattr(kit, "run_claim", interrupted_after_one)
    out = tmp_path / "rep"
    argv = ["verify", "PB13", "PB2", "--threads", "1"] + (["--out", out] if with_out else [])
    code, stdout, err = run(capsys, *argv)
    assert code == 130 and stdout == ""
    # stderr is not a terminal here: one plain progress line per finished claim, then the end
    progress = [ln for ln in err.splitlines() if re.match(r"posflow verify: \d+/2 ", ln)]
    assert progress == [ln for ln in err.splitlines() if ln.startswith("posflow verify: 1/2 PB13")]
    lines = [ln for ln in err.splitlines() if ln not in progress]
    assert lines[-1] == "posflow verify: interrupted" and "Traceback" not in err
    if not with_out:
        assert len(lines) == 1 and not out.exists()
        return
    assert len(lines) == 2 and "partial report (1 of 2 claims)" in lines[0]
    recs = json.loads((out / "results.json").read_text())
    assert [r["id"] for r in recs] == done == ["PB13"]
    assert recs[0]["provenance"]["interrupted"] == "after 1 of 2 claims"


def test_sigint_to_a_running_verify_exits_130_in_one_line(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    script = ("import sys\nfrom posflow.proofs_checks.cli import main\nprint('ready', flush=True)\n"
              "sys.exit(main(['verify', '--threads', '1', '--out', 'rep']))\n")  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                            env=dict(os.environ, COLUMNS="200"))  # fmt: skip
    assert proc.stdout.readline() == "ready\n"  # inside main from here on
    time.sleep(3)  # into the checks (all of them take far longer)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    assert err.strip().splitlines()[-1] == "posflow verify: interrupted", err
    assert "Traceback" not in err
