"""The one decision rule: an interval against a bound → HOLDS / FAILS / INCONCLUSIVE.

A statistical comparison "x ≤ c" (or "x ≥ c") is decided from a confidence interval
[lo, hi] of x at a family-wise level, never from the point estimate:

.. math::

    \\text{"}x \\le c\\text{"}: \\quad
    \\begin{cases} \\text{HOLDS} & hi \\le c \\\\ \\text{FAILS} & lo > c \\\\
    \\text{INCONCLUSIVE} & lo \\le c < hi \\end{cases}

and symmetrically for "x ≥ c" (HOLDS when lo ≥ c, FAILS when hi < c). An interval with a NaN
end decides nothing. A comparison may also be *blocked* — a precondition of the experiment
fails (too few seeds, a missing scheme, the experiment outside the claim's regime): a blocked
comparison is shown with its interval but cannot make its claim HOLD, and it cannot make it
FAIL either. :func:`combine` joins the comparisons of one statement: FAILS when an unblocked
comparison fails, HOLDS when every comparison holds and none is blocked, else INCONCLUSIVE with
the reasons. :func:`family_level` is the Bonferroni level of one comparison among m, and
:func:`sensitivity` tabulates a statement's verdict over the values of a named parameter
(:func:`sensitivity_grid`: several statements' verdicts over the values of several parameters).

Used by AT20 (paired seed comparisons), PB6 (the depth-budget sensitivity) and PB15 (rollouts
against the nulls).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from posflow.proofs_checks.kit._evidence import FAILS, HOLDS, INCONCLUSIVE
from posflow.proofs_checks.kit._specs import Table

__all__ = [
    "OPS",
    "Decision",
    "combine",
    "decide",
    "family_level",
    "sensitivity",
    "sensitivity_grid",
]

OPS = ("le", "ge")


def decide(lo: float, hi: float, bound: float, op: str = "le") -> str:
    """HOLDS / FAILS / INCONCLUSIVE for "x ≤ bound" (``op="le"``) or "x ≥ bound" (``"ge"``).

    Parameters
    ----------
    lo, hi : float
        The interval of x (lo ≤ hi); a NaN end gives INCONCLUSIVE.
    bound : float
        The bound c of the statement.
    op : {"le", "ge"}
        The direction of the statement.
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {OPS}; got {op!r}")
    lo, hi, c = float(lo), float(hi), float(bound)
    if math.isnan(c):
        raise ValueError("bound must not be NaN")
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    if lo > hi:
        raise ValueError(f"the interval must have lo <= hi; got [{lo}, {hi}]")
    if op == "le":
        return HOLDS if hi <= c else FAILS if lo > c else INCONCLUSIVE
    return HOLDS if lo >= c else FAILS if hi < c else INCONCLUSIVE


def family_level(alpha: float, m: int) -> float:
    """The level α/m of one of ``m`` comparisons made together (Bonferroni, family-wise α)."""
    if not 0 < float(alpha) < 1:
        raise ValueError(f"alpha must lie in (0, 1); got {alpha!r}")
    if isinstance(m, bool) or int(m) != m or m < 1:
        raise ValueError(f"m must be an integer >= 1; got {m!r}")
    return float(alpha) / int(m)


@dataclass
class Decision:
    """One comparison decided by :func:`decide`: the interval, the bound and what blocks it."""

    label: str
    estimate: float
    lo: float
    hi: float
    bound: float
    op: str = "le"
    level: float = math.nan
    blocked: list[str] = field(default_factory=list)

    @property
    def decision(self) -> str:
        """The interval's own verdict (blocking aside)."""
        return decide(self.lo, self.hi, self.bound, self.op)

    def why_undecided(self) -> list[str]:
        """Why this comparison does not decide: its blocks and an interval containing the bound."""
        why = list(self.blocked)
        if self.decision == INCONCLUSIVE and math.isfinite(self.lo):
            why.append(f"the interval [{self.lo:.3g}, {self.hi:.3g}] contains {self.bound:.3g}")
        return why


def combine(decisions: Iterable[Decision]) -> tuple[str, str]:
    """The verdict of a statement made of several comparisons, and the reason when undecided.

    FAILS when an unblocked comparison fails; HOLDS when none is blocked and all hold;
    INCONCLUSIVE otherwise (also for no comparisons at all), with a reason naming each
    comparison that did not decide.
    """
    rows = list(decisions)
    free = [d for d in rows if not d.blocked]
    if any(d.decision == FAILS for d in free):
        return FAILS, ""
    if rows and len(free) == len(rows) and all(d.decision == HOLDS for d in rows):
        return HOLDS, ""
    reasons = [f"{d.label}: " + "; ".join(w) for d in rows if (w := d.why_undecided())]
    return INCONCLUSIVE, " | ".join(reasons) if rows else "no comparisons"


def sensitivity(
    key: str,
    parameter: str,
    values: Iterable,
    verdict: Callable[[object], str],
    *,
    title: str = "",
    note: str = "",
    extra: Callable[[object], list] | None = None,
    extra_columns: tuple[str, ...] = (),
    verdict_last: bool = False,
) -> Table:
    """The sensitivity table of a verdict to the named parameter ``parameter``.

    One row per value ``v``: ``[v, verdict(v), *extra(v)]``, or ``[v, *extra(v), verdict(v)]``
    with ``verdict_last``. ``verdict(v)`` returns HOLDS, FAILS or INCONCLUSIVE; ``extra`` adds
    the numbers behind it (``extra_columns`` names them).
    """
    rows = []
    for v in values:
        status = verdict(v)
        if status not in (HOLDS, FAILS, INCONCLUSIVE):
            raise ValueError(f"verdict({v!r}) returned {status!r}, not a status")
        more = extra(v) if extra else []
        rows.append([v, *more, status] if verdict_last else [v, status, *more])
    title = title or f"sensitivity of the verdict to {parameter}"
    columns = [*extra_columns, "verdict"] if verdict_last else ["verdict", *extra_columns]
    return Table(key, title, [parameter, *columns], rows, note)


def sensitivity_grid(
    key: str,
    title: str,
    grid: Mapping[str, Iterable],
    verdicts: Callable[[str, object], Sequence[str]],
    columns: Sequence[str],
    note: str = "",
) -> Table:
    """The verdicts of several statements at other values of several named parameters.

    One row per parameter ``name`` of ``grid`` and value ``v`` of ``grid[name]`` (in order):
    ``[name, v, *verdicts(name, v)]``; ``verdicts`` returns one status (HOLDS, FAILS or
    INCONCLUSIVE) per statement, the statements named by ``columns``.
    """
    rows = []
    for name, values in grid.items():
        for v in values:
            statuses = list(verdicts(name, v))
            if len(statuses) != len(columns) or any(
                s not in (HOLDS, FAILS, INCONCLUSIVE) for s in statuses
            ):
                raise ValueError(f"verdicts({name!r}, {v!r}) returned {statuses!r}, not one "
                                 f"status for each of {list(columns)}")  # fmt: skip
            rows.append([name, v, *statuses])
    return Table(key, title, ["parameter", "value", *columns], rows, note)
