"""``posflow rollout``: numbers, plots, JSON, and bad arguments (one line, exit 2)."""

import json

import numpy as np
import pytest
from cli_usage import assert_usage_error, read_only_folder, run

from posflow.simulate import _validate, measured
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import influence, power_decay

SCHEDULE = ["--lam", "0.5", "--depth", "3"]


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


# ------------------------------------------------------------------------------------------
# negative numbers are values, not options


def test_negative_numbers_are_option_values(capsys):
    code, out, err = run(
        capsys, "rollout", "--n", "6", "--slopes", "-0.5", "0.25", "--content", "-1e4", "2",
        *SCHEDULE, "--json",
    )  # fmt: skip
    assert code == 0, err
    p = influence(alibi_kernel(6, [-0.5, 0.25], [-1e4, 2.0]), [0.5] * 3)
    np.testing.assert_allclose(json.loads(out)["profile"], p, rtol=1e-12, atol=1e-300)


def test_an_equals_sign_also_works(capsys):
    code, out, err = run(capsys, "rollout", "--n", "6", "--slopes=-1e-3", *SCHEDULE, "--json")
    assert code == 0, err
    assert json.loads(out)["n"] == 6


# ------------------------------------------------------------------------------------------
# every bad input: one line naming the argument, exit 2


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--n", "-3", *SCHEDULE], ("--n", "integer >= 1")),
        (["--n", "8", "--lam", "nan", "--depth", "3"], ("--lam", "finite")),
        (["--n", "8", "--lam", "0.5", "--depth", "-1"], ("--depth",)),
        (["--n", "8", "--slopes", "", *SCHEDULE], ("--slopes", "at least one")),
        (["--n", "8", "--slopes", "inf", *SCHEDULE], ("--slopes", "finite")),
        (["--n", "8", "--slopes", "alibi:0", *SCHEDULE], ("--slopes", "alibi:H")),
        (["--n", "8", "--content", "1", "2", "--slopes", "1", "2", "3", *SCHEDULE],
         ("--slopes/--content",)),
        (["--n", "8", "--lam", "0.5", "--beta", "-1", "--depth", "3"], ("--beta",)),
        (["--n", "8", "--lam", "0.5", "--depth", "3", "--lambdas", "x"], ("--lambdas",)),
    ],
)  # fmt: skip
def test_bad_numbers_are_one_line(capsys, argv, words):
    assert_usage_error(capsys, ["rollout", *argv], *words)


def strict_json(text):
    """Parse JSON that must not hold NaN or Infinity (``allow_nan=False`` output)."""

    def refuse(name):
        raise AssertionError(f"invalid JSON constant {name}")

    return json.loads(text, parse_constant=refuse)


def test_huge_slopes_are_exact_limits_not_nan(capsys):
    """-1e308 used to give a NaN profile with exit 0. A slope of -1e308 sends every row's
    attention to token 0, +1e308 keeps it on the diagonal: with λ = 0.5 over T = 3 layers the
    last token keeps (1 - λ)^T = 1/8 and token 0 gets the rest, or the last token keeps all."""
    code, out, err = run(capsys, "rollout", "--n", "10", "--slopes=-1e308", *SCHEDULE, "--json")
    assert code == 0 and err == "", err
    p = strict_json(out)["profile"]
    np.testing.assert_allclose(p, [0.875] + [0.0] * 8 + [0.125], atol=1e-15)
    code, out, err = run(capsys, "rollout", "--n", "10", "--slopes=1e308", *SCHEDULE, "--json")
    assert code == 0 and err == "", err
    np.testing.assert_allclose(strict_json(out)["profile"], [0.0] * 9 + [1.0], atol=1e-15)


def test_an_empty_slope_list_names_slopes(capsys):
    """The CLI form of alibi_kernel(8, [])."""
    assert_usage_error(capsys, ["rollout", "--n", "8", "--slopes", ",", *SCHEDULE], "--slopes")
    with pytest.raises(ValueError, match="slopes"):
        alibi_kernel(8, [])


def test_an_underflowing_diagonal_is_never_invalid_json(capsys):
    """Content -1e4 with λ = 1 over T = 40 layers: P_ii = A_ii^T with log A_ii ≈ -1e4, so
    log min P_ii ≈ -4e5 survives while every factor underflows to 0 (it used to be printed as
    the invalid JSON -Infinity). Either it is computed in log space, or refused in one line."""
    argv = ["rollout", "--n", "6", "--content", "-1e4", "--lam", "1", "--depth", "40", "--json"]
    code, out, _ = run(capsys, *argv)
    if code == 0:
        rec = strict_json(out)
        assert rec["log_min_diag"] == pytest.approx(-4e5, rel=1e-3)
    else:
        assert_usage_error(capsys, argv, "--content", "--depth")


