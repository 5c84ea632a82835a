"""Cited routines: what each claim's check compares with an independent reference.

A claim cites the routines of :mod:`posflow.theory` and :mod:`posflow.simulate` its statement rests
on. Each citation names the routine (``"posflow.simulate.transport:near_far_mass"``), the
independent reference it is compared with (a dense computation, a brute-force loop, a closed form
at points, a sympy evaluation) and the keys of the judged measurements that make the comparison:

.. code-block:: python

    @register("AT10", "[B]", "…", compares=(
        cite("posflow.theory.transport:far_mass_lower_bound",
             "the direct formula M/(M + K e^{2λ}) and the digest's printed values",
             "max_relative_error_vs_direct_formula", "max_digest_error_in_last_digit"),
    ))

Three rules make a citation mean something, and each is enforced:

- :func:`~posflow.proofs_checks.kit.run_claim` turns a check whose evidence lacks a cited key, or
  holds it only as an unjudged ``info`` value, into an ERROR (a comparison cannot silently vanish);
- :func:`~posflow.proofs_checks.kit.cited_calls` runs a check with every cited routine wrapped in
  a call counter (patched like a mutant, every binding in posflow's modules); the test suite
  asserts each is called;
- the routines a check's docstring names in double back-quotes are cited (a test reads them).

``posflow claims ID`` lists the citations, so a reader sees what each verdict compares.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Cite", "cite", "missing_cited_keys"]


@dataclass(frozen=True)
class Cite:
    """A routine a claim cites, the independent reference it is compared with, and the keys of
    the judged measurements that compare them."""

    routine: str
    reference: str
    keys: tuple[str, ...]

    def __post_init__(self):
        if not isinstance(self.routine, str) or ":" not in self.routine:
            raise ValueError(
                f"routine must look like 'posflow.pkg.module:name'; got {self.routine!r}"
            )
        if not self.routine.startswith(("posflow.theory", "posflow.simulate")):
            raise ValueError(
                f"routine must live in posflow.theory or posflow.simulate; got {self.routine!r}"
            )
        if not isinstance(self.reference, str) or not self.reference.strip():
            raise ValueError(f"the citation of {self.routine} needs a reference (what it is "
                             "compared with)")  # fmt: skip
        if not self.keys or not all(isinstance(k, str) and k for k in self.keys):
            raise ValueError(f"the citation of {self.routine} needs at least one measurement key")

    @property
    def name(self) -> str:
        """The routine's short name (``near_far_mass``)."""
        return self.routine.rpartition(":")[2]

    def as_json(self) -> dict:
        return {"routine": self.routine, "reference": self.reference, "keys": list(self.keys)}


def cite(routine: str, reference: str, *keys: str) -> Cite:
    """A :class:`Cite`: ``routine`` (``"posflow.simulate.module:name"``) is compared with
    ``reference`` by the judged measurements ``keys``."""
    return Cite(routine, reference, tuple(keys))


def missing_cited_keys(compares, evidence) -> list[str]:
    """Cited measurement keys that ``evidence`` lacks or holds only unjudged, as
    ``"routine: key"`` strings (empty when every citation is backed by a comparison)."""
    have = {m.key: m for m in evidence.measurements}
    out = []
    for c in compares:
        for k in c.keys:
            m = have.get(k)
            if m is None or not (m.judged or m.test == "undecided"):
                out.append(f"{c.name}: {k}" + (" (not judged)" if m is not None else ""))
    return out
