"""The refund app written to survive crashes, lost answers and an upgrade.

* The refund carries an **idempotency key from the workflow id and the
  step's name**: a recovered workflow that runs the step again sends the same
  key, and the payment service applies it once. Not from ``DBOS.step_id``:
  the step's number moves when a release adds a step before it (below), and
  a run started by release 1 and recovered by release 2 would then send
  another key.
* The step **retries** a lost answer (``Unknown``) or a refusal with that
  key (DBOS step retries, a few attempts), then lets the workflow fail.
* Both releases run under **one application version**, and release 2's new
  validation step is a **DBOS patch** (``DBOS.patch``): a workflow release 1
  started past that point replays without it, a new one takes it. Today's
  workers therefore recover what the previous release left pending.

    PYTHONPATH=. harness run --adapter harness.adapters.dbos:DBOSAdapter \\
        --adapter-opt app=examples.dbos_refund.careful:APP
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from harness.adapters.dbos import DBOSApp, call, release

from ._refund import DELIVERY, REFUND, request_of, validate

#: Attempts of the refund step (a lost answer is retried with the same key).
ATTEMPTS = 4


@DBOS.step(name="careful.validate")
def check(payload: dict[str, Any]) -> None:
    validate(payload)


@DBOS.step(
    name="careful.refund_payment",
    retries_allowed=True,
    max_attempts=ATTEMPTS,
    interval_seconds=0.01,
    backoff_rate=1.0,
)
def refund_payment(payload: dict[str, Any]) -> str:
    key = f"{DBOS.workflow_id}:refund"
    return call("payments", "refund", request_of(payload), key=key).external_ref


@DBOS.workflow(name="careful.refund")
def refund(payload: dict[str, Any]) -> dict[str, Any]:
    if release() != 1 and DBOS.patch("validate-before-refund"):
        check(payload)  # release 2's step, as a patch
    ref = refund_payment(payload)
    return {"refund_ref": ref, "amount_cents": payload["amount_cents"]}


APP = DBOSApp(
    name="refund-careful",
    module=__name__,
    workflows=(REFUND,),
    delivery=DELIVERY,
    versions={1: "refund-careful", None: "refund-careful"},
    entry={"refund": "careful.refund"},
)
