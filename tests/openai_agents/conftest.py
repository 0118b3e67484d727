"""OpenAI Agents SDK adapter tests: the refund example against the real SDK.

The SDK (the ``openai-agents`` extra) is required, not skipped: its model is
scripted, so nothing reaches a network. The repository root goes on
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
