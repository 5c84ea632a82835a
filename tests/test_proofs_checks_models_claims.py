"""Claims PB15 and PB16 on a tiny cached model (the quick preset is swapped for a tiny one)."""

import numpy as np
import pytest

pytest.importorskip("torch")

from posflow.proofs_checks import models_claims
from posflow.proofs_checks.registry import FAILS, HOLDS, INCONCLUSIVE, Context, get_claim
from posflow.simulate.models import train as T


@pytest.fixture
def tiny_quick(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setitem(T.PRESETS, "quick", T.PRESETS["tiny"])
    return tmp_path


def test_claims_are_registered():
    assert get_claim("PB15").check is models_claims.pb15
    assert get_claim("PB16").check is models_claims.pb16


def test_pb15_verdict_follows_the_measured_distances(tiny_quick):
    ev = models_claims.pb15(Context(out=tiny_quick / "out"))
    m = ev.measured
    ok = (
        m["w1_residual"] < m["w1_attention_only"]
        and m["spearman_residual"] > m["spearman_attention_only"]
    )
    assert ev.status == (HOLDS if ok else FAILS)
    assert len(m["lambdas"]) == 2 and ((m["lambdas"] > 0) & (m["lambdas"] < 1)).all()
    assert all(0 <= m[f"w1_{k}"] <= 1 for k in ("attention_only", "residual", "residual_content"))
    assert ev.figures and (tiny_quick / "out" / "figures" / "pb15_profiles.png").is_file()


def test_pb16_holds_and_fails_when_the_hand_computation_disagrees(tiny_quick, monkeypatch):
    ev = models_claims.pb16(Context())
    assert ev.status == HOLDS
    assert ev.measured["max_abs_error"] <= 1e-10
    assert "Hugging Face GPT-2 (random)" in ev.measured["models"]
    hand = models_claims._hand_posflow
    monkeypatch.setattr(models_claims, "_hand_posflow", lambda m, i: hand(m, i) + 1e-6)
    assert models_claims.pb16(Context()).status == FAILS


def test_without_torch_both_are_inconclusive(monkeypatch):
    monkeypatch.setattr(models_claims, "_torch", lambda: None)
    for check in (models_claims.pb15, models_claims.pb16):
        ev = check(Context())
        assert ev.status == INCONCLUSIVE and ev.summary == "torch not installed"


def test_hand_computation_is_not_the_hook():
    """The hand λ of an ALiBi LM changes when the slopes it reads are wrong."""
    import torch

    from posflow.simulate.models.lm import LM, LMConfig

    model = LM(LMConfig(n_layer=1, n_head=2, d_model=16), seed=1).double()
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 12)))
    a = models_claims._hand_posflow(model, ids)
    model.blocks[0].attn.scheme.m *= 3
    assert abs(models_claims._hand_posflow(model, ids) - a).max() > 1e-8
