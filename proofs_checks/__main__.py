"""``python -m proofs_checks`` runs the ``posflow`` command line."""

import sys

from proofs_checks.cli import main

sys.exit(main())
