"""Prefect adapter tests: the refund flows against a real Prefect server.

Each module is skipped, with the reason, when prefect (the ``prefect``
extra) is not installed (``prefect_support.PREFECT``). Nothing leaves loopback:
the server is the adapter's own. The repository root goes on
``sys.path`` (``examples`` lives there), and with it the fork servers' path.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for folder in (HERE, ROOT):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
