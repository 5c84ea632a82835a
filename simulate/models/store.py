"""The extrapolation run store, read without torch (claim AT20).

A store is a folder with ``meta.json`` (the run's configuration) and one ``<scheme>.json`` per
finished scheme holding ``rows`` of ``{"scheme", "train_len", "eval_len", "ppl"}``. Written by
:func:`simulate.models.extrapolate.run_extrapolation`.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["DEFAULT_STORE", "load_results"]

DEFAULT_STORE = Path(__file__).resolve().parents[2] / "benchmarks" / "results" / "extrapolation"


def load_results(store=DEFAULT_STORE) -> list[dict]:
    """The rows ``{"scheme", "train_len", "eval_len", "ppl"}`` saved in ``store`` (AT20).

    Sorted by scheme then length; an empty list when the store is missing or empty.
    Raises ValueError naming a file that is not a posflow extrapolation result.
    """
    store = Path(store)
    if not store.is_dir():
        return []
    rows = []
    for p in sorted(store.glob("*.json")):
        if p.name == "meta.json":
            continue
        try:
            blob = json.loads(p.read_text())
            rows += [
                {"scheme": str(r["scheme"]), "train_len": int(r["train_len"]),
                 "eval_len": int(r["eval_len"]), "ppl": float(r["ppl"])}
                for r in blob["rows"]
            ]  # fmt: skip
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"store file {str(p)!r} is not an extrapolation result") from exc
    rows.sort(key=lambda r: (r["scheme"], r["eval_len"]))
    return rows
