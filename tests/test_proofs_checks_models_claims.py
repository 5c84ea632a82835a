"""Claims PB15 and PB16 (the quick preset is swapped for the tiny one where a model is trained),
and PB15's pieces against independent references: the batched metrics against scipy, the batched
rollouts against posflow.simulate.rollout, one-sequence measurements against a batched one, and
the verdict rule on hand-made bootstrap replicates."""

import numpy as np
import pytest

pytest.importorskip("torch")

from posflow.proofs_checks.claims import pb15_measured_lm as P
from posflow.proofs_checks.claims import pb16_lambda as models_claims
from posflow.proofs_checks.kit._evidence import FAILS, HOLDS, INCONCLUSIVE
from posflow.proofs_checks.kit._registry import Context, get_claim
from posflow.simulate.compare import spearman, w1_normalised
from posflow.simulate.models import train as T


@pytest.fixture
def tiny_quick(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(T.PRESETS, "quick", T.PRESETS["tiny"])
    return tmp_path


def test_claims_are_registered_with_honest_tags():
    assert get_claim("PB15").check is models_claims.pb15 is P.pb15
    assert get_claim("PB16").check is models_claims.pb16
    assert get_claim("PB16").source == "[convention]"
    assert get_claim("PB15").source == "[A, ours]"


# -- PB15: the pieces ---------------------------------------------------------------------------


def test_batched_metrics_equal_the_library_row_by_row():
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(40), size=12)
    q = rng.dirichlet(np.ones(40), size=12)
    q[3] = p[3]  # identical rows
    q[5, :10] = q[5, 10:20]  # ties in the ranks
    w = P.batched_w1(p, q)
    r = P.batched_spearman(p, q)
    for k in range(12):
        assert abs(w[k] - w1_normalised(p[k], q[k])) < 1e-14
        assert abs(r[k] - spearman(p[k], q[k])) < 1e-12
    assert w[3] == 0.0 and abs(r[3] - 1) < 1e-12


def _fake_data(rng, N=6, L=3, H=2, n=9):
    A = rng.random((N, L, n, n)) * np.tril(np.ones((n, n)))
    A /= A.sum(axis=-1, keepdims=True)
    return P.PerSequence(
        attention=A,
        lambdas=rng.uniform(0.05, 0.9, (N, L)),
        content=rng.normal(0, 2, (N, L, H)),
        influence=rng.random((N, n)) + 0.01,
        slopes=np.array([0.0, 0.7])[:H],
        values=rng.random((N, L, n, n)) * np.tril(np.ones((n, n))),
    )


def test_batched_rollouts_equal_the_library_rollout():
    from posflow.simulate.kernels import alibi_kernel, dense_kernel, uniform_kernel
    from posflow.simulate.rollout import influence

    def sink_by_hand(M):  # rows i ≥ 1: A[i, 0] moved onto the diagonal
        M = M.copy()
        for i in range(1, M.shape[0]):
            M[i, i] += M[i, 0]
            M[i, 0] = 0.0
        return dense_kernel(M)

    rng = np.random.default_rng(7)
    data = _fake_data(rng)
    N, L = data.lambdas.shape
    n = data.influence.shape[1]
    W = rng.multinomial(N, np.full(N, 1 / N), size=5) / N
    perm = np.array([2, 0, 1])
    got = P.batched_rollouts(data, W, perm, chunk=2)  # chunks of 2 replicates
    for b, w in enumerate(W):
        A = np.tensordot(w, data.attention, axes=1)
        lam = w @ data.lambdas
        c = np.tensordot(w, data.content, axes=1)
        V = np.tensordot(w, data.values, axes=1)
        ks = [dense_kernel(A[t]) for t in range(L)]
        kc = [alibi_kernel(n, data.slopes, c[t]) for t in range(L)]
        ref = {
            "b": influence(ks, lam),
            "a": influence(ks, np.ones(L)),
            "shuffled": influence(ks, lam[perm]),
            "uniform": influence(uniform_kernel(n), lam),
            "b_param": influence(kc, lam),
            "a_param": influence(kc, np.ones(L)),
            "d": influence([dense_kernel(M / M.sum(1, keepdims=True)) for M in V], lam),
            "e": influence([sink_by_hand(A[t]) for t in range(L)], lam),
        }
        assert set(ref) == set(P.PREDICTED) | {"uniform", "shuffled"}
        for k, v in ref.items():
            np.testing.assert_allclose(got[k][b], v, rtol=0, atol=1e-14, err_msg=k)
        g = w @ data.influence
        np.testing.assert_allclose(got["measured"][b], g / g.sum(), atol=1e-15)
        np.testing.assert_allclose(got["lambdas"][b], lam, atol=1e-15)


