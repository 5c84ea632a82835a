"""simulate.models.synthetic_train: scheme bases, fixed shared test batches, chunked evaluation
against the plain forward pass, a tiny store that is written, resumed and refused when its
configuration differs, and bad input."""

import importlib.metadata
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.models import synthetic_train as ST  # noqa: E402
from posflow.simulate.models._store import code_identity  # noqa: E402
from posflow.simulate.models.extrapolate_seeds import mixing_base  # noqa: E402
from posflow.simulate.models.synthetic import AssociativeRecall, FlipFlop  # noqa: E402


def tiny(**kw):
    base = dict(
        tasks=(FlipFlop(0.8),),
        probes={"flipflop-p0.8": (FlipFlop.sparse(),)},
        train_len=8,
        factors=(1, 2, 4),
        steps=4,
        batch_size=4,
        warmup=1,
        n_layer=1,
        n_head=2,
        d_model=16,
        mlp_ratio=2,
        base=100.0,
        test_tokens=64,
        eval_chunk=8,
        eval_batch_tokens=32,
        progress_seconds=0.0,
    )
    return ST.SyntheticRunConfig(**{**base, **kw})


def test_rope_keeps_its_own_base_and_rotations_take_the_mixing_base():
    cfg = ST.SyntheticRunConfig()
    assert cfg.base == mixing_base(32, 64) and cfg.rope_base == 1e4  # d_head 64/2 = 32
    assert ST.scheme_options("rope", cfg, 3, 5) == {"base": 1e4}
    assert ST.scheme_options("random_qkv", cfg, 3, 5) == {"base": cfg.base, "seed": 3}
    assert ST.scheme_options("random_qk_alibi", cfg, 3, 5) == {"base": cfg.base, "seed": 3,
                                                               "slopes": [0.5, 0.25]}
    assert ST.scheme_options("learned_qk", cfg, 3, 5) == {"base": cfg.base, "vocab_size": 5}
    assert ST.scheme_options("path", cfg, 3, 5) == {"d_model": 64}
    assert ST.scheme_options("alibi", cfg, 3, 5) == {"slopes": [0.5, 0.25]}
    assert ST.scheme_options("nope", cfg, 3, 5) == {}
    m = ST.build_model("rope", cfg, 0, 5)
    assert m.blocks[0].attn.scheme.base == 1e4
    m = ST.build_model("learned_qkv", cfg, 0, 5)
    f = m.blocks[0].attn.scheme.freq
    assert float(f[1]) == pytest.approx(cfg.base ** (-2 / 32), rel=1e-12)  # f_b = base^{-2b/d}


def test_alibi_slopes_default_to_the_steep_ones_and_reach_the_model_and_the_store():
    cfg = ST.SyntheticRunConfig()
    # 2^{-(h+1)}: the steepest two of the textbook 8-head slopes 2^{-8(h+1)/8}
    assert cfg.alibi_slopes == ST.steep_slopes(2) == (0.5, 0.25)
    assert ST.steep_slopes(8) == tuple(2.0 ** (-8 * (h + 1) / 8) for h in range(8))
    assert cfg.identity()["alibi_slopes"] == [0.5, 0.25]
    assert ST.SyntheticRunConfig(alibi_slopes=(1 / 16, 1 / 256)).key() != cfg.key()
    for scheme in ("alibi", "random_qk_alibi"):
        m = ST.build_model(scheme, cfg, 0, 5)
        assert m.blocks[1].attn.scheme.slopes().tolist() == [0.5, 0.25]  # exact in float32
    m = ST.build_model("alibi", ST.SyntheticRunConfig(alibi_slopes=[1 / 16, 1 / 256]), 0, 5)
    assert m.blocks[0].attn.scheme.slopes().tolist() == [1 / 16, 1 / 256]


