"""Effects: persist intent, call with the idempotency key, record the result.

An intent found without a result means "we may have called": the run
reconciles (asks the service by key or business key) before any retry. A
service that can neither deduplicate nor be asked gets a ``sent`` mark before
the call; an unknown outcome after it is handed to an operator (at-most-once)
or resent (at-least-once), as the effect kind declares. An approval-gated
effect is re-authorized before every send.
"""

from __future__ import annotations

from typing import Any, NoReturn

from .. import crashpoints as cp
from .._errors import LeaseLostError, OutcomeUnknown, ServiceRejected
from .._model import CallTool
from .._records import Delivery, Operation, OperationStatus, Run, stable_hash
from .._services import CallContext, ServiceResponse
from .._states import RunStatus
from .._workflows import Definition
from ..store import Snapshot
from ._approval_steps import recheck_approval
from ._context import idempotency_key, op_id_for
from ._sites import INTENT_COMMIT, RECONCILE_LOOKUP, RESULT_COMMIT, SENT_MARK
from ._step import StepContext, Yield

S = RunStatus
OS = OperationStatus


def pending_op(snap: Snapshot) -> Operation | None:
    """The current step's operation whose outcome is not recorded yet, if any."""
    oid = op_id_for(snap.run.run_id, snap.run.current_step)
    for op in snap.operations:
        if op.op_id == oid and op.status in (OS.PREPARED, OS.SENT, OS.UNKNOWN):
            return op
    return None


def capabilities(sc: StepContext, op: Operation) -> Any:
    assert sc.services is not None
    return sc.services.capabilities(op.kind.split(".", 1)[0])


def unreconcilable(sc: StepContext, op: Operation) -> bool:
    caps = capabilities(sc, op)
    return not (caps.idempotency_keys or caps.lookup_by_key or caps.lookup_by_business_key)


def call_tool(sc: StepContext, snap: Snapshot, payload: dict[str, Any], a: CallTool) -> None:
    run, now = snap.run, sc.now()
    kind = f"{a.service}.{a.action}"
    request_hash = stable_hash(a.request)
    if a.requires_approval is not None:
        recheck_approval(sc, snap, run, a.requires_approval, kind, request_hash)
    oid = op_id_for(run.run_id, run.current_step)
    previous = next((o for o in snap.operations if o.op_id == oid), None)
    op = Operation(
        tenant=run.tenant,
        created_at=previous.created_at if previous else now,
        updated_at=now,
        op_id=oid,
        run_id=run.run_id,
        step=run.current_step,
        kind=kind,
        idempotency_key=idempotency_key(run.tenant, run.run_id, run.current_step),
        business_key=a.business_key,
        request_hash=request_hash,
        request=a.request,
        status=OS.PREPARED,
        delivery=a.delivery,
        attempts=(previous.attempts + 1) if previous else 1,
        approval_id=a.requires_approval,
    )
    if "effect-before-intent" in sc.settings.bugs:
        # SEEDED BUG effect-before-intent: "one commit per effect is
        # enough": call first, then record intent and result together.
        send(sc, snap, run, payload, op, a.next_step, intent_persisted=False)
        return
    with sc.crossing(INTENT_COMMIT):
        run = sc.commit(
            run,
            action="effect_intent",
            operations=(op,),
            detail={"op_id": oid, "kind": kind, "idempotency_key": op.idempotency_key},
        )
    send(sc, snap, run, payload, op, a.next_step)


def send(
    sc: StepContext,
    snap: Snapshot,
    run: Run,
    payload: dict[str, Any],
    op: Operation,
    next_step: str,
    *,
    intent_persisted: bool = True,
) -> None:
    """Call the service for a persisted intent and record the outcome."""
    assert sc.services is not None
    service, action = op.kind.split(".", 1)
    if unreconcilable(sc, op) and intent_persisted:
        # Nothing can tell us later whether the call happened, so record
        # that we are about to make it: an intent without this mark was
        # certainly never sent.
        op = op.model_copy(update={"status": OS.SENT, "updated_at": sc.now()})
        with sc.crossing(SENT_MARK):
            run = sc.commit(run, action="effect_sent", operations=(op,), detail={"op_id": op.op_id})
    claim = sc.renew_lease()
    cp.hit("before_external_call")
    # A paused worker may wake up here long after its lease ran out; the
    # store would refuse its next commit, but the call would already be
    # out. Check the lease against the clock right before calling.
    if sc.now() + sc.settings.lease_margin > claim.lease_expiry:
        raise LeaseLostError(
            run.run_id,
            sc.worker_id,
            claim.fencing_token,
            "lease too close to expiry to start an external call",
        )
    try:
        response = sc.services.call(
            service,
            action,
            op.request,
            # SEEDED BUG no-idempotency-key: the key is computed and
            # stored for reconciliation, but never sent with the call.
            idempotency_key=(
                None if "no-idempotency-key" in sc.settings.bugs else op.idempotency_key
            ),
            business_key=op.business_key,
            context=CallContext(
                tenant=run.tenant,
                run_id=run.run_id,
                op_id=op.op_id,
                worker_id=sc.worker_id,
                fencing_token=claim.fencing_token,
            ),
        )
    except ServiceRejected as exc:
        cp.hit("after_external_call")
        rejected(sc, run, op, str(exc))
        return
    except OutcomeUnknown as exc:
        cp.hit("after_external_call")
        with sc.crossing(RESULT_COMMIT):
            unknown = op.model_copy(update={"status": OS.UNKNOWN, "updated_at": sc.now()})
            sc.commit(
                run,
                status=S.RECONCILING,
                action="effect_unknown",
                operations=(unknown,),
                detail={"op_id": op.op_id, "reason": str(exc)},
            )
        return
    cp.hit("after_external_call")
    record_result(sc, snap, run, payload, op, response, OS.CONFIRMED, next_step)


