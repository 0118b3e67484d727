"""What the harness knows of the refund apps (they know nothing of it).

The apps read ``PAYMENTS_API_URL`` and ``REFUND_MODEL_URL``; the adapter points
both at the world's HTTP face. The world's model acts on the request: it
calls ``refund`` with the customer's request (the last user message that is
JSON) unless the conversation's last turn is a tool result, then answers.
"""

from __future__ import annotations

from harness.adapters import WorkflowSpec
from harness.adapters.adk import ADKWorkload

REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 9900, "currency": "USD"},
    ),
    effects=("payments.refund",),
)

WORKLOAD = ADKWorkload(
    workflows=(REFUND,),
    delivery={"payments.refund": "exactly_once"},
    env={"PAYMENTS_API_URL": "{url}", "REFUND_MODEL_URL": "{url}/v1"},
    script={
        "steps": [
            {"tool": "refund", "arguments": "$request"},
            {"content": "Refunded: $tool_output"},
        ]
    },
)
