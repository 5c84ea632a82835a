"""What every ``posflow`` subcommand shares: the usage error, the parser, argument types, output
paths checked before any work, memory bounds checked before any allocation, and JSON output.

A bad argument raises :class:`UsageError` (or a ValueError/TypeError from the library, whose
message names the library argument); ``posflow.proofs_checks.cli.main`` prints it as one line,
``posflow CMD: error: MESSAGE``, and exits with code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import tempfile
from pathlib import Path

__all__ = [
    "Parser",
    "UsageError",
    "add_threads_option",
    "bad_input",
    "ensure_memory",
    "export_target",
    "finite_float",
    "first_nonfinite",
    "integer",
    "json_error",
    "number_list",
    "one_line",
    "output_dir",
    "output_file",
    "positive_float",
    "print_json",
    "read_json_file",
    "read_text_file",
    "torch_device",
]


class UsageError(Exception):
    """A bad command-line argument: one line on stderr, exit code 2.

    ``prog`` is the command that reports it (``posflow rollout``); None lets ``main`` fill it in.
    """

    def __init__(self, message: str, prog: str | None = None):
        super().__init__(message)
        self.prog = prog


def one_line(message: str) -> str:
    """``message`` on one line: its non-blank lines joined with "; "."""
    parts = [s.strip() for s in str(message).splitlines() if s.strip()]
    return "; ".join(parts)


# A negative number as an option value: -3, -0.5, .5, -1e4, -1E-308, -inf, -nan. argparse's own
# pattern (-\d+ or -\d*\.\d+) misses exponents, so `--content -1e4` read as an unknown option.
_NEGATIVE_NUMBER = re.compile(
    r"^-(?:(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|inf(?:inity)?|nan)$", re.IGNORECASE
)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors (:class:`UsageError`) and negative numbers as values."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def error(self, message):
        raise UsageError(one_line(message), prog=self.prog)


# ------------------------------------------------------------------------------------------
# argument types (argparse prints "argument --x: <message>")


def integer(lo: int, hi: int | None = None):
    """An argparse type: a decimal integer in [lo, hi]."""

    def parse(text: str) -> int:
        v = int(text, 10)  # ValueError: argparse says "invalid int value: 'x'"
        if v < lo or (hi is not None and v > hi):
            rule = f"an integer >= {lo}" if hi is None else f"an integer in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"must be {rule}; got {text!r}")
        return v

    parse.__name__ = "int"
    return parse


def finite_float(text: str) -> float:
    """An argparse type: a finite number."""
    v = float(text)  # ValueError: argparse says "invalid float value: 'x'"
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"must be a finite number; got {text!r}")
    return v


def positive_float(text: str) -> float:
    """An argparse type: a finite number > 0."""
    v = finite_float(text)
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number; got {text!r}")
    return v


finite_float.__name__ = positive_float.__name__ = "float"


def number_list(values, arg: str) -> list[float]:
    """The finite numbers in ``values`` (strings, separated by spaces or commas); at least one."""
    text = " ".join(values).replace(",", " ")
    out = []
    for tok in text.split():
        try:
            v = float(tok)
        except ValueError:
            raise UsageError(f"{arg} must be numbers; got {tok!r}") from None
        if not math.isfinite(v):
            raise UsageError(f"{arg} must be finite numbers; got {tok!r}")
        out.append(v)
    if not out:
        raise UsageError(f"{arg} needs at least one number")
    return out


@contextlib.contextmanager
def bad_input(arg: str):
    """Turn a ValueError/TypeError of the library inside the block into a UsageError on ``arg``."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{arg}: {one_line(str(exc)) or type(exc).__name__}") from exc


# ------------------------------------------------------------------------------------------
# output paths: checked before any work; folders are created only when written, and only those
# the user named in the path


