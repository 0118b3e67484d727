"""DBOS adapter tests: the refund example against real DBOS.

The repository root goes on ``sys.path`` (``examples`` lives there), and with
it the fork servers' path. Without the ``dbos`` extra the tests skip, unless
``HARNESS_REQUIRE_SERVICES=1`` (CI), where that is a failure. Postgres tests
take the ``postgres_url`` fixture (tests/conftest.py): skipped without
``HARNESS_POSTGRES_URL``, failed in CI.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reference_runtime import service_urls

if not service_urls.services_required():
    pytest.importorskip("dbos", reason="needs the dbos extra")

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
