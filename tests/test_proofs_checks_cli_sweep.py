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
    code, out, err = run(capsys, spec_file, "--store", store, "--threads", "--workers", "2")
    assert code == 0, err
    assert "6 tasks: 0 already in" in err
    assert "dichotomy v1: 6 rows" in out
    for word in ("beta", "T", "log_one_minus_p0", "p_first", "kernel=uniform", "n=32"):
        assert word in out
    rows = sweep.load_table(store)
    # the table shows the stored numbers, one line per task
    assert f"{rows[0]['results']['p_first']:.6g}" in out
    code, out2, err = run(capsys, spec_file, "--store", store, "--threads")
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
    assert run(capsys, spec_file, "--store", store, "--threads")[0] == 0
    before = (store / sweep.STORE_FILE).read_bytes()
    other = tmp_path / "other.toml"
    other.write_text(SPEC.replace("n = 32", "n = 33"), encoding="utf-8")
    code, _, err = run(capsys, other, "--store", store, "--threads")
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
