"""simulate.models.context_length: block sums against direct sums, per-window statistics against
direct means of per-token losses, next-token losses against full-logit cross-entropy and prefix
forward passes (a tiny random Llama), the store round trip, and argument checks."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posflow.simulate.models import context_length as C


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 80), block=st.integers(1, 17), seed=st.integers(0, 2**31 - 1))
def test_block_sums_cover_every_predicted_position_once(n, block, seed):
    x = np.random.default_rng(seed).gamma(2.0, 1.0, n)
    s = C.block_sums(x, block)
    # block j sums losses i with predicted position t = i + 1 in [j·B, (j+1)·B)
    direct = [x[max(0, j * block - 1) : (j + 1) * block - 1].sum() for j in range(len(s))]
    np.testing.assert_allclose(s, direct, rtol=1e-13)  # fsum vs pairwise numpy sums
    assert len(s) == math.ceil((n + 1) / block)
    assert math.isclose(sum(s), x.sum(), rel_tol=1e-13)


def _store(raw, L, F, B):
    return {"meta": {"train_context": L, "factor": F, "block": B},
            "windows": [{"sums": C.block_sums(x, B)} for x in raw]}  # fmt: skip


def test_window_statistics_equal_direct_means():
    L, F, B = 32, 4, 8
    raw = [np.random.default_rng(k).gamma(2.0, 1.5, F * L - 1) for k in range(4)]
    ws = C.window_statistics(_store(raw, L, F, B))
    assert sorted(ws["ppl"]) == [1, 2, 4] and sorted(ws["excess"]) == [2, 4]
    for f in (1, 2, 4):
        want = [math.exp(x[: f * L - 1].mean()) for x in raw]
        np.testing.assert_allclose(ws["ppl"][f], want, rtol=1e-13)
    for f in (2, 4):
        want = [x[f * L // 2 - 1 : f * L - 1].mean() - x[L // 2 - 1 : L - 1].mean() for x in raw]
        np.testing.assert_allclose(ws["excess"][f], want, atol=1e-13)


def test_window_statistics_refuse_a_context_off_the_blocks():
    with pytest.raises(ValueError, match="multiple of the block"):
        C.window_statistics(_store([np.ones(23)], 12, 2, 8))


@pytest.mark.parametrize("kw, match", [
    ({"factor": 0}, "factor must be a positive integer"),
    ({"block": 2.5}, "block must be a positive integer"),
    ({"threads": True}, "threads must be a positive integer"),
    ({"windows": 0}, "windows must be a positive integer or None"),
])  # fmt: skip
def test_config_refuses_bad_arguments(kw, match):
    with pytest.raises(ValueError, match=match):
        C.ContextConfig(**kw)


def test_config_refuses_a_model_that_is_not_a_name():
    with pytest.raises(TypeError, match="model must be a non-empty string"):
        C.ContextConfig(model=3)


def test_measure_store_refuses_a_file_as_store(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="not a folder"):
        C.measure_store(C.ContextConfig(), tmp_path / "f")
    with pytest.raises(TypeError, match="cfg must be a ContextConfig"):
        C.measure_store({}, tmp_path)


def test_read_store_round_trip_and_format(tmp_path):
    assert C.read_context_store(tmp_path / "none") is None
    (tmp_path / "meta.json").write_text(json.dumps({"format": C.FORMAT, "factor": 2}))
    (tmp_path / "w16_000.json").write_text(json.dumps({"sums": [1.0]}))
    got = C.read_context_store(tmp_path)
    assert got["meta"]["factor"] == 2 and got["windows"] == [{"sums": [1.0]}]
    (tmp_path / "meta.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="is not a posflow-context-length store"):
        C.read_context_store(tmp_path)


def test_main_prints_one_line_for_bad_input(capsys):
    assert C.main(["--store", "/tmp/x", "--factor", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "factor must be a positive integer" in err[0]


def test_training_context_reads_the_config():
    class Cfg:
        max_position_embeddings = 8192

    assert C.training_context(Cfg()) == 8192
    with pytest.raises(ValueError, match="max_position_embeddings"):
        C.training_context(object())


def test_next_token_nll_against_logits_and_prefixes():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=1, max_position_embeddings=8,
                                   attn_implementation="sdpa")  # fmt: skip
    torch.manual_seed(1)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 40, (24,))
    got = C.next_token_nll(model, ids, chunk=5)
    assert got.dtype == np.float64 and got.shape == (23,)
    with torch.inference_mode():
        logits = model(ids[None]).logits[0, :-1].double()
    ref = torch.nn.functional.cross_entropy(logits, ids[1:], reduction="none").numpy()
    # float32 logits of one pass vs the same rows through the head in chunks: a few ulps
    np.testing.assert_allclose(got, ref, atol=1e-5)
    # causality: a prefix's losses are the first losses of the longer window (float32 passes
    # of different lengths: a few ulps of activations of order 1)
    np.testing.assert_allclose(C.next_token_nll(model, ids[:10]), got[:9], atol=1e-5)
    with pytest.raises(ValueError, match="one window of ≥ 2 tokens"):
        C.next_token_nll(model, ids[:1])
