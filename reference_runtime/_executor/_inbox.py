"""Waiting on the inbox: events, webhooks and an operator's resolution.

A waiting run reads its pending inbound messages in order. Every message it
reads is acknowledged in the same commit as the state change it causes (or, if
it causes none, in a commit of its own), so a message is acted on exactly once
even if the worker dies in between; a message that does not match the wait is
acknowledged with an audit event saying why it was ignored.
"""

from __future__ import annotations

from typing import Any, NoReturn

from .._records import AuditEvent, InboxMessage, OperationStatus, Run
from .._states import RunStatus
from .._workflows import Definition
from ..store import Snapshot
from ._sites import INBOX_ACK
from ._step import StepContext, Yield

S = RunStatus
OS = OperationStatus


def ignored(sc: StepContext, run: Run, action: str, message_id: str, reason: str) -> AuditEvent:
    """The audit event for a message read but not acted on."""
    now = sc.now()
    return AuditEvent(
        tenant=run.tenant,
        created_at=now,
        updated_at=now,
        run_id=run.run_id,
        at=now,
        actor=sc.worker_id,
        action=action,
        detail={"message_id": message_id, "reason": reason},
    )


def end_wait(
    sc: StepContext,
    run: Run,
    acks: tuple[str, ...],
    audits: tuple[AuditEvent, ...],
    **commit: Any,
) -> Run:
    """Commit the end of ``run``'s wait with the messages it read acknowledged
    and the ignored ones audited."""
    return sc.commit(
        run, inbox_acked=acks, extra_audit=audits, waiting_on=None, wake_at=None, **commit
    )


def ack_and_wait(
    sc: StepContext, run: Run, acks: tuple[str, ...], audits: tuple[AuditEvent, ...]
) -> NoReturn:
    """Keep waiting; acknowledge the messages read (none matched) first."""
    if acks:
        with sc.crossing(INBOX_ACK):
            sc.commit(run, inbox_acked=acks, extra_audit=audits, action="inbox")
    raise Yield


def on_event_wait(sc: StepContext, snap: Snapshot, d: Definition, payload: dict[str, Any]) -> None:
    run, now = snap.run, sc.now()
    waiting = run.waiting_on or ""
    key = waiting.split(":", 1)[1] if ":" in waiting else waiting
    operator = waiting.startswith("operator:")
    acked: list[str] = []
    skipped: list[AuditEvent] = []
    match: InboxMessage | None = None
    for msg in snap.pending_inbox:
        acked.append(msg.message_id)
        want = waiting if operator else key
        if msg.kind in ("event", "webhook") and msg.payload.get("event_key") == want:
            match = msg
            break
        skipped.append(ignored(sc, run, "event_ignored", msg.message_id, f"waits on {waiting}"))
    acks, audits = tuple(acked), tuple(skipped)
    if match is not None and operator:
        resolve_by_operator(sc, snap, d, key, match, acks, audits)
        return
    if match is not None:
        events = {**payload.get("_events", {}), key: match.payload.get("data")}
        with sc.crossing(INBOX_ACK):
            end_wait(
                sc,
                run,
                acks,
                audits,
                status=S.RUNNING,
                action="event",
                state=sc.state(snap, {**payload, "_events": events}),
                detail={"event_key": key, "message_id": match.message_id},
            )
        return
    if run.wake_at is not None and now >= run.wake_at:
        # The ignored messages are acknowledged, not audited, on a timeout.
        end_wait(
            sc,
            run,
            acks,
            (),
            status=S.FAILED,
            action="timeout",
            error=f"timed out waiting for {waiting}",
        )
        raise Yield
    ack_and_wait(sc, run, acks, audits)


def resolve_by_operator(
    sc: StepContext,
    snap: Snapshot,
    d: Definition,
    op_id: str,
    msg: InboxMessage,
    acks: tuple[str, ...],
    audits: tuple[AuditEvent, ...],
) -> None:
    """An operator tells whether an effect of unknown outcome was applied."""
    run, now = snap.run, sc.now()
    op = next(o for o in snap.operations if o.op_id == op_id)
    data = msg.payload.get("data") or {}
    applied = bool(data.get("applied"))
    if applied:
        new_op = op.model_copy(
            update={
                "status": OS.RECONCILED,
                "external_ref": data.get("external_ref"),
                "response": {},
                "updated_at": now,
            }
        )
        next_step = d.after(run.current_step) if run.current_step in d.steps else "done"
    else:
        new_op = op.model_copy(update={"status": OS.FAILED, "updated_at": now})
        next_step = run.current_step
    with sc.crossing(INBOX_ACK):
        end_wait(
            sc,
            run,
            acks,
            audits,
            status=S.RUNNING,
            action="operator_resolution",
            operations=(new_op,),
            current_step=next_step,
            detail={"op_id": op_id, "applied": applied},
        )