def record_result(
    sc: StepContext,
    snap: Snapshot,
    run: Run,
    payload: dict[str, Any],
    op: Operation,
    response: ServiceResponse,
    status: OperationStatus,
    next_step: str,
) -> None:
    done = op.model_copy(
        update={
            "status": status,
            "external_ref": response.external_ref,
            "response": dict(response.body),
            "updated_at": sc.now(),
        }
    )
    with sc.crossing(RESULT_COMMIT):
        sc.commit(
            run,
            status=S.RUNNING,
            action="effect_confirmed" if status is OS.CONFIRMED else "effect_reconciled",
            operations=(done,),
            state=sc.state(snap, payload),
            current_step=next_step,
            attempt=0,
            detail={
                "op_id": op.op_id,
                "external_ref": response.external_ref,
                "deduplicated": response.deduplicated,
            },
        )


def rejected(sc: StepContext, run: Run, op: Operation, reason: str) -> NoReturn:
    failed = op.model_copy(update={"status": OS.FAILED, "updated_at": sc.now()})
    sc.retry_later(
        run,
        what=f"{op.kind} rejected",
        reason=reason,
        action="effect_rejected",
        operations=(failed,),
        detail={"op_id": op.op_id},
    )


def reconcile(
    sc: StepContext, snap: Snapshot, d: Definition, payload: dict[str, Any], op: Operation | None
) -> None:
    """Resolve an operation whose outcome is unknown before any retry."""
    assert sc.services is not None
    run = snap.run
    next_step = d.after(run.current_step) if run.current_step in d.steps else "done"
    if op is None:
        # Nothing in flight (the result was recorded by a racing worker
        # or the operation was resolved): simply continue.
        sc.commit(run, status=S.RUNNING, action="reconciled_nothing")
        return
    service = op.kind.split(".", 1)[0]
    caps = capabilities(sc, op)
    found: ServiceResponse | None = None
    can_resend = caps.idempotency_keys
    try:
        if caps.lookup_by_key:
            with sc.crossing(RECONCILE_LOOKUP):
                found = sc.services.lookup(
                    service, idempotency_key=op.idempotency_key, tenant=run.tenant
                )
            can_resend = True
        elif caps.lookup_by_business_key and op.business_key:
            with sc.crossing(RECONCILE_LOOKUP):
                found = sc.services.lookup(service, business_key=op.business_key, tenant=run.tenant)
            can_resend = True
    except (ServiceRejected, OutcomeUnknown) as exc:
        # The service cannot answer now: try again later, never guess.
        sc.commit(
            run,
            status=S.RETRY_SCHEDULED,
            action="reconcile_deferred",
            attempt=run.attempt + 1,
            wake_at=sc.now() + sc.settings.retry_backoff,
            detail={"op_id": op.op_id, "reason": str(exc)},
        )
        raise Yield from exc
    if found is not None:
        record_result(sc, snap, run, payload, op, found, OS.RECONCILED, next_step)
        return
    at_most_once = op.delivery is Delivery.AT_MOST_ONCE
    if not can_resend and op.status is not OS.PREPARED and at_most_once:
        # Sent or maybe sent, and nobody can tell: an operator must.
        sc.commit_and_yield(
            run,
            status=S.WAITING_FOR_EVENT,
            action="needs_operator",
            operations=(op.model_copy(update={"status": OS.UNKNOWN}),),
            waiting_on=f"operator:{op.op_id}",
            wake_at=None,
            detail={"op_id": op.op_id, "kind": op.kind},
        )
    if op.approval_id is not None and can_resend:
        # The service says it was not applied: re-check the approval before
        # sending again (it may have expired while the run was down).
        failed = op.model_copy(update={"status": OS.FAILED, "updated_at": sc.now()})
        recheck_approval(
            sc, snap, run, op.approval_id, op.kind, op.request_hash, operations=(failed,)
        )
    # Not applied (or safe to repeat): send again with the same key.
    resend = op.model_copy(update={"status": OS.PREPARED, "attempts": op.attempts + 1})
    run = sc.commit(
        run,
        status=S.RUNNING,
        action="reconciled_resend",
        operations=(resend,),
        detail={"op_id": op.op_id},
    )
    send(sc, snap, run, payload, resend, next_step)
