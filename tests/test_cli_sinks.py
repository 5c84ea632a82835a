"""``posflow sinks MODEL``: both Sink_ε conventions and the sink intervention of a tiny random
Llama saved as a Hugging Face folder (no tokenizer: UTF-8 bytes of the English text), checked
against the library called directly; text, figure, progress on stderr, and bad input refused in
one line before any model is loaded."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from cli_usage import assert_usage_error, run  # noqa: E402

from posflow.proofs_checks.cli import measure as measure_cli  # noqa: E402
from posflow.simulate.models.corpus import windows  # noqa: E402
from posflow.simulate.models.english import english_text  # noqa: E402

SMALL = ["--n", "10", "--windows", "3", "--resamples", "40", "--seed", "2"]


def _save(path, cfg):
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    model.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    cfg = transformers.LlamaConfig(hidden_size=16, intermediate_size=24, vocab_size=256,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64,
                                   bos_token_id=None, eos_token_id=None)  # fmt: skip
    return _save(tmp_path_factory.mktemp("llama"), cfg)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    cfg = transformers.GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=256, n_positions=32,
                                  bos_token_id=None, eos_token_id=None)  # fmt: skip
    return _save(tmp_path_factory.mktemp("gpt2"), cfg)


def _direct(path):
    from posflow.simulate.models.sink_intervention import sink_intervention
    from posflow.simulate.models.sinks_report import sink_report

    model = transformers.AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager")
    text = np.frombuffer(english_text().encode("utf-8"), dtype=np.uint8)
    ids = windows(text, 10, 3, seed=2)
    return sink_report(model, ids), sink_intervention(model, ids, resamples=40, seed=2)


def test_json_matches_the_library_and_progress_goes_to_stderr(capsys, llama_dir):
    code, out, err = run(capsys, "sinks", llama_dir, *SMALL, "--json")
    assert code == 0, err
    res = json.loads(out)
    rep, iv = _direct(llama_dir)
    s = res["sinks"]
    assert s["rate"] == pytest.approx(rep.rate) and s["eps"] == 0.3
    assert s["rate_per_sequence"] == pytest.approx(rep.rate_per_sequence)
    assert set(s["conventions"]) == {"rate", "rate_per_sequence"}
    np.testing.assert_allclose(s["heads_above_per_sequence"], rep.text.heads_above_per_sequence)
    got = res["intervention"]
    assert (got["n"], got["windows"], got["layers"]) == (10, 3, 2)
    assert [r["layers"] for r in got["rows"]] == ["0", "0", "1", "1", "all", "all"]
    for a, b in zip(got["rows"], iv.table(), strict=True):
        assert a["target"] == b["target"]
        for k in ("dnll", "w1", "dmass0", "moved"):
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k
    assert len(got["diagonal_minus_uniform"]) == 3
    assert "sink intervention: 7/7" in err and "Sink_eps done" in err  # piped: plain lines


def test_text_tables_and_plot(capsys, llama_dir, tmp_path):
    png = tmp_path / "sinks.png"
    code, out, err = run(capsys, "sinks", llama_dir, *SMALL, "--target", "uniform", "drop",
                         "--layers", "all", "--plot", png)  # fmt: skip
    assert code == 0, err
    assert "mean, then threshold" in out and "threshold per sequence, then mean" in out
    assert "sink intervention (fraction 1" in out and "| all | drop |" in out
    assert "diagonal minus uniform" not in out  # no diagonal target asked for
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--n", "1"], ["--n must be at least 2"]),
        (["--windows", "1"], ["--windows must be at least 2"]),
        (["--eps", "1.5"], ["--eps must be in (0, 1)"]),
        (["--eps", "nan"], ["--eps must be in (0, 1)"]),
        (["--fraction", "2"], ["--fraction must be in [0, 1]"]),
        (["--target", "diagonal", "diagonal"], ["--target must name each target once"]),
        (["--target", "middle"], ["--target", "invalid choice"]),
        (["--layers", "3"], ["--layers", "invalid choice"]),
        (["--resamples", "0"], ["--resamples"]),
        (["--n", "20000", "--windows", "100"], ["--n/--windows", "English text"]),
        (["--n", "200000"], ["--n", "attention matrix"]),
        (["--plot", "out.unknown"], ["--plot"]),
    ],
)
def test_bad_options_are_one_line_before_loading(capsys, monkeypatch, llama_dir, extra, words):
    monkeypatch.setattr(measure_cli, "load_model", lambda *a: pytest.fail("loaded a model"))
    assert_usage_error(capsys, ["sinks", llama_dir, *extra], "posflow sinks", *words)


def test_bad_models_are_one_line_before_loading(capsys, monkeypatch, gpt2_dir, tmp_path):
    monkeypatch.setattr(measure_cli, "load_model", lambda *a: pytest.fail("loaded a model"))
    assert_usage_error(capsys, ["sinks", gpt2_dir], "MODEL", "'gpt2'", "attention inline")
    assert_usage_error(capsys, ["sinks", tmp_path / "missing"], "MODEL", "does not exist")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_usage_error(capsys, ["sinks", empty], "MODEL", "config.json")
    assert_usage_error(capsys, ["sinks"], "MODEL")
