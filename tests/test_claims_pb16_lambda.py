"""Claim PB16: λ_t by the hooks against a hand computation from the weights."""

import numpy as np
import pytest

pytest.importorskip("torch")

from posflow.proofs_checks.claims import pb16_lambda as models_claims
from posflow.proofs_checks.kit._evidence import FAILS, HOLDS, INCONCLUSIVE
from posflow.proofs_checks.kit._registry import Context, get_claim


def test_claims_are_registered_with_honest_tags():
    assert get_claim("PB16").check is models_claims.pb16
    assert get_claim("PB16").source == "[convention]"


def test_pb16_holds_and_fails_when_the_hand_computation_disagrees(monkeypatch):
    ev = models_claims.pb16(Context())
    assert ev.status == HOLDS
    for name in ("trained_alibi_lm", "random_nope_lm", "random_gpt2"):
        m = ev[f"{name}.max_error_vs_hand"]
        assert m.passed and m.tol.kind == "floating-point"
        # the tolerance is the float32 gap: far above float64 rounding, far below a real error
        assert 0 < m.tol.value < 1e-5
        assert ev[f"{name}.in_open_unit_interval"].passed
    assert ev["zero_attention.max_lambda"].value == 0.0
    assert ev["zero_attention.max_lambda"].role == "control"
    assert len(ev.table("lambdas").rows) == 3 + 3 + 3
    hand = models_claims._hand_posflow
    monkeypatch.setattr(
        models_claims, "_hand_posflow", lambda m, i, dtype=None: hand(m, i, dtype) + 1e-4
    )
    bad = models_claims.pb16(Context())
    assert bad.status == FAILS
    assert {m.key for m in bad.failed} == {
        "trained_alibi_lm.max_error_vs_hand",
        "random_nope_lm.max_error_vs_hand",
    }


def test_without_torch_pb16_is_inconclusive(monkeypatch):
    from posflow.proofs_checks import kit

    monkeypatch.setattr(kit, "optional_torch", lambda: None)
    for check in (models_claims.pb16,):
        ev = check(Context())
        assert ev.status == INCONCLUSIVE and "torch" in ev.summary


def test_hand_computation_is_not_the_hook():
    """The hand λ of an ALiBi LM changes when the slopes it reads are wrong."""
    import torch

    from posflow.simulate.models.lm import LM, LMConfig

    model = LM(LMConfig(n_layer=1, n_head=2, d_model=16), seed=1).double()
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 12)))
    a = models_claims._hand_posflow(model, ids)
    model.blocks[0].attn.scheme.m *= 3
    assert abs(models_claims._hand_posflow(model, ids) - a).max() > 1e-8


def test_hand_computation_by_hand_on_one_token():
    """One token: attention is the identity, so a = W_O W_V LN(x) and λ = ‖a‖/(‖x‖ + ‖a‖)."""
    import torch

    from posflow.simulate.models.lm import LM, LMConfig

    model = LM(LMConfig(n_layer=1, n_head=2, d_model=8, scheme="nope"), seed=4).double()
    ids = torch.tensor([[65]])
    blk = model.blocks[0]
    with torch.no_grad():
        x = model.tok_emb.weight[65]
        h = torch.nn.functional.layer_norm(x, (8,), blk.ln1.weight, blk.ln1.bias, blk.ln1.eps)
        v = blk.attn.qkv_proj.weight[16:] @ h
        a = blk.attn.out_proj.weight @ v
        ref = float(a.norm() / (x.norm() + a.norm()))
    assert abs(models_claims._hand_posflow(model, ids)[0] - ref) < 1e-14


def test_pb16_cites_mixing_coefficients_and_controls_its_judge():
    ev = models_claims.pb16(Context())
    for name in ("trained_alibi_lm", "random_nope_lm"):
        c = ev[f"{name}.hand_judge_control_last_layer"]
        assert c.role == "control" and c.passed
    claim = get_claim("PB16")
    assert [c.name for c in claim.compares] == ["mixing_coefficients"]


def test_the_loosened_judge_mutant_is_killed():
    from posflow.proofs_checks import kit

    (m,) = [m for m in kit.mutants_of("PB16") if m.name == "hand-judge-best-layer"]
    with kit.mutated(m):
        ev = models_claims.pb16(Context())
    assert ev.status == FAILS
    assert any("hand_judge_control" in x.key for x in ev.failed)
