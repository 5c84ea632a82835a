"""posflow's claims, the machinery that judges them, and the command line.

Three subpackages, layered one way (``cli`` → ``claims`` → ``kit``, never back):

* :mod:`posflow.proofs_checks.kit` — the machinery: the registry of claims, relaxations and
  mutants, Evidence and its comparisons, the decision rule, counterexample search, report,
  figures and catalog;
* :mod:`posflow.proofs_checks.claims` — one module per claim family, named by its IDs
  (``pb01_02_diagonal_identity``, …, ``at20_trained``): checks, their mutants and relaxations;
* :mod:`posflow.proofs_checks.cli` — the ``posflow`` command (parse, call, print).

Each check pairs exact statements from :mod:`posflow.theory` with numeric experiments from
:mod:`posflow.simulate` and judges them (HOLDS / FAILS / INCONCLUSIVE).
"""

from posflow.proofs_checks.kit import (
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
