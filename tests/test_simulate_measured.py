"""simulate.measured: the packed data equal the released YAML; the real-model profiles' facts."""

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from posflow.simulate import measured
from posflow.simulate.kernels import alibi_kernel, alibi_slopes
from posflow.simulate.rollout import influence

RELEASE = Path(__file__).resolve().parents[2] / "shared/data/ml-uhh-position-bias"
ALIBI = RELEASE / "config/rollout/alibi"


def test_five_models_and_settings():
    assert measured.models() == ("falcon-rw-7b", "mpt-7b", "mpt-30b", "bloom-7b1", "bloom")
    assert len(measured.configs()) == 32
    cfg = measured.config("bloom", "all_content", "dclm")
    assert (cfg.num_layers, cfg.num_heads, cfg.n) == (70, 112, 256)
    assert cfg.content.shape == (70, 112)


@pytest.mark.parametrize(
    "model, H",
    [("bloom-7b1", 32), ("mpt-7b", 32), ("falcon-rw-7b", 64), ("mpt-30b", 64), ("bloom", 112)],
)
def test_released_slopes_are_textbook_alibi(model, H):
    np.testing.assert_allclose(measured.config(model).slopes, alibi_slopes(H), rtol=1e-15)


@pytest.mark.parametrize("model", ["bloom-7b1", "bloom"])
def test_content_kernels_are_the_one_by_one_kernels_bit_for_bit(model):
    # MeasuredConfig.kernels builds all layers in one pass (alibi_kernels); layer by layer it
    # equals alibi_kernel(n, slopes, content[l]), bit for bit, and so does the profile
    cfg = measured.config(model, "all_content", "wikipedia")
    many = cfg.kernels(with_content=True)
    one = [alibi_kernel(cfg.n, cfg.slopes, c) for c in cfg.content]
    for a, b in zip(many, one, strict=True):
        assert np.array_equal(a._diag, b._diag) and np.array_equal(a._w_off, b._w_off)
    assert np.array_equal(influence(many, cfg.lambdas), influence(one, cfg.lambdas))


def test_lambda_sums_match_the_digest_table():
    # Σλ_t on fineweb-edu, from papers/A_position_bias.md §2.2
    expected = {
        "falcon-rw-7b": 5.0634,
        "mpt-7b": 4.2281,
        "mpt-30b": 5.3140,
        "bloom-7b1": 3.6214,
        "bloom": 3.9082,
    }
    for m, s in expected.items():
        assert measured.config(m).lambdas.sum() == pytest.approx(s, abs=5e-5)


@pytest.mark.skipif(not ALIBI.is_dir(), reason="the released configs are not beside the repo")
def test_pack_reproduces_the_shipped_file_from_the_release(tmp_path):
    dest = tmp_path / "packed.json.gz"
    assert measured.pack_configs(ALIBI, dest) == 32
    ours = json.loads(gzip.decompress(dest.read_bytes()))
    from importlib import resources

    shipped = json.loads(
        gzip.decompress(
            resources.files("posflow.simulate").joinpath("data", measured.DATA_FILE).read_bytes()
        )
    )
    assert ours == shipped
    # the loader copes with the tab quirk: that file has a tab and still parses
    tabbed = ALIBI / "no_content/mpt-30b.yaml"
    assert "\t" in tabbed.read_text()
    data = measured.read_rollout_yaml(tabbed)
    assert len(data["lambda_schedule_config"]["lambdas_custom"]) == 48


def test_read_rollout_yaml_rejects_other_files(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("a: 1\n")
    with pytest.raises(ValueError, match="not a rollout config"):
        measured.read_rollout_yaml(f)


@pytest.mark.parametrize("model", measured.MODELS)
def test_real_model_profiles_basic_facts(model):
    a = measured.profile(model, "attention_only")
    b = measured.profile(model, "residual")
    c = measured.profile(model, "residual_content")
    for p in (a, b, c):
        assert p.shape == (256,) and p.sum() == pytest.approx(1.0, abs=1e-12) and p.min() >= 0
    # (a) attention-only collapses onto token 0 (PB14a)
    assert a[0] >= 0.99
    # (b) residual-aware: interior minimum below both ends, last token = ∏(1-λ_t(1-A_nn))
    k = int(np.argmin(b))
    assert 0 < k < 255 and b[k] < min(b[0], b[-1])
    cfg = measured.config(model)
    K = alibi_kernel(256, cfg.slopes)
    assert b[-1] == pytest.approx(np.prod(1 - cfg.lambdas * (1 - K.diagonal()[-1])), rel=1e-12)
    # (c) content changes the profile (PB14c is judged in the claim check)
    assert np.abs(c - b).sum() > 1e-3


def test_bloom_residual_profile_reproduces_the_digest():
    # papers/A_position_bias.md §2.5: bloom (b) p(0) = 0.0203, argmin 61; (c) p(0) ≈ 0.0137
    b = measured.profile("bloom", "residual")
    assert b[0] == pytest.approx(0.0203, abs=5e-5) and int(np.argmin(b)) == 61
    c = measured.profile("bloom", "residual_content")
    assert c[0] == pytest.approx(0.0137, abs=5e-5)


def test_profile_equals_the_explicit_rollout():
    cfg = measured.config("mpt-7b", "all_content", "wikipedia")
    ks = [alibi_kernel(256, cfg.slopes, c) for c in cfg.content]
    np.testing.assert_array_equal(
        measured.profile("mpt-7b", "residual_content", "wikipedia"), influence(ks, cfg.lambdas)
    )


@pytest.mark.parametrize(
    "args, match",
    [
        (("gpt2", "residual"), "unknown model"),
        (("bloom", "attention"), "unknown variant"),
        (("bloom", "residual", "c4"), "unknown dataset"),
    ],
)
def test_profile_bad_names(args, match):
    with pytest.raises(ValueError, match=match):
        measured.profile(*args)


def test_config_unreleased_dataset():
    with pytest.raises(ValueError, match="not released"):
        measured.config("bloom", "no_content", "dclm")
    with pytest.raises(ValueError, match="unknown setting"):
        measured.config("bloom", "some_content")
