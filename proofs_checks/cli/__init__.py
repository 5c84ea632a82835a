"""The ``posflow`` command line: one subcommand a module, shared argument checks in ``_common``."""

from posflow.proofs_checks.cli._app import build_parser, main
from posflow.proofs_checks.cli._common import UsageError

__all__ = ["UsageError", "build_parser", "main"]