def test_bootstrap_replicate_zero_is_the_full_sample_and_the_library_agrees():
    data = _fake_data(np.random.default_rng(1))
    bs = P.bootstrap(data, 50, seed=0)
    assert bs.library_gap < 1e-13
    assert bs.measured.shape == (51, 9) and bs.lambdas.shape == (51, 3)
    np.testing.assert_allclose(bs.lambdas[0], data.lambdas.mean(axis=0), atol=1e-15)
    # the nulls are fitted to each replicate's measured mean position
    mu = bs.measured @ np.arange(9)
    np.testing.assert_allclose(bs.profiles["geometric"] @ np.arange(9), mu, atol=1e-8)
    assert not (bs.perm == np.arange(3)).any()
    again = P.bootstrap(data, 50, seed=0)
    np.testing.assert_array_equal(again.w1["b"], bs.w1["b"])  # seeded


def _bootstrap_with(diffs: dict, B=1000):
    """A Bootstrap whose W1(b) − W1(x) replicates are ``diffs[x]`` (uniform draws)."""
    rng = np.random.default_rng(0)
    w1 = {"b": np.full(B + 1, 0.5)}
    for x in P.RIVALS:
        lo, hi = diffs[x]
        d = np.concatenate([[(lo + hi) / 2], rng.uniform(lo, hi, B)])
        w1[x] = 0.5 - d
    z = np.zeros((B + 1, 4))
    return P.Bootstrap({}, z, z[:, :3], w1, {}, z[:, 0], z[:, 0], np.arange(3), 0.0)


def test_the_verdict_rule_on_hand_made_replicates():
    bs = _bootstrap_with(
        {
            "a": (-0.3, -0.1),  # below 0: beaten
            "geometric": (-0.01, 0.02),  # contains 0: undecided
            "linear": (0.01, 0.02),  # above 0: (b) is worse
            "uniform": (0.0, 0.0),  # identical profiles: not beaten
            "shuffled": (-0.02, -0.01),
        }
    )
    ms, rows = P._judge("m", "model", bs, 0.99, 10)
    by = {m.key: m for m in ms}
    assert by["m.w1_b_minus_a"].passed is True
    assert by["m.w1_b_minus_geometric"].test == "undecided"
    assert by["m.w1_b_minus_linear"].passed is False
    assert by["m.w1_b_minus_uniform"].passed is False
    assert by["m.w1_b_minus_shuffled"].passed is True
    assert [r[4] for r in rows] == ["beats", "?", "no", "no", "beats"]
    # the interval is the 0.5 % … 99.5 % percentile of the replicates
    lo, hi = P._interval(bs.w1["b"] - bs.w1["a"], 0.99)
    assert -0.3 < lo < -0.29 and -0.11 < hi < -0.1


def test_subjects_are_the_toy_model_and_smollm2_when_installed(monkeypatch):
    monkeypatch.setattr(P, "_smollm2_installed", lambda: True)
    for size, (n, N) in (("quick", P.SMOLLM2_QUICK), ("full", P.SMOLLM2_FULL)):
        subs = P.subjects(Context(size=size))
        assert [s.tag for s in subs] == ["toy", "smollm2"]
        assert subs[1].load.args == (n, N, 0)
    assert P.SMOLLM2_FULL[1] >= 64  # the N ≥ 64 sequences
    monkeypatch.setattr(P, "_smollm2_installed", lambda: False)
    assert [s.tag for s in P.subjects(Context(size="full"))] == ["toy"]


