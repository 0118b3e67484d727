"""Approvals as steps: requesting one, waiting for the decision, and the gate
every approval-gated effect passes before each send.

The rules of what a valid decision is (signature, parameters, expiry) live in
:mod:`reference_runtime._approvals`; this module applies them to a run.
"""

from __future__ import annotations

from typing import Any

from .._approvals import (
    POLICY_VERSION,
    VerifiedDecision,
    authorizes,
    is_expired,
    verify_decision,
)
from .._errors import ForgedApprovalError, MalformedEventError
from .._model import RequestApproval
from .._records import Approval, AuditEvent, Decision, Operation, Run, stable_hash
from .._states import RunStatus
from .._workflows import upgrade_approval
from ..store import Snapshot
from ._inbox import ack_and_wait, end_wait, ignored
from ._sites import APPROVAL_WRITE, INBOX_ACK
from ._step import StepContext, Yield

S = RunStatus


def request_approval(sc: StepContext, snap: Snapshot, a: RequestApproval) -> None:
    run, now = snap.run, sc.now()
    approval = Approval(
        tenant=run.tenant,
        created_at=now,
        updated_at=now,
        approval_id=a.approval_id,
        run_id=run.run_id,
        action=a.action,
        params=a.params,
        params_hash=stable_hash(a.params),
        resource=a.resource,
        scope=a.scope,
        requester=sc.worker_id,
        approver_role=a.approver_role,
        expires_at=now + a.ttl_seconds,
        policy_version=POLICY_VERSION,
    )
    with sc.crossing(APPROVAL_WRITE):
        sc.commit(
            run,
            status=S.WAITING_FOR_APPROVAL,
            action="approval_requested",
            approvals=(approval,),
            waiting_on=f"approval:{a.approval_id}",
            wake_at=approval.expires_at,
            current_step=a.next_step,
            detail={"approval_id": a.approval_id, "params_hash": approval.params_hash},
        )
    raise Yield


def on_approval_wait(sc: StepContext, snap: Snapshot, payload: dict[str, Any]) -> None:
    run, now = snap.run, sc.now()
    approval_id = (run.waiting_on or "").removeprefix("approval:")
    approval = next((a for a in snap.approvals if a.approval_id == approval_id), None)
    if approval is None:
        sc.commit_and_yield(run, status=S.FAILED, error=f"approval {approval_id!r} is missing")
    acked: list[str] = []
    rejected: list[AuditEvent] = []
    decided = None
    for msg in snap.pending_inbox:
        acked.append(msg.message_id)
        reason = None
        if msg.kind != "approval_decision":
            reason = f"a {msg.kind} message while waiting for approval {approval_id}"
        else:
            try:
                vd = verify_decision(msg, approval, sc.settings.tenant_keys)
            except (ForgedApprovalError, MalformedEventError) as exc:
                reason = str(exc)
            else:
                if vd.params_hash != approval.params_hash:
                    reason = "the decision is for other parameters than the request"
                elif is_expired(approval, now):
                    reason = f"the decision arrived after expiry ({approval.expires_at})"
                else:
                    decided = vd
        if reason is not None:
            rejected.append(ignored(sc, run, "decision_ignored", msg.message_id, reason))
        if decided is not None:
            break
    acks, audits = tuple(acked), tuple(rejected)
    if decided is not None:
        _decide(sc, run, now, approval, decided, acks, audits)
        return
    # Same bound as wake_at (= expires_at): a wait that wakes must end, or
    # the run stays runnable and the worker spins claiming it.
    if is_expired(approval, now):
        end_wait(
            sc,
            run,
            acks,
            audits,
            status=S.CANCELLED,
            action="approval_expired",
            detail={"approval_id": approval_id},
        )
        raise Yield
    ack_and_wait(sc, run, acks, audits)


def _decide(
    sc: StepContext,
    run: Run,
    now: float,
    approval: Approval,
    decided: VerifiedDecision,
    acks: tuple[str, ...],
    audits: tuple[AuditEvent, ...],
) -> None:
    """Record a verified decision (read at ``now``); a rejection cancels the run."""
    new_approval = approval.model_copy(
        update={
            "decision": decided.decision,
            "approver": decided.approver,
            "decided_at": now,
            "updated_at": now,
        }
    )
    approved = decided.decision is Decision.APPROVED
    with sc.crossing(APPROVAL_WRITE, INBOX_ACK):
        end_wait(
            sc,
            run,
            acks,
            audits,
            status=S.RUNNING if approved else S.CANCELLED,
            action="decision",
            approvals=(new_approval,),
            detail={
                "approval_id": approval.approval_id,
                "decision": decided.decision.value,
                "approver": decided.approver,
            },
        )
    if not approved:
        raise Yield


def recheck_approval(
    sc: StepContext,
    snap: Snapshot,
    run: Run,
    approval_id: str,
    kind: str,
    request_hash: str,
    operations: tuple[Operation, ...] = (),
) -> None:
    """Cancel the run unless ``approval_id`` authorizes this exact request now.

    Called before every send of a gated effect -- the first one and any
    resend after reconciliation -- so an approval that expired or no
    longer matches the parameters never authorizes the effect.
    """
    approval = next((x for x in snap.approvals if x.approval_id == approval_id), None)
    if approval is not None:
        # An approval granted under older code names the parameters in
        # that code's shape; compare like with like.
        approval = upgrade_approval(sc.registry, run.workflow, approval)
    why = authorizes(approval, kind, request_hash, sc.now())
    if "skip-approval-recheck" in sc.settings.bugs and approval is not None:
        # SEEDED BUG skip-approval-recheck: "it was approved when the
        # decision came in" -- expiry and parameters are not looked at.
        why = None if approval.decision is Decision.APPROVED else why
    if why is not None:
        sc.commit_and_yield(
            run,
            status=S.CANCELLED,
            action="approval_denied",
            operations=operations,
            error=f"{kind} not authorized: {why}",
            detail={"approval_id": approval_id, "reason": why},
        )
