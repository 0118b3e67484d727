"""What the harness knows of the refund flows (they know nothing of it).

The flows read ``PAYMENTS_API_URL``; the adapter points it at the world's
HTTP face. A run's input is the flow's parameters.
"""

from __future__ import annotations

from harness.adapters import WorkflowSpec
from harness.adapters.prefect import PrefectWorkload

REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 9900, "currency": "USD"},
    ),
    effects=("payments.refund",),
)

WORKLOAD = PrefectWorkload(
    workflows=(REFUND,),
    delivery={"payments.refund": "exactly_once"},
    env={"PAYMENTS_API_URL": "{url}"},
)
