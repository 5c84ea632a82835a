"""simulate.models.extrapolate_seeds: equal step budgets that resume exactly, nested prefixes of
shared windows, [B]'s mixing regime at small width, and a tiny end-to-end store."""

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch.nn import functional as F  # noqa: E402

from posflow.simulate.models import extrapolate_seeds as ES  # noqa: E402
from posflow.simulate.models._store import code_identity  # noqa: E402
from posflow.simulate.models.bpe import BPEConfig  # noqa: E402
from posflow.simulate.models.seed_store import load_seed_store, log_ratios  # noqa: E402
from posflow.theory.transport import blocks_mixed  # noqa: E402

V = 40


def tiny(**kw):
    base = dict(
        train_len=8,
        max_factor=4,
        steps=6,
        batch_size=2,
        warmup=2,
        n_layer=1,
        n_head=2,
        d_head=8,
        base=100.0,
        checkpoint_every=3,
        eval_windows=2,
        angle_draws=2,
    )
    return ES.SeedRunConfig(**{**base, **kw})


TOKENS = np.random.default_rng(0).integers(0, V, size=4000).astype(np.int32)


@pytest.mark.parametrize("scheme", ["random_qkv", "learned_qk", "random_qk_alibi"])
def test_a_killed_run_resumes_with_identical_numbers(scheme, tmp_path):
    torch.set_num_threads(1)
    cfg = tiny()
    straight, rec = ES.train_run(scheme, 1, cfg, TOKENS, V)
    ck = tmp_path / "ck.pt"
    model, part = ES.train_run(scheme, 1, cfg, TOKENS, V, checkpoint=ck, stop_after=3)
    assert model is None and part["steps"] == 3 and ck.is_file()  # killed after step 3
    resumed, rec2 = ES.train_run(scheme, 1, cfg, TOKENS, V, checkpoint=ck)
    assert rec2["resumed_from"] == 3 and rec2["steps"] == rec["steps"] == 6
    assert rec2["losses"] == rec["losses"]  # bit-identical losses, every step
    for (k, a), (_, b) in zip(
        straight.state_dict().items(), resumed.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), k


def test_the_nested_prefix_control_is_at_rounding_level_and_restores_threads():
    threads = torch.get_num_threads()
    assert 0.0 <= ES.nested_prefix_error() < 1e-4
    assert torch.get_num_threads() == threads


def test_nested_prefixes_equal_direct_forward_passes_on_each_prefix():
    cfg = tiny()
    wins = np.random.default_rng(1).integers(0, V, size=(3, 33))
    for scheme in ("alibi", "rope", "random_qk"):
        model = ES.build_model(scheme, cfg, 0, V).eval()
        nested = ES.evaluate_nested(model, wins, [8, 16, 32], draws=2)
        want_draws = 2 if scheme == "random_qk" else 1
        assert nested.shape == (want_draws, 3, 3)
        for k in range(want_draws):
            if scheme == "random_qk":  # the prefix uses the first L angles of the 32-token draw
                for b in model.blocks:
                    s = b.attn.scheme
                    full = s.draw(32, np.random.default_rng([1000 + k, s.layer, 32]))
                    s.angles = lambda x, full=full: full[:, : x.shape[-2]]
            with torch.no_grad():
                for i, w in enumerate(wins):
                    for j, L in enumerate((8, 16, 32)):
                        t = torch.from_numpy(w[: L + 1])[None]
                        nll = F.cross_entropy(model(t[:, :-1])[0].double(), t[0, 1:])
                        assert abs(float(nll) - nested[k, i, j]) < 1e-5, (scheme, k, L)
    if True:  # random draws differ, deterministic schemes ignore `draws`
        m = ES.build_model("random_qk", cfg, 0, V).eval()
        d = ES.evaluate_nested(m, wins, [32], draws=2)
        assert d[0, 0, 0] != d[1, 0, 0]
    with pytest.raises(ValueError, match="lengths"):
        ES.evaluate_nested(m, wins, [64])


