"""posflow's claim registry, checks, counterexample search, report and command line.

Pairs exact statements from :mod:`theory` with numeric experiments from :mod:`simulate` and
judges them (HOLDS / FAILS / INCONCLUSIVE).
Entry point: ``posflow`` (:func:`posflow.proofs_checks.cli.main`).
"""

from posflow.proofs_checks.registry import (
    FAILS,
    HOLDS,
    INCONCLUSIVE,
    Claim,
    Context,
    Evidence,
    Relaxation,
    all_claims,
    get_claim,
    run_claim,
    select,
)

__all__ = [
    "FAILS",
    "HOLDS",
    "INCONCLUSIVE",
    "Claim",
    "Context",
    "Evidence",
    "Relaxation",
    "all_claims",
    "get_claim",
    "run_claim",
    "select",
]
