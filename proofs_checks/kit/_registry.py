"""The claim registry: every checkable statement of the two papers, with a stable ID.

A :class:`Claim` pairs a statement with a ``check`` that builds inputs, asks ``theory`` for the
exact side and ``simulate`` for the numeric side, compares them with a stated tolerance and returns
:class:`Evidence`. The verdict always comes from that comparison, never from a constant.
"""

from __future__ import annotations

import importlib
import re
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

__all__ = [
    "FAILS",
    "HOLDS",
    "INCONCLUSIVE",
    "STATUSES",
    "Claim",
    "Context",
    "Evidence",
    "Relaxation",
    "Result",
    "Results",
    "add_relaxation",
    "all_claims",
    "claim_modules",
    "get_claim",
    "register",
    "run_claim",
    "select",
    "timing_label",
    "verify",
]

from posflow.proofs_checks.kit._cites import Cite, missing_cited_keys
from posflow.proofs_checks.kit._evidence import FAILS, HOLDS, INCONCLUSIVE, STATUSES, Evidence
from posflow.proofs_checks.kit._lock import expectation

ERROR = "ERROR"
CLAIM_PACKAGE = "posflow.proofs_checks.claims"
"""The package whose ``MODULES`` tuple lists every claim module, in catalog order (the one list
of registrations: importing a module registers its checks, mutants and relaxations)."""


@dataclass
class Context:
    """How a check runs: ``size`` is "quick" or "full"; ``seed`` seeds its random inputs.

    A check only computes and judges; the report (:mod:`posflow.proofs_checks.kit._report`) draws
    its figure specs and writes every file.
    """

    size: str = "quick"
    seed: int = 0

    @property
    def full(self) -> bool:
        return self.size == "full"


@dataclass
class Relaxation:
    """A named assumption of a claim, dropped, with a Hypothesis search for a violation.

    ``strategy()`` returns a Hypothesis strategy drawing plain-data examples (dicts of numbers and
    lists) that satisfy every assumption but the dropped one; ``violation(example)`` returns a
    float that is > 0 exactly when the example breaks the claim (the amount by which it does).
    """

    name: str
    drops: str
    strategy: Callable
    violation: Callable[[dict], float]
    describe: Callable[[dict], str] | None = None


@dataclass
class Claim:
    """A checkable statement: ID, source, statement, assumptions, check and relaxations."""

    id: str
    source: str
    statement: str
    assumptions: tuple[str, ...]
    check: Callable[[Context], Evidence]
    relaxations: dict[str, Relaxation] = field(default_factory=dict)
    compares: tuple = ()
    """The routines the check compares with an independent reference (:class:`Cite`)."""
    basis: str = ""
    """Where the statement comes from when it is not the source's own text (e.g. a theorem of
    [A] reconstructed from its definitions, or another paper proving a special case)."""

    def relaxation(self, name: str) -> Relaxation:
        if name not in self.relaxations:
            have = ", ".join(self.relaxations) or "none"
            raise ValueError(f"claim {self.id} has no relaxation {name!r}; available: {have}")
        return self.relaxations[name]


_REGISTRY: dict[str, Claim] = {}
_PENDING_RELAXATIONS: dict[str, dict[str, Relaxation]] = {}


def register(id: str, source: str, statement: str, assumptions=(), compares=(), basis: str = ""):
    """Decorator registering ``check(ctx) -> Evidence`` as the check of claim ``id``.

    ``source`` is one tag — ``"[A]"``, ``"[B]"``, ``"[W]"``, ``"[D]"``, ``"[ours]"`` or
    ``"[convention]"``: a claim is a paper's claim as the paper states it or posflow's own,
    never both (a paper's claim tested with posflow's extensions is two claims). ``basis`` says
    where a statement comes from when that needs saying (a reconstruction, a special case
    proved elsewhere). ``compares`` lists the routines the check compares with an independent
    reference (:func:`~posflow.proofs_checks.kit.cite`); a run whose evidence lacks a cited
    comparison is an ERROR.
    """
    if not isinstance(source, str) or not re.fullmatch(r"\[(A|B|W|D|ours|convention)\]", source):
        raise ValueError(f"source of {id} must be one tag such as '[A]' or '[ours]' (a claim is "
                         f"a paper's or posflow's own, never both); got {source!r}")  # fmt: skip
    if not isinstance(basis, str):
        raise TypeError(f"basis of {id} must be a string; got {basis!r}")
    compares = tuple(compares)
    for c in compares:
        if not isinstance(c, Cite):
            raise TypeError(f"compares of {id} must hold cite(...) entries; got {c!r}")
    routines = [c.routine for c in compares]
    if len(set(routines)) != len(routines):
        raise ValueError(f"claim {id} cites a routine twice: {sorted(routines)}")

    def deco(fn):
        if id in _REGISTRY:
            raise ValueError(f"claim {id} is registered twice")
        _REGISTRY[id] = Claim(id, source, statement, tuple(assumptions), fn, compares=compares,
                              basis=basis)  # fmt: skip
        return fn

    return deco


