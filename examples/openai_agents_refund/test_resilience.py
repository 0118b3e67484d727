"""The refund agent's resilience suite: the file a user adds to CI.

    PYTHONPATH=. pytest examples/openai_agents_refund/test_resilience.py

One test per property. The profile comes from ``--harness-profile`` (or
``CI=1`` for ``ci``), ``HARNESS_MAX_EXAMPLES`` bounds the search.
"""

from __future__ import annotations

from harness.testing import resilience_suite

ADAPTER = "harness.adapters.openai_agents:OpenAIAgentsAdapter"

TestRefundAgent = resilience_suite(ADAPTER, app="examples.openai_agents_refund.careful:APP")