def test_sizes_are_bounded_before_allocation(capsys, monkeypatch):
    monkeypatch.setattr(_validate, "available_memory", lambda: 2**30)
    assert_usage_error(capsys, ["rollout", "--n", "1000000000", *SCHEDULE], "--n", "GiB")
    argv = ["rollout", "--n", "8", "--lam", "0.5", "--depth", "1000000000"]
    assert_usage_error(capsys, argv, "--depth", "T = 1000000000")
    argv = ["rollout", "--n", "100000", "--slopes", "alibi:4096", *SCHEDULE]
    assert_usage_error(capsys, argv, "--n", "H = 4096")


# ------------------------------------------------------------------------------------------
# --lambdas FILE


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'"0.5"', ("--lambdas", "JSON string")),
        (b'{"lam": [0.5]}', ("--lambdas", "JSON object")),
        (b"[0.5, NaN]", ("--lambdas", "NaN")),
        (b"[0.5, Infinity]", ("--lambdas", "Infinity")),
        (b"0.5 nan 0.1", ("--lambdas", "finite")),
        (b"[[0.5]]", ("--lambdas", "entry 0")),
        (b"[0.5, true]", ("--lambdas", "entry 1")),
        (b"[0.5, 1.5]", ("--lambdas", "[0, 1]")),
        (b"[0.5,", ("--lambdas", "cut short", "truncated")),
        (b"[" * 100_000 + b"]" * 100_000, ("--lambdas", "nested too deeply")),
        (b"\x89PNG\r\n\x1a\n\x00\xff\xfe", ("--lambdas", "not UTF-8")),
        (b"0.1 zebra", ("--lambdas", "'zebra'")),
        (b"", ("--lambdas", "at least one")),
        (b"[]", ("--lambdas", "lam.txt", "empty list", "at least one")),
        (b" [ ]\n", ("--lambdas", "empty list")),
    ],
)
def test_bad_lambdas_files_are_one_line(capsys, tmp_path, content, words):
    f = tmp_path / "lam.txt"
    f.write_bytes(content)
    assert_usage_error(capsys, ["rollout", "--n", "8", "--lambdas", f], *words)


def test_lambdas_file_of_plain_numbers(capsys, tmp_path):
    f = tmp_path / "lam.txt"
    f.write_text("0.1, 0.9\n0.3\n")
    code, out, _ = run(capsys, "rollout", "--n", "10", "--lambdas", f, "--json")
    assert code == 0
    np.testing.assert_allclose(
        json.loads(out)["profile"], influence(alibi_kernel(10, 0.0), [0.1, 0.9, 0.3]), atol=1e-15
    )


def test_a_lambdas_file_too_large_for_memory_is_refused_unread(capsys, tmp_path, monkeypatch):
    f = tmp_path / "lam.txt"
    f.write_text("0.5 " * 1000)
    monkeypatch.setattr(_validate, "available_memory", lambda: 10_000)
    assert_usage_error(capsys, ["rollout", "--n", "8", "--lambdas", f], "--lambdas", "MiB")


def test_lambdas_combined_with_a_schedule_is_refused(capsys, tmp_path):
    f = tmp_path / "lam.json"
    f.write_text("[0.5]")
    argv = ["rollout", "--n", "8", "--lambdas", f, "--beta", "1"]
    assert_usage_error(capsys, argv, "--lambdas", "--beta")


# ------------------------------------------------------------------------------------------
# --plot


def test_plot_paths_are_checked_before_any_work(capsys, tmp_path):
    base = ["rollout", "--n", "8", *SCHEDULE, "--plot"]
    assert_usage_error(capsys, [*base, tmp_path], "--plot", "is a folder")
    assert_usage_error(capsys, [*base, f"{tmp_path}/new/"], "--plot", "is a folder")
    assert_usage_error(capsys, [*base, tmp_path / "p.docx"], "--plot", ".png", ".pdf", ".svg")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_usage_error(capsys, [*base, blocker / "p.png"], "--plot", "is a file, not a folder")
    with read_only_folder(tmp_path) as ro:
        assert_usage_error(capsys, [*base, ro / "p.png"], "--plot", "cannot write")
        assert_usage_error(capsys, [*base, ro / "sub" / "p.png"], "--plot", "cannot write")
        assert not (ro / "sub").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "read-only"]


def test_plot_creates_only_the_folders_it_names(capsys, tmp_path):
    png = tmp_path / "a" / "b.png"
    code, _, err = run(capsys, "rollout", "--n", "8", *SCHEDULE, "--plot", png)
    assert code == 0, err
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["a", "a/b.png"]
    pdf = tmp_path / "a" / "c.pdf"  # any format matplotlib writes, by the suffix
    assert run(capsys, "rollout", "--n", "8", *SCHEDULE, "--plot", pdf)[0] == 0
    assert pdf.read_bytes()[:5] == b"%PDF-"