def add_relaxation(claim_id: str, relaxation: Relaxation) -> Relaxation:
    """Attach a relaxation to claim ``claim_id`` (which may be registered later)."""
    bucket = _PENDING_RELAXATIONS.setdefault(claim_id, {})
    if relaxation.name in bucket:
        raise ValueError(f"claim {claim_id} already has a relaxation {relaxation.name!r}")
    bucket[relaxation.name] = relaxation
    return relaxation


def claim_modules() -> tuple[str, ...]:
    """Full import names of the claim modules listed in ``posflow.proofs_checks.claims.MODULES``."""
    pkg = importlib.import_module(CLAIM_PACKAGE)
    return tuple(f"{CLAIM_PACKAGE}.{m}" for m in pkg.MODULES)


def _load() -> None:
    for name in claim_modules():
        importlib.import_module(name)
    for cid, rel in _PENDING_RELAXATIONS.items():
        if cid in _REGISTRY:
            _REGISTRY[cid].relaxations.update(rel)


def _key(cid: str):
    m = re.fullmatch(r"([A-Z]+)(\d+)", cid)
    return (m.group(1), int(m.group(2))) if m else (cid, 0)


def all_claims() -> list[Claim]:
    """Every registered claim, ordered PB1, PB2, …, AT1, …"""
    _load()
    order = {"PB": 0, "AT": 1}
    return sorted(_REGISTRY.values(), key=lambda c: (order.get(_key(c.id)[0], 9), _key(c.id)))


def get_claim(cid: str) -> Claim:
    """The claim with ID ``cid`` (case-insensitive); ValueError naming unknown IDs."""
    _load()
    key = cid.upper()
    if key not in _REGISTRY:
        known = ", ".join(c.id for c in all_claims()) or "none registered"
        raise ValueError(f"unknown claim ID {cid!r}; known: {known}")
    return _REGISTRY[key]


def select(ids) -> list[Claim]:
    """Claims for IDs or prefixes ("PB", "AT3"); all claims when ``ids`` is empty."""
    claims = all_claims()
    if not ids:
        return claims
    out: list[Claim] = []
    for raw in ids:
        if not isinstance(raw, str):
            raise TypeError(f"ids must be strings (claim IDs such as 'PB3'); got {raw!r}")
        key = raw.upper()
        if key in {"PB", "AT"}:
            out += [c for c in claims if c.id.startswith(key) and c not in out]
        else:
            c = get_claim(key)
            if c not in out:
                out.append(c)
    return out


@dataclass
class Result:
    """A check's outcome: the evidence, or the error that crashed it, and the run time.

    ``seconds`` is the wall-clock time of the check; ``timing`` says what it includes (see
    :func:`timing_label`): "alone" for the first check of a process (it pays for the imports,
    numba compilation and memoised results it needs), "after K checks" when earlier checks of
    the same process may have warmed those caches for it.
    """

    claim: Claim
    status: str
    evidence: Evidence | None
    seconds: float
    error: str = ""
    timing: str = ""
    expected: str = ""
    """The verdict the lock expects (``expected.toml``; empty when not looked up)."""
    expected_reason: str = ""

    @property
    def as_expected(self) -> bool:
        """Whether the status equals the verdict lock's expectation (an ERROR never does)."""
        return self.status == self.expected

    def as_json(self) -> dict:
        ev = self.evidence
        out = {
            "id": self.claim.id,
            "status": self.status,
            "statement": self.claim.statement,
            "source": self.claim.source,
        }
        if ev is not None:
            out.update(ev.as_json())
            out["status"] = self.status
            out["measured"] = ev.measured
        else:
            out.update(measured={}, measurements=[], tables=[], figures=[], figure_paths=[],
                       summary="", setup="")  # fmt: skip
        if self.expected:
            out["expected"] = self.expected
            if self.expected_reason:
                out["expected_reason"] = self.expected_reason
        out["seconds"] = round(self.seconds, 3)
        if self.timing:
            out["timing"] = self.timing
        if self.error:
            out["error"] = self.error
        return out


