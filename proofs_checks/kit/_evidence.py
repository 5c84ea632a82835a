"""What a check returns: named measurements, tables and figure specs; the verdict follows from them.

A check computes and judges; it neither draws nor writes files. It returns :class:`Evidence`:

- :class:`Measurement` — one named number with the reference it is compared with, the tolerance
  of that comparison and where the tolerance comes from (:class:`Tolerance`), or an unjudged
  ``info`` value. Controls (inputs on which the effect must be absent) are measurements with
  ``role="control"`` and count in the verdict like any other comparison.
- :class:`Table` (e.g. a sensitivity table) and :class:`Figure` (a figure spec the report draws).

The status is derived, never stated: FAILS when any judged comparison fails, else INCONCLUSIVE
when any measurement is :func:`undecided`, else HOLDS. The summary sentence is generated from the
measurements and that status, so it cannot contradict it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from posflow.proofs_checks.kit import _scope
from posflow.proofs_checks.kit._specs import (
    Figure,
    Panel,
    Series,
    Table,
    _from_json_num,
    _json_num,
    _num,
    _scalar,
)

__all__ = ["FAILS", "HOLDS", "INCONCLUSIVE", "Evidence", "Figure", "Measurement", "Panel", "Series",
           "Table", "Tolerance", "at_least", "at_most", "close", "exact_tol", "fp_tol", "holds",
           "info", "param_tol", "stat_tol", "undecided"]  # fmt: skip

HOLDS, FAILS, INCONCLUSIVE = "HOLDS", "FAILS", "INCONCLUSIVE"
STATUSES = (HOLDS, FAILS, INCONCLUSIVE)
TOLERANCE_KINDS = ("exact", "floating-point", "statistical", "parameter")
ROLES = ("test", "control", "info")
_TESTS = ("close", "rel_close", "at_most", "at_least", "true", "info", "undecided")


@dataclass(frozen=True)
class Tolerance:
    """The slack of a comparison and where it comes from.

    ``kind`` is one of ``"exact"`` (exact arithmetic, slack 0), ``"floating-point"`` (a rounding
    bound: say which), ``"statistical"`` (standard error × a quantile at a family-wise level:
    say the sample count and the level) or ``"parameter"`` (a modelling cut-off the claim does not
    imply; ``parameter`` names it, and the evidence carries a sensitivity table for it).
    """

    value: float
    kind: str
    reason: str
    parameter: str = ""

    def __post_init__(self):
        if self.kind not in TOLERANCE_KINDS:
            raise ValueError(f"kind must be one of {TOLERANCE_KINDS}; got {self.kind!r}")
        v = float(self.value)
        if not (v >= 0 and math.isfinite(v)):
            raise ValueError(f"tolerance value must be finite and >= 0; got {self.value!r}")
        object.__setattr__(self, "value", v)
        if not self.reason.strip():
            raise ValueError("a tolerance needs a reason")
        if self.kind == "parameter" and not self.parameter:
            raise ValueError("a parameter tolerance must name its parameter")

    def describe(self) -> str:
        what = f"parameter {self.parameter}" if self.kind == "parameter" else self.kind
        return f"{what}: {self.reason}"

    def as_json(self) -> dict:
        out = {"value": self.value, "kind": self.kind, "reason": self.reason}
        if self.parameter:
            out["parameter"] = self.parameter
        return out


def exact_tol(reason: str = "exact rational arithmetic (sympy)") -> Tolerance:
    """Slack 0: both sides are exact."""
    return Tolerance(0.0, "exact", reason)


def fp_tol(value: float, reason: str) -> Tolerance:
    """A floating-point rounding bound (say which: ulps × depth, condition number, …)."""
    return Tolerance(value, "floating-point", reason)


def stat_tol(value: float, reason: str) -> Tolerance:
    """A statistical slack: standard error × quantile (say the sample count and level)."""
    return Tolerance(value, "statistical", reason)


def param_tol(parameter: str, value: float, reason: str) -> Tolerance:
    """A modelling cut-off the claim does not imply, kept as the named ``parameter``."""
    return Tolerance(value, "parameter", reason, parameter)


@dataclass
class Measurement:
    """One named number and how it is judged.

    ``test`` is ``"close"`` (|value − reference| ≤ tol), ``"rel_close"`` (|value/reference − 1| ≤
    tol), ``"at_most"`` (value ≤ reference + tol), ``"at_least"`` (value ≥ reference − tol),
    ``"true"`` (a boolean that must be True), ``"info"`` (not judged) or ``"undecided"`` (the
    setting cannot decide; ``note`` says why). A NaN value fails every judged test.
    """

    key: str
    value: object
    test: str = "info"
    reference: object = None
    tol: Tolerance | None = None
    unit: str = ""
    role: str = "test"
    label: str = ""
    note: str = ""
    passed: bool | None = field(default=None, init=False)

    def __post_init__(self):
        if not isinstance(self.key, str) or not self.key.strip():
            raise ValueError(f"measurement key must be a non-empty string; got {self.key!r}")
        if self.test not in _TESTS:
            raise ValueError(f"test must be one of {_TESTS}; got {self.test!r}")
        if self.role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}; got {self.role!r}")
        self.value = _scalar(self.key, "value", self.value)
        self.reference = _scalar(self.key, "reference", self.reference)
        if self.test == "info":
            self.role = "info"
        self.label = self.label or self.key.replace("_", " ")
        self.passed = self._judge()

    def _judge(self) -> bool | None:
        ok = self.criterion_met()
        return ok and not self.vacuous if ok is not None else None

    def criterion_met(self) -> bool | None:
        """The criterion alone, before the vacuity rule (a negative control's question)."""
        t, v, r = self.test, self.value, self.reference
        if t in ("info", "undecided"):
            return None
        if t == "true":
            return v is True
        if not isinstance(v, int | float) or isinstance(v, bool) or math.isnan(v):
            return False
        slack = self.tol.value if self.tol is not None else 0.0
        if t == "close":
            return abs(v - r) <= slack
        if t == "rel_close":
            return r != 0 and abs(v / r - 1) <= slack
        if t == "at_most":
            return v <= r + slack
        return v >= r - slack

    @property
    def judged(self) -> bool:
        return self.test not in ("info", "undecided")

    @property
    def vacuous(self) -> bool:
        """Whether 0 would pass a comparison with a nonzero reference (``close`` with tol ≥
        |reference|, ``rel_close`` with tol ≥ 1, ``at_least`` a bound > 0 with tol ≥ bound): a
        tolerance as large as the quantity. Such a comparison is judged failed."""
        r, tol = self.reference, self.tol.value if self.tol is not None else 0.0
        if not isinstance(r, int | float) or isinstance(r, bool) or math.isnan(r):
            return False
        return {"close": r != 0 and tol >= abs(r), "rel_close": tol >= 1,
                "at_least": r > 0 and tol >= r}.get(self.test, False)  # fmt: skip

    def criterion(self) -> str:
        """The comparison in words, e.g. ``≤ 0 + 1e-12``."""
        s = _num(self.tol.value) if self.tol is not None else "0"
        r = _num(self.reference)
        return {
            "close": f"= {r} ± {s}",
            "rel_close": f"= {r} within relative {s}",
            "at_most": f"≤ {r}" + (f" + {s}" if self.tol is not None and self.tol.value else ""),
            "at_least": f"≥ {r}" + (f" − {s}" if self.tol is not None and self.tol.value else ""),
            "true": "must hold",
            "info": "",
            "undecided": "cannot decide",
        }[self.test]

    def describe(self) -> str:
        """``label = value unit`` and, when judged, the criterion it was held to."""
        val = _num(self.value) + (f" {self.unit}" if self.unit else "")
        if self.test == "true":
            return f"{self.label}: {'yes' if self.value else 'no'}"
        if self.test == "undecided":
            return f"{self.label} = {val} ({self.note})" if self.note else f"{self.label} = {val}"
        if not self.judged:
            return f"{self.label} = {val}"
        if self.vacuous:
            return (f"{self.label} = {val}, needs {self.criterion()} (vacuous: a tolerance as "
                    "large as the quantity would pass 0)")  # fmt: skip
        return f"{self.label} = {val}, needs {self.criterion()}"

    def as_json(self) -> dict:
        out = {
            "key": self.key,
            "label": self.label,
            "value": _json_num(self.value),
            "test": self.test,
            "role": self.role,
            "passed": self.passed,
        }
        if self.reference is not None:
            out["reference"] = _json_num(self.reference)
        if self.tol is not None:
            out["tolerance"] = self.tol.as_json()
        if self.unit:
            out["unit"] = self.unit
        if self.note:
            out["note"] = self.note
        return out

    @classmethod
    def from_json(cls, d: dict) -> Measurement:
        tol = d.get("tolerance")
        return cls(
            d["key"],
            _from_json_num(d["value"]),
            d["test"],
            _from_json_num(d.get("reference")),
            Tolerance(**tol) if tol else None,
            d.get("unit", ""),
            d["role"],
            d.get("label", ""),
            d.get("note", ""),
        )


_NO_SLACK = Tolerance(0.0, "exact", "no slack: the inequality is required exactly as stated")


def close(key, value, reference, tol: Tolerance, *, rel=False, **kw) -> Measurement:
    """|value − reference| ≤ tol (``rel=True``: |value/reference − 1| ≤ tol)."""
    return Measurement(key, value, "rel_close" if rel else "close", reference, tol, **kw)


def at_most(key, value, bound=0.0, tol: Tolerance | None = None, **kw) -> Measurement:
    """value ≤ bound + tol (an error measure with ``bound=0`` and its tolerance); without
    ``tol`` the inequality is required exactly as stated (no slack)."""
    return Measurement(key, value, "at_most", bound, tol or _NO_SLACK, **kw)


def at_least(key, value, bound=0.0, tol: Tolerance | None = None, **kw) -> Measurement:
    """value ≥ bound − tol; without ``tol`` the inequality is required exactly (no slack)."""
    return Measurement(key, value, "at_least", bound, tol or _NO_SLACK, **kw)


def holds(key, ok, tol: Tolerance | None = None, **kw) -> Measurement:
    """A boolean that must be True (e.g. a sympy residual that simplifies to 0)."""
    return Measurement(key, bool(ok), "true", None, tol or exact_tol(), **kw)


def info(key, value, **kw) -> Measurement:
    """A number reported but not judged (a size, a setting, a diagnostic)."""
    return Measurement(key, value, "info", **kw)


def undecided(key, value, note: str, **kw) -> Measurement:
    """A comparison this setting cannot decide; ``note`` says why (makes the verdict
    INCONCLUSIVE unless another comparison fails)."""
    return Measurement(key, value, "undecided", note=note, **kw)


class Evidence:
    """What a check measured; the status and the summary are derived from the measurements.

    Parameters
    ----------
    measurements : sequence of Measurement
        Keys must be unique. At least one must be judged (or undecided).
    figures, tables : sequences of Figure, Table
    setup : str
        What was run (sizes, sample counts, seeds) — a description, never a verdict.
    absent : sequence of str
        Optional inputs the check could not use here (``"torch"``, ``"smollm2-135m"``); the
        verdict lock then expects the claim's ``absent`` verdict (INCONCLUSIVE by default).
    scopes : mapping of str to Scope, optional
        The scope of each empirical sub-verdict (``{"smollm2": Scope(...)}``; :mod:`._scope`):
        model, precision, text, n, windows, seeds, steps. Every empirical record has one.
    """

    def __init__(self, measurements, *, figures=(), tables=(), setup: str = "", absent=(),
                 scopes=None):  # fmt: skip
        ms = list(measurements)
        for m in ms:
            if not isinstance(m, Measurement):
                raise TypeError(f"measurements must be Measurement objects; got {type(m).__name__}")
        keys = [m.key for m in ms]
        dup = sorted({k for k in keys if keys.count(k) > 1})
        if dup:
            raise ValueError(f"measurement keys must be unique; repeated: {dup}")
        if not any(m.test != "info" for m in ms):
            raise ValueError("evidence needs at least one judged or undecided measurement")
        self.measurements = ms
        self.figures = list(figures)
        self.tables = list(tables)
        self.setup = setup
        if isinstance(absent, str) or not all(isinstance(a, str) and a for a in absent):
            raise TypeError(f"absent must be a sequence of input names; got {absent!r}")
        self.absent = tuple(absent)
        self.scopes = _scope.checked_scopes(scopes)
        self.figure_paths: list[str] = []  # filled in by the report when it draws the figures

    # -- derived -----------------------------------------------------------------------------
    @property
    def failed(self) -> list[Measurement]:
        return [m for m in self.measurements if m.judged and not m.passed]

    @property
    def undecided(self) -> list[Measurement]:
        return [m for m in self.measurements if m.test == "undecided"]

    @property
    def status(self) -> str:
        if self.failed:
            return FAILS
        return INCONCLUSIVE if self.undecided else HOLDS

    @property
    def summary(self) -> str:
        """One or two sentences generated from the measurements and the status."""
        judged = [m for m in self.measurements if m.judged]
        ctl = [m for m in judged if m.role == "control"]
        if self.failed:
            parts = "; ".join(m.describe() for m in self.failed)
            return f"{len(self.failed)} of {len(judged)} comparisons fail: {parts}."
        tally = f"all {len(judged)} comparisons pass" + (
            f" ({len(ctl)} of them controls)" if ctl else ""
        )
        if self.undecided:
            parts = "; ".join(m.describe() for m in self.undecided)
            return (f"{len(self.undecided)} comparison{'s' if len(self.undecided) > 1 else ''} "
                    f"cannot be decided: {parts}; the other {len(judged)} "
                    f"(judged{f', {len(ctl)} of them controls' if ctl else ''}) pass.")  # fmt: skip
        tests = [m for m in judged if m.role == "test"]
        lead = ([m for m in tests if m.test != "true"] + [m for m in tests if m.test == "true"])[:2]
        return f"{tally}; e.g. " + "; ".join(m.describe() for m in lead) + "."

    @property
    def measured(self) -> dict:
        """``{key: value}`` of every measurement (for scripts and tests)."""
        return {m.key: m.value for m in self.measurements}

    def __getitem__(self, key: str) -> Measurement:
        for m in self.measurements:
            if m.key == key:
                return m
        raise KeyError(f"no measurement {key!r}; have {[m.key for m in self.measurements]}")

    def table(self, key: str) -> Table:
        for t in self.tables:
            if t.key == key:
                return t
        raise KeyError(f"no table {key!r}; have {[t.key for t in self.tables]}")

    # -- JSON --------------------------------------------------------------------------------
    def as_json(self) -> dict:
        return {
            "status": self.status,
            "summary": self.summary,
            "setup": self.setup,
            "measurements": [m.as_json() for m in self.measurements],
            "tables": [t.as_json() for t in self.tables],
            "figures": [f.as_json() for f in self.figures],
            "figure_paths": list(self.figure_paths),
            **({"absent": list(self.absent)} if self.absent else {}),
            **({"scope": {t: sc.as_json() for t, sc in self.scopes.items()}}
               if self.scopes else {}),
        }

    @classmethod
    def from_json(cls, d: dict) -> Evidence:
        ev = cls(
            [Measurement.from_json(m) for m in d["measurements"]],
            figures=[Figure.from_json(f) for f in d.get("figures", [])],
            tables=[Table.from_json(t) for t in d.get("tables", [])],
            setup=d.get("setup", ""),
            absent=tuple(d.get("absent", ())),
            scopes=_scope.scopes_from_json(d.get("scope", {})),
        )
        ev.figure_paths = list(d.get("figure_paths", []))
        return ev

