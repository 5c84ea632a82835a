"""Resumable sweeps (simulate.sweep): specs, task keys, the store, and runs on Dask.

Reliability: a sweep killed with SIGKILL mid-run and rerun has every row exactly once; the
same sweep gives identical tables with 1 and 2 workers, and on NumPy and torch (to 1e-10).
"""

import hashlib
import importlib.util
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from posflow.simulate import sweep
from posflow.simulate.kernels import uniform_kernel
from posflow.simulate.rollout import power_decay

ROOT = Path(__file__).resolve().parents[1]
needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="dask.distributed is not installed"
)

SMALL = {
    "experiment": "dichotomy",
    "params": {"n": 40, "lam0": 0.6},
    "grid": {"kernel": ["uniform", "alibi"], "beta": [0.5, 1.0, 2.0], "T": [10, 200]},
}


def spec(**changes):
    return sweep.parse_spec(SMALL | changes)


# ------------------------------------------------------------------------------------------
# specs and keys


def test_grid_expands_in_order_with_defaults_filled_in():
    s = spec()
    tasks = s.tasks()
    assert [t[0] for t in tasks] == list(range(12))
    assert [(p["kernel"], p["beta"], p["T"]) for _, _, p in tasks[:3]] == [
        ("uniform", 0.5, 10),
        ("uniform", 0.5, 200),
        ("uniform", 1.0, 10),
    ]
    assert all(p["n"] == 40 and p["lam0"] == 0.6 and p["slope"] == 0.5 for _, _, p in tasks)
    assert len({k for _, k, _ in tasks}) == 12


def test_task_keys_hash_the_experiment_version_and_all_parameters():
    params = sweep.EXPERIMENTS["dichotomy"].defaults()
    text = json.dumps(
        {"experiment": "dichotomy", "version": 1, "params": params},
        sort_keys=True,
        separators=(",", ":"),
    )
    assert sweep.task_key("dichotomy", 1, params) == hashlib.sha256(text.encode()).hexdigest()[:24]
    assert sweep.task_key("dichotomy", 1, dict(reversed(params.items()))) == sweep.task_key(
        "dichotomy", 1, params
    )
    assert sweep.task_key("dichotomy", 2, params) != sweep.task_key("dichotomy", 1, params)
    # an int given for a float parameter is the same task
    assert (
        spec(params={"n": 40, "lam0": 1}).tasks()[0][1]
        == spec(params={"n": 40, "lam0": 1.0}).tasks()[0][1]
    )


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ({"experiment": "nope"}, "unknown experiment 'nope'"),
        ({}, r"no experiment = NAME line.*dichotomy.*\(the file is empty\)"),
        ({"version": 1}, r"no experiment = NAME line; choose one of"),
        ({"experiment": "dichotomy", "params": {"n": 0}}, r"'n' .* must be >= 1; got 0$"),
        ({"experiment": "dichotomy", "grid": {"depth": [1]}}, "unknown parameter 'depth'"),
        ({"experiment": "dichotomy", "color": 1}, "unknown key 'color'"),
        ({"experiment": "dichotomy", "version": 7}, "version 7"),
        ({"experiment": "dichotomy", "params": {"T": 3}, "grid": {"T": [1]}}, "'T' is both"),
        ({"experiment": "dichotomy", "grid": {"T": []}}, "'T' must be a non-empty list"),
        ({"experiment": "dichotomy", "grid": {"T": [1, 1]}}, "'T' repeats"),
        ({"experiment": "dichotomy", "params": {"lam0": 1.5}}, r"'lam0'.*\[0.0, 1.0\]"),
        ({"experiment": "dichotomy", "params": {"kernel": "dense"}}, "'kernel'.*one of"),
    ],
)
def test_bad_specs_name_what_is_wrong(data, match):
    with pytest.raises(ValueError, match=match):
        sweep.parse_spec(data)


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match=r"'T'.*integer"):
        sweep.parse_spec({"experiment": "dichotomy", "params": {"T": 2.5}})
    with pytest.raises(TypeError, match=r"'n'.*integer"):
        sweep.parse_spec({"experiment": "dichotomy", "grid": {"n": [True]}})


