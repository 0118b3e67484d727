"""The same upgrade behind ``workflow.patched()``: every run finishes.

Release 2 notifies first only in runs that take the patch: a new run (not
replaying) records the patch marker and takes the new order; a run release
1 started replays without the marker and keeps the old order. The refund's
key (workflow id and activity id) is the run's own either way.

    PYTHONPATH=. harness run --adapter harness.adapters.temporal:TemporalAdapter \\
        --adapter-opt app=examples.temporal_refund.patched:APP
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from harness.adapters.temporal import TemporalApp

from ._refund import DELIVERY, OPTIONS, REFUND, RefundThenNotify, notify
from .careful import refund


@workflow.defn(name="refund")
class PatchedRefund:
    """Release 2: notify first, behind a patch."""

    @workflow.run
    async def run(self, payload: dict[str, Any]) -> dict[str, Any]:
        first = workflow.patched("notify-first")
        if first:
            await workflow.execute_activity("notify", payload, **OPTIONS)
        ref = await workflow.execute_activity("refund", payload, **OPTIONS)
        if not first:
            await workflow.execute_activity("notify", payload, **OPTIONS)
        return {"refund_ref": ref, "amount_cents": payload["amount_cents"]}


APP = TemporalApp(
    workflows=(REFUND,),
    delivery=DELIVERY,
    code={1: [RefundThenNotify], None: [PatchedRefund]},
    activities=[refund, notify],
)
