"""posflow.simulate.models.scheme_identities (claim AT18): the torch schemes' hooks against
dense route products."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.simulate.identities import dense_scores, so2_dense  # noqa: E402
from posflow.simulate.models import lm  # noqa: E402
from posflow.simulate.models.scheme_identities import (  # noqa: E402
    run_hooks,
    scheme_angles,
    torch_identity_errors,
)

SCHEMES = ("rope", "random_qkv", "learned_qk", "path")


def test_every_scheme_matches_its_dense_route_products():
    torch.manual_seed(0)
    err, scale = torch_identity_errors(3, 10, 2, 4, SCHEMES)
    assert set(err) == {
        "torch_rope_scores",
        "torch_rope_output",
        "torch_random_qkv_scores",
        "torch_random_qkv_output",
        "torch_learned_qk_scores",
        "torch_learned_qk_output",
        "torch_path_scores",
        "torch_zero_init_learned_vs_rope",
    }
    assert max(err.values()) < 1e-12
    assert scale > 0


def test_rope_hooks_by_hand():
    # RoPE's scores are q_iᵀ R(−(i − j) f) k_j: the dense product of the angles scheme_angles gives
    gen = torch.Generator().manual_seed(1)
    H, n, d = 1, 6, 4
    q, k, v = (torch.randn(1, H, n, d, generator=gen, dtype=torch.float64) for _ in range(3))
    x = torch.zeros(1, n, H * d, dtype=torch.float64)
    scheme = lm.RoPE(H, d, 0).double().eval()
    theta, theta_v = scheme_angles(scheme, x, H, n, d)
    assert theta_v is None
    s, att, y = run_hooks(scheme, q, k, v, x)
    dense = dense_scores(q[0, 0].numpy(), k[0, 0].numpy(), so2_dense(theta[0]))
    low = np.tril_indices(n)
    assert np.abs(s[0] - dense)[low].max() < 1e-12
    assert att[0].sum(axis=1) == pytest.approx(np.ones(n))
    assert y[0] == pytest.approx(att[0] @ v[0, 0].numpy(), abs=1e-12)  # RoPE leaves values alone
