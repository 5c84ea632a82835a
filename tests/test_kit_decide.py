"""The decision rule: an interval against a bound, combined comparisons, sensitivity tables."""

import math

import pytest

from posflow.proofs_checks.kit import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Decision,
    combine,
    decide,
    family_level,
    sensitivity,
    sensitivity_grid,
)

CASES = [  # (lo, hi, bound, op, expected)
    (0.0, 1.0, 1.0, "le", HOLDS),
    (0.0, 1.0, 0.5, "le", INCONCLUSIVE),
    (0.6, 1.0, 0.5, "le", FAILS),
    (0.5, 1.0, 0.5, "le", INCONCLUSIVE),  # lo = c: not excluded
    (0.5, 1.0, 0.5, "ge", HOLDS),
    (0.0, 1.0, 0.5, "ge", INCONCLUSIVE),
    (0.0, 0.4, 0.5, "ge", FAILS),
    (math.nan, 1.0, 0.5, "le", INCONCLUSIVE),
    (0.0, math.nan, 0.5, "ge", INCONCLUSIVE),
]


@pytest.mark.parametrize(("lo", "hi", "bound", "op", "expected"), CASES)
def test_decide(lo, hi, bound, op, expected):
    assert decide(lo, hi, bound, op) == expected


@pytest.mark.parametrize(("args", "match"), [
    ((0, 1, 0, "lt"), "op"), ((1, 0, 0, "le"), "lo <= hi"), ((0, 1, math.nan, "le"), "bound"),
])  # fmt: skip
def test_decide_refuses_bad_input(args, match):
    with pytest.raises(ValueError, match=match):
        decide(*args)


def test_family_level():
    assert family_level(0.05, 14) == 0.05 / 14
    for a, m in [(0, 1), (1.5, 1), (0.05, 0), (0.05, 1.5), (0.05, True)]:
        with pytest.raises(ValueError):
            family_level(a, m)


def _d(lo, hi, bound=0.0, blocked=()):
    return Decision("x", (lo + hi) / 2, lo, hi, bound, "le", 0.01, list(blocked))


def test_combine():
    assert combine([_d(-2, -1), _d(-3, -1)]) == (HOLDS, "")
    assert combine([_d(-2, -1), _d(1, 2)]) == (FAILS, "")
    status, why = combine([_d(-2, -1), _d(-1, 1)])
    assert status == INCONCLUSIVE and "contains 0" in why
    # a blocked failing comparison does not fail the statement; a blocked holding one does not
    # make it hold
    status, why = combine([_d(-2, -1), _d(1, 2, blocked=["2 seeds"])])
    assert status == INCONCLUSIVE and "2 seeds" in why
    assert combine([_d(-2, -1, blocked=["b"])])[0] == INCONCLUSIVE
    assert combine([]) == (INCONCLUSIVE, "no comparisons")


def test_sensitivity_table():
    t = sensitivity("s", "K", [1, 2, 3], lambda k: HOLDS if k < 3 else FAILS,
                    extra=lambda k: [k * k], extra_columns=("k²",))  # fmt: skip
    assert t.columns == ["K", "verdict", "k²"]
    assert t.rows == [[1, HOLDS, 1], [2, HOLDS, 4], [3, FAILS, 9]]
    with pytest.raises(ValueError, match="not a status"):
        sensitivity("s", "K", [1], lambda k: "maybe")


def test_sensitivity_table_with_the_verdict_last():
    t = sensitivity("s", "K", [1, 3], lambda k: HOLDS if k < 3 else FAILS,
                    extra=lambda k: [k * k], extra_columns=("k²",), verdict_last=True)  # fmt: skip
    assert t.columns == ["K", "k²", "verdict"]
    assert t.rows == [[1, 1, HOLDS], [3, 9, FAILS]]


def test_sensitivity_grid_table():
    t = sensitivity_grid("g", "grid", {"A": [1, 2], "B": [0.5]},
                         lambda name, v: [HOLDS, FAILS if v == 2 else HOLDS],
                         ("s1", "s2"))  # fmt: skip
    assert t.columns == ["parameter", "value", "s1", "s2"]
    assert t.rows == [["A", 1, HOLDS, HOLDS], ["A", 2, HOLDS, FAILS], ["B", 0.5, HOLDS, HOLDS]]
    for bad in (lambda n, v: [HOLDS], lambda n, v: [HOLDS, "maybe"]):
        with pytest.raises(ValueError, match="not one status"):
            sensitivity_grid("g", "grid", {"A": [1]}, bad, ("s1", "s2"))
