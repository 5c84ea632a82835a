"""The results of ``posflow verify`` as pandas DataFrames (:func:`results_frame`, behind
``Results.to_dataframe``): one row per claim or per measurement, from the Result objects or from
the JSON records ``verify --json`` prints and ``verify --out`` writes. pandas is imported on the
first call only.
"""

from __future__ import annotations

__all__ = ["NEEDS_PANDAS", "results_frame"]

NEEDS_PANDAS = "to_dataframe needs pandas, which is not installed: pip install pandas"

_CLAIM_COLUMNS = ("status", "expected", "as_expected", "expected_reason", "source", "statement",
                  "setup", "summary", "error", "measurements", "judged", "failed", "seconds",
                  "timing")  # fmt: skip
_MEASUREMENT_COLUMNS = ("key", "label", "test", "role", "value", "reference", "unit", "passed",
                        "tolerance", "tolerance_kind", "tolerance_reason", "note")  # fmt: skip


def _pandas():
    """pandas, imported on first use; ImportError naming the install command otherwise."""
    try:
        import pandas
    except ImportError as exc:
        raise ImportError(NEEDS_PANDAS) from exc
    return pandas


def _claim_row(rec: dict) -> list:
    ms = rec.get("measurements", [])
    judged = [m for m in ms if m["test"] not in ("info", "undecided")]
    expected = rec.get("expected") or None
    return [
        rec["status"], expected, None if expected is None else rec["status"] == expected,
        rec.get("expected_reason") or None, rec["source"], rec["statement"],
        rec.get("setup", ""), rec.get("summary", ""), rec.get("error") or None, len(ms),
        len(judged), sum(m["passed"] is False for m in judged), float(rec["seconds"]),
        rec.get("timing") or None,
    ]  # fmt: skip


def _measurement_rows(rec: dict) -> list[list]:
    from posflow.proofs_checks.kit._specs import _from_json_num

    out = []
    for m in rec.get("measurements", []):
        tol = m.get("tolerance") or {}
        out.append([
            rec["id"], m["key"], m["label"], m["test"], m["role"], _from_json_num(m["value"]),
            _from_json_num(m.get("reference")), m.get("unit") or None, m["passed"],
            tol.get("value"), tol.get("kind"), tol.get("reason"), m.get("note") or None,
        ])  # fmt: skip
    return out


def results_frame(results, *, measurements: bool = False):
    """The results of ``posflow verify`` as a pandas DataFrame.

    Parameters
    ----------
    results : list of Result, list of dict, or path
        What :func:`verify` returns, the records ``posflow verify --json`` prints (a list of
        dicts), or the path of such a JSON file (``results.json`` of ``verify --out``).
    measurements : bool
        One row per claim (False) or one row per measurement (True).

    Returns
    -------
    pandas.DataFrame
        ``measurements=False``: index ``id`` (claim ID, catalog order); columns ``status``,
        ``expected`` and ``as_expected`` (the verdict lock; missing when not looked up),
        ``expected_reason``, ``source``, ``statement``, ``setup``, ``summary``, ``error`` (missing
        unless the check crashed), ``measurements``, ``judged`` and ``failed`` (counts of the
        evidence's measurements, of those judged, of the judged ones that failed), ``seconds``
        (the check's wall-clock time, rounded to ms) and ``timing`` (what the seconds include).
        ``measurements=True``: a column ``id``, then ``key``, ``label``, ``test``, ``role``,
        ``value``, ``reference``, ``unit``, ``passed`` (missing for information), ``tolerance``,
        ``tolerance_kind``, ``tolerance_reason`` and ``note``; ``value`` and ``reference`` are
        floats where every row is numeric, else objects (a ``true`` test's value is a bool).
        Every cell is a plain scalar or missing (pandas' NA); the run's provenance (the same
        for every row) is left out: it is in each JSON record.

    A frame from the records equals the frame from the Result objects they were written from.
    pandas is imported here only; ImportError naming ``pip install pandas`` when it is missing.
    Raises ValueError for a file that is not a JSON list of result records.
    """
    import json
    import os

    pd = _pandas()
    if isinstance(results, str | os.PathLike):
        try:
            with open(results, encoding="utf-8") as fh:
                results = json.load(fh)
        except json.JSONDecodeError as exc:
            raise ValueError(f"results {str(results)!r} is not JSON: {exc}") from None
    recs = [r if isinstance(r, dict) else r.as_json() if hasattr(r, "as_json") else None
            for r in results]  # Result objects give their JSON record
    if not all(isinstance(r, dict) and {"id", "status", "source", "statement", "seconds"}
               <= set(r) for r in recs):  # fmt: skip
        raise ValueError(
            "results must be Result objects or records of posflow verify --json (dicts with id, "
            "status, source, statement and seconds)"
        )
    if measurements:
        rows = [row for r in recs for row in _measurement_rows(r)]
        return pd.DataFrame(rows, columns=["id", *_MEASUREMENT_COLUMNS])
    index = pd.Index([r["id"] for r in recs], name="id", dtype=object)
    return pd.DataFrame([_claim_row(r) for r in recs], index=index, columns=list(_CLAIM_COLUMNS))