def _existing_ancestor(p: Path) -> Path:
    p = Path(os.path.abspath(p))
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def _probe(folder: Path) -> str | None:
    """None if a file can be created in ``folder`` (tried for real: root ignores modes)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".posflow-probe-", dir=folder)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    os.close(fd)
    with contextlib.suppress(OSError):
        os.unlink(name)
    return None


def _writable_parent(arg: str, text: str, p: Path) -> None:
    anc = _existing_ancestor(p.parent)
    if not anc.is_dir():
        raise UsageError(f"{arg} {text!r}: {str(anc)!r} is a file, not a folder")
    why = _probe(anc)
    if why is not None:
        raise UsageError(f"{arg} {text!r}: cannot write in {str(anc)!r} ({why})")


def output_file(arg: str, path, suffix: str | tuple[str, ...] | None = None) -> Path:
    """Check that a file can be written at ``path`` (given as option ``arg``); return it.

    Refuses a folder (an existing one, or a name ending in "/"), a wrong ``suffix``, an existing
    non-regular file, a file in the way of a parent folder and a location that cannot be written
    (tested by creating a file). Nothing is created; the missing folders of ``path`` are made
    when the file is written.
    """
    text = str(path)
    p = Path(text)
    if text.endswith(("/", os.sep)) or p.is_dir():
        raise UsageError(f"{arg} {text!r} is a folder; give a file name")
    if suffix is not None and p.suffix.lower() not in ((suffix,) if isinstance(suffix, str)
                                                         else suffix):  # fmt: skip
        if isinstance(suffix, str):
            raise UsageError(f"{arg} must be a {suffix} file; got {text!r}")
        raise UsageError(f"{arg} must end in one of {', '.join(suffix)}; got {text!r}")
    if p.exists():
        if not p.is_file():
            raise UsageError(f"{arg} {text!r} exists and is not a regular file")
        try:
            with open(p, "ab"):
                pass
        except OSError as exc:
            raise UsageError(f"{arg} {text!r}: cannot write ({exc.strerror})") from None
        return p
    _writable_parent(arg, text, p)
    return p


def output_dir(arg: str, path) -> Path:
    """Check that folder ``path`` (option ``arg``) exists or can be made, and can be written.

    Refuses an existing file, a file in the way of a parent folder and a location that cannot be
    written (tested by creating a file). Nothing is created here.
    """
    text = str(path)
    p = Path(text)
    if p.exists():
        if not p.is_dir():
            raise UsageError(f"{arg} {text!r} is a file, not a folder")
        why = _probe(p)
        if why is not None:
            raise UsageError(f"{arg} {text!r}: cannot write in this folder ({why})")
        return p
    _writable_parent(arg, text, p)
    return p


def export_target(arg: str, path, suffix: str = ".py") -> tuple[Path, bool]:
    """``(path, is_folder)`` for an output that may be a file or a folder to write into.

    An existing folder or a name ending in "/" is a folder (created when written); anything else
    is a file that must end in ``suffix``.
    """
    text = str(path)
    if text.endswith(("/", os.sep)) or Path(text).is_dir():
        return output_dir(arg, text), True
    return output_file(arg, text, suffix), False


# ------------------------------------------------------------------------------------------
# input files and sizes


def add_threads_option(parser) -> None:
    """``--threads N`` (an integer >= 1; default: the free cores), applied with
    :func:`posflow.simulate.runtime.set_threads` to torch, BLAS and numba alike."""
    parser.add_argument(
        "--threads",
        type=integer(1),
        metavar="N",
        help="CPU threads of torch, BLAS and numba (default: the free cores)",
    )


def read_text_file(arg: str, path, max_bytes: int) -> str:
    """The UTF-8 text of file ``path`` (option ``arg``), refused above ``max_bytes``
    (:func:`posflow.simulate.runtime.read_text`, as a usage error)."""
    from posflow.simulate.runtime import read_text

    try:
        return read_text(path, arg, max_bytes)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _no_constant(name):
    raise ValueError(f"holds {name}, which is not a finite number")


def _open_at_end(text: str) -> list[str]:
    """What is still open where ``text`` ends: "a string", "a list", "an object" (innermost
    last); empty when every string, list and object is closed."""
    stack, in_string, escaped = [], False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append(ch)
        elif ch in "]}" and stack and stack[-1] == "[{"["]}".index(ch)]:
            stack.pop()
    names = ["a list" if c == "[" else "an object" for c in stack]
    return names + (["a string"] if in_string else [])


def json_error(arg: str, path, text: str, exc: json.JSONDecodeError, what: str = "JSON") -> str:
    """A one-line message for JSON that does not parse: a file that stops inside a string,
    list or object is named as cut short, with what is left open; otherwise the parser's
    reason and where (line, column)."""
    where = f"line {exc.lineno}, column {exc.colno}"
    still_open = _open_at_end(text)
    # a string open at the end of the file, or a list/object open where the parser stopped
    if still_open and (still_open[-1] == "a string" or exc.pos >= len(text.rstrip()) - 1):
        closers = {"a list": "]", "an object": "}", "a string": '"'}
        need = "".join(closers[k] for k in reversed(still_open))
        return (
            f"{arg}: {str(path)!r} is cut short: it ends inside {still_open[-1]} "
            f"(missing {need!r} at {where}); is the file truncated?"
        )
    return f"{arg}: {str(path)!r} is not {what} ({exc.msg} at {where})"


def read_json_file(arg: str, path, max_bytes: int):
    """The JSON data of file ``path``: no NaN/Infinity, bounded size and nesting."""
    text = read_text_file(arg, path, max_bytes)
    try:
        return json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise UsageError(f"{arg}: {str(path)!r} is nested too deeply") from None
    except json.JSONDecodeError as exc:
        raise UsageError(json_error(arg, path, text, exc)) from None
    except ValueError as exc:
        raise UsageError(f"{arg}: {str(path)!r} {exc}") from None


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.3g} GiB"


def ensure_memory(arg: str, nbytes: float, what: str) -> None:
    """Refuse (naming ``arg``) work that would hold ``nbytes`` at once, more than 80% of the
    memory available now (:func:`posflow.simulate.runtime.available_memory`)."""
    from posflow.simulate import runtime

    avail = runtime.available_memory()
    if not nbytes <= 0.8 * avail:
        raise UsageError(
            f"{arg}: {what} would need about {_gib(nbytes)} but only {_gib(avail)} of memory "
            "is available"
        )


# ------------------------------------------------------------------------------------------
# devices


def torch_device(arg: str, text: str):
    """A torch device that exists here, checked before anything is loaded (needs torch)."""
    import torch

    try:
        dev = torch.device(text)
    except (RuntimeError, ValueError, TypeError):
        raise UsageError(f"{arg} {text!r} is not a torch device (cpu, cuda, cuda:1)") from None
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(f"{arg} {text!r}: no CUDA device is available on this machine")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise UsageError(
                f"{arg} {text!r}: this machine has {torch.cuda.device_count()} CUDA device(s)"
            )
    elif dev.type == "mps":
        if not torch.backends.mps.is_available():
            raise UsageError(f"{arg} {text!r}: no MPS device is available on this machine")
    elif dev.type != "cpu":
        raise UsageError(f"{arg} {text!r}: posflow runs on cpu, cuda or mps")
    return dev


# ------------------------------------------------------------------------------------------
# JSON output


def first_nonfinite(obj, where: str = ""):
    """``(path, value)`` of the first NaN or infinity in nested dicts/lists, or None."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else (where or "value", obj)
    if isinstance(obj, dict):
        for k, v in obj.items():
            hit = first_nonfinite(v, f"{where}.{k}" if where else str(k))
            if hit:
                return hit
    elif isinstance(obj, list | tuple):
        for i, v in enumerate(obj):
            hit = first_nonfinite(v, f"{where}[{i}]")
            if hit:
                return hit
    return None


def print_json(obj, *, inputs: str, indent=None) -> None:
    """Print ``obj`` as valid JSON (no NaN/Infinity); a non-finite number is refused in one
    line that names the result field and the ``inputs`` (the options that produced it)."""
    hit = first_nonfinite(obj)
    if hit is not None:
        raise UsageError(
            f"{inputs}: the result {hit[0]} is {hit[1]} for these inputs; refusing to print a "
            "non-finite number"
        )
    print(json.dumps(obj, indent=indent, allow_nan=False))
