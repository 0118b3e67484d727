"""An upgrade that reorders activities: the harness finds runs that never finish.

Release 2 notifies the customer before refunding. Shipped as a plain edit,
a run release 1 started -- its history holds the refund scheduled first --
no longer replays on release 2's workers: Temporal raises a nondeterminism
error on the workflow task and retries it forever, so the run stays
running (``progress``, ``migration_safety``). The activities are
``careful.py``'s: the refund is keyed.

    PYTHONPATH=. harness run --adapter harness.adapters.temporal:TemporalAdapter \\
        --adapter-opt app=examples.temporal_refund.reordered:APP
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from harness.adapters.temporal import TemporalApp

from ._refund import DELIVERY, OPTIONS, REFUND, RefundThenNotify, notify
from .careful import refund


@workflow.defn(name="refund")
class NotifyThenRefund:
    """Release 2: notify, then refund."""

    @workflow.run
    async def run(self, payload: dict[str, Any]) -> dict[str, Any]:
        await workflow.execute_activity("notify", payload, **OPTIONS)
        ref = await workflow.execute_activity("refund", payload, **OPTIONS)
        return {"refund_ref": ref, "amount_cents": payload["amount_cents"]}


APP = TemporalApp(
    workflows=(REFUND,),
    delivery=DELIVERY,
    code={1: [RefundThenNotify], None: [NotifyThenRefund]},
    activities=[refund, notify],
)