class Results(list):
    """What :func:`verify` returns: a list of :class:`Result`, one per claim in catalog order,
    with :meth:`to_dataframe`."""

    def to_dataframe(self, *, measurements: bool = False):
        """These results as a pandas DataFrame, one row per claim (or per measurement with
        ``measurements=True``); the columns are :func:`results_frame`'s."""
        from posflow.proofs_checks.kit._frames import results_frame

        return results_frame(self, measurements=measurements)


def run_claim(claim: Claim, ctx: Context) -> Result:
    """Run one check; a crash becomes status ERROR with the traceback's last line.

    The result's ``seconds`` are the check's wall-clock time and ``timing`` the
    :func:`timing_label` of how many checks this process ran before it.
    """
    label = timing_label(_CHECKS_RUN[0])
    _CHECKS_RUN[0] += 1
    exp = expectation(claim.id)
    lock = {"expected": exp.at(ctx.size), "expected_reason": exp.reason}
    t0 = time.perf_counter()
    try:
        ev = claim.check(ctx)
        if not isinstance(ev, Evidence):
            raise TypeError(f"check of {claim.id} returned {type(ev).__name__}, not Evidence")
        missing = missing_cited_keys(claim.compares, ev)
        if missing:
            raise ValueError(f"{claim.id} cites comparisons its evidence lacks: {missing}")
        if ev.absent:
            lock = {"expected": exp.at(ctx.size, ev.absent),
                    "expected_reason": f"{', '.join(ev.absent)} absent here"}  # fmt: skip
        return Result(claim, ev.status, ev, time.perf_counter() - t0, timing=label, **lock)
    except Exception as exc:
        tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
        return Result(claim, ERROR, None, time.perf_counter() - t0, error=tb, timing=label,
                      **lock)  # fmt: skip


def timing_label(k: int) -> str:
    """What the seconds of a check include when ``k`` checks ran before it in this process."""
    if k == 0:
        return "alone (first check of this process)"
    return f"after {k} check{'s' if k > 1 else ''} in this process (may reuse their warm caches)"


_CHECKS_RUN = [0]  # checks run so far in this process (for timing_label)


def verify(ids=None, *, size: str = "quick", seed: int = 0) -> list[Result]:
    """Check claims and return their results (the programmatic ``posflow verify``).

    Parameters
    ----------
    ids : sequence of str, optional
        Claim IDs or prefixes ("PB", "AT3"); every registered claim when omitted.
    size : {"quick", "full"}
        Problem sizes of the checks.
    seed : int
        Seed of the random inputs (a non-negative integer).

    Returns
    -------
    Results
        A list of Result, one per claim in catalog order; ``Result.status`` is HOLDS, FAILS,
        INCONCLUSIVE or ERROR; ``.to_dataframe()`` gives them as a pandas DataFrame
        (:func:`results_frame`).

    Raises
    ------
    ValueError
        For an unknown ID, an empty ``ids`` (omit it to check every claim), a bad size or a
        negative seed.
    TypeError
        For ``ids`` that are not strings.

    Checks write nothing; :func:`posflow.proofs_checks.kit.write_report` renders results.
    """
    if size not in ("quick", "full"):
        raise ValueError(f"size must be 'quick' or 'full'; got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer; got {seed!r}")
    if isinstance(ids, str):
        ids = [ids]
    elif ids is not None:
        if isinstance(ids, bytes) or not isinstance(ids, Iterable):
            raise TypeError(f"ids must be a sequence of claim IDs (strings); got {ids!r}")
        ids = list(ids)
        if not ids:
            raise ValueError(
                "ids must name at least one claim; omit ids (or pass None) to check every claim"
            )
    claims = select(ids or [])  # every ID is checked before any claim runs
    ctx = Context(size=size, seed=seed)
    return Results(run_claim(c, ctx) for c in claims)
