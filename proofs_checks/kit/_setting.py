"""What a run outside a paper's setting may decide (:func:`scoped`, :func:`not_in_setting`).

A paper's claim is judged in the paper's setting (:class:`~posflow.proofs_checks.kit._scope.
Setting`); a run at another scope (:class:`~posflow.proofs_checks.kit._scope.Scope`) is a
sub-verdict with that scope, reported beside the claim but not deciding it.
"""

from __future__ import annotations

from posflow.proofs_checks.kit._evidence import info, undecided
from posflow.proofs_checks.kit._scope import Scope, Setting

__all__ = ["not_in_setting", "scoped"]


def scoped(measurements, scope: Scope, setting: Setting | None) -> tuple[list, list[str]]:
    """The measurements of one run as evidence for a paper's claim made in ``setting``.

    Inside the setting (or ``setting`` None: the claim is posflow's own, or its statement covers
    the run) the measurements are returned unchanged. Outside it, the run is a sub-verdict with
    its scope, reported but not deciding: each judged or undecided *test* measurement becomes
    info (its value kept, its label saying "outside <paper>'s setting: <gaps>") — a reduced-scale
    run can neither refute nor confirm the paper's claim; controls (which test the judge, not
    the claim) stay judged. Returns (measurements, gaps). A claim whose runs are all outside
    its setting adds :func:`not_in_setting`.
    """
    gaps = [] if setting is None else setting.differences(scope)
    if not gaps:
        return list(measurements), gaps
    out = []
    for m in measurements:
        if m.test != "info" and m.role == "test":
            verdict = "undecided" if m.test == "undecided" else ("passes" if m.passed else "fails")
            label = (f"{m.label or m.key} — {verdict} at this scope; reported, not deciding: "
                     f"outside {setting.source}'s setting ({'; '.join(gaps)})")  # fmt: skip
            out.append(info(m.key, m.value, label=label))
        else:
            out.append(m)
    return out, gaps


def not_in_setting(key: str, setting: Setting, runs: int):
    """An undecided measurement when none of a paper's claim's ``runs`` was in its setting
    (the claim is then INCONCLUSIVE, "not run in the paper's setting"); None otherwise."""
    if runs:
        return None
    return undecided(key, 0, f"not run in {setting.source}'s setting ({setting.description}): "
                     "every run is a sub-verdict at a reduced scope", label="runs in the "
                     f"setting of {setting.source}'s claim")  # fmt: skip
