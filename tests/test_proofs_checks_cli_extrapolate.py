"""``posflow extrapolate``: a tiny run into a store, --results --json, --plot, bad input."""

import json

import pytest

torch = pytest.importorskip("torch")

from posflow.proofs_checks.cli import main  # noqa: E402

TINY = ["--train-len", "8", "--max-factor", "4", "--steps", "2", "--batch-size", "2",
        "--n-layer", "1", "--n-head", "2", "--d-model", "16", "--max-bytes", "40000",
        "--eval-tokens", "32", "--threads", "1"]  # fmt: skip


def run(capsys, *argv):
    capsys.readouterr()
    rc = main(["extrapolate", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_tiny_run_then_results_json_and_plot(capsys, tmp_path):
    store = tmp_path / "store"
    rc, out, err = run(capsys, *TINY, "--schemes", "rope,alibi", "--store", store)
    assert rc == 0, err
    assert "alibi: L = 32" in out and "perplexity" in out
    rc, out, err = run(capsys, "--results", "--json", "--store", store)
    assert rc == 0, err
    rows = json.loads(out)
    assert [(r["scheme"], r["eval_len"]) for r in rows] == [
        (s, L) for s in ("alibi", "rope") for L in (8, 16, 32)
    ]
    assert all(r["train_len"] == 8 and 1 < r["ppl"] < 1000 for r in rows)
    png = tmp_path / "fig.png"
    rc, out, err = run(capsys, "--results", "--store", store, "--plot", png)
    assert rc == 0 and png.is_file() and "plot written" in out
    # another configuration into the same store: refused in one line
    rc, out, err = run(capsys, *TINY[:-6], "--steps", "3", "--store", store)
    assert rc == 2 and "another configuration" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--schemes", "bogus"], "schemes"),
        (["--max-factor", "3"], "max_factor"),
        (["--steps", "2", "--time", "3"], "--time"),
        (["--time", "-1"], "--time"),
        (["--results", "--schemes", "rope"], "--results"),
        (["--train-len", "x"], "--train-len"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, argv, match):
    rc, _, err = run(capsys, *argv, "--store", tmp_path / "s")
    assert rc == 2 and match in err and err.count("\n") == 1


def test_results_of_an_empty_store(capsys, tmp_path):
    rc, out, _ = run(capsys, "--results", "--store", tmp_path / "none")
    assert rc == 0 and "no saved results" in out
    png = tmp_path / "p.png"
    rc, _, err = run(capsys, "--results", "--store", tmp_path / "none", "--plot", png)
    assert rc == 2 and "--plot" in err
