"""Counterexample search: drop one assumption of a claim and let Hypothesis find a violation.

For a claim and one of its relaxations (registered beside the claim's check), :func:`search`
draws examples from the relaxation's strategy, stops at the first with ``violation > 0``,
shrinks it to a simplest one and returns it as plain data. The search is reproducible: a seed
fixes the Hypothesis random stream, no example database is read or written and nothing is
written in the working directory (Hypothesis's caches go to a temporary folder). A found
counterexample is saved as a JSON record

    {"id": "PB8", "relaxed": "nonnegative_slope", "found": true, "example": {...},
     "violation": 0.0002, "drops": "...", "seed": 0, "max_examples": 200, "tried": 57}

that :func:`replay` re-checks and :func:`export_test` turns into a pytest regression test.
The command line ``posflow counterexample ID [--list | --relax NAME | --replay FILE] ...`` is
:mod:`posflow.proofs_checks.cli.counterexample`.
"""

from __future__ import annotations

import contextlib
import json
import math
import random
import re
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis.errors import NoSuchExample, Unsatisfiable

from posflow.proofs_checks.kit import _registry as registry
from posflow.proofs_checks.kit._registry import Relaxation

__all__ = [
    "SearchResult",
    "describe",
    "export_test",
    "get_relaxation",
    "load_record",
    "relaxations_of",
    "replay",
    "save_record",
    "search",
    "write_test",
]


# ------------------------------------------------------------------------------------------
# looking relaxations up


def relaxations_of(claim_id: str) -> tuple[str, dict[str, Relaxation]]:
    """The canonical ID of a claim and its relaxations by name (claims PB2, PB6, PB8, PB11).

    Uses the registered claim when there is one, and the relaxations attached to its ID
    (``registry.add_relaxation``) while the claim itself is not registered yet.

    Returns
    -------
    (str, dict)
        The upper-case ID and ``{name: Relaxation}`` (possibly empty for a registered claim).

    Raises ValueError for an ID that is neither registered nor has relaxations.
    """
    if not isinstance(claim_id, str):
        raise TypeError(f"claim_id must be a string such as 'PB8'; got {claim_id!r}")
    cid = claim_id.strip().upper()
    registry._load()
    pending = dict(registry._PENDING_RELAXATIONS.get(cid, {}))
    if cid in registry._REGISTRY:
        pending.update(registry._REGISTRY[cid].relaxations)
        return cid, pending
    if pending:
        return cid, pending
    known = sorted(set(registry._REGISTRY) | set(registry._PENDING_RELAXATIONS))
    raise ValueError(
        f"unknown claim ID {claim_id!r}; known: {', '.join(known) or 'none registered'}"
    )


def get_relaxation(claim_id: str, name: str) -> tuple[str, Relaxation]:
    """The relaxation ``name`` of claim ``claim_id``: ``(ID, Relaxation)``; ValueError if none."""
    cid, rels = relaxations_of(claim_id)
    if name not in rels:
        have = ", ".join(sorted(rels)) or "none"
        raise ValueError(f"claim {cid} has no relaxation {name!r}; available: {have}")
    return cid, rels[name]


def _resolve(claim_id, relax) -> tuple[str, Relaxation]:
    if isinstance(relax, Relaxation):
        if not isinstance(claim_id, str):
            raise TypeError(f"claim_id must be a string such as 'PB8'; got {claim_id!r}")
        return claim_id.strip().upper(), relax
    if not isinstance(relax, str):
        raise TypeError(f"relax must be a relaxation name or a Relaxation; got {relax!r}")
    return get_relaxation(claim_id, relax)


# ------------------------------------------------------------------------------------------
# search


@dataclass
class SearchResult:
    """Outcome of a counterexample search (see :func:`search`)."""

    claim_id: str
    relaxed: str
    drops: str
    found: bool
    example: dict | None
    violation: float | None
    tried: int
    seed: int
    max_examples: int

    def as_record(self) -> dict:
        """The JSON record: ``id``, ``relaxed``, ``found``, ``example`` and the search details."""
        return {
            "id": self.claim_id,
            "relaxed": self.relaxed,
            "found": self.found,
            "example": self.example,
            "violation": self.violation,
            "drops": self.drops,
            "seed": self.seed,
            "max_examples": self.max_examples,
            "tried": self.tried,
        }


