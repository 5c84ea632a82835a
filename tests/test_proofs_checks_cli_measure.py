"""``posflow measure``: checkpoints, Hugging Face directories, --train, output and bad input."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from posflow.proofs_checks.cli import main  # noqa: E402
from posflow.proofs_checks.cli import measure as measure_cli  # noqa: E402
from posflow.simulate.models.corpus import load_corpus, windows  # noqa: E402
from posflow.simulate.models.lm import LMConfig  # noqa: E402
from posflow.simulate.models.measure import measure  # noqa: E402
from posflow.simulate.models.train import TrainConfig, train  # noqa: E402

SMALL = ["--n", "16", "--num-seqs", "4", "--max-bytes", "20000"]


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpt2")
    cfg = transformers.GPT2Config(
        n_layer=2,
        n_head=2,
        n_embd=32,
        vocab_size=256,
        n_positions=64,
        bos_token_id=None,
        eos_token_id=None,
    )
    torch.manual_seed(0)
    transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager").save_pretrained(
        path
    )
    return path


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("ckpt") / "tiny.pt"
    tc = TrainConfig(steps=5, batch_size=4, seq_len=16, warmup=1, max_bytes=20_000)
    train(LMConfig(n_layer=2, n_head=2, d_model=16), tc, checkpoint=path, progress=False)
    return path


def run(capsys, *argv):
    capsys.readouterr()  # drop what the fixtures printed
    rc = main(["measure", *map(str, argv)])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_hf_directory_json_matches_a_direct_measurement(capsys, gpt2_dir):
    rc, out, err = run(capsys, gpt2_dir, *SMALL, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["architecture"] == "gpt2" and res["n"] == 16 and res["num_layers"] == 2
    # without a tokenizer the checkpoint reads bytes; the same windows measured directly
    model = transformers.AutoModelForCausalLM.from_pretrained(gpt2_dir, attn_implementation="eager")
    ids = windows(load_corpus(max_bytes=20_000, seed=0).data, 16, 4, seed=0)
    m = measure(model, ids)
    np.testing.assert_allclose(res["profiles"]["measured"], m.influence, rtol=1e-6)
    np.testing.assert_allclose(res["lambdas"], m.lambdas, rtol=1e-6)
    for k in ("attention_only", "residual", "residual_content", "measured"):
        assert sum(res["profiles"][k]) == pytest.approx(1.0, abs=1e-9)
    for v in res["comparison"].values():
        assert 0 <= v["w1"] <= 1 and -1 <= v["spearman"] <= 1


def test_posflow_checkpoint_table_and_plot(capsys, checkpoint, tmp_path):
    png = tmp_path / "fig" / "profiles.png"
    rc, out, err = run(capsys, checkpoint, *SMALL, "--plot", png, "--content-scale", "raw")
    assert rc == 0, err
    assert "lambda_t = [" in out and "residual_content" in out and "W1/(n-1)" in out
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"


def test_train_flag_trains_the_tiny_preset_once(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    rc, out, err = run(capsys, "--train", "--preset", "tiny", *SMALL, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["architecture"] == "posflow" and len(res["lambdas"]) == 2
    assert res["slopes"] == pytest.approx([2**-4, 2**-8])
    assert list((tmp_path / "posflow" / "models").glob("tiny-*.pt"))


def test_help_documents_the_conventions(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["measure", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for phrase in (
        "||a_t|| / (||x_t|| + ||a_t||)",
        "sqrt(d_head)",
        "argmax",
        "attention_only",
        "wasserstein_distance",
        "Spearman",
        "--train",
    ):
        assert phrase in text


def one_line_error(capsys, *argv, match):
    rc, _, err = run(capsys, *argv)
    assert rc == 2
    assert err.count("\n") == 1 and match in err, err
    return err


def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, gpt2_dir, checkpoint):
    one_line_error(capsys, tmp_path / "nothing", match="MODEL must be a posflow checkpoint")
    one_line_error(capsys, tmp_path, match="Hugging Face checkpoint directory with config.json")
    (tmp_path / "junk.pt").write_bytes(b"junk")
    one_line_error(capsys, tmp_path / "junk.pt", match="is not a posflow checkpoint")
    opt = tmp_path / "opt"
    opt.mkdir()
    (opt / "config.json").write_text('{"model_type": "opt"}')
    one_line_error(capsys, opt, match="unsupported architecture 'opt'")
    one_line_error(capsys, checkpoint, "--train", match="give either MODEL")
    one_line_error(capsys, match="give either MODEL")
    one_line_error(capsys, checkpoint, "--n", "1", match="--n must be at least 2")
    small = tmp_path / "small.txt"
    small.write_text("print('hello')\n" * 3)
    one_line_error(capsys, checkpoint, "--corpus", small, "--n", "16", match="too little text")
    one_line_error(
        capsys,
        gpt2_dir,
        "--n",
        "100",
        "--num-seqs",
        "1",
        "--max-bytes",
        "20000",
        match="exceeds the model's maximum sequence length 64",
    )


def test_hf_directory_without_tokenizer_needs_a_byte_vocabulary(capsys, tmp_path):
    cfg = transformers.GPT2Config(
        n_layer=1, n_head=2, n_embd=16, vocab_size=64, bos_token_id=None, eos_token_id=None
    )
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    one_line_error(capsys, tmp_path, *SMALL, match="byte tokens do not fit")


def test_without_torch_the_command_says_how_to_install_it(capsys, monkeypatch):
    monkeypatch.setattr(measure_cli, "_torch_available", lambda: False)
    err = one_line_error(capsys, "--train", match="posflow measure needs torch")
    assert "pip install torch==2.13.0" in err


def test_hf_directory_with_a_tokenizer_tokenizes_the_corpus(capsys, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    trainer = tokenizers.trainers.WordLevelTrainer(vocab_size=200, special_tokens=["[UNK]"])
    text = load_corpus(max_bytes=20_000, seed=0).data.tobytes().decode("utf-8", "replace")
    tok.train_from_iterator(text.splitlines(), trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]")
    fast.save_pretrained(tmp_path)
    cfg = transformers.GPT2Config(
        n_layer=1,
        n_head=2,
        n_embd=16,
        vocab_size=200,
        n_positions=64,
        bos_token_id=None,
        eos_token_id=None,
    )
    transformers.AutoModelForCausalLM.from_config(cfg).save_pretrained(tmp_path)
    rc, out, err = run(capsys, tmp_path, *SMALL, "--json")
    assert rc == 0, err
    res = json.loads(out)
    # the same windows of the tokenizer's ids, measured directly
    ids = fast(text[: 16 * 16 * 4])["input_ids"]
    model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, attn_implementation="eager")
    m = measure(model, windows(ids, 16, 4, seed=0))
    np.testing.assert_allclose(res["profiles"]["measured"], m.influence, rtol=1e-6)


# ------------------------------------------------------------------------------------------
# refused before any model is loaded or trained; threads


@pytest.fixture
def no_work(monkeypatch):
    from posflow.simulate.models import train as train_mod

    def refuse(*a, **k):
        raise AssertionError("loaded or trained before the arguments were checked")

    monkeypatch.setattr(train_mod, "cached_model", refuse)
    monkeypatch.setattr(measure_cli, "load_model", refuse)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_cuda_fails_before_any_work(capsys, no_work):
    err = one_line_error(capsys, "--train", "--device", "cuda", match="--device 'cuda'")
    assert "no CUDA device" in err
    one_line_error(capsys, "--train", "--device", "cuda:3", match="no CUDA device")


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--device", "gpu"], "not a torch device"),
        (["--device", "meta"], "cpu, cuda or mps"),
        (["--threads", "0"], "argument --threads: must be an integer >= 1"),
        (["--seed", "-1"], "argument --seed: must be an integer >= 0"),
        (["--batch-size", "-4"], "argument --batch-size"),
        (["--max-bytes", "0"], "argument --max-bytes"),
        (["--n", "-16"], "--n must be at least 2"),
    ],
)
def test_bad_options_are_refused_before_any_work(capsys, no_work, argv, match):
    one_line_error(capsys, "--train", *argv, match=match)


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["smollm2-135m", "--n", str(10**12)], "one n × n attention matrix"),
        (["smollm2-135m", "--n", "4096", "--num-seqs", "10000"], "--n/--num-seqs"),
        (["smollm2-135m", "--n", "512", "--max-bytes", "1000"], "--max-bytes 1000"),
        (["smollm2-135m", "--text", "english", "--n", "8192", "--num-seqs", "1000"],
         "the English text"),
        (["smollm2-135m", "--corpus", "/missing/corpus"], "--corpus '/missing/corpus' does not"),
        (["/missing/model.pt"], "MODEL must be a posflow checkpoint"),
        (["--train", "--corpus", "/missing/corpus"], "--corpus '/missing/corpus'"),
        (["--train", "--n", str(10**12)], "one n × n attention matrix"),
    ],
)  # fmt: skip
def test_every_argument_is_checked_before_a_model_is_loaded(capsys, monkeypatch, no_work,
                                                             argv, match):  # fmt: skip
    from posflow.simulate.models import hub

    monkeypatch.setattr(hub, "model_path", lambda name: "/fake/installed")
    monkeypatch.setattr(hub, "load_pretrained", measure_cli.load_model)  # refuses (no_work)
    one_line_error(capsys, *argv, match=match)


def test_run_measure_checks_its_options_before_measuring():
    from posflow.simulate.models.profiles import run_measure

    for kw, match in (({"content_scale": "nope"}, "content_scale"),
                      ({"bootstrap": -1}, "bootstrap"), ({"seed": -1}, "seed")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            run_measure(None, None, **kw)  # no model: it would fail only once used


def test_a_corrupt_installed_model_is_one_line_naming_the_reinstall(capsys, monkeypatch,
                                                                    tmp_path):  # fmt: skip
    folder = tmp_path / "cache" / "hf-models" / "smollm2-135m"
    cfg = transformers.LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=1, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=64)  # fmt: skip
    transformers.LlamaForCausalLM(cfg).save_pretrained(folder)
    (folder / "posflow-model.json").write_text("{}")
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))
    err = one_line_error(capsys, "--model", "smollm2-135m", "--n", "8", "--num-seqs", "1",
                         match="the cached model 'smollm2-135m'")  # fmt: skip
    assert "corrupt" in err and "posflow models install smollm2-135m --force" in err


def test_bad_plot_paths_are_refused_before_any_work(capsys, tmp_path, no_work):
    from cli_usage import read_only_folder

    one_line_error(capsys, "--train", "--plot", tmp_path, match="--plot")
    one_line_error(capsys, "--train", "--plot", tmp_path / "p.docx", match=".png, .ps")
    with read_only_folder(tmp_path) as ro:
        one_line_error(capsys, "--train", "--plot", ro / "p.png", match="cannot write")


def test_threads_are_applied_and_recorded(capsys, checkpoint, monkeypatch):
    from posflow.simulate import _threads

    for var in _threads._ENV_VARS:
        monkeypatch.setenv(var, "1")
    before = torch.get_num_threads()
    try:
        rc, out, err = run(capsys, checkpoint, *SMALL, "--threads", "1", "--json")
        assert rc == 0, err
        res = json.loads(out)
        assert res["threads"] == 1 and res["device"] == "cpu"
        assert torch.get_num_threads() == 1
    finally:
        _threads.set_threads(before, torch=True)


def test_english_text_sinks_and_intervals(capsys, gpt2_dir):
    from posflow.simulate.compare import w1_normalised
    from posflow.simulate.models.english import english_text
    from posflow.simulate.models.predict import predict_sink_profiles
    from posflow.simulate.models.sinks import sink_table

    argv = ["--n", "16", "--num-seqs", "6", "--text", "english", "--bootstrap", "50"]
    rc, out, err = run(capsys, gpt2_dir, *argv, "--json")
    assert rc == 0, err
    res = json.loads(out)
    assert res["corpus"].startswith("English: pydoc_data.topics")
    # the same English byte windows measured directly (GPT-2 has value norms: (d) is there)
    model = transformers.AutoModelForCausalLM.from_pretrained(gpt2_dir, attn_implementation="eager")
    ids = windows(list(english_text().encode("utf-8")), 16, 6, seed=0)
    m = measure(model, ids, value_norms=True, layer_influence=True)
    pred = predict_sink_profiles(m)
    for k in ("value_norm", "sink_aware"):
        np.testing.assert_allclose(res["profiles"][k], pred[k], rtol=1e-6)
        c = res["comparison"][k]
        assert c["w1"] == pytest.approx(w1_normalised(pred[k], m.influence), rel=1e-5)
        lo, hi = c["w1_interval"]
        assert 0 <= lo <= hi <= 1 and c["spearman_interval"][0] <= c["spearman_interval"][1]
    tab = sink_table(m.attention, m.value_weights, m.layer_influence)
    for k, v in tab.items():
        np.testing.assert_allclose(res["sinks"][k], v, rtol=1e-5)
    assert res["bootstrap"] == {"reps": 50, "seed": 0, "level": 0.95, "over": "sequences"}
