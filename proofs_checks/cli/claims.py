"""``posflow claims [IDS] [--json | --markdown]``: the claim catalog, from the kit.

The table lists each claim's ID, source tag, statement, assumptions, relaxations, mutants, the
routines its check compares with an independent reference, its expected verdict (the verdict lock)
and the function that checks it; ``--markdown`` prints exactly the repository's ``CLAIMS.md``
(:func:`posflow.proofs_checks.kit.to_markdown`).
"""

from __future__ import annotations

from posflow.proofs_checks.cli._common import UsageError, print_json
from posflow.proofs_checks.cli._output import show

__all__ = ["add_parser", "cmd_claims"]


def add_parser(sub) -> None:
    """Register ``posflow claims``."""
    c = sub.add_parser("claims", help="print the claim catalog (table, JSON or Markdown)")
    c.add_argument("ids", nargs="*", metavar="ID", help="claim IDs or prefixes (PB, AT)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("--json", action="store_true", help="print the records as JSON")
    g.add_argument("--markdown", action="store_true", help="print CLAIMS.md")
    c.set_defaults(func=cmd_claims)


def cmd_claims(args) -> int:
    """Print the catalog of the selected claims (all by default)."""
    from posflow.proofs_checks import kit

    try:
        claims = kit.select(args.ids)
    except ValueError as exc:
        raise UsageError(f"ID: {exc}") from None
    recs = kit.catalog_records(claims)
    if args.json:
        print_json(recs, inputs="claims", indent=1)
    elif args.markdown:
        print(kit.to_markdown(recs), end="")
    else:
        _print_table(recs)
    return 0


def _compares(compares) -> str:
    return "; ".join(f"{x['routine'].rpartition(':')[2]} vs {x['reference']}"
                     for x in compares) or "—"  # fmt: skip


def _expected(exp) -> str:
    if exp["quick"] == exp["full"]:
        return exp["quick"]
    return f"{exp['quick']} (quick), {exp['full']} (full)"


def _print_table(recs) -> None:
    from rich.markup import escape

    from posflow.proofs_checks.cli._output import table as Table

    t = Table(title=f"posflow claims ({len(recs)})")
    cols = ("ID", "source", "statement", "assumptions", "relaxations", "mutants", "compares",
            "expected", "check")  # fmt: skip
    for col in cols:
        t.add_column(col, overflow="fold")
    for r in recs:
        t.add_row(
            r["id"],
            escape(r["source"]),
            escape(r["statement"]),
            escape("; ".join(r["assumptions"])),
            escape(", ".join(x["name"] for x in r["relaxations"]) or "—"),
            escape(", ".join(r["mutants"]) or "—"),
            escape(_compares(r["compares"])),
            escape(_expected(r["expected"])),
            r["check"].removeprefix("posflow.proofs_checks."),
        )
    show(t)