def test_mixing_base_puts_the_papers_fraction_of_blocks_mixed_at_the_training_length():
    # [B]: d = 96, base 1e4: 10 of 48 at 512; the proxy: d = 48 at 64 tokens -> 5 of 24
    assert blocks_mixed(96, 1e4, 0.1, 512) == 10
    b = ES.mixing_base(48, 64)
    assert blocks_mixed(48, b, 0.1, 64) == 5
    assert blocks_mixed(96, ES.mixing_base(96, 512), 0.1, 512) == 10
    assert ES.mixing_base(96, 512) > 1e3  # [B]'s own setting lies in the same interval order
    with pytest.raises(ValueError, match="fraction"):
        ES.mixing_base(8, 8)
    assert ES.SeedRunConfig().base == b


def test_learned_angle_means_start_at_ropes_constant_rotation():
    model = ES.build_model("learned_qkv", tiny(), 0, V)
    (layer,) = ES.learned_angle_means(model, TOKENS[:50])
    np.testing.assert_allclose(layer["mean"], -1.0, rtol=0, atol=1e-15)  # θ = −f_b at init
    assert ES.learned_angle_means(ES.build_model("rope", tiny(), 0, V), TOKENS) is None


def test_bad_configuration_is_rejected():
    with pytest.raises(ValueError, match="steps"):
        tiny(steps=0)
    with pytest.raises(ValueError, match="max_factor"):
        tiny(max_factor=3)
    with pytest.raises(ValueError, match="schemes"):
        tiny(schemes=("rope", "nonsense"))
    with pytest.raises(ValueError, match="seeds"):
        tiny(seeds=(0, 0))
    with pytest.raises(ValueError, match="part"):
        ES.run_seeds(tiny(), "x", part=(2, 2))


def test_a_tiny_store_end_to_end_then_resumes(tmp_path, monkeypatch):
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tiny(
        bpe=BPEConfig(vocab_size=300, code_bytes=0, english_chars=40_000),
        schemes=("rope", "alibi"),
        seeds=(0, 1),
    )
    written = ES.run_seeds(cfg, tmp_path / "store")
    assert len(written) == 4
    st = load_seed_store(tmp_path / "store")
    assert sorted(st.runs) == [("alibi", 0), ("alibi", 1), ("rope", 0), ("rope", 1)]
    assert st.meta["tokens_per_length"] == {"8": 16, "16": 32, "32": 64}
    assert st.meta["unigram_ppl"] > 10 and st.meta["vocab_size"] == 300
    assert all(r["train"]["steps"] == 6 for r in st.runs.values())
    lr = log_ratios(st, "rope", 32)
    n = st.nats("rope", 0)
    assert lr[0] == pytest.approx(n[:, 2].mean() - n[:, 0].mean(), abs=1e-15)
    assert ES.run_seeds(cfg, tmp_path / "store") == []  # finished runs are kept
    other = tiny(bpe=cfg.bpe, schemes=cfg.schemes, seeds=cfg.seeds, steps=7)
    with pytest.raises(ValueError, match="another config"):
        ES.run_seeds(other, tmp_path / "store")
    blob = json.loads((tmp_path / "store" / "rope__s0.json").read_text())
    assert blob["draws"] == 1 and np.asarray(blob["nats_by_draw"]).shape == (1, 2, 3)
    assert blob["code"] == code_identity(ES.TRAINING_SOURCES)  # the code that wrote the run


def test_mixing_counts_equal_the_exact_count_of_at6():
    """The float64 count of simulate equals theory's 40-digit blocks_mixed on a grid."""
    for d, base in ((96, 1e4), (48, 64.0), (16, 500.0), (48, 40.3), (48, 101.6)):
        lengths = [1, 8, 64, 512, 4096, 65536]
        got = ES.mixing_counts(d, base, lengths)
        assert got == {n: int(blocks_mixed(d, base, 0.1, n)) for n in lengths}
    with pytest.raises(ValueError, match="base must be a finite number > 1"):
        ES.mixing_counts(16, 1.0, [8])
