"""simulate.models.schemes_alibi: random accumulated Q/K rotations plus ALiBi, against a dense
reference built from explicit 2×2 rotations of the scheme's own angles."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.kernels import alibi_slopes  # noqa: E402
from posflow.simulate.models.extrapolate import chunked_logits  # noqa: E402
from posflow.simulate.models.lm import LM, SCHEMES, LMConfig  # noqa: E402
from posflow.simulate.models.schemes_alibi import RandomQKAlibi  # noqa: E402


def dense_logits(q, k, theta, m):
    """ℓ_ij = q_iᵀ R(Σ_{s=j}^{i-1} θ_s) k_j / √d − m_h (i − j), float64, pairs (b, b + d/2)."""
    H, n, d = q.shape
    h = d // 2
    out = np.full((H, n, n), -np.inf)
    for a in range(H):
        for i in range(n):
            for j in range(i + 1):
                ang = theta[a, j:i].sum(0)  # (d/2,)
                c, s = np.cos(ang), np.sin(ang)
                k1, k2 = k[a, j, :h], k[a, j, h:]
                rk = np.concatenate([k1 * c - k2 * s, k1 * s + k2 * c])
                out[a, i, j] = q[a, i] @ rk / math.sqrt(d) - m[a] * (i - j)
    return out


def test_attention_probabilities_match_the_dense_reference():
    assert SCHEMES["random_qk_alibi"] is RandomQKAlibi
    cfg = LMConfig(
        vocab_size=30,
        n_layer=1,
        n_head=2,
        d_model=16,
        scheme="random_qk_alibi",
        scheme_options={"base": 50.0, "eval_seed": 3},
    )
    model = LM(cfg, seed=0).double().eval()
    attn = model.blocks[0].attn
    n = 9
    theta = attn.scheme.draw(n, np.random.default_rng([3, 0, n])).numpy()  # the eval draw
    seen = {}
    attn.prob_probe.register_forward_hook(lambda mod, i, o: seen.setdefault("p", o.detach()))
    ln = {}
    model.blocks[0].ln1.register_forward_hook(lambda mod, i, o: ln.setdefault("x", o.detach()))
    idx = torch.randint(0, 30, (1, n), generator=torch.Generator().manual_seed(0))
    logits = model(idx)
    x = ln["x"][0]
    with torch.no_grad():
        q, k, _ = attn.qkv_proj(x).split(16, dim=-1)
    q = q.view(n, 2, 8).transpose(0, 1).numpy()
    k = k.view(n, 2, 8).transpose(0, 1).numpy()
    ref = dense_logits(q, k, theta, alibi_slopes(2))
    ref = np.exp(ref - ref.max(-1, keepdims=True))
    ref /= ref.sum(-1, keepdims=True)
    err = np.abs(seen["p"][0].numpy() - ref).max()
    assert err < 1e-13, err  # float64 throughout: n·d rounding of order 1e-15
    # the query-chunked evaluation adds the bias chunk by chunk and gives the same logits
    assert torch.allclose(chunked_logits(model, idx, chunk=4), logits, atol=1e-12, rtol=0)
    np.testing.assert_array_equal(attn.scheme.slopes(), alibi_slopes(2))


def test_bad_slopes_are_rejected():
    with pytest.raises(ValueError, match="slopes"):
        RandomQKAlibi(2, 8, 0, slopes=[1.0])
