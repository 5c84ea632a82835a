"""Claim PB19: the rollout from every layer against the influence at that layer's input."""

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from posflow.proofs_checks.claims import pb19_layerwise as P  # noqa: E402
from posflow.proofs_checks.claims import pb19_refs as R  # noqa: E402
from posflow.proofs_checks.kit import FAILS, HOLDS, INCONCLUSIVE  # noqa: E402
from posflow.proofs_checks.kit._registry import Context, get_claim  # noqa: E402


def test_pb19_is_registered_as_ours():
    c = get_claim("PB19")
    assert c.check is P.pb19 and c.source == "[ours]"
    assert {x.routine.rpartition(":")[2] for x in c.compares} >= {
        "layerwise_profiles",
        "layerwise_w1",
        "layerwise_crossfit",
        "measure",
    }


# the model verdict from the layers' statuses: cases as data
STATUS_CASES = [
    ([HOLDS, HOLDS, HOLDS], (HOLDS, 0)),
    ([INCONCLUSIVE, HOLDS, HOLDS], (INCONCLUSIVE, 1)),
    ([HOLDS, INCONCLUSIVE, HOLDS], (INCONCLUSIVE, 2)),  # a gap: the break is above it
    ([HOLDS, HOLDS, INCONCLUSIVE], (INCONCLUSIVE, 3)),  # not even the top layer
    ([FAILS, HOLDS, HOLDS], (FAILS, 1)),
    ([HOLDS, FAILS, INCONCLUSIVE], (FAILS, 3)),
]


@pytest.mark.parametrize(("statuses", "want"), STATUS_CASES)
def test_model_status(statuses, want):
    assert P.model_status(statuses) == want


def _cf(b, e, geo, lin, spread=0.001, G=12, seed=0):
    """A CrossFit-like object: jackknife replicates around the given W1 values."""
    rng = np.random.default_rng(seed)
    return SimpleNamespace(metrics={"w1": {k: v + spread * rng.standard_normal(G + 1)
                                           for k, v in (("b", b), ("e", e), ("geometric", geo),
                                                        ("linear", lin))}})  # fmt: skip


@pytest.mark.parametrize(("w1", "want", "best"), [
    ((0.05, 0.10, 0.20, 0.30), HOLDS, "b"),  # (b) beats both nulls
    ((0.30, 0.05, 0.20, 0.30), HOLDS, "e"),  # (e) does
    ((0.30, 0.25, 0.10, 0.12), FAILS, "e"),  # each candidate beaten by a null
    ((0.30, 0.10, 0.10, 0.30), INCONCLUSIVE, "e"),  # (e) ties the geometric null
])  # fmt: skip
def test_layer_status_negative_and_positive_controls(w1, want, best):
    st, got_best, decs = P.layer_status(_cf(*w1), 0.999, -1e-12)
    assert (st, got_best) == (want, best)
    assert [d.label for d in decs] == list(P.RIVALS)


def test_layer_status_is_not_fooled_by_the_best_point_estimate():
    """(b) lowest but its interval straddles the geometric null's: undecided, not HOLDS."""
    st, _, _ = P.layer_status(_cf(0.10, 0.5, 0.11, 0.5, spread=0.05), 0.999, -1e-12)
    assert st == INCONCLUSIVE


# -- the references --------------------------------------------------------------------------


def _toy_lm(seed=0):
    from posflow.simulate.models.lm import LM, LMConfig

    return LM(LMConfig(n_layer=3, n_head=2, d_model=16), seed=seed).double()


def _tiny_hf(kind):
    import tiny_lms

    return tiny_lms.build(kind).double(), tiny_lms.ids(count=1)[0].numpy()


