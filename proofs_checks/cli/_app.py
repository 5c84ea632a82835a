"""The ``posflow`` parser and entry point: one subcommand a module of this package.

``main`` catches only bad input: :class:`~posflow.proofs_checks.cli._common.UsageError`, a
ValueError/TypeError the library raises for a bad argument (its message names the argument), and
BrokenPipeError when the reader of stdout has gone (``posflow … | head``), which ends quietly,
and KeyboardInterrupt (Ctrl-C): one line ``posflow CMD: interrupted``, exit code 130.
Everything else is a bug and keeps its traceback. Under shell completion (argcomplete's
``_ARGCOMPLETE`` set) ``main`` prints the completions and exits before parsing.
"""

from __future__ import annotations

import importlib
import os
import sys

from posflow.proofs_checks.cli._common import Parser, UsageError, one_line

__all__ = ["SUBCOMMANDS", "build_parser", "main"]

# modules of this package, each with add_parser(subparsers); none imports torch or dask at load
SUBCOMMANDS = (
    "verify", "claims", "rollout", "counterexample", "measure", "models", "extrapolate", "sweep",
    "sinks",
)  # fmt: skip


def build_parser() -> Parser:
    """The ``posflow`` argument parser with every subcommand."""
    p = Parser(
        prog="posflow",
        description="Check the claims of [A] position bias and [B] length extrapolation; run "
        "rollouts, counterexample searches, model measurements and sweeps.",
    )
    sub = p.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"posflow.proofs_checks.cli.{name}").add_parser(sub)
    return p


def _fail(prog: str, message: str) -> int:
    print(f"{prog}: error: {one_line(message)}", file=sys.stderr, flush=True)
    return 2


def _stdout_to_devnull() -> None:
    """After EPIPE: point fd 1 at /dev/null so the flush at exit cannot fail again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # a captured or replaced stdout
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _complete(parser) -> None:
    """Shell completion by argcomplete (returns at once unless the shell asked for it)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    try:
        import argcomplete
    except ImportError:  # pragma: no cover - a dependency; completion is then silently off
        return
    argcomplete.autocomplete(parser)


def main(argv=None) -> int:
    """Run ``posflow ARGV``; returns the exit code (0 ok, 1 a claim crashed or the output pipe
    closed, 2 bad input)."""
    parser = build_parser()
    _complete(parser)
    prog = "posflow"
    try:
        args, extra = parser.parse_known_args(argv)
        if not getattr(args, "command", None):
            parser.print_help()
            return 2
        prog = f"posflow {args.command}"
        if extra:
            raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
        code = args.func(args)
        sys.stdout.flush()
        return code
    except UsageError as exc:
        return _fail(exc.prog or prog, str(exc))
    except (ValueError, TypeError) as exc:
        return _fail(prog, str(exc) or type(exc).__name__)
    except BrokenPipeError:
        _stdout_to_devnull()
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line, the shell's code for SIGINT
        print(f"{prog}: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
