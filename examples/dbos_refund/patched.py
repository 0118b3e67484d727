"""The careful refund app with release 2's step shipped as a DBOS patch.

Everything ``careful.py`` does, except that release 2's validation is a
**step of its own behind** ``DBOS.patch("validate-before-refund")``, under
the one application version both releases share, as DBOS's docs describe
patching. DBOS makes a patch safe once no process runs the code from before
it: pre-patch code that recovers a workflow holding the patch marker meets a
checkpoint it does not know (``DBOSUnexpectedStepError``). The harness runs
the previous release's workers beside today's (a rolling deploy, a
rollback), and finds that (``migration_safety``): release 2 takes a run
release 1 accepted, records the marker and is killed before the refund;
release 1 recovers it and the run ends in ``ERROR``, unrefunded.
``careful.py`` makes the same change without a new step.

    PYTHONPATH=. harness run --adapter harness.adapters.dbos:DBOSAdapter \\
        --adapter-opt app=examples.dbos_refund.patched:APP
"""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from harness.adapters.dbos import DBOSApp, call, release

from ._refund import DELIVERY, REFUND, request_of, validate

#: Attempts of the refund step (a lost answer is retried with the same key).
ATTEMPTS = 4


@DBOS.step(name="patched.validate")
def check(payload: dict[str, Any]) -> None:
    validate(payload)


@DBOS.step(
    name="patched.refund_payment",
    retries_allowed=True,
    max_attempts=ATTEMPTS,
    interval_seconds=0.01,
    backoff_rate=1.0,
)
def refund_payment(payload: dict[str, Any]) -> str:
    key = f"{DBOS.workflow_id}:refund"
    return call("payments", "refund", request_of(payload), key=key).external_ref


@DBOS.workflow(name="patched.refund")
def refund(payload: dict[str, Any]) -> dict[str, Any]:
    if release() != 1 and DBOS.patch("validate-before-refund"):
        check(payload)  # release 2's step, as a patch
    ref = refund_payment(payload)
    return {"refund_ref": ref, "amount_cents": payload["amount_cents"]}


APP = DBOSApp(
    name="refund-patched",
    module=__name__,
    workflows=(REFUND,),
    delivery=DELIVERY,
    versions={1: "refund-patched", None: "refund-patched"},
    entry={"refund": "patched.refund"},
)
