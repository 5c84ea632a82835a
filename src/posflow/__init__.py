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


def _output_folder(out):
    """``out`` as a Path to a folder that exists or can be made and can be written; ValueError
    naming ``out`` otherwise (checked by creating and removing a probe file; nothing is made)."""
    import os
    import tempfile
    from pathlib import Path

    if isinstance(out, bytes) or not isinstance(out, str | os.PathLike):
        raise TypeError(f"out must be a folder path (str or path); got {out!r}")
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise ValueError(f"out {str(out)!r} is a file, not a folder")
    anc = p
    while not anc.exists():  # the nearest existing folder, where the report's folders start
        anc = anc.parent
    if not anc.is_dir():
        raise ValueError(f"out {str(out)!r}: {str(anc)!r} is a file, not a folder")
    try:
        fd, probe = tempfile.mkstemp(prefix=".posflow-probe-", dir=anc)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ValueError(f"out {str(out)!r}: cannot write in {str(anc)!r} ({why})") from None
    os.close(fd)
    os.unlink(probe)
    return p


def verify(ids=None, *, size="quick", seed=0, out=None):
    """Check claims and return their results (see :func:`posflow.proofs_checks.kit.verify`);
    with ``out`` (a folder) also write the report there (index.md, index.html, figures,
    results.json; :func:`posflow.proofs_checks.kit.write_report`).

    The results are a list of Result with ``.to_dataframe()`` (a pandas DataFrame, one row per
    claim; ``measurements=True`` for one row per measurement), which imports pandas when called.

    ``out`` is checked before any claim runs: ValueError naming it when it is a file or cannot
    be written. ``ids`` as for the kit: omit it for every claim (an empty list is refused).
    """
    from posflow.proofs_checks.kit import verify as _verify

    folder = None if out is None else _output_folder(out)
    results = _verify(ids, size=size, seed=seed)
    if out is not None:
        from posflow.proofs_checks.kit import write_report

        write_report(results, folder, size=size)
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