def test_example_specs_are_valid(tmp_path):
    d = sweep.load_spec(ROOT / "examples/sweeps/dichotomy.toml")
    assert len(d.tasks()) >= 40
    for name in ("rollout_profile", "far_mass"):
        assert sweep.load_spec(ROOT / f"examples/sweeps/{name}.toml").experiment == name
    bad = tmp_path / "bad.toml"
    bad.write_text("experiment = [", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid TOML"):
        sweep.load_spec(bad)
    with pytest.raises(ValueError, match="does not exist"):
        sweep.load_spec(tmp_path / "missing.toml")


def test_spec_sizes_are_bounded_before_anything_runs(monkeypatch):
    from posflow.simulate import _validate

    monkeypatch.setattr(_validate, "available_memory", lambda: 2**30)
    with pytest.raises(ValueError, match=r"n = 1000000000, T = 1000 would need about .* GiB"):
        sweep.parse_spec({"experiment": "dichotomy", "params": {"n": 10**9}})
    with pytest.raises(ValueError, match="T = 10000000000"):
        sweep.parse_spec({"experiment": "rollout_profile", "grid": {"T": [1, 10**10]}})
    with pytest.raises(ValueError, match="points"):
        sweep.parse_spec(
            {"experiment": "dichotomy", "grid": {"T": list(range(1001)), "n": list(range(1, 1001))}}
        )
    s = spec()
    assert s.num_tasks == 12 == len(s.tasks())
    assert s.largest_task()["T"] == 200 and s.largest_task()["kernel"] == "uniform"
    assert 0 < s.peak_task_bytes() < 2**30


def test_spec_files_are_bounded_and_decoded(tmp_path):
    f = tmp_path / "s.toml"
    f.write_bytes(b"\xff\xfe junk")
    with pytest.raises(ValueError, match="not UTF-8"):
        sweep.load_spec(f)
    f.write_text("x = " + "[" * 100_000)
    with pytest.raises(ValueError, match="nested too deeply"):
        sweep.load_spec(f)
    f.write_text("#" * (sweep.MAX_SPEC_BYTES + 1))
    with pytest.raises(ValueError, match="at most"):
        sweep.load_spec(f)
    with pytest.raises(TypeError, match="table"):
        sweep.parse_spec(["experiment"])


def test_a_non_finite_result_is_refused_by_run_task():
    p = sweep.EXPERIMENTS["dichotomy"].defaults() | {"n": 8, "lam0": 1.0, "beta": 0.0, "T": 2000}
    with pytest.raises(ValueError, match="log_one_minus_p0 = -inf"):
        sweep.run_task("dichotomy", p)


# ------------------------------------------------------------------------------------------
# experiments against independent references


def test_dichotomy_task_matches_the_dense_matrix_product():
    p = sweep.EXPERIMENTS["dichotomy"].defaults() | {"n": 6, "T": 5, "beta": 0.5, "lam0": 0.9}
    res, seconds = sweep.run_task("dichotomy", p)
    A = uniform_kernel(6).dense()
    P = np.eye(6)
    for lam in power_decay(0.9, 0.5, 5):
        P = ((1 - lam) * np.eye(6) + lam * A) @ P
    assert res["p_first"] == pytest.approx(P[-1, 0], rel=1e-12)
    assert res["log_one_minus_p0"] == pytest.approx(np.log(P[-1, 1:].sum()), rel=1e-12)
    assert res["log_min_diag"] == pytest.approx(np.log(np.diag(P).min()), rel=1e-12)
    # uniform kernel: the PB3 bound is attained at row n - 1
    assert res["log_diag_bound"] == pytest.approx(res["log_min_diag"], rel=1e-12)
    assert res["sum_lambda"] == pytest.approx(sum(0.9 / np.sqrt(t + 1) for t in range(5)))
    assert seconds >= 0


def test_rollout_profile_and_far_mass_tasks_are_consistent():
    p = sweep.EXPERIMENTS["rollout_profile"].defaults() | {"n": 64, "T": 8, "lam": 0.5}
    r, _ = sweep.run_task("rollout_profile", p)
    assert r["p_min"] <= min(r["p_first"], r["p_last"]) and 0 <= r["mean_position"] <= 1
    assert r["sum_lambda"] == pytest.approx(4.0)
    q = sweep.EXPERIMENTS["far_mass"].defaults() | {"length": 300, "d": 8, "n_trials": 2}
    f, _ = sweep.run_task("far_mass", q)
    assert 0 <= f["far_mass"] <= 1 and f["near_weight"] <= 1 - f["far_mass"] + 1e-12


# ------------------------------------------------------------------------------------------
# the store


def test_store_refuses_another_spec_and_stays_unchanged(tmp_path):
    s = spec()
    with sweep.SweepStore(tmp_path / "st", s) as st:
        st.put(0, "k0", {"a": 1}, {"r": 2.0}, "numpy", 0.1)
        st.put(0, "k0", {"a": 1}, {"r": 3.0}, "numpy", 0.1)  # a duplicate key is ignored
    before = (tmp_path / "st" / sweep.STORE_FILE).read_bytes()
    with pytest.raises(ValueError, match="different spec"):
        sweep.SweepStore(tmp_path / "st", spec(params={"n": 41, "lam0": 0.6}))
    assert (tmp_path / "st" / sweep.STORE_FILE).read_bytes() == before
    rows = sweep.load_table(tmp_path / "st")
    assert rows == [{"key": "k0", "params": {"a": 1}, "results": {"r": 2.0}}]
    with pytest.raises(ValueError, match="no sweep store"):
        sweep.load_table(tmp_path / "elsewhere")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(ValueError, match="not a posflow sweep store"):
        sweep.load_table(other)


def _partial_store(path):
    """A store of SMALL with grid points 0, 3 and 11 finished (by run_task, as a worker would)."""
    s = spec()
    tasks = s.tasks()
    with sweep.SweepStore(path, s) as st:
        for idx in (11, 0, 3):  # written out of order, as workers finish
            _, key, params = tasks[idx]
            res, sec = sweep.run_task(s.experiment, params)
            st.put(idx, key, params, res, "numpy", sec)
    return s


def test_to_dataframe_is_the_store_table_one_row_per_finished_task(tmp_path):
    import pandas as pd

    s = _partial_store(tmp_path / "st")
    with sweep.SweepStore(tmp_path / "st") as st:
        rows, df = st.rows(meta=True), st.to_dataframe(meta=True)
        plain = st.to_dataframe()
    assert df.index.name == "task" and df.index.tolist() == [0, 3, 11]
    grid, results = list(s.grid), list(rows[0]["results"])
    fixed = [k for k in rows[0]["params"] if k not in grid]
    assert df.columns.tolist() == ["key", *grid, *fixed, *results, "backend", "seconds"]
    assert plain.columns.tolist() == ["key", *grid, *fixed, *results]
    for (task, rec), row in zip(df.iterrows(), rows, strict=True):
        assert rec["key"] == row["key"] == s.tasks()[task][1]
        assert {k: rec[k] for k in row["params"]} == row["params"]
        assert {k: rec[k] for k in results} == row["results"]  # the stored floats, bit for bit
        assert (rec["backend"], rec["seconds"]) == (row["backend"], row["seconds"])
    assert df["T"].dtype == np.int64 and df["p_first"].dtype == np.float64
    pd.testing.assert_frame_equal(plain, df.drop(columns=["backend", "seconds"]))
    report = sweep.SweepReport(tmp_path / "st", s.num_tasks, 0, 3, 1.0)
    pd.testing.assert_frame_equal(report.to_dataframe(meta=True), df)


def test_to_dataframe_of_an_empty_store_and_a_result_named_like_a_parameter(tmp_path):
    with sweep.SweepStore(tmp_path / "st", spec()) as st:
        assert st.to_dataframe().empty
        params = {"T": 10, "beta": 0.5, "kernel": "alibi", "n": 4}
        st.put(0, "k0", params, {"n": 2.5, "key": 1.0}, "numpy", 0.1)
        df = st.to_dataframe()
    assert df.columns.tolist() == ["key", "kernel", "beta", "T", "n", "n_result", "key_result"]
    assert df.loc[0].tolist() == ["k0", "alibi", 0.5, 10, 4, 2.5, 1.0]


def test_to_dataframe_without_pandas_names_the_install_command(tmp_path, monkeypatch):
    s = _partial_store(tmp_path / "st")
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(ImportError, match=r"pip install pandas"):
        sweep.SweepReport(tmp_path / "st", s.num_tasks, 0, 3, 1.0).to_dataframe()


# ------------------------------------------------------------------------------------------
# runs on Dask


@needs_dask
def test_tables_are_identical_with_one_and_two_workers_and_resume_computes_nothing(tmp_path):
    s = spec()
    r1 = sweep.run_sweep(s, tmp_path / "a", workers=1, processes=False, progress=False)
    r2 = sweep.run_sweep(s, tmp_path / "b", workers=2, processes=False, progress=False)
    assert (r1.computed, r2.computed) == (12, 12)
    a, b = sweep.load_table(tmp_path / "a"), sweep.load_table(tmp_path / "b")
    assert a == b and len(a) == 12
    assert [r["key"] for r in a] == [k for _, k, _ in s.tasks()]
    again = sweep.run_sweep(s, tmp_path / "a", workers=1, processes=False, progress=False)
    assert (again.skipped, again.computed) == (12, 0)
    assert sweep.load_table(tmp_path / "a") == a


@needs_dask
@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_numpy_and_torch_backends_give_the_same_table(tmp_path):
    s = sweep.parse_spec(
        {
            "experiment": "rollout_profile",
            "params": {"n": 300, "heads": 4},
            "grid": {"T": [3, 12], "content": [-1.0, 2.0]},
        }
    )
    sweep.run_sweep(s, tmp_path / "np", workers=1, processes=False, progress=False)
    sweep.run_sweep(s, tmp_path / "t", workers=1, processes=False, progress=False, backend="torch")
    a, b = sweep.load_table(tmp_path / "np"), sweep.load_table(tmp_path / "t", meta=True)
    assert [r["backend"] for r in b] == ["torch"] * 4
    assert [(r["key"], r["params"]) for r in a] == [(r["key"], r["params"]) for r in b]
    for ra, rb in zip(a, b, strict=True):
        assert ra["results"].keys() == rb["results"].keys()
        for k, v in ra["results"].items():
            assert rb["results"][k] == pytest.approx(v, rel=1e-10, abs=1e-14), k


@needs_dask
def test_bad_runs_fail_before_touching_the_store(tmp_path):
    s = spec()
    with pytest.raises(ValueError, match="backend must be one of"):
        sweep.run_sweep(s, tmp_path / "x", backend="tpu")
    assert not (tmp_path / "x").exists()
    with pytest.raises(ValueError, match=r"scheduler 'tcp://127\.0\.0\.1:9' is unreachable"):
        sweep.run_sweep(s, tmp_path / "y", scheduler="tcp://127.0.0.1:9", timeout=1)
    assert sweep.load_table(tmp_path / "y") == []
    with pytest.raises(ValueError, match="workers"):
        sweep.run_sweep(s, tmp_path / "z", workers=0)


@needs_dask
def test_a_failing_task_keeps_the_finished_rows(tmp_path, monkeypatch):
    exp = sweep.EXPERIMENTS["dichotomy"]

    def flaky(params, backend, device):
        if params["T"] == 200 and params["beta"] == 2.0:
            raise ValueError("boom")
        return {"T": params["T"]}

    monkeypatch.setitem(sweep.EXPERIMENTS, "dichotomy", type(exp)(**(vars(exp) | {"run": flaky})))
    with pytest.raises(ValueError, match="failed: boom"):
        sweep.run_sweep(spec(), tmp_path / "f", workers=1, processes=False, progress=False)
    rows = sweep.load_table(tmp_path / "f")
    assert 0 < len(rows) < 12 and all(r["results"] == {"T": r["params"]["T"]} for r in rows)


KILL_SPEC = """
experiment = "dichotomy"
[params]
n = 2048
[grid]
beta = [0.5, 0.75, 1.0, 1.25, 1.5, 2.0]
T = [1500, 1501, 1502, 1503]
"""


@needs_dask
def test_a_sweep_killed_with_sigkill_resumes_with_every_row_once(tmp_path):
    spec_file = tmp_path / "kill.toml"
    spec_file.write_text(KILL_SPEC, encoding="utf-8")
    store = tmp_path / "store"
    db = store / sweep.STORE_FILE
    cmd = [sys.executable, "-m", "posflow", "sweep", str(spec_file), "--store", str(store)]
    proc = subprocess.Popen(
        [*cmd, "--workers", "1"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the Dask workers die with it
    )
    deadline, count = time.monotonic() + 120, 0
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists():
                with sqlite3.connect(db, timeout=10) as con:
                    if con.execute(
                        "SELECT name FROM sqlite_master WHERE name='results'"
                    ).fetchone():
                        count = con.execute("SELECT count(*) FROM results").fetchone()[0]
            if count >= 3:
                break
            time.sleep(0.05)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the sweep ended before it could be killed"
    with sqlite3.connect(db) as con:
        before = dict(con.execute("SELECT key, finished FROM results"))
    assert 3 <= len(before) < 24
    done = subprocess.run(
        [*cmd, "--in-process", "--json"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert f"{len(before)} already in {store}, {24 - len(before)} computed" in done.stderr
    with sqlite3.connect(db) as con:
        after = dict(con.execute("SELECT key, finished FROM results"))
        keys = [k for (k,) in con.execute("SELECT key FROM results")]
        assert con.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert sorted(keys) == sorted(k for _, k, _ in sweep.load_spec(spec_file).tasks())
    assert len(set(keys)) == len(keys) == 24
    assert all(after[k] == t for k, t in before.items())  # finished rows were kept as written
    assert json.loads(done.stdout) == sweep.load_table(store)


def _damaged_stores(tmp_path):
    good = tmp_path / "good"
    with sweep.SweepStore(good, spec()) as st:
        for i in range(200):
            st.put(i, f"k{i}", {"a": i}, {"r": float(i)}, "numpy", 0.1)
    data = (good / sweep.STORE_FILE).read_bytes()
    rng = np.random.default_rng(0)
    return {
        "truncated-header": data[:100],
        "truncated-pages": data[: len(data) // 2],
        "random-bytes": rng.integers(0, 256, 8192, dtype=np.uint8).tobytes(),
    }


@pytest.mark.parametrize("kind", ["truncated-header", "truncated-pages", "random-bytes"])
def test_a_damaged_store_is_one_value_error_naming_the_file(tmp_path, kind):
    f = tmp_path / "bad.sqlite"
    f.write_bytes(_damaged_stores(tmp_path)[kind])
    with pytest.raises(ValueError, match="not a readable posflow sweep store") as err:
        sweep.load_table(f)
    assert str(f) in str(err.value) and "\n" not in str(err.value)
