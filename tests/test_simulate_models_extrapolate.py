"""simulate.models.extrapolate: chunked attention, perplexity, the resumable run store (AT20)."""

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.models import extrapolate as X  # noqa: E402
from posflow.simulate.models.corpus import load_corpus, windows  # noqa: E402

TINY = dict(train_len=8, max_factor=4, steps=3, batch_size=4, n_layer=1, n_head=2, d_model=16,
            max_bytes=60_000, eval_tokens=64, min_windows=2, chunk=5, warmup=1)  # fmt: skip


@pytest.mark.parametrize("scheme", X.DEFAULT_SCHEMES)
def test_chunked_logits_equal_the_plain_forward(scheme):
    cfg = X.ExtrapolationConfig(**{**TINY, "n_layer": 2})
    model = X.build_model(scheme, cfg).eval()
    with torch.no_grad():
        for blk in model.blocks:  # non-zero learned angles, so the check is not RoPE's
            if hasattr(blk.attn.scheme, "angle_emb"):
                blk.attn.scheme.angle_emb.normal_(0, 0.3)
    idx = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 23)))
    with torch.no_grad():
        plain = model(idx)
    for chunk in (1, 5, 64):
        assert float((X.chunked_logits(model, idx, chunk) - plain).abs().max()) < 1e-5


def test_perplexity_is_exp_mean_cross_entropy_of_the_seeded_windows():
    cfg = X.ExtrapolationConfig(**TINY)
    model = X.build_model("alibi", cfg).eval()
    tokens = load_corpus(None, max_bytes=20_000).data
    ppl, nats = X.perplexity(model, tokens, 16, 3, chunk=4)
    w = torch.from_numpy(windows(tokens, 17, 3, seed=42 + 16))
    with torch.no_grad():
        ref = float(model.loss(w[:, :-1], w[:, 1:]))
    assert abs(nats - ref) < 1e-5 and abs(ppl - math.exp(nats)) < 1e-9
    with pytest.raises(ValueError, match="length"):
        X.perplexity(model, tokens, 0, 3)


def test_training_by_steps_is_deterministic_and_lowers_the_loss():
    cfg = X.ExtrapolationConfig(**{**TINY, "steps": 40, "lr": 1e-2})
    tokens = load_corpus(None, max_bytes=60_000).data
    _, r1 = X.train_scheme("random_qkv", cfg, tokens)
    _, r2 = X.train_scheme("random_qkv", cfg, tokens)
    assert r1["steps"] == 40 and r1["final_train_loss"] == r2["final_train_loss"]
    assert r1["final_train_loss"] < math.log(256) - 1.0  # well below the uniform byte model


def test_run_store_resumes_and_refuses_another_configuration(tmp_path):
    cfg = X.ExtrapolationConfig(**TINY, schemes=("rope", "random_qk"))
    logs = []
    rows = X.run_extrapolation(cfg, tmp_path, log=logs.append)
    assert [(r["scheme"], r["eval_len"]) for r in rows] == [
        (s, L) for s in ("random_qk", "rope") for L in (8, 16, 32)
    ]
    assert all(set(r) == {"scheme", "train_len", "eval_len", "ppl"} for r in rows)
    blob = json.loads((tmp_path / "rope.json").read_text())
    assert blob["train"]["steps"] == 3 and blob["rows"][2]["windows"] == 2
    before = (tmp_path / "rope.json").stat().st_mtime_ns
    more = X.ExtrapolationConfig(**TINY, schemes=("rope", "alibi"))  # same identity: resumes
    logs.clear()
    X.run_extrapolation(more, tmp_path, log=logs.append)
    assert "rope: already in the store, skipped" in logs
    assert (tmp_path / "rope.json").stat().st_mtime_ns == before
    assert len(X.load_results(tmp_path)) == 9
    with pytest.raises(ValueError, match=r"another configuration.*steps"):
        X.run_extrapolation(X.ExtrapolationConfig(**{**TINY, "steps": 4}), tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ValueError, match=r"bad\.json"):
        X.load_results(tmp_path)
    assert X.load_results(tmp_path / "missing") == []


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"max_factor": 3}, "max_factor"),
        ({"train_len": 0}, "train_len"),
        ({"schemes": ("rope", "bogus")}, "schemes"),
        ({"schemes": ("rope", "rope")}, "schemes"),
        ({"time_s": -1.0}, "time_s"),
        ({"lr": float("nan")}, "lr"),
        ({"d_model": 18, "n_head": 2}, "d_model"),
        ({"threads": 0}, "threads"),
    ],
)
def test_bad_configurations_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        X.ExtrapolationConfig(**kw)


def test_eval_lengths_and_identity():
    cfg = X.ExtrapolationConfig()
    assert cfg.eval_lengths == [64, 128, 256, 512, 1024, 2048, 4096]
    assert "schemes" not in cfg.identity() and "device" not in cfg.identity()
    with pytest.raises(TypeError, match="cfg"):
        X.run_extrapolation({"train_len": 8})
    with pytest.raises(TypeError, match="model"):
        X.chunked_logits("model", torch.zeros(1, 3, dtype=torch.long))
