"""Where ``posflow`` writes: rich consoles sized for a terminal or a pipe, and figure files.

A rich Console on a terminal takes the terminal's width; piped (a log, ``| grep``) it would
fold table cells at 80 columns, so :func:`console` widens it to whole rows, and :func:`show`
writes a table as plain Markdown rows instead (no padding to the widest cell, no box
characters: one line per row, whole cells, ready for ``grep``, ``cut -d'|'`` or a Markdown
file). :func:`figure_file`
checks a ``--plot`` path like :func:`~posflow.proofs_checks.cli._common.output_file`, accepting
every format matplotlib writes.
"""

from __future__ import annotations

from pathlib import Path

from posflow.proofs_checks.cli._common import output_file

__all__ = ["PIPED_WIDTH", "console", "figure_file", "markdown_rows", "show", "table"]


def console(*, stderr: bool = False):
    """A rich Console: the terminal's width on a terminal; when piped, wide enough that no table
    cell is folded (``$COLUMNS`` included, which rich would otherwise take), so a log or
    ``| grep`` sees whole lines."""
    from rich.console import Console

    con = Console(stderr=stderr)
    if not con.is_terminal:
        con = Console(stderr=stderr, width=PIPED_WIDTH)
    return con


PIPED_WIDTH = 10_000


def table(*args, **kw):
    """A rich Table whose title and caption start at the left edge: centred over a piped table
    as wide as its longest cell (thousands of characters for a verdict's summary), they would
    be preceded by as many spaces."""
    from rich.table import Table

    kw.setdefault("title_justify", "left")
    kw.setdefault("caption_justify", "left")
    return Table(*args, **kw)


def _plain(cell) -> str:
    """A cell's text without rich markup, on one line, with ``|`` escaped for Markdown."""
    from rich.text import Text

    text = cell.plain if isinstance(cell, Text) else Text.from_markup(str(cell)).plain
    return " ".join(text.split()).replace("|", "\\|")


def markdown_rows(t) -> list[str]:
    """A rich Table as Markdown lines: the title, the header, the rule, one line per row (each
    cell whole, markup removed) and the caption."""
    cols = t.columns
    out = [_plain(t.title)] if t.title else []
    out += ["| " + " | ".join(_plain(c.header) for c in cols) + " |",
            "|" + "---|" * len(cols)]  # fmt: skip
    cells = [list(c.cells) for c in cols]
    for i in range(t.row_count):
        out.append("| " + " | ".join(_plain(col[i]) for col in cells) + " |")
    return out + ([_plain(t.caption)] if t.caption else [])


def show(t, *, stderr: bool = False) -> None:
    """Print a rich Table: drawn with box characters on a terminal, as :func:`markdown_rows`
    when piped."""
    con = console(stderr=stderr)
    if con.is_terminal:
        con.print(t)
    else:
        import sys

        print("\n".join(markdown_rows(t)), file=sys.stderr if stderr else sys.stdout, flush=True)


def figure_file(arg: str, path) -> Path:
    """:func:`output_file` for a figure: any format matplotlib writes (``.png``, ``.pdf``, …)."""
    from posflow.proofs_checks.kit import figure_suffixes

    return output_file(arg, path, figure_suffixes())
