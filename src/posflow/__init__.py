"""posflow: theorem checking and simulation of how position shapes information flow in transformers.

The small public API, re-exported from the three subpackages:

* :mod:`posflow.theory` — exact mathematics (sympy): closed forms, drifts, bounds, limits;
* :mod:`posflow.simulate` — numerics: kernels, rollouts, orthogonal steps, transport, models;
* :mod:`posflow.proofs_checks` — the claim registry, checks, counterexamples, report, CLI.

>>> import posflow
>>> p = posflow.influence(posflow.alibi_kernel(64, posflow.alibi_slopes(4)), posflow.constant(0.2,
8))
>>> round(float(p.sum()), 12)
1.0

``posflow.verify(["PB3"])`` checks claims and returns their results; ``posflow verify`` (or
``python -m posflow verify``) is the same from the command line.
"""

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _version

try:
    __version__ = _version("posflow")
except PackageNotFoundError:  # pragma: no cover - running from an unbuilt tree
    __version__ = "0+unknown"

from posflow.simulate import (
    alibi_kernel,
    alibi_slopes,
    constant,
    dense_kernel,
    diagonal,
    influence,
    power_decay,
    rollout_matrix,
    uniform_kernel,
)


def verify(ids=None, *, size="quick", seed=0, out=None):
    """Check claims and return their results (see :func:`posflow.proofs_checks.kit.verify`);
    with ``out`` (a folder) also write the report there (index.md, index.html, figures,
    results.json; :func:`posflow.proofs_checks.kit.write_report`)."""
    from pathlib import Path

    from posflow.proofs_checks.kit import verify as _verify

    results = _verify(ids, size=size, seed=seed)
    if out is not None:
        from posflow.proofs_checks.kit import write_report

        write_report(results, Path(out), size=size)
    return results


def get_claim(cid):
    """The registered claim with ID ``cid`` (e.g. ``"PB3"``); ValueError for an unknown ID."""
    from posflow.proofs_checks.kit import get_claim as _get

    return _get(cid)


__all__ = [
    "__version__",
    "alibi_kernel",
    "alibi_slopes",
    "constant",
    "dense_kernel",
    "diagonal",
    "get_claim",
    "influence",
    "power_decay",
    "rollout_matrix",
    "uniform_kernel",
    "verify",
]
