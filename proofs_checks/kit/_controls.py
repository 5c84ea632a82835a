"""Negative controls of judges: known-wrong inputs that the judge must reject, inside the verdict.

A judge is the code that turns numbers into a pass or a fail: the U test, a z or t interval at a
Bonferroni level, a worst-row maximum, a relative closeness, a decision rule. A judge loosened by
a bug (a value compared with itself, the best row taken for the worst, a √d dropped from a z
score) still passes the correct inputs, so only known-wrong inputs can show it. A check therefore
runs each of its judges, the same function it judges its data with, on inputs that are wrong by
construction (a flat profile for the U test, a bias of k standard errors for a z test, one wrong
row, a case where relative and absolute error disagree) and records with :func:`rejects` that the
judge said no. The control is a judged measurement (``role="control"``): a judge that accepts a
known-wrong input turns the verdict to FAILS.

.. code-block:: python

    def judge_rows(P, ref) -> Measurement:          # the judge the check uses on its data
        return at_most("max_row_error", float(np.max(np.abs(P - ref).sum(1))), 0.0, tol)

    ms = [judge_rows(P, ref),
          rejects("rows_control_one_wrong_row", judge_rows(P_one_row_wrong, ref),
                  "row n−1 moved by 1e-6: the worst row must be seen")]
"""

from __future__ import annotations

import math

from posflow.proofs_checks.kit._evidence import Measurement, Tolerance

__all__ = ["biased", "rejects"]

_REJECT = Tolerance(
    0.0, "exact", "a negative control: the judge must reject an input that is wrong by construction"
)


def _accepted(judged) -> bool:
    """Whether the judge's outcome ``judged`` accepted its input."""
    if isinstance(judged, Measurement):
        if not judged.judged:
            raise ValueError(f"a negative control needs a judged measurement; {judged.key!r} is "
                             f"{judged.test!r}")  # fmt: skip
        return bool(judged.criterion_met())  # a vacuous judge still accepts what it meets
    if isinstance(judged, bool):
        return judged
    if isinstance(judged, str):  # a verdict (kit.decide): only HOLDS accepts
        if judged not in ("HOLDS", "FAILS", "INCONCLUSIVE"):
            raise ValueError(f"a verdict must be HOLDS, FAILS or INCONCLUSIVE; got {judged!r}")
        return judged == "HOLDS"
    if isinstance(judged, list | tuple):
        if not judged:
            raise ValueError("a negative control needs at least one judged outcome")
        return all(_accepted(j) for j in judged)
    if hasattr(judged, "status"):  # a Decision or Evidence: only HOLDS accepts
        return judged.status == "HOLDS"
    raise TypeError(
        "judged must be a Measurement, a bool (the judge accepted), a verdict, a Decision/Evidence "
        f"or a list of them; got {type(judged).__name__}"
    )


def rejects(key: str, judged, wrong: str, *, label: str = "") -> Measurement:
    """A negative control: the judge's outcome ``judged`` on a known-wrong input must be a reject.

    Parameters
    ----------
    key : str
        Measurement key (by convention ``<judge>_control_<what is wrong>``).
    judged : Measurement, bool, verdict string, Decision, Evidence or list of them
        What the judge said about the wrong input: a judged Measurement (rejected when it fails),
        a bool (True = accepted), a verdict such as :func:`kit.decide` returns or anything with a
        ``status`` (rejected unless HOLDS), or a list (rejected when any element rejects).
    wrong : str
        How the input is wrong, in words (shown in the report).

    Returns
    -------
    Measurement
        ``role="control"``, test "true": passes exactly when the judge rejected.
    """
    if not isinstance(wrong, str) or not wrong.strip():
        raise ValueError("wrong must say how the control's input is wrong")
    ok = not _accepted(judged)
    return Measurement(key, ok, "true", None, _REJECT, role="control",
                       label=label or f"judge rejects a known-wrong input ({wrong})")  # fmt: skip


def biased(estimate: float, se: float, k: float) -> float:
    """``estimate`` moved by ``k`` standard errors ``se`` (k may be negative): the input of a
    statistical negative control. The judge must reject a bias of k SE when k exceeds its
    family-wise quantile."""
    if not (math.isfinite(se) and se > 0):
        raise ValueError(f"se must be finite and > 0; got {se!r}")
    return float(estimate) + k * float(se)
