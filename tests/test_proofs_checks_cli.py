"""The ``posflow`` entry point and what every subcommand shares (proofs_checks/cli/_app.py and
_common.py): one-line errors with exit 2, negative numbers as values, output paths checked
before any work, memory bounds, valid JSON only, quiet broken pipes."""

import argparse
import importlib
import json
import subprocess
import sys
import tomllib
from pathlib import Path

import numpy as np
import pytest
from cli_usage import assert_usage_error, read_only_folder, run

from posflow.proofs_checks import cli
from posflow.proofs_checks.cli import _app, _common
from posflow.proofs_checks.cli._common import UsageError
from posflow.simulate import _validate
from posflow.simulate.kernels import alibi_kernel
from posflow.simulate.rollout import influence

ROOT = Path(__file__).resolve().parents[1]


def test_the_console_script_target_is_the_package_main():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, func = scripts["posflow"].split(":")
    assert getattr(importlib.import_module(module), func) is cli.main


def test_every_subcommand_is_registered():
    sub = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(_app.SUBCOMMANDS)


def test_no_command_prints_help_and_exit_2(capsys):
    code, out, _ = run(capsys)
    assert code == 2 and "COMMAND" in out


def test_unknown_command_and_option_are_one_line(capsys):
    assert_usage_error(capsys, ["frobnicate"], "invalid choice", "frobnicate")
    assert_usage_error(capsys, ["rollout", "--bogus"], "posflow rollout", "--bogus")


def test_only_bad_input_is_caught(capsys, monkeypatch):
    """A bug (here a RuntimeError) keeps its traceback; it is not turned into a usage line."""

    def boom(args):
        raise RuntimeError("a bug")

    from posflow.proofs_checks.cli import rollout

    monkeypatch.setattr(rollout, "cmd_rollout", boom)
    real = rollout.add_parser

    def add_parser(sub):
        real(sub)
        sub.choices["rollout"].set_defaults(func=boom)

    monkeypatch.setattr(rollout, "add_parser", add_parser)
    with pytest.raises(RuntimeError, match="a bug"):
        cli.main(["rollout", "--n", "3"])


# ------------------------------------------------------------------------------------------
# argument types


def test_negative_numbers_are_values():
    p = _common.Parser(prog="t")
    p.add_argument("--x", nargs="+")
    p.add_argument("--y", type=_common.finite_float)
    for v in ("-1", "-0.5", "-.5", "-1e4", "-1E-308", "-2.5e+3", "-inf", "-nan"):
        assert p.parse_args(["--x", v, "--y", "-3e2"]).x == [v]
    with pytest.raises(UsageError, match="unrecognized arguments: -e4"):
        p.parse_args(["--x", "1", "-e4"])


def test_integer_and_float_types_name_the_argument():
    p = _common.Parser(prog="posflow t")
    p.add_argument("--seed", type=_common.integer(0))
    p.add_argument("--time", type=_common.positive_float)
    assert p.parse_args(["--seed", "7", "--time", "1e-3"]).seed == 7
    for argv, words in (
        (["--seed", "-1"], ("argument --seed", "integer >= 0", "'-1'")),
        (["--seed", "1.5"], ("argument --seed", "invalid int value")),
        (["--time", "0"], ("argument --time", "positive")),
        (["--time", "nan"], ("argument --time", "finite")),
        (["--time", "-1e308"], ("argument --time", "positive")),
    ):
        with pytest.raises(UsageError) as exc:
            p.parse_args(argv)
        assert exc.value.prog == "posflow t"
        for w in words:
            assert w in str(exc.value)


def test_number_lists():
    assert _common.number_list(["1,2", "-3e2"], "--x") == [1.0, 2.0, -300.0]
    for vals, match in (([""], "at least one"), (["1", "nan"], "finite"), (["a"], "'a'")):
        with pytest.raises(UsageError, match=match):
            _common.number_list(vals, "--x")


# ------------------------------------------------------------------------------------------
# output paths


