"""measure(..., per_sequence=True) and measure_per_sequence: one batched measurement keeps every
sequence's own statistics, equal to measuring that sequence alone.

The reference is the per-window loop PB15 ran before (one ``measure`` call per row of ids, kept
here and not in the library), on tiny float64 models of tests/tiny_lms.py: Llama (attention
interface), Gemma 3 with sliding windows shorter than n, GPT-2 (hand adapter) and
posflow's own LM, in one batch and in batches of 2 with an uneven last batch.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tiny_lms  # noqa: E402

from posflow.simulate.models import measure as M  # noqa: E402
from posflow.simulate.models.lm import LM, LMConfig  # noqa: E402
from posflow.simulate.models.profiles_bootstrap import PerSequence, measure_per_sequence  # noqa: E402

N = 5  # windows; batches of 2 leave a last batch of 1
KINDS = ("llama", "gemma3_text", "gpt2", "posflow")
FIELDS = ("attention", "lambdas", "content", "influence", "slopes", "values", "layer_influence",
          "lambdas_mlp")  # fmt: skip


def _model(kind):
    if kind == "posflow":
        return LM(LMConfig(vocab_size=tiny_lms.V, n_layer=2, n_head=2, d_model=16), seed=3).double()
    return tiny_lms.build(kind, seed=3)


def _loop(model, ids, layer_influence=False, lambdas_mlp=False) -> PerSequence:
    """The reference: ``measure`` on each window alone (PB15's loop before issue 24)."""
    A, lam, c, g, V, G, Lm, slopes = [], [], [], [], [], [], [], None
    for s in range(ids.shape[0]):
        m = M.measure(model, ids[s : s + 1], value_norms=True, heads=False, qk="summary",
                      layer_influence=layer_influence,
                      lambdas="both" if lambdas_mlp else True)  # fmt: skip
        A.append(m.attention.mean(axis=1))
        V.append(m.value_weights)
        lam.append(m.lambdas)
        c.append(m.content("sqrt_d")[1])
        g.append(m.influence_raw)
        G.append(m.layer_influence)
        Lm.append(m.lambdas_mlp)
        slopes = np.zeros(m.num_heads) if m.slopes is None else np.asarray(m.slopes, float)
    return PerSequence(np.stack(A), np.stack(lam), np.stack(c), np.stack(g), slopes, np.stack(V),
                       np.stack(G) if layer_influence else None,
                       np.stack(Lm) if lambdas_mlp else None)  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
def test_one_batched_call_equals_one_call_per_window(kind):
    model, ids = _model(kind), tiny_lms.ids(seed=4, count=N)
    ref = _loop(model, ids, layer_influence=True, lambdas_mlp=True)
    L = ref.lambdas.shape[1]
    assert ref.layer_influence.shape == (N, L, tiny_lms.n)
    for batch_size in (None, 2):  # one batch; batches of 2 + 2 + 1
        got = measure_per_sequence(model, ids, layer_influence=True, lambdas_mlp=True,
                                   batch_size=batch_size)  # fmt: skip
        # the layers' windows are kept (Gemma 3: n = 12 beyond its 4-key windows, no refusal)
        assert got.windows == tiny_lms.WINDOWS.get(kind, (None,) * L)
        for f in FIELDS:
            x, y = getattr(got, f), getattr(ref, f)
            assert x.shape == y.shape, f
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-12, err_msg=f"{f} {batch_size}")
    np.testing.assert_allclose(got.layer_influence.sum(-1), 1.0, atol=1e-14)  # per layer, window
    plain = measure_per_sequence(model, ids, batch_size=3)  # options off
    assert plain.layer_influence is None and plain.lambdas_mlp is None
    np.testing.assert_allclose(plain.attention, ref.attention, rtol=1e-12, atol=1e-12)
    # allow_windows is accepted for compatibility and changes nothing
    again = measure_per_sequence(model, ids, batch_size=3, allow_windows=True)
    for f in ("attention", "lambdas", "content", "influence", "values", "windows"):
        np.testing.assert_array_equal(getattr(again, f), getattr(plain, f))


