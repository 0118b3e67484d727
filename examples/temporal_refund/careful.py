"""The refund app written to survive crashes and lost answers.

The refund carries an **idempotency key from the workflow id and the
activity id**: every attempt of one activity -- the retry after a killed
worker, after a lost answer -- sends the same key, and the payment service
applies it once. Not from the attempt number, nor a fresh uuid: those change
between attempts.

    PYTHONPATH=. harness run --adapter harness.adapters.temporal:TemporalAdapter \\
        --adapter-opt app=examples.temporal_refund.careful:APP
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from harness.adapters.temporal import TemporalApp, call

from ._refund import DELIVERY, REFUND, RefundThenNotify, notify, request_of


@activity.defn(name="refund")
def refund(payload: dict[str, Any]) -> str:
    info = activity.info()
    key = f"{info.workflow_id}:{info.activity_id}"
    return call("payments", "refund", request_of(payload), key=key).external_ref


APP = TemporalApp(
    workflows=(REFUND,),
    delivery=DELIVERY,
    code={None: [RefundThenNotify]},
    activities=[refund, notify],
)
