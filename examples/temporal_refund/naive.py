"""The refund app as it is usually first written: the harness finds a double refund.

The refund activity carries **no idempotency key**. Temporal runs an
activity at least once: a worker killed after the payment service applied
the refund never reports the attempt, Temporal retries it once its
``start_to_close_timeout`` has passed, and the retry refunds again
(``exactly_once_effects``). A lost answer (the service applied it, the
activity raised) is retried the same way.

    PYTHONPATH=. harness run --adapter harness.adapters.temporal:TemporalAdapter \\
        --adapter-opt app=examples.temporal_refund.naive:APP
"""

from __future__ import annotations

from typing import Any

from temporalio import activity

from harness.adapters.temporal import TemporalApp, call

from ._refund import DELIVERY, REFUND, RefundThenNotify, notify, request_of


@activity.defn(name="refund")
def refund(payload: dict[str, Any]) -> str:
    return call("payments", "refund", request_of(payload)).external_ref


APP = TemporalApp(
    workflows=(REFUND,),
    delivery=DELIVERY,
    code={None: [RefundThenNotify]},
    activities=[refund, notify],
)
