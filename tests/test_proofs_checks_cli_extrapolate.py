"""``posflow extrapolate``: a tiny multi-seed run into a store, --results (table with intervals and
the unigram ceiling), --json, --plot, bad input."""

import json

import pytest

torch = pytest.importorskip("torch")

from posflow.proofs_checks.cli import main  # noqa: E402

TINY = ["--train-len", "8", "--max-factor", "4", "--steps", "4", "--batch-size", "2",
        "--n-layer", "1", "--n-head", "2", "--d-head", "8", "--base", "100",
        "--vocab-size", "300", "--code-bytes", "0", "--english-chars", "40000",
        "--eval-windows", "2", "--angle-draws", "2", "--threads", "1"]  # fmt: skip


def run(capsys, *argv):
    capsys.readouterr()
    rc = main(["extrapolate", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))


def test_tiny_run_then_results_json_and_plot(capsys, tmp_path, cache):
    store = tmp_path / "store"
    argv = [*TINY, "--schemes", "rope,random_qk", "--seeds", "0", "1", "--store", store]
    rc, out, err = run(capsys, *argv)
    assert rc == 0, err
    assert "random_qk s1: PPL 8:" in out and "PPL(L)/PPL(L_train)" in out
    rc, out, err = run(capsys, "--results", "--store", store)
    assert rc == 0, err
    assert "unigram perplexity of the held-out text" in out and "tokens per length: 8: 16" in out
    assert "2x" in out and "4x" in out and "[" in out  # intervals over the two seeds
    rc, out, err = run(capsys, "--results", "--json", "--store", store)
    rows = json.loads(out)
    assert [(r["scheme"], r["eval_len"]) for r in rows] == [
        (s, L) for s in ("random_qk", "rope") for L in (8, 16, 32)
    ]
    assert all(r["seeds"] == 2 and r["lo"] <= r["ratio"] <= r["hi"] for r in rows)
    png = tmp_path / "fig.png"
    rc, out, err = run(capsys, "--results", "--store", store, "--plot", png)
    assert rc == 0 and png.is_file() and "plot written" in out
    # another configuration into the same store: refused in one line
    rc, out, err = run(capsys, *TINY[:-2], "--steps", "5", "--store", store)
    assert rc == 2 and "another config" in err and err.count("\n") == 1


def test_the_committed_store_prints():
    from posflow.simulate.models.seed_store import COMMITTED_STORE, load_seed_store

    if load_seed_store(COMMITTED_STORE) is None:
        pytest.skip("no committed store")
    assert main(["extrapolate", "--results"]) == 0


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--schemes", "bogus"], "schemes"),
        (["--max-factor", "3"], "max_factor"),
        (["--results", "--schemes", "rope"], "--results"),
        (["--train-len", "x"], "--train-len"),
        (["--part", "2/2"], "--part"),
        (["--seeds", "0", "0"], "seeds"),
    ],
)
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, cache, argv, match):
    rc, _, err = run(capsys, *argv, "--store", tmp_path / "s")
    assert rc == 2 and match in err and err.count("\n") == 1


def test_results_of_an_empty_store(capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    rc, out, _ = run(capsys, "--results", "--store", tmp_path / "empty")
    assert rc == 0 and "no saved results" in out
    png = tmp_path / "p.png"
    rc, _, err = run(capsys, "--results", "--store", tmp_path / "empty", "--plot", png)
    assert rc == 2 and "--plot" in err


@pytest.mark.parametrize("extra", [[], ["--json"], ["--judge"]])
def test_results_of_a_store_that_does_not_exist_is_one_line(capsys, tmp_path, extra):
    missing = tmp_path / "none"
    rc, out, err = run(capsys, "--results", "--store", missing, *extra)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "--store" in err and str(missing) in err and "does not exist" in err


# ------------------------------------------------------------------------------------------
# stores, plots, devices and threads: refused before any training


@pytest.fixture
def no_training(monkeypatch):
    from posflow.simulate.models import extrapolate_seeds

    def refuse(*a, **k):
        raise AssertionError("trained before the arguments were checked")

    monkeypatch.setattr(extrapolate_seeds, "run_seeds", refuse)


def one_line(capsys, *argv, words):
    from cli_usage import assert_usage_error

    return assert_usage_error(capsys, ["extrapolate", *argv], *words)


def test_bad_stores_and_plots_are_refused_before_training(capsys, tmp_path, no_training):
    from cli_usage import read_only_folder

    f = tmp_path / "file"
    f.write_text("")
    one_line(capsys, *TINY, "--store", f, words=("--store", "is a file, not a folder"))
    one_line(capsys, "--results", "--store", f, words=("--store", "not a folder"))
    one_line(capsys, *TINY, "--store", f / "s", words=("--store", "is a file"))
    one_line(capsys, *TINY, "--plot", tmp_path, words=("--plot", "is a folder"))
    one_line(capsys, *TINY, "--plot", tmp_path / "x.docx", words=("--plot", ".png", ".pdf", ".svg"))
    with read_only_folder(tmp_path) as ro:
        one_line(capsys, *TINY, "--store", ro, words=("--store", "cannot write"))
        one_line(capsys, *TINY, "--store", ro / "new", words=("--store", "cannot write"))
        one_line(capsys, "--results", "--plot", ro / "p.png", words=("--plot", "cannot write"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "read-only"]


def test_the_default_store_is_checked_too(capsys, tmp_path, monkeypatch, no_training):
    f = tmp_path / "cache"
    f.write_text("")  # the per-user cache folder is a file
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(f))
    one_line(capsys, *TINY, words=("--store (the per-user cache)", "is a file"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_fails_before_training(capsys, tmp_path, no_training):
    one_line(capsys, *TINY, "--device", "cuda", "--store", tmp_path / "s",
             words=("--device 'cuda'", "no CUDA device"))  # fmt: skip
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--threads", "0"], ("--threads", "integer >= 1")),
        (["--lr", "nan"], ("--lr", "finite")),
        (["--device", "tpu"], ("--device", "not a torch device")),
    ],
)
def test_bad_options_are_one_line(capsys, tmp_path, no_training, argv, words):
    one_line(capsys, *TINY[:-2], *argv, "--store", tmp_path / "s", words=words)


def test_threads_are_applied(capsys, tmp_path, monkeypatch, cache):
    from posflow.simulate import _threads

    for var in _threads._ENV_VARS:
        monkeypatch.setenv(var, "1")
    before = torch.get_num_threads()
    try:
        argv = [*TINY, "--schemes", "alibi", "--seeds", "0", "--store", tmp_path / "s"]
        rc, out, err = run(capsys, *argv)
        assert rc == 0, err
        assert "1 CPU thread(s), device cpu" in out and torch.get_num_threads() == 1
    finally:
        _threads.set_threads(before, torch=True)
