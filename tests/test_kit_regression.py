"""kit._regression: every reported number against stored reference values."""

import math

import numpy as np
import pytest

from posflow.proofs_checks.kit import (
    Table,
    flatten,
    info,
    load_reference,
    regression,
    regression_measurements,
)


def test_flatten_keeps_numbers_and_drops_plain_torch_gaps_and_rank_columns():
    ms = [info("a", 1.5), info("b", "text"), info("c.vs_plain_torch", 1e-6), info("d", True)]
    tables = [Table("t.crossfit", "", ["x", "ρ lo", "name"], [[1.0, 0.3, "k"]]),
              Table("t.profiles", "", ["x", "Spearman ρ"], [[2.0, 0.4]])]  # fmt: skip
    base = {"a": 1.5, "t.crossfit[0][x#0]": 1.0, "t.profiles[0][x#0]": 2.0}
    assert flatten(ms, tables) == base
    assert flatten(ms, tables, ranks=True) == {
        **base, "t.crossfit[0][ρ lo#1]": 0.3, "t.profiles[0][Spearman ρ#1]": 0.4
    }


def test_one_swapped_near_tie_moves_spearman_rho_by_at_most_12_over_n_times_n_plus_1():
    # the bound flatten's docstring gives for dropping ρ: every adjacent swap of one ranking,
    # against a seeded sample of other rankings of n = 7; the bound is attained
    from scipy.stats import spearmanr

    rng = np.random.default_rng(3)
    n, worst = 7, 0.0
    for _ in range(200):
        a, b = rng.permutation(n).astype(float), rng.permutation(n).astype(float)
        for r in range(n - 1):
            s = a.copy()
            i, j = np.flatnonzero(a == r)[0], np.flatnonzero(a == r + 1)[0]
            s[i], s[j] = a[j], a[i]
            worst = max(worst, abs(spearmanr(a, b)[0] - spearmanr(s, b)[0]))
    assert worst == pytest.approx(12 / (n * (n + 1)), abs=1e-12)


@pytest.mark.parametrize(("values", "ok"), [
    ({"a": 1.0, "b": 2.0}, True),
    ({"a": 1.0, "b": 2.0 * (1 + 5e-5)}, True),
    ({"a": 1.0, "b": 2.0 * (1 + 2e-4)}, False),
    ({"a": 1.0}, False),  # one missing: inf
    ({"a": 1.0, "b": 2.0, "c": 3.0}, False),  # one new: inf
    ({"a": 1.0, "b": math.nan}, False),
])  # fmt: skip
def test_regression_relative_deviation(values, ok):
    m = regression("k", values, {"a": 1.0, "b": 2.0}, 1e-4, "why", "what")
    assert m[0].passed is ok and m[1].value == len({*values, "a", "b"})


def test_regression_floor_and_matching_nan():
    assert regression("k", {"a": 1e-7}, {"a": 2e-7}, 1e-4, "r", "w")[0].passed  # below the floor
    assert regression("k", {"a": math.nan}, {"a": math.nan}, 1e-4, "r", "w")[0].passed


def test_regression_measurements_compare_by_identity_with_a_control(monkeypatch):
    from posflow.proofs_checks.kit import _regression as G

    stored = {"quick": {"p": [{"identity": "id-1", "values": {"a": 1.0, "b": 0.5}}]}}
    monkeypatch.setattr(G, "load_reference", lambda name: stored if name == "x.json" else {})
    ms = regression_measurements("p", "id-1", {"a": 1.0, "b": 0.5}, "quick", 1e-4, "r", "w",
                                 "x.json")  # fmt: skip
    assert [m.key for m in ms] == ["p.regression_vs_reference", "p.regression_vs_reference_count",
                                   "p.regression_control_one_number_moved"]  # fmt: skip
    assert all(m.passed is not False for m in ms)
    other = regression_measurements("p", "id-2", {"a": 1.0}, "quick", 1e-4, "r", "w", "x.json")
    assert len(other) == 1 and "not compared" in other[0].value and "id-1" in other[0].value


def test_regression_measurements_of_a_selection_compare_only_its_numbers(monkeypatch):
    # names= picks numbers of one kind on both sides (the others left to a call of their own
    # tolerance); tag= keeps the keys apart; a selection the reference lacks is reported
    from posflow.proofs_checks.kit import _regression as G

    stored = {"quick": {"p": [{"identity": "i", "values": {"x": 1.0, "fit": 0.5}}]}}
    monkeypatch.setattr(G, "load_reference", lambda name: stored)
    run = {"x": 1.0, "fit": 0.5 * (1 + 3e-3)}
    whole = regression_measurements("p", "i", run, "quick", 1e-3, "r", "w", "x.json")
    assert whole[0].passed is False
    rest = regression_measurements("p", "i", run, "quick", 1e-3, "r", "w", "x.json",
                                   names=lambda k: k != "fit")  # fmt: skip
    fit = regression_measurements("p", "i", run, "quick", 1e-2, "r", "w", "x.json",
                                  names=lambda k: k == "fit", tag="_fitted")  # fmt: skip
    assert rest[0].passed and rest[1].value == 1
    assert [m.key for m in fit] == ["p.regression_fitted_vs_reference",
                                    "p.regression_fitted_vs_reference_count",
                                    "p.regression_fitted_control_one_number_moved"]  # fmt: skip
    assert fit[0].passed and fit[1].value == 1 and fit[2].passed
    tight = regression_measurements("p", "i", run, "quick", 1e-3, "r", "w", "x.json",
                                    names=lambda k: k == "fit", tag="_fitted")  # fmt: skip
    assert tight[0].passed is False
    none = regression_measurements("p", "i", run, "quick", 1e-3, "r", "w", "x.json",
                                   names=lambda k: k == "absent")  # fmt: skip
    assert len(none) == 1 and "holds none" in none[0].value


def test_load_reference_reads_the_packaged_files():
    assert "quick" in load_reference("pb20.json") and "quick" in load_reference("pb19.json")
    assert load_reference("no-such-file.json") == {}
