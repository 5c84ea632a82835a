"""kit._plain_torch: gradient influence by plain autograd against measure's hooks."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.proofs_checks.kit import plain_influence  # noqa: E402


def _lm():
    from posflow.simulate.models.lm import LM, LMConfig

    return LM(LMConfig(n_layer=2, n_head=2, d_model=16), seed=3).double()


def test_plain_influence_equals_measure_and_leaves_the_model_as_found():
    from posflow.simulate.models.measure import measure

    model = _lm().train()
    model.blocks[0].ln1.weight.requires_grad_(False)
    flags = [p.requires_grad for p in model.parameters()]
    ids = np.random.default_rng(1).integers(0, 256, 9)
    got = plain_influence(model, ids)
    layers = plain_influence(model, ids, layers=True)
    assert model.training and [p.requires_grad for p in model.parameters()] == flags
    m = measure(model, ids[None], layer_influence=True, attention=False, qk=False)
    np.testing.assert_allclose(got, m.influence_raw, rtol=1e-12, atol=0)
    assert layers.shape == (2, 9)
    np.testing.assert_allclose(layers[0], got, rtol=1e-12)  # block 0's input is the embedding
    np.testing.assert_allclose(layers / layers.sum(1, keepdims=True), m.layer_influence,
                               rtol=0, atol=1e-12)  # fmt: skip
