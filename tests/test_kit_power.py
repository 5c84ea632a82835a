"""kit._power: the break depth's power rule, the judge's Monte Carlo and their controls."""

import numpy as np
import pytest

from posflow.proofs_checks import kit
from posflow.proofs_checks.kit import FAILS, HOLDS, INCONCLUSIVE
from posflow.proofs_checks.kit import _power as PW
from posflow.simulate.models.layerwise import detectable_difference, detection_power

H, I, F = HOLDS, INCONCLUSIVE, FAILS

# (statuses, powers) → (break depth or None, held_from, powered_from); power required 0.8
DEPTH_CASES = [
    ([H, H, H], [0.1, 0.1, 0.1], (0, 0, 3)),  # nothing breaks: determined whatever the power
    ([I, H, H], [0.9, 0.9, 0.9], (1, 1, 0)),  # layer 0 could see the effect and did not
    ([I, H, H], [0.5, 0.9, 0.9], (None, 1, 1)),  # layer 0 could not: undetermined below 1
    ([I, H, H], [0.9, 0.5, 0.9], (None, 1, 2)),  # a held layer above lacked power
    ([I, I, H, H], [0.1, 0.8, 0.8, 0.8], (2, 2, 1)),  # the layer below the break is powered
    ([F, H], [0.8, 0.8], (1, 1, 0)),
    ([H, I], [0.9, 0.9], (2, 2, 0)),  # not even the top layer holds, and it is powered
    ([H, I], [0.9, 0.7], (None, 2, 2)),
    ([H, I, H], [0.9, 0.9, 0.9], (2, 2, 0)),  # a gap: the break is above it
]


@pytest.mark.parametrize(("statuses", "powers", "want"), DEPTH_CASES)
def test_powered_depth(statuses, powers, want):
    assert kit.powered_depth(statuses, powers, 0.8) == want


@pytest.mark.parametrize(("args", "match"), [
    (([], []), "statuses"),
    (([H, H], [0.9]), "powers"),
    (([H], [1.5]), "powers"),
    (([H], [np.nan]), "powers"),
    (([H], [0.9], 1.0), "power"),
])  # fmt: skip
def test_powered_depth_refuses_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        kit.powered_depth(*args)


def test_the_judge_monte_carlo_follows_the_shifted_t_power():
    """At the MDD the judge (kit.crossfit_decision) HOLDS in 80 % of the draws, at MDD/2 in
    π(MDD/2) of them: 4000 draws, within 4 binomial standard errors."""
    se, df, level = 0.03, 15, 1 - 0.05 / 120
    mdd = detectable_difference(se, df, 1 - level)
    deltas = np.array([mdd, mdd / 2, 1.5 * mdd])
    pi = detection_power(deltas, se, df, 1 - level)
    rates = PW.judge_monte_carlo(deltas, se, df, level, -1e-12, seed=3, draws=4000)
    assert (np.abs(rates - pi) <= 4 * np.sqrt(pi * (1 - pi) / 4000)).all(), (rates, pi)


def test_the_judge_on_normal_windows_has_the_noncentral_t_power():
    """The independent reference of the 'exact power': windows drawn from a normal with mean −δ,
    the statistic their mean, the delete-one replicates the judge reads; the HOLDS rate of
    kit.crossfit_decision matches scipy.stats.nct within 4 binomial SE (2000 draws), and lies
    below the shifted-t power 0.8 at the MDD."""
    from scipy import stats

    G, level = 16, 1 - 0.05 / 120
    df, sigma = G - 1, 1.0
    se = sigma / np.sqrt(G)
    mdd = detectable_difference(se, df, 1 - level)
    rng = np.random.default_rng(7)
    held = 0
    K = 2000
    for _ in range(K):
        x = rng.normal(-mdd, sigma, G)
        loo = (x.sum() - x) / (G - 1)
        reps = np.concatenate([[x.mean()], loo])
        held += kit.crossfit_decision("n", reps, level, 0.0).decision == HOLDS
    exact = stats.nct.sf(stats.t.ppf(1 - (1 - level) / 2, df), df, mdd / se)
    assert abs(held / K - exact) <= 4 * np.sqrt(exact * (1 - exact) / K), (held / K, exact)
    assert exact < 0.8


def test_mdd_vs_judge_passes_and_catches_the_mdd_without_its_power_term(monkeypatch):
    from posflow.proofs_checks.claims import pb19_refs as R
    from posflow.simulate.models import layerwise

    ms = kit.mdd_vs_judge("t", "t", 0.03, 15, 1 - 0.05 / 120, -1e-12, 0.8, seed=0)
    assert [m.key for m in ms] == ["t.mdd_vs_judge_monte_carlo", "t.power_vs_judge_monte_carlo",
                                   "t.exact_power_at_mdd"]  # fmt: skip
    assert ms[0].passed and ms[1].passed
    assert ms[2].value == pytest.approx(0.768, abs=1e-3)
    monkeypatch.setattr(
        layerwise,
        "detectable_difference",
        R.mdd_without_power_term(layerwise.detectable_difference),
    )
    bad = kit.mdd_vs_judge("t", "t", 0.03, 15, 1 - 0.05 / 120, -1e-12, 0.8, seed=0)
    assert not bad[0].passed and bad[1].passed  # the power routine itself is still right


def test_power_controls_reject_their_wrong_inputs():
    ms = kit.power_controls(0.03, 15, 1 - 0.05 / 120, -1e-12, 0.8, seed=0)
    assert [m.key for m in ms] == ["mdd_control_power_term_dropped",
                                   "break_depth_control_underpowered"]  # fmt: skip
    assert all(m.passed and m.role == "control" for m in ms)


def test_judge_monte_carlo_refuses_bad_input():
    for kw, match in (({"se": 0.0}, "se"), ({"df": 0}, "df"), ({"draws": 0}, "draws")):
        args = {"se": 0.03, "df": 15, "draws": 10, **kw}
        with pytest.raises(ValueError, match=match):
            PW.judge_monte_carlo([0.1], args["se"], args["df"], 0.99, 0.0, 0, args["draws"])
