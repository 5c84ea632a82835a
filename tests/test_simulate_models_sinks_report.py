"""The per-model sink report (issue 24, item 5): Sink_ε share of heads, first-token attention
share and value-norm share of token 0 per layer, on text and on the repeated-token control.

Every array is checked against plain torch on tiny random models (tests/tiny_lms.py): the
eager attention probabilities (``output_attentions``) and Σ_h α_ij^h ‖W_O^h v_j^h‖ from the
value projections, averaged over the sequences and summarised by explicit loops over layers,
heads and the queries that see token 0 — a global Llama and a Gemma 3 whose sliding window
(W = 4) is shorter than n = 12.
"""

import functools
import json
import re

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import tiny_lms as TL  # noqa: E402

from posflow.simulate.models import sinks_report as SR  # noqa: E402
from posflow.simulate.models.sinks import sink_rate  # noqa: E402

H, HKV = 4, 2  # query heads, key/value heads of the tiny configs
TOL = 1e-6  # the recording function's softmax runs in float32


@functools.cache
def model(kind):
    return TL.build(kind)


@pytest.fixture(scope="module", autouse=True)
def _built():
    """Build both models once (the first build pays transformers' lazy imports, seconds)."""
    for kind in ("llama", "gemma3_text"):
        model(kind)


def _by_hand(kind, ids):
    """Mean per-head attention (L, H, n, n) and value weights (L, n, n) from plain torch."""
    m = model(kind)
    cap, hooks = {}, []
    for t, blk in enumerate(m.model.layers):
        hooks.append(blk.self_attn.v_proj.register_forward_hook(
            lambda mod, a, o, t=t: cap.__setitem__(t, o.detach())))  # fmt: skip
    with torch.no_grad():
        out = m(input_ids=torch.as_tensor(ids), output_attentions=True, use_cache=False)
    for h in hooks:
        h.remove()
    d = m.config.head_dim
    P, VW = [], []
    for t, blk in enumerate(m.model.layers):
        p = out.attentions[t].numpy()  # (B, H, n, n)
        v = cap[t].numpy()  # (B, n, Hkv·d)
        Wo = blk.self_attn.o_proj.weight.detach().numpy()  # (D, H·d)
        if kind == "gemma3_text":  # the post norm's gain (its 1/rms is shared by the row)
            Wo = (1 + blk.post_attention_layernorm.weight.detach().numpy())[:, None] * Wo
        M = np.zeros(p.shape[-2:])
        for h in range(H):
            g = h // (H // HKV)
            f = v[:, :, g * d : (g + 1) * d] @ Wo[:, h * d : (h + 1) * d].T  # (B, n, D)
            M += np.einsum("bij,bj->ij", p[:, h], np.linalg.norm(f, axis=-1)) / p.shape[0]
        P.append(p.mean(axis=0))
        VW.append(M)
    return np.stack(P), np.stack(VW)


def _summary(P, VW, windows, eps):
    """Sink_ε scores, heads above ε, first-token and value-norm shares by explicit loops."""
    L, _, n, _ = P.shape
    scores = np.zeros((L, H))
    first, value = np.zeros(L), np.zeros(L)
    for t in range(L):
        w = windows[t] or n
        sees = [i for i in range(n) if i < w]  # queries that see key 0 (query 0 included)
        for h in range(H):
            scores[t, h] = sum(P[t, h, i, 0] for i in sees) / len(sees)
        rows = sees[1:]
        first[t] = np.mean([P[t, h, i, 0] for h in range(H) for i in rows])
        value[t] = np.mean([VW[t, i, 0] / VW[t, i, : i + 1].sum() for i in rows])
    return scores, (scores > eps).mean(axis=1), first, value


def _eps_between(scores):
    """A threshold half-way across the widest gap between sorted scores (some heads above, some
    below, none within 1e-3 of it)."""
    s = np.sort(scores.ravel())
    k = int(np.argmax(np.diff(s)))
    assert s[k + 1] - s[k] > 2e-3
    return float((s[k] + s[k + 1]) / 2)


def _check(profile, P, VW, windows, eps):
    scores, above, first, value = _summary(P, VW, windows, eps)
    np.testing.assert_allclose(profile.scores, scores, rtol=0, atol=TOL)
    np.testing.assert_array_equal(profile.heads_above, above)
    np.testing.assert_allclose(profile.first_token_share, first, rtol=0, atol=TOL)
    np.testing.assert_allclose(profile.value_share, value, rtol=0, atol=TOL)
    assert profile.rate == pytest.approx(above.mean(), abs=1e-15)
    assert profile.heads_above.shape == profile.value_share.shape == (P.shape[0],)


