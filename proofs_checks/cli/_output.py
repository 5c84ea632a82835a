"""Where ``posflow`` writes: rich consoles sized for a terminal or a pipe, and figure files.

A rich Console on a terminal takes the terminal's width; piped (a log, ``| grep``) it would
fold table cells at 80 columns, so :func:`console` widens it to whole rows. :func:`figure_file`
checks a ``--plot`` path like :func:`~posflow.proofs_checks.cli._common.output_file`, accepting
every format matplotlib writes.
"""

from __future__ import annotations

from pathlib import Path

from posflow.proofs_checks.cli._common import output_file

__all__ = ["PIPED_WIDTH", "console", "figure_file", "table"]


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


def figure_file(arg: str, path) -> Path:
    """:func:`output_file` for a figure: any format matplotlib writes (``.png``, ``.pdf``, …)."""
    from posflow.proofs_checks.kit import figure_suffixes

    return output_file(arg, path, figure_suffixes())
