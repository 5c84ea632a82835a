"""The verdict lock: the verdict each claim is expected to reach, so a regression cannot hide.

``expected.toml`` (package data beside this module) records, one line per claim that is not
expected to HOLD, the verdict it reaches and why — like pytest's ``xfail``:

.. code-block:: toml

    PB15 = { verdict = "FAILS", reason = "every rollout loses to geometric recency …" }
    PB17 = { verdict = "INCONCLUSIVE", full = "HOLDS", reason = "…" }

Every claim not listed is expected to HOLD. ``scope`` states what an empirical verdict was
locked on (model, precision, text, n, windows, seeds, steps). ``full`` (or ``quick``)
overrides the verdict for one size. A check whose evidence declares an optional input absent
(``Evidence.absent``: torch, or a model that is not installed) is expected INCONCLUSIVE, or the
entry's ``absent`` verdict (one verdict, or ``{ quick = …, full = … }``).
``posflow verify`` exits 0 when every verdict equals its expectation and 1 when any differs or a
check errors; the report shows the expectation beside each verdict.
"""

from __future__ import annotations

import functools
import tomllib
from dataclasses import dataclass
from importlib import resources

from posflow.proofs_checks.kit._evidence import HOLDS, INCONCLUSIVE, STATUSES

__all__ = ["Expectation", "expectation", "expectations", "lock_mismatches"]

LOCK_FILE = "expected.toml"


@dataclass(frozen=True)
class Expectation:
    """The verdict a claim is expected to reach at each size, and why when it is not HOLDS."""

    id: str
    quick: str = HOLDS
    full: str = HOLDS
    reason: str = ""
    absent: str = INCONCLUSIVE
    """The verdict when the evidence declares an optional input absent (quick size)."""
    absent_full: str = INCONCLUSIVE
    """The same at full size."""
    scope: str = ""
    """What the locked verdict of an empirical claim was obtained on (model, precision, text,
    n, windows, seeds, steps), in one short line."""

    def at(self, size: str, absent=()) -> str:
        """The expected verdict at ``size`` ("quick" or "full"); the ``absent`` verdict when the
        evidence declares optional inputs ``absent``."""
        if size not in ("quick", "full"):
            raise ValueError(f"size must be 'quick' or 'full'; got {size!r}")
        if absent:
            return self.absent if size == "quick" else self.absent_full
        return self.quick if size == "quick" else self.full


def _parse(table: dict, source: str) -> dict[str, Expectation]:
    out = {}
    for cid, entry in table.items():
        where = f"{source}: {cid}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where} must be an inline table {{ verdict = …, reason = … }}")
        unknown = set(entry) - {"verdict", "quick", "full", "reason", "absent", "scope"}
        if unknown:
            raise ValueError(f"{where} has unknown keys {sorted(unknown)}")
        verdict = entry.get("verdict", HOLDS)
        quick, full = entry.get("quick", verdict), entry.get("full", verdict)
        absent = entry.get("absent", INCONCLUSIVE)
        if isinstance(absent, dict):
            if set(absent) - {"quick", "full"}:
                raise ValueError(f"{where}: absent takes quick and full; got {sorted(absent)}")
            absent_full = absent.get("full", INCONCLUSIVE)
            absent = absent.get("quick", INCONCLUSIVE)
        else:
            absent_full = absent
        for v in (verdict, quick, full, absent, absent_full):
            if v not in STATUSES:
                raise ValueError(f"{where}: verdict must be one of {STATUSES}; got {v!r}")
        reason = entry.get("reason", "")
        if (quick != HOLDS or full != HOLDS) and not str(reason).strip():
            raise ValueError(f"{where}: an expected {quick}/{full} needs a reason")
        scope = entry.get("scope", "")
        if not isinstance(scope, str):
            raise ValueError(f"{where}: scope must be a string (one line); got {scope!r}")
        out[cid] = Expectation(cid, quick, full, str(reason), absent, absent_full, scope)
    return out


@functools.cache
def expectations() -> dict[str, Expectation]:
    """``{claim_id: Expectation}`` for the claims recorded in ``expected.toml`` (package data)."""
    text = resources.files("posflow.proofs_checks.kit").joinpath(LOCK_FILE).read_text("utf-8")
    return _parse(tomllib.loads(text), LOCK_FILE)


def expectation(cid: str) -> Expectation:
    """The expectation of claim ``cid``: its recorded line, else HOLDS at both sizes."""
    return expectations().get(cid, Expectation(cid))


def lock_mismatches(results, size: str) -> list[str]:
    """One line per result whose status differs from its expectation at ``size`` (an ERROR
    always differs): ``"PB3: HOLDS expected, got FAILS"``. The expectation is the one the result
    recorded when it ran (``Result.expected``), else the lock's."""
    out = []
    for r in results:
        want = getattr(r, "expected", "") or expectation(r.claim.id).at(size)
        if r.status != want:
            out.append(f"{r.claim.id}: {want} expected, got {r.status}")
    return out
