"""Progress of long work on stderr: a rich bar on a terminal, plain lines when piped.

A rich progress bar draws nothing when stderr is not a terminal (a log file, a pipe, CI), so a
long run would stay silent for minutes. :func:`progress` keeps the bar on a terminal and writes
one plain line per step otherwise (throttled to one line every ``every`` seconds, the last step
always written)::

    with progress(len(claims), "verify") as bar:
        for c in claims:
            ...
            bar.advance(detail=f"{c.id} {verdict}")

prints ``verify: 3/38 AT03 HOLDS (2.1 s)`` lines when piped.
"""

from __future__ import annotations

import contextlib
import sys
import time

__all__ = ["progress"]


class _Plain:
    """Plain progress lines on a stream (see the module docstring)."""

    def __init__(self, total, description: str, every: float, stream):
        self.total, self.description, self.every, self.stream = total, description, every, stream
        self.done, self.t0, self.last = 0, time.perf_counter(), -float("inf")

    def advance(self, n: int = 1, *, detail: str = "", **fields) -> None:
        self.done += n
        now = time.perf_counter()
        final = self.total is not None and self.done >= self.total
        if now - self.last < self.every and not final:
            return
        self.last = now
        of = f"/{self.total}" if self.total is not None else ""
        extra = " ".join(str(v) for v in (detail, *fields.values()) if v)
        extra = f" {extra}" if extra else ""
        print(f"{self.description}: {self.done}{of}{extra} ({now - self.t0:.1f} s)",
              file=self.stream, flush=True)  # fmt: skip

    def describe(self, detail: str) -> None:
        """A new description of the current step (shown by the terminal bar only)."""


class _Rich:
    def __init__(self, bar, task):
        self.bar, self.task = bar, task

    def advance(self, n: int = 1, *, detail: str = "", **fields) -> None:
        self.bar.update(self.task, advance=n, **fields)

    def describe(self, detail: str) -> None:
        self.bar.update(self.task, description=detail)


class _Off:
    def advance(self, n: int = 1, *, detail: str = "", **fields) -> None:
        pass

    def describe(self, detail: str) -> None:
        pass


@contextlib.contextmanager
def progress(total, description: str, *, enabled: bool = True, every: float = 0.0,
             columns=None, stream=None, **fields):  # fmt: skip
    """Context manager yielding a progress object with ``advance(n=1, detail="", **fields)``
    and ``describe(text)``.

    Parameters
    ----------
    total : int or None
        Number of steps (None: unknown).
    description : str
        What is being done (the bar's label, each plain line's prefix).
    enabled : bool
        False: show nothing.
    every : float
        Off a terminal, the least number of seconds between two plain lines (0: every step).
    columns : tuple, optional
        rich progress columns for the terminal bar (default rich's).
    stream : file, optional
        Where to write (default ``sys.stderr``); a bar only when it is a terminal.
    **fields
        Extra task fields that ``columns`` show (rich's ``{task.fields[name]}``).
    """
    stream = sys.stderr if stream is None else stream
    if not enabled:
        yield _Off()
        return
    if not getattr(stream, "isatty", lambda: False)():
        yield _Plain(total, description, every, stream)
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(*(columns or ()), console=Console(file=stream), transient=True) as bar:
        yield _Rich(bar, bar.add_task(description, total=total, **fields))