@pytest.mark.parametrize("kind", ["posflow", "llama", "gemma3_text", "gpt2"])
def test_plain_layer_influence_equals_the_measured_one(kind):
    """float64 models: hooks (measure) and the plain forward agree to rounding."""
    from posflow.simulate.models.measure import measure

    if kind == "posflow":
        model, ids = _toy_lm(), np.random.default_rng(0).integers(0, 256, 10)
    else:
        model, ids = _tiny_hf(kind)
    ref = R.plain_layer_influence(model, ids)
    m = measure(model, ids[None], layer_influence=True, attention=False, qk=False)
    np.testing.assert_allclose(m.layer_influence, ref, rtol=0, atol=1e-12)
    assert ref.shape == (len(m.lambdas), ids.size)
    assert R.layer_influence_vs_plain("t", "t", model, ids, m.layer_influence).passed
    late = R.one_layer_late(measure)(model, ids[None], layer_influence=True, attention=False,
                                     qk=False).layer_influence  # fmt: skip
    assert not R.layer_influence_vs_plain("t", "t", model, ids, late).passed


def test_profile_and_w1_references_pass_and_catch_their_mutants(monkeypatch):
    from posflow.simulate.models import layerwise

    rng = np.random.default_rng(2)
    A = np.tril(rng.random((4, 7, 7)) + 0.05)
    A /= A.sum(axis=-1, keepdims=True)
    lam = rng.uniform(0.1, 0.9, 4)
    G = rng.random((4, 7)) + 0.01
    assert R.profiles_vs_dense("t", "t", A, lam).passed
    P_ = layerwise.layerwise_profiles(A, lam)
    assert R.w1_vs_scipy("t", "t", P_, G).passed
    monkeypatch.setattr(
        layerwise, "layerwise_profiles", R.rollout_from_next_layer(layerwise.layerwise_profiles)
    )
    assert not R.profiles_vs_dense("t", "t", A, lam).passed


def test_library_reference_catches_the_one_layer_high_crossfit():
    from posflow.proofs_checks.kit import crossfit_library_reference
    from posflow.simulate.models.layerwise import layerwise_crossfit

    rng = np.random.default_rng(5)
    N, L, n = 6, 3, 6
    A = np.tril(rng.random((N, L, n, n)) + 0.05)
    A /= A.sum(axis=-1, keepdims=True)
    G = rng.random((N, L, n)) + 0.05
    data = SimpleNamespace(attention=A, lambdas=rng.uniform(0.2, 0.8, (N, L)),
                           influence=G[:, 0], content=rng.normal(0, 1, (N, L, 2)), values=A,
                           slopes=np.zeros(2), layer_influence=G)  # fmt: skip
    good = layerwise_crossfit(data, rollouts=("b", "e"))
    bad = R.crossfit_one_layer_high(layerwise_crossfit)(data, rollouts=("b", "e"))
    t = 1
    assert max(crossfit_library_reference(R.layer_slice(data, t), good[t])[:2]) < 1e-12
    assert max(crossfit_library_reference(R.layer_slice(data, t), bad[t])[:2]) > 1e-3


# -- the check ------------------------------------------------------------------------------


def test_pb19_on_the_toy_lm_alone(monkeypatch):
    """Without SmolLM2 the toy LM is judged: every cited comparison is there and passes, the
    per-layer tables have one row per layer, the judges' controls are in the verdict, and the
    record names its scope."""
    monkeypatch.setattr(P, "_smollm2_installed", lambda: False)
    ev = P.pb19(Context())
    assert ev.status == HOLDS, ev.summary
    assert ev.absent == ("smollm2-135m",)
    for key in (
        "toy.layer_influence_vs_plain_torch",
        "toy.layerwise_profiles_vs_rollout",
        "toy.layerwise_w1_vs_scipy",
        "toy.layerwise_crossfit_vs_library",
        "toy.mdd_vs_judge_monte_carlo",
        "toy.power_vs_judge_monte_carlo",
        "crossfit_control_past_bound",
        "crossfit_control_straddling",
        "mdd_control_power_term_dropped",
        "break_depth_control_underpowered",
    ):
        assert ev[key].passed, key
    L = ev["toy.family"].value // (len(P.CANDIDATES) * len(P.RIVALS))
    assert len(ev.table("toy.layerwise").rows) == len(ev.table("toy.effects").rows) == L
    assert ev["toy.held_from"].value == ev["toy.break_depth"].value == 0  # every layer holds
    assert [r[0] for r in ev.table("toy.break_depth_sensitivity").rows] == list(P.EFFECTS)
    scope = ev.scopes["toy"]
    assert scope.samples == "32 windows" and scope.n == 64
    assert scope.line() in ev["toy.verdict"].label


