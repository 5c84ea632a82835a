"""``posflow sweep``: run, resume and show sweeps; bad input is one line and exit code 2."""

import importlib.util
import json
import subprocess
import sys

import pytest

from posflow.proofs_checks import cli
from posflow.simulate import sweep

needs_dask = pytest.mark.skipif(
    importlib.util.find_spec("distributed") is None, reason="dask.distributed is not installed"
)

SPEC = """
experiment = "dichotomy"
[params]
n = 32
lam0 = 0.5
[grid]
beta = [0.5, 2.0]
T = [10, 100, 1000]
"""


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "small.toml"
    path.write_text(SPEC, encoding="utf-8")
    return path


def run(capsys, *argv):
    code = cli.main(["sweep", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, err, *words):
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("posflow"), err
    for w in words:
        assert w in lines[0], (w, lines[0])


@needs_dask
def test_sweep_prints_its_table_resumes_and_shows_it(capsys, spec_file, tmp_path):
    store = tmp_path / "st"
    code, out, err = run(capsys, spec_file, "--store", store, "--in-process", "--workers", "2")
    assert code == 0, err
    assert "6 tasks: 0 already in" in err
    assert "dichotomy v1: 6 rows" in out
    for word in ("beta", "T", "log_one_minus_p0", "p_first", "kernel=uniform", "n=32"):
        assert word in out
    rows = sweep.load_table(store)
    # the table shows the stored numbers, one line per task
    assert f"{rows[0]['results']['p_first']:.6g}" in out
    code, out2, err = run(capsys, spec_file, "--store", store, "--in-process")
    assert code == 0 and "6 already in" in err and "0 computed" in err
    code, shown, _ = run(capsys, "--show", store)
    assert code == 0 and shown == out2
    code, js, _ = run(capsys, "--show", store, "--json")
    data = json.loads(js)
    assert data == rows and len(data) == 6
    assert [(r["params"]["beta"], r["params"]["T"]) for r in data][:3] == [
        (0.5, 10),
        (0.5, 100),
        (0.5, 1000),
    ]


@needs_dask
@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('experiment = "nope"', ("unknown experiment 'nope'",)),
        ("", ("no experiment = NAME line", "the file is empty")),
        ('experiment = "dichotomy"\n[params]\nn = 0', ("'n'", "must be >= 1; got 0")),
        ('experiment = "dichotomy"\n[grid]\ndepth = [1]', ("unknown parameter 'depth'",)),
        ('experiment = "far_mass"\n[params]\nscheme = "nope"', ("'scheme'", "one of")),
    ],
)
def test_bad_specs_are_one_line_errors(capsys, tmp_path, text, words):
    path = tmp_path / "bad.toml"
    path.write_text(text, encoding="utf-8")
    code, _, err = run(capsys, path, "--store", tmp_path / "st")
    one_line_error(code, err, *words)
    assert not (tmp_path / "st").exists()


@needs_dask
def test_a_store_of_another_spec_is_refused_unchanged(capsys, spec_file, tmp_path):
    store = tmp_path / "st"
    assert run(capsys, spec_file, "--store", store, "--in-process")[0] == 0
    before = (store / sweep.STORE_FILE).read_bytes()
    other = tmp_path / "other.toml"
    other.write_text(SPEC.replace("n = 32", "n = 33"), encoding="utf-8")
    code, _, err = run(capsys, other, "--store", store, "--in-process")
    one_line_error(code, err, "different spec", str(store))
    assert (store / sweep.STORE_FILE).read_bytes() == before


@needs_dask
def test_unreachable_scheduler_and_missing_backend_are_named(capsys, spec_file, tmp_path):
    args = (spec_file, "--store", tmp_path / "st")
    code, _, err = run(capsys, *args, "--scheduler", "tcp://127.0.0.1:9", "--connect-timeout", "1")
    one_line_error(code, err, "tcp://127.0.0.1:9", "unreachable")
    code, _, err = run(capsys, *args, "--backend", "tpu")
    one_line_error(code, err, "backend", "'tpu'")
    if importlib.util.find_spec("cupy") is None:
        code, _, err = run(capsys, *args, "--backend", "cupy")
        one_line_error(code, err, "'cupy' is not installed", "pip install")
    assert sweep.load_table(tmp_path / "st") == []


