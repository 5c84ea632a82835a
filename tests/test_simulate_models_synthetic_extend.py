"""simulate.models.synthetic_extend: longer test lengths by exact retraining — the stored counts
reproduced, the new counts equal to a direct train-and-score of the same run, tampered stores
refused without writing, resumable, bad input."""

import json

import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.models import synthetic_extend as X  # noqa: E402
from posflow.simulate.models import synthetic_train as ST  # noqa: E402
from posflow.simulate.models.synthetic import FlipFlop  # noqa: E402


def tiny_cfg(**kw):
    base = dict(tasks=(FlipFlop(0.8),), probes={"flipflop-p0.8": (FlipFlop(0.98),)},
                train_len=8, factors=(1, 2), steps=3, batch_size=2, warmup=0, n_layer=1,
                n_head=2, d_model=16, base=100.0, test_tokens=64, progress_seconds=0.0)
    return ST.SyntheticRunConfig(**{**base, **kw})  # fmt: skip


@pytest.fixture
def store(tmp_path):
    torch.set_num_threads(1)
    ST.run_store(tiny_cfg(), tmp_path, ("rope", "path"), (0, 1), log=None)
    return tmp_path


def test_extension_appends_the_counts_of_a_direct_run(store):
    before = ST.load_store(store)
    done = X.extend_store(store, [4], schemes=["path"], log=None)
    assert done == ["flipflop-p0.8__path__s0.json", "flipflop-p0.8__path__s1.json"]
    after = ST.load_store(store)
    assert after["meta"] == before["meta"]  # the store's identity is unchanged
    assert after["runs"]["flipflop-p0.8", "rope", 0] == before["runs"]["flipflop-p0.8", "rope", 0]
    run = after["runs"]["flipflop-p0.8", "path", 1]
    old = before["runs"]["flipflop-p0.8", "path", 1]
    # independent reference: train the run again with a config that scores at 1×, 2×, 4×
    cfg = tiny_cfg(factors=(1, 2, 4))
    model, _ = ST.train_run(FlipFlop(0.8), "path", 1, cfg)
    for t in (FlipFlop(0.8), FlipFlop(0.98)):
        ev, ev0 = run["eval"][t.label], old["eval"][t.label]
        assert ev["lengths"] == [8, 16, 32] and ev["errors"][:2] == ev0["errors"]
        assert ev["counts"][:2] == ev0["counts"] and ev["sequences"] == [8, 4, 2]
        direct = ST.evaluate_errors(model, t, ST.eval_batches(t, cfg)[32])
        assert (ev["errors"][2], ev["counts"][2]) == direct
    ext = run["extended"][0]
    assert ext["factors"] == [4] and ext["reproduced_lengths"] == [8, 16]
    # resumable: every requested length present → nothing retrained
    assert X.extend_store(store, [4], schemes=["path"], log=None) == []


def test_a_count_training_does_not_reproduce_is_refused_and_nothing_written(store):
    p = store / "flipflop-p0.8__rope__s0.json"
    blob = json.loads(p.read_text())
    ev = blob["eval"]["flipflop-p0.8"]
    ev["errors"][1] += 1  # a count no retraining can give back
    p.write_text(json.dumps(blob))
    text = p.read_text()
    with pytest.raises(ValueError, match="not reproducible"):
        X.extend_store(store, [4], schemes=["rope"], seeds=[0], log=None)
    assert p.read_text() == text


def test_run_config_rebuilds_the_training_configuration(store):
    st = ST.load_store(store)
    run = st["runs"]["flipflop-p0.8", "rope", 0]
    cfg = X.run_config(st["meta"], run, [8, 4])
    assert cfg.factors == (1, 2, 4, 8)
    ident = {k: v for k, v in cfg.identity().items() if k != "factors"}
    assert ident == {k: v for k, v in st["meta"]["config"].items() if k != "factors"}
    assert [p.label for p in cfg.probes["flipflop-p0.8"]] == ["flipflop-p0.98"]


@pytest.mark.parametrize("factors", [[], [0], [2.0], [True]])
def test_bad_factors_raise(store, factors):
    with pytest.raises(ValueError, match="factors must be positive integers"):
        X.extend_store(store, factors, log=None)


def test_an_empty_selection_raises(store):
    with pytest.raises(ValueError, match="no run of the store matches"):
        X.extend_store(store, [4], schemes=["alibi"], log=None)


def test_cli_bad_store_is_one_line_exit_2(tmp_path, capsys):
    assert X.main(["--store", str(tmp_path / "none"), "--factors", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --store") and err.count("\n") == 1


def test_cli_extends_a_part(store, capsys):
    assert X.main(["--store", str(store), "--factors", "4", "--schemes", "rope",
                   "--part", "1/2"]) == 0  # fmt: skip
    runs = ST.load_store(store)["runs"]
    assert "extended" in runs["flipflop-p0.8", "rope", 1]
    assert "extended" not in runs["flipflop-p0.8", "rope", 0]


def test_a_new_seed_trained_with_the_lengths_equals_one_extended_later(store, tmp_path):
    other = tmp_path / "other"
    ST.run_store(tiny_cfg(), other, ("path",), (0, 1, 2), log=None)
    X.extend_store(other, [4], seeds=[2], log=None)
    blob = X.train_new(store, "flipflop-p0.8", "path", 2, [4], log=None)
    ref = ST.load_store(other)["runs"]["flipflop-p0.8", "path", 2]
    assert blob["eval"] == ref["eval"]  # the same counts at 1×, 2× and 4×, probes included
    assert blob["config"] == ST.load_store(store)["meta"]["config"]  # the store's identity
    assert blob["extended"][0]["factors"] == [4] and blob["extended"][0]["trained_with_them"]
    assert X.train_new(store, "flipflop-p0.8", "path", 2, [4], log=None) is None
    assert not list(store.glob("*.new"))
    with pytest.raises(ValueError, match="no run of 'recall-k2-v4'"):
        X.train_new(store, "recall-k2-v4", "path", 0, [4], log=None)


def test_cli_new_needs_a_selection(store, capsys):
    assert X.main(["--store", str(store), "--factors", "4", "--new"]) == 2
    assert "--new needs" in capsys.readouterr().err