def _plain(example) -> dict:
    """A JSON round trip of ``example``: plain dicts, lists, ints and finite floats."""
    try:
        return json.loads(json.dumps(example, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"example must be plain JSON data with finite numbers: {exc}") from exc


@contextlib.contextmanager
def _private_hypothesis_home():
    """Hypothesis's storage (its caches of source constants and unicode tables; the example
    database is off) in a temporary folder, removed afterwards: a search writes nothing in the
    working directory (Hypothesis's default is ``./.hypothesis``). The caches only save time:
    what they hold is recomputed, so the examples drawn are the same."""
    from hypothesis import configuration

    key = "__hypothesis_home_directory"  # module global; None: the default, ./.hypothesis
    before = getattr(configuration, key, None)
    with tempfile.TemporaryDirectory(prefix="posflow-hypothesis-") as tmp:
        configuration.set_hypothesis_home_dir(tmp)
        try:
            yield
        finally:
            configuration.set_hypothesis_home_dir(before)


def _seed(seed) -> int:
    if seed is None:
        return int(np.random.default_rng().integers(2**63))
    if isinstance(seed, np.random.Generator):
        return int(seed.integers(2**63))
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer):
        raise TypeError(f"seed must be an int, None or a numpy Generator; got {seed!r}")
    return int(seed)


def search(claim_id: str, relax, seed=0, max_examples: int = 200) -> SearchResult:
    """Search a shrunk counterexample to claim ``claim_id`` with one assumption dropped.

    Draws up to ``max_examples`` examples from ``relax.strategy()`` (Hypothesis, seeded with
    ``random.Random(seed)``, no example database), stops at the first with
    ``relax.violation(example) > 0`` and shrinks it to a simplest example that still violates
    the claim. Serves the relaxations of claims PB2, PB6, PB8 and PB11.

    Parameters
    ----------
    claim_id : str
        Claim ID, e.g. ``"PB8"`` (case-insensitive).
    relax : str or Relaxation
        Name of a relaxation of the claim (``"nonnegative_slope"``), or a Relaxation object.
    seed : int, None or numpy.random.Generator
        Seed of the search; the same seed and code give the same example. ``None`` (or a
        Generator) draws a fresh integer seed, which is recorded in the result.
    max_examples : int
        Budget of generated examples (>= 1); shrinking evaluates further examples.

    Returns
    -------
    SearchResult
        ``found``; the shrunk ``example`` (plain JSON data) and its ``violation`` (> 0), both
        None when nothing violated the claim within the budget; ``tried``, the examples
        evaluated (generation and shrinking).

    Cost: ``tried`` evaluations of the violation.
    """
    cid, rel = _resolve(claim_id, relax)
    if isinstance(max_examples, bool) or not isinstance(max_examples, int | np.integer):
        raise TypeError(f"max_examples must be an integer; got {max_examples!r}")
    if max_examples < 1:
        raise ValueError(f"max_examples must be at least 1; got {max_examples}")
    s = _seed(seed)
    tried = 0

    def breaks(example) -> bool:
        nonlocal tried
        tried += 1
        v = float(rel.violation(example))
        if not math.isfinite(v):
            raise ValueError(f"violation of {rel.name} is {v} for example {example!r}")
        return v > 0

    conf = settings(
        max_examples=int(max_examples),
        database=None,
        deadline=None,
        derandomize=False,
        phases=[Phase.generate, Phase.shrink],
        verbosity=Verbosity.quiet,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )
    result = SearchResult(cid, rel.name, rel.drops, False, None, None, 0, s, int(max_examples))
    try:
        with _private_hypothesis_home():
            example = find(rel.strategy(), breaks, settings=conf, random=random.Random(s))
    except (NoSuchExample, Unsatisfiable):
        result.tried = tried
        return result
    example = _plain(example)
    v = float(rel.violation(example))
    if not v > 0:  # pragma: no cover - the JSON round trip is exact for finite floats
        raise RuntimeError(f"the shrunk example of {rel.name} no longer violates: {v}")
    result.found, result.example, result.violation, result.tried = True, example, v, tried
    return result


# ------------------------------------------------------------------------------------------
# records: save, load, replay, export


def _record(record) -> dict:
    if isinstance(record, SearchResult):
        record = record.as_record()
    if not isinstance(record, dict):
        raise TypeError(f"record must be a dict or a SearchResult; got {type(record).__name__}")
    for key in ("id", "relaxed"):
        if not isinstance(record.get(key), str):
            raise ValueError(f"record must have a string {key!r}; got {record.get(key)!r}")
    if record.get("found") is False or record.get("example") is None:
        raise ValueError(
            f"record holds no counterexample ({record['id']} without {record['relaxed']}: "
            "found is false)"
        )
    if not isinstance(record["example"], dict):
        raise ValueError(f"record['example'] must be a dict; got {record['example']!r}")
    return record