def test_output_file_refuses_folders_clashes_and_read_only_places(tmp_path):
    f = _common.output_file
    assert f("--plot", tmp_path / "new" / "deeper" / "p.png", ".png") == (
        tmp_path / "new" / "deeper" / "p.png"
    )
    assert list(tmp_path.iterdir()) == []  # nothing created by the check
    with pytest.raises(UsageError, match=r"--plot .* is a folder"):
        f("--plot", tmp_path)
    with pytest.raises(UsageError, match="is a folder"):
        f("--plot", f"{tmp_path}/x/")
    with pytest.raises(UsageError, match=r"--plot must be a \.png file"):
        f("--plot", tmp_path / "p.jpg", ".png")
    blocker = tmp_path / "blocker"
    blocker.write_text("")
    with pytest.raises(UsageError, match="is a file, not a folder"):
        f("--plot", blocker / "a" / "p.png")
    with read_only_folder(tmp_path) as ro:
        with pytest.raises(UsageError, match=r"--out .* cannot write"):
            f("--out", ro / "r.json")
        with pytest.raises(UsageError, match="cannot write"):
            _common.output_dir("--out", ro)
        with pytest.raises(UsageError, match="cannot write"):
            _common.output_dir("--out", ro / "a" / "b")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blocker", "read-only"]