@pytest.mark.parametrize("kind", ["llama", "gemma3_text"])
def test_every_array_matches_plain_torch_on_text_and_control(kind):
    ids = TL.ids(seed=4, count=3)
    windows = TL.WINDOWS.get(kind, (None, None))
    P, VW = _by_hand(kind, ids)
    eps = _eps_between(_summary(P, VW, windows, 0.5)[0])
    rep = SR.sink_report(model(kind), ids, eps=eps)
    assert (rep.n, rep.num_sequences, rep.eps, rep.windows) == (TL.n, 3, eps, windows)
    assert 0 < rep.rate < 1  # the threshold splits the heads
    _check(rep.text, P, VW, windows, eps)
    tok = int(np.bincount(ids.numpy().ravel()).argmax())
    assert rep.control_token == tok
    _check(rep.control, *_by_hand(kind, np.full((3, TL.n), tok)), windows, eps)


def test_sliding_layers_average_only_the_queries_that_see_token_0():
    # one head, window 3 at n = 5: queries 0, 1, 2 see key 0; the first-token share uses 1, 2
    A = np.zeros((1, 1, 5, 5))
    A[0, 0, 0, 0] = 1.0
    A[0, 0, 1, :2] = [0.5, 0.5]
    A[0, 0, 2, :3] = [0.2, 0.4, 0.4]
    for i in (3, 4):
        A[0, 0, i, i - 2 : i + 1] = 1 / 3
    V = np.tril(np.ones((1, 5, 5)))
    p = SR.sink_profile(A, V, eps=0.5, windows=[3])
    np.testing.assert_allclose(p.scores, [[(1 + 0.5 + 0.2) / 3]])
    np.testing.assert_allclose(p.first_token_share, [(0.5 + 0.2) / 2])
    np.testing.assert_allclose(p.value_share, [(1 / 2 + 1 / 3) / 2])
    np.testing.assert_array_equal(p.heads_above, [1.0])
    assert p.rate == float(sink_rate(A, eps=0.5, windows=[3])) == 1.0


def test_the_control_repeats_the_most_frequent_or_the_given_token():
    ids = np.array([[3, 3, 5, 5, 9], [1, 2, 7, 8, 9]])
    np.testing.assert_array_equal(SR.repeated_token_control(ids), np.full((2, 5), 3))  # tie: 3
    np.testing.assert_array_equal(SR.repeated_token_control(ids[:, 3:]), np.full((2, 2), 9))
    got = SR.repeated_token_control(torch.as_tensor(ids), control_token=np.int64(7))
    assert got.dtype == np.int64 and got.shape == (2, 5) and (got == 7).all()
    rep = SR.sink_report(model("llama"), TL.ids(seed=5, count=2), control_token=11)
    P, VW = _by_hand("llama", np.full((2, TL.n), 11))
    assert rep.control_token == 11 and rep.eps == 0.3
    _check(rep.control, P, VW, (None, None), 0.3)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        (dict(ids=np.zeros((2, TL.n))), "ids must be an integer array"),
        (dict(ids=np.arange(TL.n)), "ids must be an integer array"),
        (dict(ids=np.zeros((2, 1), dtype=int)), "ids must be an integer array"),
        (dict(ids=np.full((2, 4), -1)), "ids must be non-negative"),
        (dict(ids=np.full((2, 4), TL.V)), "ids must lie in"),
        (dict(eps=0.0), "eps must be a number in"),
        (dict(eps=1.0), "eps must be a number in"),
        (dict(eps=True), "eps must be a number in"),
        (dict(eps="0.3"), "eps must be a number in"),
        (dict(control_token=-1), "control_token must be a non-negative integer"),
        (dict(control_token=1.5), "control_token must be a non-negative integer"),
        (dict(control_token=True), "control_token must be a non-negative integer"),
        (dict(control_token=TL.V), "control_token must lie in"),
    ],
)
def test_bad_input_is_refused_before_any_forward_pass(kw, match, monkeypatch):
    import posflow.simulate.models.measure as M

    def no_forward(*a, **k):
        raise AssertionError("measured before validating")

    monkeypatch.setattr(M, "measure", no_forward)
    args = {"ids": TL.ids(count=2).numpy(), **kw}
    with pytest.raises(ValueError, match=match):
        SR.sink_report(model("llama"), args.pop("ids"), **args)


def test_sink_profile_refuses_bad_shapes_and_windows():
    A = np.tril(np.ones((2, 1, 4, 4)))
    A /= A.sum(-1, keepdims=True)
    V = np.tril(np.ones((2, 4, 4)))
    with pytest.raises(ValueError, match="attention must have shape"):
        SR.sink_profile(A[:, 0], V)
    with pytest.raises(ValueError, match="value_weights must have shape"):
        SR.sink_profile(A, V[:1])
    with pytest.raises(ValueError, match="windows must be >= 2"):
        SR.sink_profile(A, V, windows=[None, 1])
    with pytest.raises(ValueError, match="windows must hold"):
        SR.sink_profile(A, V, windows=[None])
    with pytest.raises(ValueError, match="eps"):
        SR.sink_profile(A, V, eps=-0.1)


def _report():
    prof = SR.SinkProfile(np.array([0.5, 0.0]), np.array([0.4, 0.1]), np.array([0.2, 0.05]),
                          np.array([[0.6, 0.1], [0.2, 0.1]]), 0.25)  # fmt: skip
    return SR.SinkReport("llama", 8, 2, 0.3, 7, (None, 4), prof, prof)


