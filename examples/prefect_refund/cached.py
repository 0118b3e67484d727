"""The refund flow made "safe to re-run" with Prefect's caching instead of a key.

The refund task persists its result under a cache key from the flow run:
when a crashed flow run is retried after the task *completed*, Prefect finds
the cached result and does not run the task again. But a worker killed
*during* the task -- after the payments API applied the refund, before the
result was persisted -- leaves nothing cached, and the retry refunds again
(Prefect 3 in docs/findings.md).

    harness run --adapter prefect --adapter-opt app=examples.prefect_refund.cached:APP
"""

from __future__ import annotations

from typing import Any

from prefect import flow, task
from prefect.context import TaskRunContext

from ._payments import post_refund


def by_flow_run(context: TaskRunContext, parameters: dict[str, Any]) -> str:
    """One cache entry per flow run: the same for every retry of it."""
    return f"{context.task_run.flow_run_id}:refund"


@task(retries=3, persist_result=True, cache_key_fn=by_flow_run)
def refund(customer_id: str, amount_cents: int, currency: str) -> str:
    return post_refund(customer_id, amount_cents, currency, key=None)


@flow(name="refund")
def refund_flow(customer_id: str, amount_cents: int, currency: str) -> dict[str, str]:
    return {"refund": refund(customer_id, amount_cents, currency)}


APP = refund_flow
