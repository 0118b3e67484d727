"""The refund workflow's resilience suite: the file a user adds to CI.

    PYTHONPATH=. pytest examples/temporal_refund/test_resilience.py

One test per property, for today's careful app and for the release that
ships the new order behind ``workflow.patched()``; the adapter starts a
Temporal dev server for each. The profile comes from ``--harness-profile``
(or ``CI=1`` for ``ci``), ``HARNESS_MAX_EXAMPLES`` bounds the search. Each
scenario runs on real time (a killed worker's refund is retried after its
two-second timeout): a few seconds each.
"""

from __future__ import annotations

from harness.testing import resilience_suite

ADAPTER = "harness.adapters.temporal:TemporalAdapter"

TestRefundWorkflow = resilience_suite(ADAPTER, app="examples.temporal_refund.careful:APP")
TestPatchedUpgrade = resilience_suite(ADAPTER, app="examples.temporal_refund.patched:APP")