def test_stored_reports_round_trip_and_bad_files_name_their_path(tmp_path):
    rep = _report()
    store = {"setup": {"n": 8}, "runs": {"none": {"convention": "stream", "seconds": 1.5,
                                                  "report": rep.to_dict()}}}  # fmt: skip
    f = tmp_path / "sinks.json"
    f.write_text(json.dumps(store))
    got = SR.load_sinks("smollm2-135m", path=f)
    back = got["runs"]["none"]["report"]
    assert got["setup"] == {"n": 8} and back.windows == (None, 4) and back.rate == 0.25
    for a, b in zip(back.text.to_dict().values(), rep.text.to_dict().values(), strict=True):
        np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "missing.json"))):
        SR.load_sinks("smollm2-135m", path=tmp_path / "missing.json")
    f.write_text("{not json")
    with pytest.raises(ValueError, match=re.escape(f"unreadable sink report at {f}")):
        SR.load_sinks("gemma3-270m", path=f)
    f.write_text(json.dumps({"setup": {}, "runs": {"none": {"report": {}}}}))
    with pytest.raises(ValueError, match=re.escape(f"unreadable sink report at {f}")):
        SR.load_sinks("gemma3-270m", path=f)
    with pytest.raises(ValueError, match="model_key must be one of"):
        SR.load_sinks("gpt2")


@pytest.mark.parametrize(("key", "layers", "conventions"),
                         [("smollm2-135m", 30, {"none"}),
                          ("gemma3-270m", 18, {"prepend", "none"})])  # fmt: skip
def test_the_package_data_holds_each_models_report(key, layers, conventions):
    got = SR.load_sinks(key)
    assert set(got["runs"]) == conventions
    assert {"command", "n", "sequences", "eps", "date", "threads"} <= set(got["setup"])
    for run in got["runs"].values():
        rep = run["report"]
        assert rep.text.scores.shape[0] == rep.control.heads_above.shape[0] == layers
        assert rep.rate == pytest.approx(rep.text.heads_above.mean())


@pytest.mark.parametrize("kind", ["llama", "gemma3_text"])
def test_threshold_per_sequence_then_mean_matches_plain_torch_sequence_by_sequence(kind):
    """The second Sink_ε convention (issue 41): each sequence's scores by plain torch, the
    indicator 1[α > ε] averaged over sequences and heads; ε splits the per-sequence scores."""
    ids = TL.ids(seed=6, count=3)
    windows = TL.WINDOWS.get(kind, (None, None))
    per = [_summary(*_by_hand(kind, ids[s : s + 1]), windows, 0.5)[0] for s in range(3)]
    eps = _eps_between(np.stack(per))
    rep = SR.sink_report(model(kind), ids, eps=eps)
    above = np.stack(per) > eps  # (N, L, H)
    np.testing.assert_array_equal(rep.text.heads_above_per_sequence, above.mean(axis=(0, 2)))
    assert rep.rate_per_sequence == pytest.approx(above.mean(), abs=1e-15)
    # the scores of the mean are the mean of the per-sequence scores (α is linear in A)
    np.testing.assert_allclose(rep.text.scores, np.mean(per, axis=0), rtol=0, atol=TOL)
    # the control repeats one sequence: both conventions agree there
    np.testing.assert_array_equal(rep.control.heads_above_per_sequence, rep.control.heads_above)


def test_the_two_conventions_differ_where_a_head_is_a_sink_in_some_sequences_only():
    # one head, n = 2: α = (A[0,0] + A[1,0]) / 2 = (1 + a) / 2 per sequence
    A = np.zeros((1, 1, 2, 2))
    A[..., 0, 0] = 1.0
    A[..., 1, :] = [0.5, 0.5]
    V = np.tril(np.ones((1, 2, 2)))
    per = np.array([[[0.9]], [[0.9]], [[0.5]]])  # a sink (ε = 0.8) in two of three sequences
    p = SR.sink_profile(A, V, eps=0.8, scores_per_sequence=per)
    assert p.rate == 0.0  # α of the mean, 0.75, is below ε
    assert p.rate_per_sequence == pytest.approx(2 / 3)
    np.testing.assert_allclose(p.heads_above_per_sequence, [2 / 3])
    assert SR.sink_profile(A, V, eps=0.8).rate_per_sequence is None
    with pytest.raises(ValueError, match="scores_per_sequence must have shape"):
        SR.sink_profile(A, V, scores_per_sequence=per[:, 0])
    with pytest.raises(ValueError, match="scores_per_sequence must be finite"):
        SR.sink_profile(A, V, scores_per_sequence=per * np.nan)
    back = SR.SinkProfile.from_dict(p.to_dict())
    assert back.rate_per_sequence == p.rate_per_sequence
    np.testing.assert_array_equal(back.heads_above_per_sequence, p.heads_above_per_sequence)
    assert set(SR.SINK_CONVENTIONS) == {"rate", "rate_per_sequence"}
