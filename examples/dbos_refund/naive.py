"""The refund app as it is usually first written. The harness finds two bugs.

* The refund step carries **no idempotency key**. DBOS checkpoints a step's
  output only after it returns: a worker killed after the payment service
  applied the refund (or a lost answer, retried) leaves no checkpoint, and
  the recovered workflow runs the step again -- two refunds
  (``exactly_once_effects``).
* Each release runs under an **application version of its own** (DBOS's
  default is a hash of the workflow code). DBOS recovers and dequeues only
  workflows of its own version, so a refund the previous release accepted
  and did not finish is never resumed by today's workers: it stays
  ``ENQUEUED`` or ``PENDING`` (``progress``, ``migration_safety``).

    PYTHONPATH=. harness run --adapter harness.adapters.dbos:DBOSAdapter \\
        --adapter-opt app=examples.dbos_refund.naive:APP
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from harness.adapters.dbos import DBOSApp, call, release

from ._refund import DELIVERY, REFUND, request_of, validate


@DBOS.step(name="naive.validate")
def check(payload: dict[str, Any]) -> None:
    validate(payload)


@DBOS.step(name="naive.refund_payment")
def refund_payment(payload: dict[str, Any]) -> str:
    return call("payments", "refund", request_of(payload)).external_ref


@DBOS.workflow(name="naive.refund")
def refund(payload: dict[str, Any]) -> dict[str, Any]:
    if release() != 1:
        check(payload)  # release 2 added this step
    ref = refund_payment(payload)
    return {"refund_ref": ref, "amount_cents": payload["amount_cents"]}


APP = DBOSApp(
    name="refund-naive",
    module=__name__,
    workflows=(REFUND,),
    delivery=DELIVERY,
    versions={1: "refund-naive-r1", None: "refund-naive-r2"},
    entry={"refund": "naive.refund"},
)
