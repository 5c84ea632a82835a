"""PB17: lost in the middle, measured and predicted — the evidence against independent numbers.

The check runs here on a tiny random Llama with a word-level tokenizer (monkeypatched in place of
SmolLM2), so the comparisons can be recomputed from the evidence's own tables; the real-model run
is exercised by the mutant test (tests/test_proofs_checks_mutants.py)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
tokenizers = pytest.importorskip("tokenizers")

from posflow.proofs_checks.claims import pb17_retrieval as pb  # noqa: E402
from posflow.proofs_checks.kit import Context, get_claim  # noqa: E402
from posflow.simulate.models import retrieval as R  # noqa: E402


@pytest.fixture(scope="module")
def tiny():
    vocab = ["[UNK]", *map(str, range(10)), " ", "\n", ":", ".",
             *"Each word below has a number".split(), *R.WORDS[:40]]  # fmt: skip
    wl = tokenizers.models.WordLevel({w: i for i, w in enumerate(vocab)}, unk_token="[UNK]")
    t = tokenizers.Tokenizer(wl)
    t.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r"\d|\s|[^\w\s]|\w+"), behavior="isolated"
    )
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=t, unk_token="[UNK]")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=512)  # fmt: skip
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="eager")
    return model.eval(), tok


@pytest.fixture(scope="module")
def evidence(tiny):
    mp = pytest.MonkeyPatch()
    mp.setattr(pb, "_model", lambda key="smollm2-135m": tiny)
    mp.setattr(pb, "_installed", lambda: True)
    mp.setitem(pb.QUICK, "contexts", 8)
    try:
        yield pb.pb17(Context())
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def two_models(tiny):
    """PB17 over two models: the tiny pair as 'SmolLM2' and, with a <bos> token, as 'Gemma 3'."""
    import copy

    model, tok = tiny
    tb = copy.deepcopy(tok)
    tb.bos_token = "[UNK]"
    mp = pytest.MonkeyPatch()
    mp.setattr(pb, "_model", lambda key="smollm2-135m": (model, tb if "gemma" in key else tok))
    mp.setattr(pb, "_installed", lambda: True)
    mp.setattr(pb, "models", lambda ctx: ["smollm2-135m", "gemma3-270m"])
    mp.setitem(pb.QUICK, "contexts", 8)
    try:  # undone at once: the module's other fixture measures one model
        return pb.pb17(Context()), tb.bos_token_id
    finally:
        mp.undo()


def test_each_model_has_its_own_keys_figure_rows_and_bos_convention(two_models):
    ev, bos = two_models
    keys = {m.key for m in ev.measurements}
    gemma = {k for k in keys if k.startswith("gemma3_")}
    assert {"gemma3_" + k for k in keys - gemma} == gemma  # every number, once per model
    assert "dip_K10" in keys and "regression_vs_reference" in keys
    assert [f.name for f in ev.figures] == ["PB17_lost_in_the_middle",
                                            "PB17_lost_in_the_middle_gemma3"]
    for t in ev.tables:
        assert t.columns[0] == "model"
        assert {r[0] for r in t.rows} == {"SmolLM2-135M", "Gemma 3 270M"}
    assert "<bos> first" in ev.setup and ev.setup.count("<bos> first") == 1  # Gemma's only
    assert ev["gemma3_stored_study_readable"].passed  # Gemma's own stored study
    # the same tiny model and tasks, one token later: the same kind of numbers, not the same
    assert ev["gemma3_positions_labelled_K10"].passed and ev["positions_labelled_K10"].passed
    assert bos is not None


def test_registered_as_ours():
    claim = get_claim("PB17")
    assert claim.source == "[ours]" and "interior dip" in claim.statement


def test_without_the_model_it_is_undecided_naming_the_install_command(monkeypatch):
    monkeypatch.setattr(pb, "_installed", lambda: False)
    ev = pb.pb17(Context())
    assert ev.status == "INCONCLUSIVE"
    assert "posflow models install smollm2-135m" in ev.summary


def test_the_dip_by_hand():
    k = np.arange(7)
    mean = (k - 2.0) ** 2 / 4 - 3  # minimum at k = 2, ends −2 and 3.25 − 3 = 0.25 → −2 − (−3) = 1
    cur = R.PositionCurve(mean, mean - 0.2, mean + 0.3, 0.95, 100)
    kmin, interior, depth, sep = pb._dip(cur)
    assert (kmin, interior) == (2, True)
    assert depth == pytest.approx(1.0) and sep == pytest.approx(1.0 - 0.2 - 0.3)
    assert pb._dip(R.PositionCurve(k * 1.0, k - 1.0, k + 1.0, 0.95, 100))[:2] == (0, False)


def rows(ev, K):
    t = ev.table("position_curves")  # columns after the model's name
    return np.array([r[1:] for r in t.rows if r[1] == K], dtype=float)


def test_the_judged_numbers_recompute_from_the_curves(evidence):
    ev = evidence
    for K in pb.QUICK["Ks"]:
        r = rows(ev, K)
        assert r.shape == (K, 9) and (r[:, 1] == np.arange(K)).all()
        mean, lo, hi = r[:, 2], r[:, 3], r[:, 4]
        assert ((lo <= mean) & (mean <= hi)).all()  # the bootstrap interval holds the mean
        kmin = int(np.argmin(mean))
        assert ev[f"argmin_K{K}"].value == kmin
        depth = min(mean[0], mean[-1]) - mean[kmin]
        assert ev[f"dip_depth_K{K}"].value == pytest.approx(depth, abs=1e-12)
        sep = min(lo[0], lo[-1]) - hi[kmin]
        assert ev[f"dip_separation_K{K}"].value == pytest.approx(sep, abs=1e-12)
        fit = {row[2]: row[3:] for row in ev.table("crossfit").rows if row[1] == K}
        assert ev[f"spearman_point_K{K}"].value == fit["fitted"][0]  # the cross-fitted ρ
        lo_hi = [ev[f"spearman_lo_K{K}"].value, ev[f"spearman_hi_K{K}"].value]
        assert lo_hi == list(fit["fitted"][1:])
        assert ev[f"alpha_K{K}"].value == fit["alpha"][0] > 0
        assert f"α = {fit['alpha'][0]:.2f}" in ev[f"spearman_K{K}"].label  # the verdict line
        assert ev[f"verdict_K{K}"].value.split(" — ")[1].startswith("fitted α = ")
        for s in ("unit", "ceiling"):
            assert ev[f"rho_{s}_K{K}"].value == fit[s][0]
        assert (r[:, 8] > 0).all()  # the displayed profile: the fitted rollout's line masses
        assert ((r[:, 5] >= 0) & (r[:, 5] <= 1)).all() and (r[:, 8] > 0).all()


def test_controls_pass_and_the_verdict_follows_the_comparisons(evidence):
    ev = evidence
    for K in pb.QUICK["Ks"]:
        assert ev[f"positions_labelled_K{K}"].passed and ev[f"positions_labelled_K{K}"].role == (
            "control")  # fmt: skip
        assert ev[f"logprob_vs_direct_K{K}"].passed
    fails = [m.key for m in ev.failed]
    assert ev.status == ("FAILS" if fails else "INCONCLUSIVE" if ev.undecided else "HOLDS")
    for K in pb.QUICK["Ks"]:  # each statement decided by the kit's rule from its interval
        for key in (f"dip_K{K}", f"spearman_K{K}"):
            m = ev[key]
            assert m.test in ("undecided", "at_least"), key
        assert ev[f"verdict_K{K}"].value.split()[0] in ("HOLDS", "FAILS", "INCONCLUSIVE")
    for key in ("position_curve_vs_direct", "spearman_vs_rank_formula", "spearman_lo_vs_scipy",
                "line_profile_vs_direct", "best_profile_vs_direct"):
        assert ev[f"{key}_K10"].passed, key
    assert ev["regression_vs_reference"].test == "info"  # the tiny model has no reference
    controls = [m for m in ev.measurements if "_control_" in m.key]
    assert len(controls) >= 5 and all(m.passed for m in controls)


def test_the_depth_sensitivity_table_is_the_comparison_at_each_threshold(evidence):
    t = evidence.table("dip_depth_sensitivity")
    assert {r[1] for r in t.rows} == set(pb.DEPTH_GRID)
    for _model, delta, K, depth, depth_ok, dip_ok in t.rows:
        assert depth == pytest.approx(evidence[f"dip_depth_K{K}"].value)
        assert depth_ok == (depth >= delta)
        kmin = evidence[f"argmin_K{K}"].value
        want = (0 < kmin < K - 1 and depth >= delta
                and evidence[f"dip_separation_K{K}"].value >= 0)  # fmt: skip
        assert dip_ok == want


def test_the_figure_has_measured_and_predicted_panels_per_K(evidence):
    (fig,) = evidence.figures
    assert len(fig.panels) == 3 * len(pb.QUICK["Ks"])
    pred = [p for p in fig.panels if p.title.startswith("predicted")]
    for p in pred:  # the predicted line mass, normalised
        assert sum(p.series[0].y) == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["query-position-shifted", "logprob-wrong-offset"])
def test_each_mutant_breaks_a_control_that_passes_unmutated(tiny, evidence, monkeypatch, name):
    from posflow.proofs_checks import kit as mut

    (m,) = [m for m in mut.mutants_of("PB17") if m.name == name]
    monkeypatch.setattr(pb, "_model", lambda key="smollm2-135m": tiny)
    monkeypatch.setattr(pb, "_installed", lambda: True)
    monkeypatch.setitem(pb.QUICK, "contexts", 8)
    with mut.mutated(m):
        ev = pb.pb17(Context())
    newly = {x.key for x in ev.failed} - {x.key for x in evidence.failed}
    assert ev.status == "FAILS" and newly
    control = "positions_labelled" if name == "query-position-shifted" else "logprob_vs_direct"
    assert {f"{control}_K{K}" for K in pb.QUICK["Ks"]} <= newly


def test_every_profile_is_reported_and_the_judged_one_is_the_stored_best(evidence):
    from posflow.simulate.models.study import PROFILES, best_profile, stored_study

    store = stored_study()
    best = best_profile(store)[0] if store and store.get("runs") else "b"
    assert evidence["best_profile"].value.startswith(f"{best}: ")
    t = evidence.table("spearman_by_profile")
    for K in pb.QUICK["Ks"]:
        got = {r[2]: r[1:] for r in t.rows if r[1] == K}
        assert set(got) == set("abcde") and set(got) <= set(PROFILES)
        judged = [k for k, r in got.items() if r[6]]
        assert judged == [best]
        # the table is α = 1 pooled over all contexts (reported); the judged ρ is cross-fitted
        fit = {r[2]: r[3:] for r in evidence.table("crossfit").rows if r[1] == K}
        assert fit["fitted"][0] == evidence[f"spearman_K{K}"].value
        for r in got.values():
            assert r[4] <= r[3] + 1e-12 <= r[5] + 2e-12 or np.isnan(r[3])


# -- issue 23: the kit's decision rule, the stored study, the regression ---------------------------


def _decision(lo, hi, bound=0.0):
    from posflow.proofs_checks.kit import Decision

    return Decision("x", (lo + hi) / 2, lo, hi, bound, "ge")


def test_the_decision_rule_fails_only_an_interval_that_excludes_the_claim():
    from posflow.proofs_checks.claims import pb17_refs as R

    assert R.decision_measurement("k", _decision(0.1, 0.3), "l").passed is True
    assert R.decision_measurement("k", _decision(-0.3, -0.1), "l").passed is False
    assert R.decision_measurement("k", _decision(-0.1, 0.3), "l").test == "undecided"
    assert all(m.passed for m in R.decision_controls(_decision(-0.1, 0.3)))


def test_the_decision_controls_kill_a_point_estimate_judge():
    from posflow.proofs_checks import kit
    from posflow.proofs_checks.claims import pb17_refs as R

    (m,) = [m for m in kit.mutants_of("PB17") if m.name == "decide-on-point-estimate"]
    with kit.mutated(m):
        assert not all(c.passed for c in R.decision_controls(_decision(-0.1, 0.3)))


@pytest.mark.parametrize("content", [None, "{not json", '{"runs": {}}'])
def test_a_missing_or_corrupt_study_fails_naming_its_path(tmp_path, monkeypatch, content):
    from posflow.proofs_checks.claims import pb17_refs as R

    f = tmp_path / "study.json"
    if content is not None:
        f.write_text(content)
    monkeypatch.setattr(R, "study_file", lambda model="smollm2-135m": f)
    monkeypatch.setattr(pb, "_installed", lambda: True)
    ev = pb.pb17(Context())
    assert ev.status == "FAILS" and ev["stored_study_readable"].passed is False
    assert str(f) in ev["stored_study_readable"].label


def test_without_the_model_the_study_is_still_compared(monkeypatch):
    monkeypatch.setattr(pb, "_installed", lambda: False)
    ev = pb.pb17(Context())
    assert ev["stored_study_readable"].passed and ev["best_profile_vs_direct_K10"].passed
    assert ev.status == "INCONCLUSIVE"


def test_the_regression_judge_sees_one_moved_number():
    from posflow.proofs_checks.claims import pb17_refs as R

    ref = {"a": 1.0, "b": 2.0, "s": "x"}
    assert R.regression("k", dict(ref), ref, 1e-4, "r")[0].passed
    assert not R.regression("k", {**ref, "b": 2.001}, ref, 1e-4, "r")[0].passed
    assert not R.regression("k", {"a": 1.0, "s": "x"}, ref, 1e-4, "r")[0].passed  # one missing


# -- issue 41: the cross-fitted profile, families per model, scopes ------------------------------


def test_the_crossfit_matches_its_direct_recomputation_and_its_controls_reject(evidence):
    K = pb.QUICK["Ks"][0]
    assert evidence[f"crossfit_vs_direct_K{K}"].passed
    assert evidence[f"crossfit_control_in_sample_K{K}"].passed  # the in-sample fit is rejected
    assert evidence[f"crossfit_control_fit_held_K{K}"].passed  # so is a bootstrap without refit
    t = {r[2]: r[3:] for r in evidence.table("crossfit").rows}
    assert set(t) == {"alpha", "fitted", "unit", "ceiling"}
    for est, lo, hi in t.values():
        assert np.isfinite([est, lo, hi]).all() and lo <= hi


def test_a_models_family_is_its_own_comparisons_whatever_else_is_installed(evidence, two_models):
    from posflow.proofs_checks.claims import pb17_figures as F

    assert F.family((10,)) == (2, 0.025, 0.975)
    assert F.family((10, 20, 50))[:2] == (6, 0.05 / 6)
    two, _ = two_models  # SmolLM2 measured alone, then with a second model installed
    assert evidence["family"].value == two["family"].value == two["gemma3_family"].value
    for m in evidence.measurements:  # every judged number and interval of SmolLM2 unmoved
        if m.test != "info" or not m.key.startswith(("seconds", "load")):
            other = two[m.key]
            assert (other.value, other.passed, other.label) == (m.value, m.passed, m.label), m.key
    with pytest.raises(ValueError, match="Ks"):
        F.family(())


def test_every_model_has_its_scope(two_models):
    ev, _ = two_models
    assert set(ev.scopes) == {"smollm2-135m", "gemma3-270m"}
    for sc in ev.scopes.values():
        assert "retrieval" in sc.text and "contexts 8" in sc.line()
        assert str(pb.QUICK["Ks"][0]) in str(sc.n)
    assert "Gemma 3" in ev.scopes["gemma3-270m"].model


def test_fitting_alpha_on_the_scored_half_fails_the_direct_recomputation(tiny, evidence,
                                                                          monkeypatch):
    from posflow.proofs_checks import kit

    (m,) = [m for m in kit.mutants_of("PB17") if m.name == "alpha-fitted-on-scored-half"]
    monkeypatch.setattr(pb, "_model", lambda key="smollm2-135m": tiny)
    monkeypatch.setattr(pb, "_installed", lambda: True)
    monkeypatch.setitem(pb.QUICK, "contexts", 8)
    with kit.mutated(m):
        ev = pb.pb17(Context())
    assert ev.status == "FAILS"
    newly = {x.key for x in ev.failed} - {x.key for x in evidence.failed}
    for K in pb.QUICK["Ks"]:  # the routine now equals the in-sample recomputation, not the direct
        assert {f"crossfit_vs_direct_K{K}", f"crossfit_control_in_sample_K{K}"} == newly
