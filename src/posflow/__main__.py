"""``python -m posflow`` runs the ``posflow`` command line."""

import sys

from posflow.proofs_checks.cli import main

sys.exit(main())
