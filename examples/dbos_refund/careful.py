"""The refund app written to survive crashes, lost answers and an upgrade
with the previous release's workers still serving.

* The refund carries an **idempotency key from the workflow id and the
  step's name**: a recovered workflow that runs the step again sends the same
  key, and the payment service applies it once. Not from ``DBOS.step_id``:
  the step's number moves when a release adds a step before it, and a run
  started by one release and recovered by the other would send another key.
* The step **retries** a lost answer (``Unknown``) or a refusal with that
  key (DBOS step retries, a few attempts), then lets the workflow fail.
* Both releases run under **one application version**, so today's workers
  recover what the previous release left pending.
* Release 2's validation is **not a new step**: a pure check in the workflow
  body, which adds no checkpoint (workflow code between steps runs again on
  every recovery). A run holds the same steps whichever release ran it, so
  an old worker may recover a run today's worker started, and the other way
  round: in a rolling deploy, or a rollback, both happen. A new step behind
  ``DBOS.patch`` is safe only once no old process runs (``patched.py``: an
  old worker meeting the patch marker fails the run).

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
    if release() != 1:
        validate(payload)  # release 2's check: no step, so no checkpoint
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