# -- families per model (issue 41 item 3) ------------------------------------------------------


def _synthetic(L, seed, N=6, n=6):
    """(per-window data, plain-torch comparison, note) shaped like measure_model's."""
    from posflow.proofs_checks.kit import at_most

    rng = np.random.default_rng(seed)
    A = np.tril(rng.random((N, L, n, n)) + 0.05)
    A /= A.sum(axis=-1, keepdims=True)
    G = rng.random((N, L, n)) + 0.05
    data = SimpleNamespace(attention=A, lambdas=rng.uniform(0.2, 0.8, (N, L)), influence=G[:, 0],
                           content=rng.normal(0, 1, (N, L, 2)), values=A, slopes=np.zeros(2),
                           layer_influence=G)  # fmt: skip
    return data, at_most("x.layer_influence_vs_plain_torch", 0.0, 0.0), f"synthetic L = {L}"


def test_a_models_level_and_verdict_do_not_depend_on_the_other_models(monkeypatch):
    """The toy model's family, level, identity and every number it reports are the same alone
    and beside a second model of another depth (before issue 41 the family summed over models)."""
    from posflow.simulate.models.subjects import Subject

    fake = {"toy": _synthetic(3, 0), "smollm2": _synthetic(5, 1)}
    monkeypatch.setattr(P, "measure_model", lambda sub, count=None: fake[sub.tag])
    toy, other = Subject("toy", "toy LM", None), Subject("smollm2", "SmolLM2", None)

    def toy_part(subs):
        monkeypatch.setattr(P, "subjects", lambda ctx: subs)
        (sub, (ms, tables, _, _, scope, ident)), *_ = P._collect(Context())
        assert sub is toy
        return ident, {m.key: m.value for m in ms}, [t.rows for t in tables], scope

    alone, beside = toy_part([toy]), toy_part([toy, other])
    assert alone == beside
    assert alone[1]["toy.family"] == P.model_family(3) == 12
    assert "12 comparisons" in alone[0]


def test_model_family_refuses_bad_depths():
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="L"):
            P.model_family(bad)


def test_pb19_reads_the_first_windows_of_the_shared_measurement():
    """PB19 judges the first WINDOWS of the measurement PB15 and PB20 share (issue 41, item 8)."""
    from posflow.simulate.models.profiles_bootstrap import PerSequence

    rng = np.random.default_rng(0)
    N, L, n = 6, 2, 5
    data = PerSequence(rng.random((N, L, n, n)), rng.random((N, L)), rng.random((N, L, 3)),
                       rng.random((N, n)), np.zeros(3), rng.random((N, L, n, n)),
                       layer_influence=rng.random((N, L, n)), windows=(None, 4))  # fmt: skip
    got = P.first_windows(data, 4)
    for f in ("attention", "lambdas", "content", "influence", "values", "layer_influence"):
        np.testing.assert_array_equal(getattr(got, f), getattr(data, f)[:4])
    assert got.lambdas_mlp is None and got.windows == (None, 4) and got.slopes is data.slopes
    assert P.WINDOWS["quick"] == {"toy": 32, "smollm2": 16}
    from posflow.proofs_checks.claims import pb20_like_for_like as PB20

    ctx = Context()
    assert [s.load.args for s in P.subjects(ctx)] == [s.load.args for s in PB20.subjects(ctx)]