def test_one_sequence_at_a_time_equals_one_batched_measurement():
    import torch

    from posflow.simulate.models.lm import LM, LMConfig
    from posflow.simulate.models.measure import measure

    model = LM(LMConfig(n_layer=2, n_head=2, d_model=16), seed=2).double()
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (5, 12)))
    per = P.measure_per_sequence(model, ids)
    m = measure(model, ids, value_norms=True)
    np.testing.assert_allclose(per.values.mean(0), m.value_weights, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(per.lambdas.mean(0), m.lambdas, atol=1e-14)
    np.testing.assert_allclose(per.attention.mean(0), m.attention.mean(1), atol=1e-14)
    np.testing.assert_allclose(per.content.mean(0), m.content("sqrt_d")[1], atol=1e-12)
    g = per.influence.mean(0)
    np.testing.assert_allclose(g / g.sum(), m.influence, atol=1e-14)
    np.testing.assert_allclose(per.slopes, m.slopes)


# -- PB15 and PB16 end to end -------------------------------------------------------------------


def test_pb15_verdict_follows_the_intervals(tiny_quick):
    ev = models_claims.pb15(Context())
    rows = {r[0]: r for r in ev.table("toy.differences").rows}
    assert set(rows) == set(P.RIVALS)
    for x, (_, _point, lo, hi, beats) in rows.items():
        m = ev[f"toy.w1_b_minus_{x}"]
        assert lo <= hi and m.value == hi
        if beats == "beats":
            assert m.passed is True and hi < 0
        elif beats == "?":
            assert m.test == "undecided" and lo < 0 <= hi
        else:
            assert m.passed is False and lo >= -1e-9
    failed = any(r[4] == "no" for r in rows.values())
    undecided = any(r[4] == "?" for r in rows.values())
    assert ev.status == (FAILS if failed else INCONCLUSIVE if undecided else HOLDS)
    assert ev["toy.verdict"].value == ev.status  # one model: its sub-verdict is the verdict
    assert ev["toy.library_vs_batched_rollout"].passed
    assert ev["toy.n"].value == T.PRESETS["tiny"].train.seq_len  # its training length
    assert ev["toy.layers"].value == 2
    lam = ev.table("toy.lambdas").rows
    assert len(lam) == 2 and all(0 < r[1] < 1 and r[2] <= r[1] <= r[3] for r in lam)
    assert abs(ev["toy.sum_lambda"].value - sum(r[1] for r in lam)) < 1e-12
    assert "not a test of depth" in ev["toy.depth"].value
    prof = {r[0]: r for r in ev.table("toy.profiles").rows}
    assert set(prof) == {*P.PREDICTED, *P.NULLS, "measured"}
    for k in (*P.PREDICTED, *P.NULLS):
        assert 0 <= prof[k][3] <= prof[k][2] <= prof[k][4] <= 1  # W1 inside its interval
        assert abs(prof[k][2] - ev[f"toy.w1_{k}"].value) < 1e-15
    # the geometric null has the measured mean position
    assert abs(prof["geometric"][8] - prof["measured"][8]) < 1e-6
    (fig,) = [f for f in ev.figures if f.name.startswith("pb15_toy")]
    assert fig.name == "pb15_toy" and len(fig.panels) == 3
    from posflow.simulate.models.study import stored_study

    if stored_study() is not None:  # the stored SmolLM2 study is shown beside it
        assert [f.name for f in ev.figures] == ["pb15_toy", "pb15_smollm2_study"]


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


def test_without_torch_both_are_inconclusive(monkeypatch):
    from posflow.proofs_checks.kit import _optional as _optional

    monkeypatch.setattr(models_claims, "_torch", lambda: None)
    monkeypatch.setattr(_optional, "optional_torch", lambda: None)
    for check in (models_claims.pb15, models_claims.pb16):
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


def test_the_stored_study_in_pb15_is_reported_from_its_numbers():
    from posflow.proofs_checks.claims.pb15_study import study_evidence

    rng = np.random.default_rng(0)
    n, L = 6, 3

    def rec(v):
        return [v, 0.01, v - 0.02, v + 0.02]

    stats = {}
    for k in ("a", "b", "c", "d", "e", "geometric", "linear", "uniform", "shuffled"):
        stats[f"w1.{k}"] = rec({"e": 0.1, "d": 0.2}.get(k, 0.4))
        stats[f"spearman.{k}"] = rec(0.3)
        stats[f"first.{k}"] = rec(0.5)
    stats["first.measured"] = rec(0.05)
    for t in range(L):
        for name in ("lambda", "sink.attention_on_0", "sink.value_share_of_0",
                     "sink.gradient_influence_of_0"):  # fmt: skip
            stats[f"{name}.{t}"] = rec(0.1 * (t + 1))
    p = rng.dirichlet(np.ones(n))
    run = {"n": n, "sequences": 64, "groups": 8, "confidence": 0.95, "stats": stats,
           "profiles": {k: list(p) for k in (*"abcde", "geometric", "linear", "uniform",
                                              "shuffled", "measured")},
           "best": "e", "differences": {k: rec(0.0) for k in (*"abcde", "geometric", "linear",
                                                              "uniform", "shuffled")},
           "layers": L}  # fmt: skip
    store = {"setup": {"command": "cmd", "text": "txt"}, "runs": {str(n): run}}
    ms, tables, figs, setup = study_evidence(store)
    by = {m.key: m for m in ms}
    assert by["smollm2_study.best"].value.startswith("e: ")
    assert all(m.test == "info" for m in ms)
    sinks = next(t for t in tables if t.key == "smollm2_study.sinks")
    assert sinks.rows[1][:4] == pytest.approx([1, 0.2, 0.18, 0.22], abs=1e-15)  # λ_1 est, lo, hi
    prof = next(t for t in tables if t.key == "smollm2_study.profiles")
    assert len(prof.rows) == 9 and all(len(r) == len(prof.columns) for r in prof.rows)
    assert len(figs[0].panels) == 2  # one per n and the sinks
    assert "median 0.2" in setup and "(e) 0.1 < (d) 0.2" in setup
