"""Mutants: named, small, realistic breaks of the routines a claim checks, to prove it can fail.

A :class:`Mutant` names a routine by its import path (``"posflow.simulate.rollout:influence"``,
or ``"module:Class.method"``) and a factory ``make(original) -> replacement``. :func:`mutated`
applies it by patching, in a context manager, every binding of the original inside posflow's
loaded modules (so ``from … import influence`` copies are patched too) and clearing posflow's
module-level memo caches before and after; no file is ever edited.

A mutant is *killed* when, under it, the claim's verdict is FAILS with at least one comparison
failing that passes on the unmutated code (:func:`kill_table`). The test suite asserts every
registered mutant is killed.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

__all__ = [
    "Kill",
    "Mutant",
    "add_mutant",
    "all_mutants",
    "cited_calls",
    "counting",
    "kill_table",
    "mutants_of",
    "mutated",
]


@dataclass(frozen=True)
class Mutant:
    """A break of ``target`` (``"pkg.module:name"`` or ``"pkg.module:Class.attr"``)."""

    name: str
    target: str
    make: Callable
    description: str

    def __post_init__(self):
        if ":" not in self.target:
            raise ValueError(f"target must look like 'pkg.module:name'; got {self.target!r}")


_MUTANTS: dict[str, dict[str, Mutant]] = {}


def add_mutant(claims, name: str, target: str, make: Callable, description: str) -> Mutant:
    """Register a mutant for one claim ID or a tuple of them; returns it.

    Parameters
    ----------
    claims : str or tuple of str
        The claims that must FAIL under the mutant.
    name : str
        Short, unique per claim (e.g. ``"reversed-layer-order"``).
    target : str
        The routine replaced, ``"posflow.simulate.rollout:influence"``.
    make : callable
        ``make(original) -> replacement``.
    description : str
        What the break is, in one line.
    """
    mut = Mutant(name, target, make, description)
    for cid in (claims,) if isinstance(claims, str) else tuple(claims):
        bucket = _MUTANTS.setdefault(cid, {})
        if name in bucket:
            raise ValueError(f"claim {cid} already has a mutant {name!r}")
        bucket[name] = mut
    return mut


def mutants_of(claim_id: str) -> list[Mutant]:
    """The mutants registered for ``claim_id`` (claim modules are loaded first)."""
    from posflow.proofs_checks.kit._registry import all_claims

    all_claims()
    return list(_MUTANTS.get(claim_id, {}).values())


def all_mutants() -> dict[str, list[Mutant]]:
    """``{claim_id: [Mutant, ...]}`` for every registered claim, in catalog order."""
    from posflow.proofs_checks.kit._registry import all_claims

    return {c.id: list(_MUTANTS.get(c.id, {}).values()) for c in all_claims()}


def _resolve(target: str):
    modname, _, attr = target.partition(":")
    owner = importlib.import_module(modname)
    parts = attr.split(".")
    for p in parts[:-1]:
        owner = getattr(owner, p)
    if not hasattr(owner, parts[-1]):
        raise ValueError(f"mutant target {target!r} does not exist")
    return owner, parts[-1], owner.__dict__.get(parts[-1], getattr(owner, parts[-1]))


def _posflow_modules():
    return [m for name, m in list(sys.modules.items()) if name.startswith("posflow") and m]


def clear_caches() -> int:
    """Clear every module-level ``functools`` memo cache in posflow's loaded modules."""
    n = 0
    for mod in _posflow_modules():
        for v in list(vars(mod).values()):
            if callable(getattr(v, "cache_clear", None)) and getattr(v, "__module__", "") == (
                mod.__name__
            ):
                v.cache_clear()
                n += 1
    return n


@contextmanager
def mutated(mutant: Mutant):
    """Apply ``mutant`` for the duration of the block (every binding of the original routine in
    posflow's modules is patched; memo caches are cleared on entry and exit)."""
    owner, attr, original = _resolve(mutant.target)
    replacement = mutant.make(original)
    patched = [(owner, attr, original)]
    if not isinstance(owner, type):
        for mod in _posflow_modules():
            for k, v in list(vars(mod).items()):
                if v is original and (mod, k) != (owner, attr):
                    patched.append((mod, k, v))
    clear_caches()
    try:
        for obj, k, _ in patched:
            setattr(obj, k, replacement)
        yield replacement
    finally:
        for obj, k, v in patched:
            setattr(obj, k, v)
        clear_caches()


