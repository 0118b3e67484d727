"""Durable records, each with an explicit, versioned schema.

Every record carries its tenant, timestamps (seconds from the injected clock)
and a ``schema_version``. Records are frozen: change them through
``model_copy(update=...)``. A record from a newer ``schema_version`` than this
code knows is refused by :func:`check_schema_version` (see ``_migrations`` for
workflow payloads).
"""

from __future__ import annotations

import hashlib
import json
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._errors import FutureSchemaError
from ._states import RunStatus

#: The record schema version this code writes and reads.
RECORD_SCHEMA_VERSION = 1


class Record(BaseModel):
    """Base of all durable records: frozen, strict about unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = RECORD_SCHEMA_VERSION
    tenant: str
    created_at: float
    updated_at: float


def check_schema_version(what: str, found: int, known: int = RECORD_SCHEMA_VERSION) -> None:
    if found > known:
        raise FutureSchemaError(what, found, known)


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no whitespace: the input of every hash."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def stable_hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()


class Run(Record):
    """Workflow state: where a run is and what may happen next."""

    record: Literal["run"] = "run"
    run_id: str
    workflow: str
    definition_version: int
    status: RunStatus
    state_version: int = 0
    current_step: str
    attempt: int = 0
    wake_at: float | None = None
    waiting_on: str | None = None  # "approval:<id>", "event:<key>" or "operator:<op id>"
    parent_run_id: str | None = None
    lease_owner: str | None = None
    lease_expiry: float | None = None
    fencing_token: int = 0
    error: str | None = None


class WorkingState(Record):
    """The structured, versioned per-workflow payload of a run.

    ``payload_version`` is the version of the workflow's payload schema (see
    ``_migrations``); ``payload`` holds plan, variables and tool results.
    """

    record: Literal["working_state"] = "working_state"
    run_id: str
    workflow: str
    payload_version: int
    payload: dict[str, Any]


class OperationStatus(StrEnum):
    PREPARED = "prepared"
    SENT = "sent"
    CONFIRMED = "confirmed"
    UNKNOWN = "unknown"
    RECONCILED = "reconciled"
    FAILED = "failed"


class Delivery(StrEnum):
    """What a runtime promises for one effect kind."""

    EXACTLY_ONCE = "exactly_once"
    AT_MOST_ONCE = "at_most_once"
    AT_LEAST_ONCE = "at_least_once"


class Operation(Record):
    """A side-effect ledger entry: one logical call to an external service."""

    record: Literal["operation"] = "operation"
    op_id: str
    run_id: str
    step: str
    kind: str  # "<service>.<action>", e.g. "payments.refund"
    idempotency_key: str
    business_key: str | None = None
    request_hash: str
    request: dict[str, Any]
    status: OperationStatus
    delivery: Delivery
    external_ref: str | None = None
    response: dict[str, Any] | None = None
    attempts: int = 0
    #: the approval that must still authorize this request at every send
    approval_id: str | None = None


class Decision(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"


class Approval(Record):
    """A request for a human decision on one exact action."""

    record: Literal["approval"] = "approval"
    approval_id: str
    run_id: str
    action: str
    params: dict[str, Any]
    params_hash: str
    resource: str
    scope: str
    requester: str
    approver_role: str
    approver: str | None = None
    expires_at: float
    decision: Decision = Decision.PENDING
    policy_version: int
    decided_at: float | None = None


class Provenance(StrEnum):
    USER_SUPPLIED = "user_supplied"
    SYSTEM_VERIFIED = "system_verified"
    TOOL_OUTPUT = "tool_output"


#: Trust attached by default to each provenance. Only ``system_verified`` is
#: trusted enough to feed a consequential decision.
DEFAULT_TRUST: dict[Provenance, float] = {
    Provenance.USER_SUPPLIED: 0.2,
    Provenance.TOOL_OUTPUT: 0.5,
    Provenance.SYSTEM_VERIFIED: 1.0,
}


class MemoryRecord(Record):
    """Long-term memory: tenant-scoped data, never instructions."""

    record: Literal["memory"] = "memory"
    memory_id: str
    namespace: str
    key: str
    value: Any
    version: int = 1
    provenance: Provenance
    trust: float = Field(ge=0.0, le=1.0)
    subject: str | None = None  # the user the fact is about (for deletion)
    derived_from: tuple[str, ...] = ()  # memory ids this one was computed from
    expires_at: float | None = None
    deleted: bool = False


class AuditEvent(Record):
    """Append-only: who or what did which transition, decision or effect, when."""

    record: Literal["audit"] = "audit"
    run_id: str
    at: float
    actor: str
    action: str  # "created", "transition", "effect", "decision", "inbox", "parked", ...
    from_status: RunStatus | None = None
    to_status: RunStatus | None = None
    state_version: int | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class ArtifactRef(Record):
    """A reference into the object store; the bytes live there, not in rows."""

    record: Literal["artifact"] = "artifact"
    uri: str
    sha256: str
    owner: str  # run id that produced it
    subject: str | None = None
    expires_at: float | None = None


class InboxMessage(Record):
    """An inbound event, deduplicated by ``message_id``."""

    record: Literal["inbox"] = "inbox"
    message_id: str
    run_id: str
    kind: Literal["approval_decision", "event", "webhook"]
    payload: dict[str, Any]
    signature: str | None = None
    received_at: float
    processed_at: float | None = None
