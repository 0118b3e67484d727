"""What every version of the refund app shares: the spec, the activities'
options, the notification, and release 1's workflow (refund, then notify).

A refund activity may take up to two seconds (``start_to_close_timeout``):
an attempt not finished by then -- its worker died -- is retried, and the
retry may run the refund again.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from harness.adapters import WorkflowSpec
from harness.adapters.temporal import call

REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 99_00, "currency": "USD"},
    ),
    effects=("payments.refund", "email.notify"),
)
DELIVERY = {"payments.refund": "exactly_once", "email.notify": "at_least_once"}
#: How every activity runs: retried every 100 ms, each attempt given 2 s.
OPTIONS: dict[str, Any] = {
    "start_to_close_timeout": timedelta(seconds=2),
    "retry_policy": RetryPolicy(
        initial_interval=timedelta(milliseconds=100), backoff_coefficient=1
    ),
}


def request_of(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The payments service's refund request for a run's input."""
    return {k: payload[k] for k in ("customer_id", "amount_cents", "currency")}


@activity.defn(name="notify")
def notify(payload: dict[str, Any]) -> None:
    """Tell the customer (an email: at least once is fine)."""
    call("email", "notify", {"to": payload["customer_id"], "template": "refund"})


@workflow.defn(name="refund")
class RefundThenNotify:
    """Release 1 (and today's naive and careful apps): refund, then notify."""

    @workflow.run
    async def run(self, payload: dict[str, Any]) -> dict[str, Any]:
        ref = await workflow.execute_activity("refund", payload, **OPTIONS)
        await workflow.execute_activity("notify", payload, **OPTIONS)
        return {"refund_ref": ref, "amount_cents": payload["amount_cents"]}