def replay(record) -> float:
    """Re-check a saved counterexample and return its violation (> 0: it still breaks the claim).

    ``record`` is the JSON record of :func:`search` (a dict with ``id``, ``relaxed`` and
    ``example``) or a SearchResult. Claims PB2, PB6, PB8, PB11. ValueError for a record without a
    counterexample or naming an unknown claim or relaxation.
    """
    rec = _record(record)
    _, rel = get_relaxation(rec["id"], rec["relaxed"])
    v = float(rel.violation(_plain(rec["example"])))
    if not math.isfinite(v):
        raise ValueError(f"violation of {rec['relaxed']} is {v} for the recorded example")
    return v


def describe(record) -> str:
    """One human-readable sentence on why a recorded example breaks its claim (or '')."""
    rec = _record(record)
    _, rel = get_relaxation(rec["id"], rec["relaxed"])
    return rel.describe(rec["example"]) if rel.describe else ""


def save_record(record, path) -> Path:
    """Write a search record (dict or SearchResult) as JSON to ``path``; return the path."""
    rec = record.as_record() if isinstance(record, SearchResult) else record
    if not isinstance(rec, dict):
        raise TypeError(f"record must be a dict or a SearchResult; got {type(rec).__name__}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rec, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def load_record(path) -> dict:
    """Read a JSON record written by :func:`save_record` (ValueError if missing or not JSON)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"record file: no such file {str(path)!r}")
    try:
        rec = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"record file {str(path)!r} is not JSON: {exc}") from exc
    if not isinstance(rec, dict):
        raise ValueError(f"record file {str(path)!r} must hold a JSON object")
    return rec


def _slug(rec: dict) -> str:
    return re.sub(r"\W+", "_", f"{rec['id']}_{rec['relaxed']}".lower()).strip("_")


def _flat(value) -> str:
    """One-line Python source of plain data (dicts, lists, strings, numbers, bools, None)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flat(k)}: {_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flat(v) for v in value) + "]"
    return repr(value)


def _literal(value, indent: int = 0, lead: int = 0, trail: int = 0) -> str:
    """Python source of plain data laid out like ``ruff format``: one line when it fits in 100
    columns (``lead`` columns before it, ``trail`` after), else one item a line."""
    flat = _flat(value)
    if lead + len(flat) + trail <= 100 or not isinstance(value, dict | list | tuple) or not value:
        return flat
    pad = indent + 4
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            key = f"{_flat(k)}: "
            lines.append(key + _literal(v, pad, pad + len(key), 1))
        open_, close = "{", "}"
    else:
        lines = [_literal(v, pad, pad, 1) for v in value]
        open_, close = "[", "]"
    body = "".join(f"{' ' * pad}{line},\n" for line in lines)
    return f"{open_}\n{body}{' ' * indent}{close}"


def export_test(record) -> str:
    """Source of a pytest module that replays a counterexample and asserts violation > 0.

    The record is embedded as a Python literal; the test calls :func:`replay` (posflow's public
    API) and, when the record has a ``violation``, checks it is reproduced to 1e-6 relative.
    Claims PB2, PB6, PB8, PB11.
    """
    rec = _plain(_record(record))
    get_relaxation(rec["id"], rec["relaxed"])
    drops = str(rec.get("drops", rec["relaxed"])).replace("\\", "/").replace('"', "'")
    check = ""
    if isinstance(rec.get("violation"), int | float):
        check = '\n    assert violation == pytest.approx(RECORD["violation"], rel=1e-6, abs=1e-12)'
    how = f"posflow counterexample {rec['id']} --relax {rec['relaxed']}"
    if "seed" in rec:
        how += f" --seed {rec['seed']}"
    doc = textwrap.fill(
        f'Regression: claim {rec["id"]} fails once "{drops}" is dropped (relaxation '
        f"{rec['relaxed']}). Generated by ``{how} --export``; replays the shrunk counterexample "
        "below through posflow's public API.",
        width=96,
        break_on_hyphens=False,
    )
    return (
        f'"""{doc}\n"""\n\n'
        "import pytest\n\n"
        "from posflow.proofs_checks.kit._counterexamples import replay\n\n"
        f"RECORD = {_literal(rec, 0, len('RECORD = '))}\n\n\n"
        f"def test_{_slug(rec)}_counterexample_still_violates():\n"
        "    violation = replay(RECORD)\n"
        f"    assert violation > 0{check}\n"
    )


def write_test(record, path) -> Path:
    """Write :func:`export_test` of ``record`` to ``path`` (a folder gets
    ``test_cx_<id>_<relaxation>.py``); return the file written."""
    source = export_test(record)
    path = Path(path)
    if path.is_dir():
        path = path / f"test_cx_{_slug(_record(record))}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    return path