@dataclass
class Kill:
    """One row of the kill table."""

    claim: str
    mutant: str
    description: str
    baseline: str
    status: str
    newly_failed: list[str]
    error: str = ""
    result: object = field(default=None, repr=False, compare=False)  # the mutated Result

    @property
    def killed(self) -> bool:
        return self.status == "FAILS" and bool(self.newly_failed)

    def as_json(self) -> dict:
        return {
            "claim": self.claim,
            "mutant": self.mutant,
            "description": self.description,
            "baseline": self.baseline,
            "status": self.status,
            "killed": self.killed,
            "newly_failed": self.newly_failed,
            "error": self.error,
        }


def _failed_keys(result) -> set[str]:
    ev = result.evidence
    return {m.key for m in ev.failed} if ev is not None and hasattr(ev, "failed") else set()


def run_mutant(claim, mutant: Mutant, ctx, baseline=None) -> Kill:
    """Run ``claim`` under ``mutant`` and compare with ``baseline`` (a Result; computed when
    not given)."""
    from posflow.proofs_checks.kit._registry import run_claim

    if baseline is None:
        clear_caches()
        baseline = run_claim(claim, ctx)
    with mutated(mutant):
        res = run_claim(claim, ctx)
    newly = sorted(_failed_keys(res) - _failed_keys(baseline))
    return Kill(
        claim.id,
        mutant.name,
        mutant.description,
        baseline.status,
        res.status,
        newly,
        res.error,
        result=res,
    )


def kill_table(ids=None, *, size: str = "quick", seed: int = 0, progress=None) -> list[Kill]:
    """Run every selected claim under each of its mutants; one :class:`Kill` per pair.

    ``progress(claim_id, mutant_name)`` is called before each run when given.
    """
    from posflow.proofs_checks.kit._registry import Context, run_claim, select

    ctx = Context(size=size, seed=seed)
    rows = []
    for claim in select(ids or []):
        muts = mutants_of(claim.id)
        if not muts:
            continue
        if progress:
            progress(claim.id, "(unmutated)")
        clear_caches()
        base = run_claim(claim, ctx)
        for m in muts:
            if progress:
                progress(claim.id, m.name)
            rows.append(run_mutant(claim, m, ctx, base))
    return rows


# -- call counters on cited routines (kit.cite), patched like mutants ----------------------


def _counter(counts, routine):
    def make(original):
        @functools.wraps(original)
        def counted(*args, **kwargs):
            counts[routine] += 1
            return original(*args, **kwargs)

        return counted

    return make


@contextmanager
def counting(claim):
    """Within the block, every routine ``claim`` cites is wrapped in a call counter; yields the
    ``{routine: calls}`` dict the wrappers fill in.

    The routines are patched like mutants (:func:`~posflow.proofs_checks.kit.mutated`), so copies
    bound by ``from … import`` are counted too; the wrappers compute exactly what the originals
    do. Cited routines must be functions (a class would lose ``isinstance``).
    """
    counts = {c.routine: 0 for c in claim.compares}
    with ExitStack() as stack:
        for routine in counts:
            stack.enter_context(mutated(Mutant("count", routine, _counter(counts, routine), "")))
        yield counts


def cited_calls(claim, ctx=None) -> dict[str, int]:
    """Run ``claim``'s check with every cited routine wrapped in a call counter.

    Returns ``{routine: number of calls}`` (0 for a cited routine the check never runs).
    Raises RuntimeError when the check crashes.
    """
    from posflow.proofs_checks.kit._registry import Context, run_claim

    with counting(claim) as counts:
        res = run_claim(claim, ctx or Context())
    if res.error:
        raise RuntimeError(f"{claim.id} failed while counting cited calls: {res.error}")
    return dict(counts)
