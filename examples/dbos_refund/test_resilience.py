"""The refund app's resilience suite: the file a user adds to CI.

    PYTHONPATH=. pytest examples/dbos_refund/test_resilience.py

One test per property, for each system database; the Postgres suite needs
``HARNESS_POSTGRES_URL``. The profile comes from ``--harness-profile`` (or
``CI=1`` for ``ci``), ``HARNESS_MAX_EXAMPLES`` bounds the search.
"""

from __future__ import annotations

import os

import pytest

from harness.testing import resilience_suite

ADAPTER = "harness.adapters.dbos:DBOSAdapter"
APP = "examples.dbos_refund.careful:APP"

TestRefundOnSqlite = resilience_suite(ADAPTER, app=APP)
TestRefundOnPostgres = pytest.mark.skipif(
    not os.environ.get("HARNESS_POSTGRES_URL"), reason="needs HARNESS_POSTGRES_URL"
)(resilience_suite(ADAPTER, app=APP, database="postgres"))
