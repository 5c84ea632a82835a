"""posflow.simulate.models.train: deterministic training, checkpoints and the user cache."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.models import train as T  # noqa: E402
from posflow.simulate.models.corpus import Corpus  # noqa: E402
from posflow.simulate.models.lm import LM, LMConfig  # noqa: E402

SMALL = LMConfig(n_layer=1, n_head=2, d_model=16)


def fast(**kw):
    base = dict(steps=25, batch_size=4, seq_len=16, lr=1e-2, warmup=3, max_bytes=20_000)
    base.update(kw)
    return T.TrainConfig(**base)


@pytest.fixture
def periodic():
    """A corpus with an obvious pattern: a 7-byte cycle the model can learn in a few steps."""
    data = np.frombuffer(b"posflow" * 600, dtype=np.uint8).copy()
    return Corpus(data, ["cycle"], "cycle")


def test_training_lowers_the_loss_on_a_learnable_corpus(periodic):
    r = T.train(SMALL, fast(steps=60), corpus=periodic, progress=False)
    assert len(r.history) == 60
    assert abs(r.history[0] - math.log(256)) < 0.1  # starts near uniform over bytes
    assert np.mean(r.history[-5:]) < r.history[0] - 2.0
    assert r.valid_loss < r.history[0] - 2.0
    assert not r.model.training


def test_training_is_deterministic_for_a_seed(periodic):
    a = T.train(SMALL, fast(), corpus=periodic, progress=False)
    b = T.train(SMALL, fast(), corpus=periodic, progress=True)
    c = T.train(SMALL, fast(seed=1), corpus=periodic, progress=False)
    assert a.history == b.history
    for k, v in a.model.state_dict().items():
        assert torch.equal(v, b.model.state_dict()[k])
    assert a.history != c.history


def test_checkpoints_round_trip(periodic, tmp_path):
    r = T.train(SMALL, fast(steps=5), corpus=periodic, progress=False, checkpoint=tmp_path / "m.pt")
    model, record = T.load_checkpoint(tmp_path / "m.pt")
    assert isinstance(model, LM) and model.config == SMALL
    x = torch.arange(12).reshape(1, 12)
    with torch.no_grad():
        np.testing.assert_array_equal(model(x).numpy(), r.model(x).numpy())
    assert record["history"] == r.history and record["config"]["steps"] == 5
    assert record["corpus"] == "cycle"


def test_learning_rate_warms_up_then_decays_to_a_tenth():
    cfg = T.TrainConfig(steps=100, warmup=10, lr=1.0)
    assert T._lr(cfg, 0) == pytest.approx(0.1)
    assert T._lr(cfg, 9) == pytest.approx(1.0)
    assert T._lr(cfg, 10) == pytest.approx(1.0)
    assert T._lr(cfg, 100) == pytest.approx(0.1)
    lrs = [T._lr(cfg, s) for s in range(10, 101)]
    assert (np.diff(lrs) <= 0).all()


def test_cached_model_trains_once(monkeypatch, tmp_path, periodic):
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "posflow"))
    assert T.cache_dir() == tmp_path / "posflow" / "models"
    monkeypatch.setitem(T.PRESETS, "quick", T._Preset(SMALL, fast(steps=3), "test"))
    model, record, path = T.cached_model("quick")
    assert path.parent == tmp_path / "posflow" / "models" and path.is_file()
    assert len(record["history"]) == 3

    def boom(*a, **k):
        raise AssertionError("trained again")

    monkeypatch.setattr(T, "train", boom)
    again, record2, path2 = T.cached_model("quick")
    assert path2 == path and record2["history"] == record["history"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, again.state_dict()[k])
    # a changed trainer never reuses the cached model: the key holds a hash of its code
    monkeypatch.setattr(T, "training_code_hash", lambda: "0" * 16)
    monkeypatch.setattr(T, "train", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("new")))
    with pytest.raises(RuntimeError, match="new"):
        T.cached_model("quick")
    monkeypatch.delenv("POSFLOW_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert T.cache_dir() == tmp_path / "xdg" / "posflow" / "models"


def test_training_code_hash_follows_the_source():
    import hashlib
    from importlib import resources

    h = hashlib.sha256()
    for name in ("train.py", "lm.py", "corpus.py", "schemes.py"):
        h.update(name.encode())
        h.update(resources.files("posflow.simulate.models").joinpath(name).read_bytes())
    assert T.training_code_hash() == h.hexdigest()[:16]


def test_bad_inputs(tmp_path, periodic):
    with pytest.raises(ValueError, match="steps must be a positive integer"):
        T.TrainConfig(steps=0)
    with pytest.raises(ValueError, match="lr must be positive"):
        T.TrainConfig(lr=0.0)
    with pytest.raises(ValueError, match="valid_fraction"):
        T.TrainConfig(valid_fraction=0.0)
    with pytest.raises(ValueError, match="vocab_size must be 256"):
        T.train(LMConfig(vocab_size=64), fast(), corpus=periodic, progress=False)
    short = Corpus(np.zeros(100, np.uint8), [], "short")
    with pytest.raises(ValueError, match="too little text"):
        T.train(SMALL, fast(seq_len=64), corpus=short, progress=False)
    (tmp_path / "x.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="is not a posflow checkpoint"):
        T.load_checkpoint(tmp_path / "x.pt")
    torch.save({"weights": torch.zeros(2)}, tmp_path / "y.pt")
    with pytest.raises(ValueError, match="is not a posflow checkpoint"):
        T.load_checkpoint(tmp_path / "y.pt")
    with pytest.raises(ValueError, match="is not a file"):
        T.load_checkpoint(tmp_path / "none.pt")
    with pytest.raises(ValueError, match="preset must be one of"):
        T.cached_model("huge")
    with pytest.raises(TypeError, match="posflow LM"):
        T.save_checkpoint(tmp_path / "z.pt", torch.nn.Linear(1, 1))
