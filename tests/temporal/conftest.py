"""Temporal adapter tests: the refund example against a real Temporal dev server.

The repository root goes on ``sys.path`` (``examples`` lives there), and with
it the fork servers' path; so does this folder (shared helpers). Without the
``temporal`` extra the tests skip, unless ``HARNESS_REQUIRE_SERVICES=1``
(CI), where that is a failure. Every scenario runs on real time (a killed
worker's activity is retried after a two-second timeout): each search here
is bounded to a few scenarios.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reference_runtime import service_urls

if not service_urls.services_required():
    pytest.importorskip("temporalio", reason="needs the temporal extra")

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parents[1]):  # test_temporal_search's helpers; examples
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