def test_gemma3_windows_are_narrower_than_n_and_the_rows_respect_them():
    model, ids = _model("gemma3_text"), tiny_lms.ids(seed=5, count=3)
    m = M.measure(model, ids, value_norms=True, heads=False, qk="summary", per_sequence=True)
    assert m.windows == tiny_lms.WINDOWS["gemma3_text"] and tiny_lms.W < tiny_lms.n
    i = np.arange(tiny_lms.n)
    outside = (i[:, None] - i[None, :]) >= tiny_lms.W  # keys a sliding layer does not see
    for t, w in enumerate(m.windows):
        A = m.attention_per_sequence[:, t]
        np.testing.assert_allclose(A.sum(-1), 1.0, atol=1e-12)
        assert np.abs(np.triu(A, 1)).max() == 0.0
        if w is not None:
            assert np.abs(A[:, outside]).max() == 0.0
            assert np.abs(m.value_weights_per_sequence[:, t][:, outside]).max() == 0.0


@pytest.mark.parametrize("kind", ("llama", "gpt2"))
def test_per_sequence_fields_average_to_the_dataset_means(kind):
    """The per-sequence rows average to the means; the means do not change with the flag."""
    model, ids = _model(kind), tiny_lms.ids(seed=6, count=4)
    kw = dict(value_norms=True, layer_influence=True, batch_size=3, chunk=5)
    off = M.measure(model, ids, **kw)
    on = M.measure(model, ids, per_sequence=True, **kw)
    assert off.attention_per_sequence is None and off.qk_sums_per_sequence is None
    assert off.value_weights_per_sequence is None and off.layer_influence_per_sequence is None
    for f in ("attention", "qk", "qk_sums", "value_weights", "influence", "layer_influence",
              "lambdas"):  # fmt: skip
        np.testing.assert_allclose(getattr(on, f), getattr(off, f), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(on.attention_per_sequence.mean(0), off.attention.mean(1),
                               rtol=1e-12, atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(on.value_weights_per_sequence.mean(0), off.value_weights,
                               rtol=1e-12, atol=1e-14)  # fmt: skip
    np.testing.assert_allclose(on.qk_sums_per_sequence.mean(0), off.qk_sums, rtol=1e-12,
                               atol=1e-12)  # fmt: skip
    g = on.layer_influence_per_sequence.mean(0)
    np.testing.assert_allclose(g / g.sum(1, keepdims=True), off.layer_influence, atol=1e-14)
    b, c = on.content_per_sequence("raw")
    b0, c0 = on.content("raw")  # content is linear in the sums: its mean is the mean's content
    np.testing.assert_allclose((b.mean(0), c.mean(0)), (b0, c0), rtol=1e-10, atol=1e-12)
    bs, cs = on.content_per_sequence("sqrt_d")
    np.testing.assert_allclose((bs, cs), (b / np.sqrt(on.d_head), c / np.sqrt(on.d_head)),
                               rtol=1e-14)  # fmt: skip


def test_bad_flags_and_sizes_are_refused_before_any_pass(monkeypatch):
    model, ids = _model("gpt2"), tiny_lms.ids(seed=7, count=2)
    calls = []
    model.register_forward_pre_hook(lambda *a: calls.append(1))
    with pytest.raises(TypeError, match="per_sequence must be True or False"):
        M.measure(model, ids, per_sequence="yes")
    import posflow.simulate._validate as V

    monkeypatch.setattr(V, "available_memory", lambda: 1000.0)
    with pytest.raises(ValueError, match="per-sequence attention/value-norm weights"):
        M.measure(model, ids, per_sequence=True, heads=False, qk=False, value_norms=True)
    assert not calls
    monkeypatch.undo()
    m = M.measure(model, ids, qk=False, influence=False)
    for scale in ("raw", "sqrt_d"):
        with pytest.raises(ValueError, match="not measured per sequence"):
            m.content_per_sequence(scale)
    with pytest.raises(ValueError, match="scale"):
        m.content_per_sequence("logit")


def test_a_window_without_influence_is_refused_by_name(monkeypatch):
    """A window whose p* ignores its embeddings would have made the loop raise; it still does."""
    model, ids = _model("posflow"), tiny_lms.ids(seed=8, count=3)
    real = M.measure

    def zero_second(*a, **kw):
        m = real(*a, **kw)
        m.influence_per_sequence[1] = 0.0
        return m

    monkeypatch.setattr(M, "measure", zero_second)
    with pytest.raises(ValueError, match="gradient influence of sequence 1 is zero"):
        measure_per_sequence(model, ids)