def test_output_dir_refuses_a_file(tmp_path):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(UsageError, match=r"--store .* is a file, not a folder"):
        _common.output_dir("--store", f)
    assert _common.output_dir("--store", tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert not (tmp_path / "a").exists()


def test_export_target_is_a_folder_only_when_named_so(tmp_path):
    assert _common.export_target("--export", f"{tmp_path}/tests/") == (
        Path(f"{tmp_path}/tests/"),
        True,
    )
    assert _common.export_target("--export", tmp_path) == (tmp_path, True)
    assert _common.export_target("--export", tmp_path / "t.py") == (tmp_path / "t.py", False)
    with pytest.raises(UsageError, match=r"\.py"):
        _common.export_target("--export", tmp_path / "tests")


# ------------------------------------------------------------------------------------------
# input files, memory and JSON


def test_read_json_file_refuses_junk_nesting_nan_and_size(tmp_path):
    f = tmp_path / "r.json"
    for content, match in (
        (b"\xff\xfe\x00junk", "not UTF-8"),
        (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
        (b'{"x": NaN}', "NaN"),
        (b"{", "cut short"),  # a truncated file is named as such (issue 27)
        (b'{"x" 1}', "not JSON"),
    ):
        f.write_bytes(content)
        with pytest.raises(UsageError, match=match):
            _common.read_json_file("--replay", f, 2**20)
    f.write_bytes(b"[1]" + b" " * 100)
    with pytest.raises(UsageError, match="MiB"):
        _common.read_json_file("--replay", f, 10)
    with pytest.raises(UsageError, match="no such file"):
        _common.read_json_file("--replay", tmp_path / "none", 10)


def test_ensure_memory_uses_the_available_memory(monkeypatch):
    monkeypatch.setattr(_validate, "available_memory", lambda: 2**30)
    _common.ensure_memory("--n", 2**29, "x")
    with pytest.raises(UsageError, match="--n: a kernel would need about 1 GiB"):
        _common.ensure_memory("--n", 2**30, "a kernel")


def test_print_json_refuses_non_finite_numbers(capsys):
    _common.print_json({"a": [1.0, 2]}, inputs="--x")
    assert json.loads(capsys.readouterr().out) == {"a": [1.0, 2]}
    for bad in (float("nan"), float("inf"), -float("inf")):
        with pytest.raises(UsageError, match=r"--x: the result a\[1\]\.b is"):
            _common.print_json({"a": [0.0, {"b": bad}]}, inputs="--x")
    assert capsys.readouterr().out == ""


def test_torch_device_without_cuda_is_refused_before_any_work():
    torch = pytest.importorskip("torch")
    assert _common.torch_device("--device", "cpu") == torch.device("cpu")
    with pytest.raises(UsageError, match="not a torch device"):
        _common.torch_device("--device", "gpu7")
    if not torch.cuda.is_available():
        with pytest.raises(UsageError, match="--device 'cuda': no CUDA device"):
            _common.torch_device("--device", "cuda")


# ------------------------------------------------------------------------------------------
# pipes and python -m


def test_piping_into_head_ends_quietly(tmp_path):
    """Reading a few bytes and closing the pipe, as ``head -c 20`` does: no BrokenPipeError."""
    cmd = [sys.executable, "-m", "posflow", "rollout", "--n", "200000", "--lam", "0.3",
           "--depth", "2", "--json"]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path, bufsize=0
    )
    head = proc.stdout.read(20)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    proc.stderr.close()
    code = proc.wait(timeout=120)
    assert head.startswith(b'{"n": 200000')
    assert err == "" and code in (0, 1)


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


def _completions(tmp_path, line: str) -> list[str]:
    """What ``python -m posflow`` answers under argcomplete's protocol for the command line
    ``line`` typed so far: completions on fd 8, its debug stream on fd 9 (as the shell sets)."""
    import os
    import subprocess
    import sys

    out = tmp_path / "completions"
    env = dict(os.environ, _ARGCOMPLETE="1", COMP_LINE=line, COMP_POINT=str(len(line)),
               _ARGCOMPLETE_IFS="\n")  # fmt: skip
    with open(out, "w") as f8, open(os.devnull, "w") as f9:
        def fds():
            os.dup2(f8.fileno(), 8)
            os.dup2(f9.fileno(), 9)

        subprocess.run([sys.executable, "-m", "posflow"], env=env, preexec_fn=fds,
                       pass_fds=(8, 9), check=True, timeout=60)  # fmt: skip
    return sorted(out.read_text().split())


def test_shell_completion_names_subcommands_options_and_choices(tmp_path):
    assert _completions(tmp_path, "posflow ver") == ["verify"]
    assert {"claims", "measure", "models", "rollout"} <= set(_completions(tmp_path, "posflow "))
    assert "--quick" in _completions(tmp_path, "posflow verify --q")
    assert {"install", "list", "path"} <= set(_completions(tmp_path, "posflow models "))


def test_without_the_completion_request_main_parses_as_usual(monkeypatch, capsys):
    from posflow.proofs_checks import cli

    monkeypatch.delenv("_ARGCOMPLETE", raising=False)
    assert cli.main(["models", "list", "--json"]) == 0
    assert capsys.readouterr().out.startswith("[")


def test_a_piped_table_title_starts_at_the_left_edge():
    """A piped table is as wide as its longest cell; its title and caption are not centred over
    it (they would be preceded by thousands of spaces)."""
    import io

    from rich.console import Console

    from posflow.proofs_checks.cli._output import PIPED_WIDTH, table

    t = table(title="the title", caption="the caption")
    t.add_column("c")
    t.add_row("x" * 3000)
    buf = io.StringIO()
    Console(file=buf, width=PIPED_WIDTH, force_terminal=False).print(t)
    lines = buf.getvalue().splitlines()
    assert lines[0].startswith("the title") and lines[-1].startswith("the caption")


def test_a_piped_table_is_plain_markdown_rows(capsys):
    """Piped, a table is one Markdown line per row: whole cells, markup removed, ``|``
    escaped, no padding to the widest cell and no box characters."""
    from posflow.proofs_checks.cli._output import markdown_rows, show, table

    t = table(title="the title", caption="the caption")
    t.add_column("ID")
    t.add_column("status")
    t.add_row("PB1", "[green]HOLDS[/]")
    t.add_row("AT20", "a | b\nsecond line " + "x" * 3000)
    want = ["the title", "| ID | status |", "|---|---|", "| PB1 | HOLDS |",
            "| AT20 | a \\| b second line " + "x" * 3000 + " |", "the caption"]
    assert markdown_rows(t) == want
    show(t)  # capsys is not a terminal
    assert capsys.readouterr().out.splitlines() == want
