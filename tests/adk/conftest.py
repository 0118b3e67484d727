"""Google ADK adapter tests: the refund example against the real ADK.

Each module is skipped, with the reason, when google-adk (the ``adk``
extra) is not installed (``adk_support.ADK``). Nothing reaches a network:
the model is the world's scripted endpoint. The repository root goes on
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
