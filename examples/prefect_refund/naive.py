"""The refund flow as first written: the refund carries no idempotency key.

A worker killed after the payments API applied the refund leaves the flow
run ``RUNNING``; once it is marked crashed and retried, the flow runs again
from the top and the refund task posts again: two refunds
(``exactly_once_effects``). A lost reply the task's retries send again does
the same.

    harness run --adapter prefect --adapter-opt app=examples.prefect_refund.naive:APP
"""

from __future__ import annotations

from prefect import flow, task

from ._payments import post_refund


@task(retries=3)
def refund(customer_id: str, amount_cents: int, currency: str) -> str:
    return post_refund(customer_id, amount_cents, currency, key=None)


@flow(name="refund")
def refund_flow(customer_id: str, amount_cents: int, currency: str) -> dict[str, str]:
    return {"refund": refund(customer_id, amount_cents, currency)}


APP = refund_flow