def test_missing_dask_names_the_extra(capsys, spec_file, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed → ImportError
    code, _, err = run(capsys, spec_file, "--store", tmp_path / "st")
    one_line_error(code, err, "pip install -e .[cluster]")


def test_usage_errors(capsys, spec_file, tmp_path):
    one_line_error(*run(capsys)[::2], "SPEC.toml")
    one_line_error(*run(capsys, spec_file, "--show", tmp_path)[::2], "not both")
    one_line_error(*run(capsys, "--show", tmp_path / "none")[::2], "no sweep store")
    one_line_error(*run(capsys, spec_file, "--workers", "0")[::2], "--workers")


def test_posflow_starts_without_importing_dask():
    code = (
        "import sys; from posflow.proofs_checks import cli; cli.build_parser(); "
        "print(any(m.split('.')[0] in ('dask', 'distributed') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------------------------
# specs are files: bounded before anything is allocated; stores are checked before any work


def bad_spec(capsys, tmp_path, content, *words):
    path = tmp_path / "bad.toml"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    code, _, err = run(capsys, path, "--store", tmp_path / "st")
    one_line_error(code, err, *words)
    assert not (tmp_path / "st").exists()


def test_deeply_nested_toml_is_one_line(capsys, tmp_path):
    bad_spec(capsys, tmp_path, "x = " + "[" * 100_000, "nested too deeply")
    bad_spec(capsys, tmp_path, "x = " + "{a = " * 50_000, "bad.toml")


def test_binary_and_huge_spec_files_are_one_line(capsys, tmp_path):
    bad_spec(capsys, tmp_path, b"\x89PNG\r\n\x1a\n\x00\xff", "not UTF-8")
    bad_spec(capsys, tmp_path, "# " + "x" * sweep.MAX_SPEC_BYTES, "at most")


def test_sizes_in_a_spec_are_bounded_before_allocation(capsys, tmp_path, monkeypatch):
    from posflow.simulate import _validate

    monkeypatch.setattr(_validate, "available_memory", lambda: 8 * 2**30)
    n9 = 'experiment = "dichotomy"\n[params]\nn = 1000000000\n'
    bad_spec(capsys, tmp_path, n9, "n = 1000000000", "GiB")
    deep = 'experiment = "rollout_profile"\n[grid]\nT = [10, 100000000000]\n'
    bad_spec(capsys, tmp_path, deep, "T = 100000000000", "GiB")
    far = 'experiment = "far_mass"\n[params]\nlength = 10000000000\n'
    bad_spec(capsys, tmp_path, far, "length = 10000000000")
    grid = 'experiment = "dichotomy"\n[grid]\n' + "".join(
        f"{k} = [{', '.join(str(v) for v in range(1, 11))}]\n" for k in ("n", "T")
    )
    grid += "lam0 = [" + ", ".join(f"{i / 1000}" for i in range(1000)) + "]\n"
    grid += "beta = [" + ", ".join(f"{i / 10}" for i in range(20)) + "]\n"
    bad_spec(capsys, tmp_path, grid, "2000000 points", "at most 1000000")


def test_parallel_workers_count_against_memory(capsys, tmp_path, monkeypatch, spec_file):
    from posflow.simulate import _validate

    one_task = sweep.load_spec(spec_file).peak_task_bytes()
    monkeypatch.setattr(_validate, "available_memory", lambda: int(2 * one_task))
    code, _, err = run(capsys, spec_file, "--workers", "4", "--store", tmp_path / "st")
    one_line_error(code, err, "--workers", "4 task(s)")
    assert not (tmp_path / "st").exists()


def test_bad_stores_are_refused_before_any_work(capsys, tmp_path, spec_file, monkeypatch):
    from cli_usage import read_only_folder

    f = tmp_path / "file"
    f.write_text("")
    one_line_error(*run(capsys, spec_file, "--store", f)[::2], "--store", "is a file")
    one_line_error(*run(capsys, spec_file, "--store", f / "x")[::2], "--store", "is a file")
    with read_only_folder(tmp_path) as ro:
        one_line_error(*run(capsys, spec_file, "--store", ro / "st")[::2], "cannot write")
        one_line_error(*run(capsys, spec_file, "--store", ro / "s.sqlite")[::2], "cannot write")
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(f))
    one_line_error(*run(capsys, spec_file)[::2], "--store (the per-user cache)", "is a file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "read-only", "small.toml"]


def test_connect_timeout_must_be_positive(capsys, spec_file):
    for bad in ("0", "-1", "nan"):
        one_line_error(*run(capsys, spec_file, "--connect-timeout", bad)[::2], "--connect-timeout")


@needs_dask
def test_an_underflowing_result_is_refused_not_written_as_infinity(capsys, tmp_path):
    """T = 2000 layers of λ = 1 on a uniform kernel: 1 - p(0) underflows to 0, so
    log(1 - p(0)) would be -inf (once written as the invalid JSON -Infinity)."""
    spec = 'experiment = "dichotomy"\n[params]\nn = 8\nlam0 = 1.0\nbeta = 0.0\n[grid]\nT = [2000]\n'
    path = tmp_path / "deep.toml"
    path.write_text(spec)
    code, _, err = run(capsys, path, "--store", tmp_path / "st", "--in-process", "--workers", "1")
    one_line_error(code, err, "log_one_minus_p0", "-inf", '"T":2000')
    assert sweep.load_table(tmp_path / "st") == []


@pytest.mark.parametrize("kind", ["truncated-header", "truncated-pages", "random-bytes"])
def test_show_of_a_damaged_store_is_one_line_naming_the_file(capsys, tmp_path, kind):
    from test_simulate_sweep import _damaged_stores

    f = tmp_path / "bad.sqlite"
    f.write_bytes(_damaged_stores(tmp_path)[kind])
    code, _, err = run(capsys, "--show", f)
    one_line_error(code, err, "--show", str(f), "not a readable posflow sweep store")
