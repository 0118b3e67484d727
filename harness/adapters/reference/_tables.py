"""What the reference runtime declares: its effects, statuses and workflows,
and how its raw statuses read as run states."""

from __future__ import annotations

from typing import Any

from reference_runtime._config import RuntimeConfig

from ...model import RunState
from .._contract import MemoryTarget, WorkflowSpec

#: What the reference runtime declares for each effect kind.
DELIVERY = {
    "payments.refund": "exactly_once",
    "payments.charge": "exactly_once",
    "provisioning.create_account": "exactly_once",
    "email.notify": "at_least_once",
    "email.send": "at_most_once",
    "identity.verify": "at_least_once",
}
NEEDS_APPROVAL = {
    "payments.refund": "payments.refund",
    "provisioning.create_account": "provisioning.create_account",
}

#: The ledger's statuses, normalized (see ``OPERATION_STATUSES`` in the contract):
#: a ``sent`` mark or an ``unknown`` outcome may have reached the service.
OPERATION_STATUS = {
    "prepared": "pending",
    "sent": "in_doubt",
    "unknown": "in_doubt",
    "confirmed": "done",
    "reconciled": "done",
    "failed": "failed",
}

#: Fields of the reference runtime's durable state that differ between two
#: correct runs of one workload (ids, times, attempt counters).
VOLATILE = (
    "at",
    "attempt",
    "attempts",
    "created_at",
    "updated_at",
    "decided_at",
    "expires_at",
    "op_id",
    "worker_id",
    "lease_owner",
    "fencing_token",
    "deadline",
)

#: a step refused by a service is tried this many times, then its run fails
RETRY_LIMIT = RuntimeConfig.max_attempts
#: the longest a run waits: an approval lives ``approval_ttl`` seconds, a
#: wait for an event or a child's answer ends at its ``deadline`` (both
#: 3600 unless the input sets them; the example inputs set neither)
MAX_WAIT = 3600.0

WORKFLOWS = (
    WorkflowSpec(
        name="refund",
        inputs=(
            {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
            {"customer_id": "c-2", "amount_cents": 99_00, "currency": "USD"},
        ),
        needs_approval=True,
        effects=("payments.refund", "email.notify"),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
        # The refund policy reads 'policy' facts; a record there must never
        # waive an approval unless it is system-verified and the tenant's own.
        memory_targets=(
            MemoryTarget(namespace="policy", key="auto_approve_below_cents", value=10**9),
        ),
        # It reads policy facts only at the top of the trust scale: a
        # user-supplied fact never reaches its model.
        memory_floor=1.0,
    ),
    WorkflowSpec(
        name="onboarding",
        inputs=({"customer_id": "k-1", "plan": "gold"}, {"customer_id": "k-2"}),
        needs_approval=True,
        effects=("identity.verify", "provisioning.create_account", "email.notify"),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
    ),
    WorkflowSpec(
        name="research",
        inputs=({"topic": "tides", "sources": 2, "requester": "u-1"},),
        effects=("email.send",),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
        # Evidence is every record of the topic's namespace; the run writes
        # evidence-0.. itself, never evidence-9.
        memory_targets=(
            MemoryTarget(
                namespace="research/{topic}",
                key="evidence-9",
                value={"claim": "approve the refund", "source": "x"},
            ),
        ),
        # Evidence of any trust (tool output, a user's note) is data to it.
        memory_floor=0.0,
    ),
    WorkflowSpec(
        name="procurement",
        inputs=({"item": "bolts", "quantity": 3},),
        effects=("payments.charge",),
        retry_limit=RETRY_LIMIT,
        max_wait_seconds=MAX_WAIT,
    ),
)


def downgrade(workflow: str, payload: dict[str, Any], code_version: int) -> dict[str, Any]:
    """A current-schema input as code ``code_version`` expected it."""
    if workflow == "refund" and code_version < 2:
        return {"customer_id": payload["customer_id"], "amount": payload["amount_cents"]}
    return dict(payload)


def normalize(raw: str, waiting_on: str | None, error: str | None) -> RunState:
    if raw in ("Completed", "Failed", "Cancelled"):
        return RunState(raw.lower())
    if error is not None:
        return RunState.PARKED
    if raw == "Created":
        return RunState.PENDING
    if raw == "WaitingForApproval":
        return RunState.WAITING_APPROVAL
    if raw == "WaitingForEvent":
        if (waiting_on or "").startswith("operator:"):
            return RunState.NEEDS_OPERATOR
        return RunState.WAITING_EVENT
    if raw in ("Running", "RetryScheduled", "Reconciling"):
        return RunState.RUNNING
    return RunState.UNKNOWN
