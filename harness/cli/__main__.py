"""``python -m harness.cli``: the ``harness`` command."""

import sys

from . import main

sys.exit(main())
