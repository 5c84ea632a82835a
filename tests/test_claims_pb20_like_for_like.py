"""Claim PB20 (the quick preset is swapped for the tiny one where a model is trained): the
cross-fitted verdict rule (pb20_crossfit) and the reported in-sample rule (pb20_insample) on
hand-made replicates, the independent reference of crossfit and the mutant it kills, the
subjects, the check end to end and the stored study it shows. The profiles pipeline itself is
tested in tests/test_simulate_models_profiles.py, cross-fitting in
tests/test_simulate_models_crossfit.py."""

import numpy as np
import pytest

pytest.importorskip("torch")

from posflow.proofs_checks.claims import pb20_like_for_like as P
from posflow.proofs_checks.claims import pb20_like_for_like as models_claims
from posflow.proofs_checks.claims import pb20_study as S
from posflow.proofs_checks.kit._evidence import FAILS, HOLDS, INCONCLUSIVE
from posflow.proofs_checks.kit._registry import Context, get_claim
from posflow.simulate.models import train as T
from posflow.simulate.models.profiles import percentile_interval
from posflow.simulate.models.profiles_bootstrap import Bootstrap


@pytest.fixture
def tiny_quick(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("POSFLOW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setitem(T.PRESETS, "quick", T.PRESETS["tiny"])
    return tmp_path


def test_claims_are_registered_with_honest_tags():
    assert get_claim("PB20").check is models_claims.pb20 is P.pb20
    assert get_claim("PB20").source == "[ours]"


# -- PB15: the verdict rule ---------------------------------------------------------------------


def _bootstrap_with(diffs: dict, B=1000):
    """A Bootstrap whose W1(b) − W1(x) replicates are ``diffs[x]`` (uniform draws)."""
    rng = np.random.default_rng(0)
    w1 = {"b": np.full(B + 1, 0.5)}
    for x in S.RIVALS:
        lo, hi = diffs[x]
        d = np.concatenate([[(lo + hi) / 2], rng.uniform(lo, hi, B)])
        w1[x] = 0.5 - d
    z = np.zeros((B + 1, 4))
    return Bootstrap({}, z, z[:, :3], w1, {}, z[:, 0], z[:, 0], np.arange(3), 0.0)


def test_the_in_sample_comparison_is_reported_with_its_percentile_rule():
    from posflow.proofs_checks.claims.pb20_insample import judge

    bs = _bootstrap_with(
        {
            "a": (-0.3, -0.1),  # below 0: beaten
            "geometric": (-0.01, 0.02),  # contains 0: undecided
            "linear": (0.01, 0.02),  # above 0: (b) is worse
            "uniform": (0.0, 0.0),  # identical profiles: not beaten
            "shuffled": (-0.02, -0.01),
        }
    )
    ms, rows = judge("m", "model", bs, 0.99, 10)
    assert all(m.test == "info" for m in ms)  # not like for like (issue 24): reported only
    assert [r[4] for r in rows] == ["beats", "?", "no", "no", "beats"]
    # the interval is the 0.5 % … 99.5 % percentile of the replicates
    lo, hi = percentile_interval(bs.w1["b"] - bs.w1["a"], 0.99)
    assert -0.3 < lo < -0.29 and -0.11 < hi < -0.1 and ms[0].value == hi


def _jack(lo, hi, G=16):
    """Jackknife replicates whose t interval at 99 % is about [lo, hi]."""
    from scipy.stats import t

    mid, half = (lo + hi) / 2, (hi - lo) / 2
    se = half / t.ppf(0.995, G - 1)
    # G/2 replicates at mid ± c: ŝe² = (G − 1)/G · G c², so c = ŝe/√(G − 1)
    return np.r_[mid, mid + se / np.sqrt(G - 1) * np.where(np.arange(G) % 2, 1.0, -1.0)]


def test_the_crossfit_judge_decides_from_the_jackknife_interval():
    from posflow.proofs_checks.claims.pb20_crossfit import crossfit_decision, jackknife_controls
    from posflow.simulate.models.crossfit import jackknife_interval

    for (lo, hi), want in (((-0.3, -0.1), HOLDS), ((-0.1, 0.1), INCONCLUSIVE),
                           ((0.1, 0.3), FAILS)):  # fmt: skip
        d = _jack(lo, hi)
        _, _, a, b = jackknife_interval(d, 0.99)
        assert a == pytest.approx(lo, abs=1e-12) and b == pytest.approx(hi, abs=1e-12)
        assert crossfit_decision("x", d, 0.99, 0.0).decision == want
    assert all(m.passed for m in jackknife_controls(_jack(-0.3, -0.1), 0.99, 0.0))


def _windows(seed=0, N=8, L=3, H=2, n=10):
    from posflow.simulate.models.profiles_bootstrap import PerSequence

    rng = np.random.default_rng(seed)

    def causal():
        A = rng.random((N, L, n, n)) * np.tril(np.ones((n, n))) + 0.05 * np.eye(n)
        return A / A.sum(axis=-1, keepdims=True)

    return PerSequence(causal(), rng.uniform(0.1, 0.8, (N, L)), rng.normal(0, 2, (N, L, H)),
                       rng.random((N, n)) + 0.01, np.array([0.3, 0.0]), causal())  # fmt: skip


def test_the_library_reference_agrees_with_crossfit_and_kills_an_in_sample_fit():
    from posflow.proofs_checks import kit
    from posflow.proofs_checks.claims.pb20_crossfit import library_reference
    from posflow.simulate.models.crossfit import crossfit

    data = _windows()
    prof, metric, resid, missed = library_reference(data, crossfit(data))
    assert prof < 1e-13 and metric < 1e-13 and resid < 1e-8 and missed == 0
    (m,) = [m for m in kit.mutants_of("PB20") if m.name == "crossfit-in-sample"]
    with kit.mutated(m):
        cf = crossfit(data)
    assert library_reference(data, cf)[2] > 1e-3  # α fitted on the scoring half: seen


def test_the_mlp_variant_is_reported_only_when_measured():
    from types import SimpleNamespace

    from posflow.proofs_checks.claims.pb20_crossfit import crossfit_evidence
    from posflow.proofs_checks.claims.pb20_insample import what

    data = _windows(N=6)
    sub = SimpleNamespace(tag="m", name="model")
    perm = np.array([1, 2, 0])
    _, tables, fig, decs, _ = crossfit_evidence(sub, data, perm, 0.99, 0, what, 1e-12)
    assert [t.key for t in tables] == ["m.crossfit", "m.crossfit_alpha", "m.crossfit_differences",
                                       "m.crossfit_normalised"]  # fmt: skip
    alpha = {r[0]: r for r in tables[1].rows}  # every rollout's verdict, α and its interval
    assert set(alpha) == {"b", "b_param", "d", "e"}
    for r in alpha.values():
        assert r[4] <= r[3] <= r[5] and r[6] == ("yes" if r[4] <= 1 <= r[5] else "no")
    assert len(decs) == 5 and fig.name == "pb15_m_crossfit"
    data.lambdas_mlp = np.clip(data.lambdas * 0.7, 0, 1)  # λ with the MLP update counted
    _, tables, *_ = crossfit_evidence(sub, data, perm, 0.99, 0, what, 1e-12)
    keys = [t.key for t in tables]
    assert keys[3:] == ["m.crossfit_mlp", "m.crossfit_mlp_differences", "m.crossfit_normalised"]
    mlp, base = tables[3].rows, tables[0].rows
    assert [r[0] for r in mlp] == [r[0] for r in base] and mlp[0][3] != base[0][3]


def _named_axes_are_names(fig, table_keys):
    """Every panel of ``fig`` whose x axis counts predictors or rivals names each point by its
    display name (SHORT), in the table's order, at the point's own x; returns those panels."""
    from posflow.proofs_checks.claims.pb20_crossfit import SHORT

    named = [p for p in fig.panels if p.xlabel in ("predictor", "rival")]
    for p in named:
        assert p.xticks is not None, p.title
        pos, labels = zip(*p.xticks, strict=True)
        assert [s.x[0] for s in p.series if s.kind == "errorbar"] == list(pos)
        assert set(labels) <= set(SHORT.values())  # display names: (c), never keys like b_param
    predictors = [p for p in named if p.xlabel == "predictor"]
    for p in predictors:
        assert [lab for _, lab in p.xticks] == [SHORT[k] for k in table_keys]
    return named, predictors


def test_the_crossfit_figure_names_every_predictor_on_its_axis():
    from types import SimpleNamespace

    from posflow.proofs_checks.claims.pb20_crossfit import SHORT, crossfit_evidence
    from posflow.proofs_checks.claims.pb20_insample import what
    from posflow.proofs_checks.kit import render

    sub = SimpleNamespace(tag="m", name="model")
    _, tables, fig, decs, _ = crossfit_evidence(sub, _windows(N=6), np.array([1, 2, 0]), 0.99, 0,
                                                what, 1e-12)  # fmt: skip
    keys = [r[0] for r in tables[0].rows if r[0] != "measured"]
    named, predictors = _named_axes_are_names(fig, keys)
    assert len(predictors) == 2 and len(named) == 3  # W1, shape; the rival differences
    assert [lab for _, lab in named[2].xticks] == [SHORT[d.label] for d in decs]
    mpl = render(fig)  # drawn: the names are the ticks, slanted where ten of them crowd a panel
    for ax in mpl.axes[:2]:
        labels = ax.get_xticklabels()
        assert [t.get_text() for t in labels] == [SHORT[k] for k in keys]
        assert {t.get_rotation() for t in labels} == {30.0}
        # slanted labels anchored at their ticks lie on parallel lines (tick spacing)·sin 30°
        # apart; more than one line of text means neighbours cannot collide
        spacing = ax.transData.transform((1, 0))[0] - ax.transData.transform((0, 0))[0]
        assert spacing * 0.5 > labels[0].get_fontsize() * mpl.dpi / 72


def test_subjects_are_the_toy_model_and_smollm2_when_installed(monkeypatch):
    monkeypatch.setattr(P, "_smollm2_installed", lambda: True)
    monkeypatch.setattr(P, "installed", lambda key: False)  # Gemma 3 270M: see the next test
    for size, (n, N) in (("quick", P.SMOLLM2_QUICK), ("full", P.SMOLLM2_FULL)):
        subs = P.subjects(Context(size=size))
        assert [s.tag for s in subs] == ["toy", "smollm2"]
        assert subs[1].load.args == (n, N, 0)
    assert P.SMOLLM2_FULL[1] >= 64  # the N ≥ 64 sequences
    monkeypatch.setattr(P, "_smollm2_installed", lambda: False)
    assert [s.tag for s in P.subjects(Context(size="full"))] == ["toy"]


def test_gemma3_is_measured_at_full_size_only_when_installed(monkeypatch):
    monkeypatch.setattr(P, "_smollm2_installed", lambda: True)
    monkeypatch.setattr(P, "installed", lambda key: key == "gemma3-270m")
    assert [s.tag for s in P.subjects(Context(size="quick"))] == ["toy", "smollm2"]
    subs = P.subjects(Context(size="full"))
    assert [s.tag for s in subs] == ["toy", "smollm2", "gemma3"]
    from posflow.simulate.models.subjects import gemma3_windows

    assert subs[2].load.func is gemma3_windows and subs[2].load.args == (*P.GEMMA3_FULL, 0)


# -- PB15 end to end ---------------------------------------------------------------------------


def test_pb15_verdict_follows_the_intervals(tiny_quick):
    from posflow.proofs_checks.claims.pb20_crossfit import CANDIDATES, CF_RIVALS

    ev = models_claims.pb20(Context())
    rows = ev.table("toy.crossfit_differences").rows
    assert {(r[0], r[1]) for r in rows} == {(x, y) for x in CANDIDATES for y in CF_RIVALS}
    status = {}
    for x in CANDIDATES:
        beats = [r[5] for r in rows if r[0] == x]
        status[x] = FAILS if "no" in beats else HOLDS if set(beats) == {"beats"} else INCONCLUSIVE
    best = ev["toy.crossfit.best"].value.split(":")[0]
    rank = {HOLDS: 0, INCONCLUSIVE: 1, FAILS: 2}
    assert rank[status[best]] == min(rank[s] for s in status.values())
    for r in (r for r in rows if r[0] == best):  # only the best rollout's comparisons judged
        m = ev[f"toy.crossfit.w1_best_minus_{r[1]}"]
        assert r[3] <= r[2] <= r[4] and m.value == r[4]
        if r[5] == "beats":
            assert m.passed is True and r[4] < 0
        elif r[5] == "?":
            assert m.test == "undecided" and r[3] < 0 <= r[4]
        else:
            assert m.passed is False
    assert ev["toy.verdict"].value.startswith(f"{status[best]} (every rollout")
    assert ev.status == status[best]  # one model: its sub-verdict is the verdict
    for key in ("toy.library_vs_batched_rollout", "toy.crossfit_vs_library",
                "toy.crossfit_fit_residual", "toy.influence_vs_plain_torch",
                "toy.lambdas_vs_plain_torch"):
        assert ev[key].passed, key  # fmt: skip
    assert ev["toy.w1_b_minus_a"].test == "info"  # the in-sample comparison: reported
    assert ev["toy.n"].value == T.PRESETS["tiny"].train.seq_len  # its training length
    assert ev["toy.layers"].value == 2
    lam = ev.table("toy.lambdas").rows
    assert len(lam) == 2 and all(0 < r[1] < 1 and r[2] <= r[1] <= r[3] for r in lam)
    assert abs(ev["toy.sum_lambda"].value - sum(r[1] for r in lam)) < 1e-12
    assert "not a test of depth" in ev["toy.depth"].value
    prof = {r[0]: r for r in ev.table("toy.profiles").rows}
    assert set(prof) == {*S.PREDICTED, *S.NULLS, "measured"}
    for k in (*S.PREDICTED, *S.NULLS):
        assert 0 <= prof[k][3] <= prof[k][2] <= prof[k][4] <= 1  # W1 inside its interval
        assert abs(prof[k][2] - ev[f"toy.w1_{k}"].value) < 1e-15
    # the geometric null has the measured mean position
    assert abs(prof["geometric"][8] - prof["measured"][8]) < 1e-6
    cf = {r[0]: r for r in ev.table("toy.crossfit").rows}
    assert set(cf) == {*CANDIDATES, *CF_RIVALS, "a_param", "measured"}
    for k, r in cf.items():
        if k != "measured":
            assert all(r[i + 1] <= r[i] <= r[i + 2] for i in (5, 8, 14, 17)), k
    names = [f.name for f in ev.figures]
    assert names[:2] == ["pb15_toy", "pb15_toy_crossfit"]
    assert len(ev.figures[0].panels) == 3 and len(ev.figures[1].panels) == 4
    for f in ev.figures:  # predictors and rivals are named on their axes, never numbered
        named, _ = _named_axes_are_names(f, [k for k in cf if k != "measured"])
        assert len(named) == {"pb15_toy": 1, "pb15_toy_crossfit": 3}.get(f.name, 0), f.name
    from posflow.simulate.models.study import stored_study

    if stored_study() is not None:  # the stored studies are shown beside it
        assert names == ["pb15_toy", "pb15_toy_crossfit", "pb15_smollm2_study",
                         "pb15_gemma3_study"]  # fmt: skip
        assert ev["gemma3_study_readable"].passed and ev["gemma3_study.best_vs_direct"].passed


def test_without_torch_pb15_is_inconclusive(monkeypatch):
    from posflow.proofs_checks import kit

    monkeypatch.setattr(kit, "optional_torch", lambda: None)
    for check in (models_claims.pb20,):
        ev = check(Context())
        assert ev.status == INCONCLUSIVE and "torch" in ev.summary


def test_the_stored_study_in_pb15_is_reported_from_its_numbers():
    from posflow.proofs_checks.claims.pb20_study import study_evidence

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


# -- issue 23: the stored study's failure, the decision rule's controls, the regression -----------


@pytest.mark.parametrize("content", [None, "{not json", '{"runs": {}}'])
def test_load_study_fails_naming_the_path(tmp_path, monkeypatch, content):
    from posflow.proofs_checks.claims import pb20_refs as R

    f = tmp_path / "study.json"
    if content is not None:
        f.write_text(content)
    monkeypatch.setattr(R, "study_file", lambda model="smollm2-135m": f)
    store, m = R.load_study()
    assert store is None and m.judged and m.passed is False and str(f) in m.label


def test_a_missing_study_makes_pb15_fail_naming_its_path(tiny_quick, monkeypatch):
    from posflow.proofs_checks.claims import pb20_refs as R

    f = tiny_quick / "missing.json"
    monkeypatch.setattr(R, "study_file", lambda model="smollm2-135m": f)
    monkeypatch.setattr(P, "_smollm2_installed", lambda: False)
    ev = P.pb20(Context())
    assert ev.status == FAILS and ev["stored_study_readable"].passed is False
    assert str(f) in ev["stored_study_readable"].label
    for key in ("decision_control_past_bound", "decision_control_straddling",
                "decision_control_blocked", "percentile_interval_vs_direct",
                "crossfit_control_past_bound", "crossfit_control_straddling",
                "jackknife_interval_vs_direct"):
        assert ev[key].passed, key  # fmt: skip
    # the tiny model is not the model of the stored reference: reported, not compared
    assert ev["toy.regression_vs_reference"].test == "info"


def test_the_decision_controls_reject_wrong_replicates_and_kill_a_loosened_judge():
    from posflow.proofs_checks import kit
    from posflow.proofs_checks.claims import pb20_refs as R

    d = np.concatenate([[-0.2], np.random.default_rng(0).normal(-0.2, 0.05, 1000)])
    assert R.rival_decision("x", d, 0.99, 0.0).decision == HOLDS
    assert R.rival_decision("x", d + 0.2, 0.99, 0.0).decision == INCONCLUSIVE
    assert R.rival_decision("x", d + 1.0, 0.99, 0.0).decision == FAILS
    assert all(m.passed for m in R.decision_controls(d, 0.99, 0.0))
    (m,) = [m for m in kit.mutants_of("PB20") if m.name == "decide-on-point-estimate"]
    with kit.mutated(m):
        assert not all(c.passed for c in R.decision_controls(d, 0.99, 0.0))


def test_the_stored_study_matches_its_reference():
    from posflow.proofs_checks.claims import pb20_refs as R
    from posflow.proofs_checks.claims.pb20_study import study_evidence

    store, ok = R.load_study()
    assert ok.passed and R.best_vs_direct(store).passed
    m, t, _, _ = study_evidence(store)
    vals = R.flatten(m, t, ranks=True)  # a stored study's numbers are exact: ρ compared too
    ms = R.regression_measurements("smollm2_study", store["setup"]["command"], vals, "quick",
                                   R.STUDY_TOL, R.STUDY_REASON, "study")
    assert ms[0].passed and ms[1].value > 100 and ms[2].passed
    k = next(iter(vals))
    bad = R.regression_measurements("smollm2_study", store["setup"]["command"],
                                    {**vals, k: vals[k] * 1.001 + 1e-3}, "quick", R.STUDY_TOL,
                                    R.STUDY_REASON, "study")  # fmt: skip
    assert bad[0].passed is False


def test_each_models_family_is_its_own(monkeypatch):
    """Installing or removing another model moves no model's Bonferroni family (issue 41)."""
    from posflow.proofs_checks.claims.pb20_crossfit import CANDIDATES, CF_RIVALS

    base = P.families()
    assert base == (len(S.RIVALS), len(CANDIDATES) * len(CF_RIVALS))
    for smollm2 in (True, False):
        monkeypatch.setattr(P, "_smollm2_installed", lambda s=smollm2: s)
        for full in (False, True):
            assert len(P.subjects(Context(size="full" if full else "quick"))) >= 1
            assert P.families() == base
