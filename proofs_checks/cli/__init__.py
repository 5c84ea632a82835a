# PYTHON_ARGCOMPLETE_OK  (argcomplete looks for this marker in the entry point's module)
"""The ``posflow`` command line: one subcommand a module, shared argument checks in ``_common``.

Shell completion comes from argcomplete, argparse's completion library: after
``eval "$(register-python-argcomplete posflow)"`` (bash/zsh; ``activate-global-python-argcomplete``
for every argcomplete program) the shell completes subcommands, options, choices and paths.
"""

from posflow.proofs_checks.cli._app import build_parser, main
from posflow.proofs_checks.cli._common import UsageError

__all__ = ["UsageError", "build_parser", "main"]