def test_eval_batches_are_fixed_and_shared():
    cfg = tiny()
    a, b = ST.eval_batches(FlipFlop(), cfg), ST.eval_batches(FlipFlop(), cfg)
    assert sorted(a) == [8, 16, 32]
    for L in a:
        assert np.array_equal(a[L].tokens, b[L].tokens) and len(a[L]) == 64 // L
    want = FlipFlop().sample(64 // 16, 16, np.random.default_rng([cfg.test_seed, 16]))
    assert np.array_equal(a[16].tokens, want.tokens)


@pytest.mark.parametrize("scheme", ["rope", "random_qk_alibi", "learned_qkv", "path"])
def test_chunked_sub_batched_errors_equal_the_plain_forward_pass(scheme):
    torch.set_num_threads(1)
    cfg = tiny()
    task = AssociativeRecall(3, 4)
    model = ST.build_model(scheme, cfg, 0, task.vocab_size).eval()
    if scheme == "learned_qkv":  # non-trivial learned angles (zero-initialised otherwise)
        with torch.no_grad():
            for b in model.blocks:
                b.attn.scheme.angle_emb.normal_(0, 0.5, generator=torch.Generator().manual_seed(1))
    batch = task.sample(6, 32, np.random.default_rng(2))
    got = ST.evaluate_errors(model, task, batch, chunk=5, batch_tokens=64)  # 2 rows, 7 chunks
    with torch.no_grad():
        want = task.error(model(torch.from_numpy(batch.tokens)), batch)
    assert got == want and got[1] == batch.count


def test_a_tiny_store_is_written_resumed_and_guarded(tmp_path):
    torch.set_num_threads(1)
    cfg = tiny()
    lines = []
    written = ST.run_store(cfg, tmp_path, ("rope", "random_qkv"), (0,), log=lines.append)
    assert [p.name for p in written] == ["flipflop-p0.8__rope__s0.json",
                                         "flipflop-p0.8__random_qkv__s0.json"]  # fmt: skip
    rec = json.loads(written[1].read_text())
    assert rec["scheme_options"] == {"base": cfg.base, "seed": 0} and rec["eval_seed"] == 1234
    assert rec["code"] == code_identity(ST.TRAINING_SOURCES)  # the code that wrote the run
    assert rec["train"]["steps"] == 4 and rec["train"]["cpu_seconds"] > 0
    ev = rec["eval"]
    assert set(ev) == {"flipflop-p0.8", "flipflop-p0.98"}
    assert ev["flipflop-p0.8"]["lengths"] == [8, 16, 32]
    assert ev["flipflop-p0.8"]["sequences"] == [8, 4, 2]
    batches = ST.eval_batches(FlipFlop(0.8), cfg)
    assert ev["flipflop-p0.8"]["counts"] == [batches[L].count for L in (8, 16, 32)]
    assert all(0 <= e <= c for e, c in zip(ev["flipflop-p0.8"]["errors"],
                                           ev["flipflop-p0.8"]["counts"], strict=True))  # fmt: skip
    assert ev["flipflop-p0.8"]["chance"] == 0.5
    assert any("step 4/4" in s for s in lines)  # training lines, not only run lines
    assert sum("error at 1/2/4×" in s for s in lines) == 2
    # a rerun finds both files and trains nothing; a new seed adds exactly its runs
    lines.clear()
    assert ST.run_store(cfg, tmp_path, ("rope", "random_qkv"), (0,), log=lines.append) == []
    assert sum("already in the store" in s for s in lines) == 2
    more = ST.run_store(cfg, tmp_path, ("rope",), (0, 1), log=None)
    assert [p.name for p in more] == ["flipflop-p0.8__rope__s1.json"]
    store = ST.load_store(tmp_path)
    assert set(store["runs"]) == {("flipflop-p0.8", "rope", 0), ("flipflop-p0.8", "random_qkv", 0),
                                  ("flipflop-p0.8", "rope", 1)}  # fmt: skip
    # the same run trained again gives the same numbers (fixed seeds, one thread)
    again = ST.run_store(cfg, tmp_path / "again", ("random_qkv",), (0,), log=None)
    rec2 = json.loads(again[0].read_text())
    assert rec2["eval"] == rec["eval"] and rec2["train"]["final_loss"] == rec["train"]["final_loss"]
    with pytest.raises(ValueError, match="another config"):
        ST.run_store(tiny(steps=5), tmp_path, ("rope",), (0,), log=None)
    no_tmp = [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    assert no_tmp == []


def test_part_splits_the_run_list(tmp_path):
    cfg = tiny(steps=1, tasks=(AssociativeRecall(2, 2),), probes={})
    a = ST.run_store(cfg, tmp_path, ("alibi", "nope"), (0, 1), part=(0, 2), log=None)
    b = ST.run_store(cfg, tmp_path, ("alibi", "nope"), (0, 1), part=(1, 2), log=None)
    assert [p.name for p in a] == ["recall-k2-v2__alibi__s0.json", "recall-k2-v2__alibi__s1.json"]
    assert [p.name for p in b] == ["recall-k2-v2__nope__s0.json", "recall-k2-v2__nope__s1.json"]


def test_loss_on_every_next_token_also_trains():
    cfg = tiny(loss="all", steps=2)
    model, rec = ST.train_run(FlipFlop(), "alibi", 0, cfg)
    assert rec["steps"] == 2 and np.isfinite(rec["final_loss"]) and not model.training


def test_bad_input_names_the_argument(tmp_path):
    for kw, name in [({"steps": 0}, "steps"), ({"loss": "bits"}, "loss"),
                     ({"factors": (2, 1)}, "factors"), ({"train_len": 7}, "train_len"),
                     ({"d_model": 18}, "d_model"), ({"lr": float("nan")}, "lr"),
                     ({"test_tokens": 16}, "test_tokens"), ({"warmup": -1}, "warmup"),
                     ({"tasks": ({"name": "copying"},)}, "spec"),
                     ({"probes": {"flipflop-p0.8": (AssociativeRecall(),)}}, "probes"),
                     ({"tasks": (FlipFlop(), FlipFlop())}, "tasks"),
                     ({"rope_base": 1.0}, "rope_base"), ({"base": None}, "base"),
                     ({"alibi_slopes": (0.5,)}, "alibi_slopes"),
                     ({"alibi_slopes": (0.5, float("inf"))}, "alibi_slopes"),
                     ({"alibi_slopes": (0.5, 0.0)}, "alibi_slopes"),
                     ({"alibi_slopes": "steep"}, "alibi_slopes")]:  # fmt: skip
        with pytest.raises(ValueError, match=name):
            tiny(**kw)
    cfg = tiny()
    with pytest.raises(ValueError, match="schemes"):
        ST.run_store(cfg, tmp_path, ("rope", "sinusoid"), (0,), log=None)
    with pytest.raises(ValueError, match="seeds"):
        ST.run_store(cfg, tmp_path, ("rope",), (0, 0), log=None)
    with pytest.raises(ValueError, match="part"):
        ST.run_store(cfg, tmp_path, ("rope",), (0,), part=(2, 2), log=None)
    with pytest.raises(TypeError, match="cfg"):
        ST.run_store({}, tmp_path, ("rope",), (0,), log=None)
    with pytest.raises(ValueError, match="seed"):
        ST.train_run(FlipFlop(), "rope", -1, cfg)
    with pytest.raises(ValueError, match="scheme"):
        ST.scheme_options("sinusoid", cfg, 0, 5)
    model = ST.build_model("rope", cfg, 0, 5)
    with pytest.raises(ValueError, match="vocabulary"):
        ST.evaluate_errors(model, AssociativeRecall(), AssociativeRecall().sample(1, 8, 0))
    with pytest.raises(ValueError, match=r"meta\.json"):
        ST.load_store(tmp_path / "nothing")


def test_the_module_command_trains_a_store_in_parts(tmp_path, capsys):
    cfg = tiny(steps=1, tasks=(AssociativeRecall(2, 2),), probes={})
    store = str(tmp_path / "s")
    args = ["--store", store, "--seeds", "0", "1", "--schemes", "alibi", "rope"]
    assert ST.main([*args, "--part", "1/2"], cfg=cfg) == 0
    assert sorted(ST.load_store(store)["runs"]) == [("recall-k2-v2", "rope", 0),
                                                    ("recall-k2-v2", "rope", 1)]  # fmt: skip
    assert ST.main(args, cfg=cfg) == 0  # resumes: trains the missing alibi runs only
    assert len(ST.load_store(store)["runs"]) == 4
    assert "already in the store" in capsys.readouterr().err
    for bad in (["--part", "2/2"], ["--part", "1"], ["--schemes", "sinusoid"]):
        assert ST.main([*args, *bad], cfg=cfg) == 2
        assert capsys.readouterr().err.startswith("error: ")
    assert ST.main(["--store", store, "--threads", "0"]) == 2  # the default config refuses it


def test_the_module_command_takes_sizes_tasks_and_device(tmp_path, capsys):
    store = str(tmp_path / "s")
    # sizes reach the configuration (a bad one is refused by it, naming the field)
    assert ST.main(["--store", store, "--d-model", "30", "--n-head", "4"]) == 2
    assert "d_model / n_head must be an even integer" in capsys.readouterr().err
    assert ST.main(["--store", store, "--device", ""]) == 2
    assert "device must be a torch device name" in capsys.readouterr().err
    assert ST.main(["--store", store, "--tasks", "copy"]) == 2
    assert "--tasks: unknown task 'copy'" in capsys.readouterr().err
    # a subset of the tasks trains into the same store (tasks are not in its identity)
    args = ["--store", store, "--seeds", "0", "--schemes", "alibi", "--train-len", "16",
            "--steps", "1", "--batch-size", "2", "--n-layer", "1", "--d-model", "32"]
    assert ST.main([*args, "--tasks", "recall-k2-v4"]) == 0
    st = ST.load_store(store)
    assert sorted(st["runs"]) == [("recall-k2-v4", "alibi", 0)]
    assert st["meta"]["config"]["train_len"] == 16 and st["meta"]["config"]["d_model"] == 32
    assert ST.SyntheticRunConfig().key() != ST.SyntheticRunConfig(train_len=16, n_layer=1,
                                                                  d_model=32).key()  # fmt: skip
    assert ST.SyntheticRunConfig(device="meta").key() == ST.SyntheticRunConfig().key()


def test_the_code_identity_hashes_the_named_sources_and_names_the_version():
    """code_identity: the same files give the same hash, another list another; the sources it
    names exist in the installed package (a missing one is an error, not a silent skip)."""
    a = code_identity(ST.TRAINING_SOURCES)
    assert a == code_identity(ST.TRAINING_SOURCES) and len(a["sources"]) == 16
    assert code_identity(ST.TRAINING_SOURCES[:-1])["sources"] != a["sources"]
    assert a["posflow"] == importlib.metadata.version("posflow")
    with pytest.raises(FileNotFoundError):
        code_identity(["models/no_such_module.py"])
