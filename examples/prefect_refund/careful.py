"""The refund flow with an idempotency key from the flow run.

Every retry of a task and every retry of a crashed flow run keeps the flow
run's id, so each post of this run's refund carries the same key and the
payments API applies it once.

    harness run --adapter prefect --adapter-opt app=examples.prefect_refund.careful:APP
"""

from __future__ import annotations

from prefect import flow, runtime, task

from ._payments import post_refund


@task(retries=3)
def refund(customer_id: str, amount_cents: int, currency: str) -> str:
    key = f"{runtime.flow_run.id}:refund"
    return post_refund(customer_id, amount_cents, currency, key=key)


@flow(name="refund")
def refund_flow(customer_id: str, amount_cents: int, currency: str) -> dict[str, str]:
    return {"refund": refund(customer_id, amount_cents, currency)}


APP = refund_flow
