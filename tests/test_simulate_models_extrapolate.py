"""simulate.models.extrapolate: the query-chunked forward pass equals the plain one (AT20)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.models import extrapolate as X  # noqa: E402
from posflow.simulate.models.lm import LM, LMConfig  # noqa: E402

SCHEMES = ("nope", "rope", "alibi", "random_qk", "random_qkv", "random_pos_qk", "learned_qk",
           "learned_qkv", "path")  # fmt: skip


def build_model(scheme: str) -> LM:
    """A 2-layer, 2-head, d_model 16 byte-level LM with ``scheme`` (seed 0)."""
    opts = {"d_model": 16} if scheme == "path" else {}
    if scheme.startswith("random"):
        opts["seed"] = 0
    torch.manual_seed(0)
    return LM(LMConfig(n_layer=2, n_head=2, d_model=16, scheme=scheme, scheme_options=opts), seed=0)


@pytest.mark.parametrize("scheme", SCHEMES)
def test_chunked_logits_equal_the_plain_forward(scheme):
    model = build_model(scheme).eval()
    with torch.no_grad():
        for blk in model.blocks:  # non-zero learned angles, so the check is not RoPE's
            if hasattr(blk.attn.scheme, "angle_emb"):
                blk.attn.scheme.angle_emb.normal_(0, 0.3)
    idx = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (2, 23)))
    with torch.no_grad():
        plain = model(idx)
    for chunk in (1, 5, 64):
        assert float((X.chunked_logits(model, idx, chunk) - plain).abs().max()) < 1e-5


def test_chunked_logits_refuses_other_models():
    with pytest.raises(TypeError, match="model"):
        X.chunked_logits("model", torch.zeros(1, 3, dtype=torch.long))
