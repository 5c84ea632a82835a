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


def __getattr__(name: str):
    """The names above, from :mod:`posflow.proofs_checks.kit` on first use (so that the command
    line, which lives in this package, starts without loading the claim machinery)."""
    if name in __all__:
        from posflow.proofs_checks import kit

        return getattr(kit, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
