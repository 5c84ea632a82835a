"""The posflow command line: rollout numbers, plots, JSON, bad arguments (exit 2)."""

import json
import subprocess
import sys

import numpy as np
import pytest

from posflow.proofs_checks.cli import main
from posflow.simulate import measured
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import influence, power_decay


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_rollout_model_json_matches_library(capsys):
    code, out, err = run(capsys, "rollout", "--model", "bloom", "--variant", "residual", "--json")
    assert code == 0 and err == ""
    rec = json.loads(out)
    p = measured.profile("bloom", "residual")
    np.testing.assert_allclose(rec["profile"], p, rtol=0, atol=0)
    assert rec["argmin"] == int(np.argmin(p)) == 61
    assert rec["p_first"] == pytest.approx(p[0])
    assert rec["T"] == 70


def test_rollout_model_plot_writes_png(capsys, tmp_path):
    png = tmp_path / "bloom.png"
    code, out, _ = run(
        capsys, "rollout", "--model", "bloom", "--variant", "residual", "--plot", str(png)
    )
    assert code == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "argmin" in out and "61" in out


def test_rollout_parametric_power_decay(capsys):
    code, out, _ = run(
        capsys,
        "rollout",
        "--n",
        "40",
        "--slopes",
        "alibi:4",
        "--content",
        "1",
        "--lam",
        "0.5",
        "--beta",
        "1.5",
        "--depth",
        "12",
        "--json",
    )
    assert code == 0
    p = influence(alibi_kernel(40, alibi_slopes(4), 1.0), power_decay(0.5, 1.5, 12))
    np.testing.assert_allclose(json.loads(out)["profile"], p, atol=1e-15)


def test_rollout_lambdas_file(capsys, tmp_path):
    f = tmp_path / "lam.json"
    f.write_text("[0.1, 0.9, 0.3]")
    code, out, _ = run(
        capsys, "rollout", "--n", "10", "--slopes", "0.2", "0.7", "--lambdas", str(f), "--json"
    )
    assert code == 0
    p = influence(alibi_kernel(10, [0.2, 0.7]), [0.1, 0.9, 0.3])
    np.testing.assert_allclose(json.loads(out)["profile"], p, atol=1e-15)


@pytest.mark.parametrize(
    "argv, match",
    [
        (["rollout", "--model", "gpt2"], "unknown --model"),
        (["rollout", "--n", "10", "--lam", "1.5", "--depth", "3"], "lam"),
        (["rollout", "--n", "0", "--lam", "0.5", "--depth", "3"], "--n"),
        (["rollout", "--n", "10"], "--lam"),
        (["rollout", "--model", "bloom", "--n", "10"], "cannot be combined"),
        (["rollout", "--n", "10", "--slopes", "x", "--lam", "0.1", "--depth", "2"], "--slopes"),
        (["rollout", "--n", "10", "--lambdas", "/nonexistent"], "no such file"),
        (["rollout", "--variant", "residual", "--n", "3"], "--variant needs --model"),
        (["rollout", "--bogus"], "unrecognized"),
        (["verify", "PB999"], "unknown claim"),
    ],
)
def test_bad_arguments_one_line_exit_2(capsys, argv, match):
    code, _out, err = run(capsys, *argv)
    assert code == 2
    assert match in err and err.count("\n") == 1


def test_python_dash_m_runs_the_same_cli(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "posflow",
            "rollout",
            "--n",
            "8",
            "--lam",
            "0.3",
            "--depth",
            "4",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stderr
    p = influence(alibi_kernel(8, 0.0), [0.3] * 4)
    np.testing.assert_allclose(json.loads(r.stdout)["profile"], p, atol=1e-15)


def test_only_the_posflow_namespace_is_installed(tmp_path):
    """Nothing installs a generic top-level name; a user's own simulate.py cannot shadow posflow."""
    (tmp_path / "simulate.py").write_text("raise SystemExit('shadowed')\n")
    code = (
        "import importlib.util as u, posflow.simulate as s, posflow\n"
        "assert all(u.find_spec(m) is None for m in ('theory', 'proofs_checks'))\n"
        "print(s.__name__, posflow.influence is s.influence)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       check=False, cwd=tmp_path)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["posflow.simulate", "True"]
