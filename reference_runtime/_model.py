"""The model seam: a structured context in, one action out.

No LLM is reachable here, so the model is an interface with a deterministic
scripted implementation. What matters for recovery is the *context*: it is a
frozen value built only from durable records (see ``_executor.build_context``),
so a test can compare the context a resumed worker sees with the one a
fault-free run saw at the same step.
"""

from __future__ import annotations

import hashlib
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from ._records import Delivery, Provenance


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class MemoryFact(_Frozen):
    """One memory record as the model sees it: data with its provenance."""

    memory_id: str
    namespace: str
    key: str
    value: Any
    version: int
    provenance: Provenance
    trust: float


class ApprovalView(_Frozen):
    """An approval as the model sees it. No timestamps: expiry is enforced by
    the runtime, and absolute times would make a resumed context differ from
    a fault-free one for no reason the model could act on."""

    approval_id: str
    action: str
    params_hash: str
    decision: str
    approver: str | None


class ModelContext(_Frozen):
    """Everything the model may know at one step, rebuilt from durable state."""

    run_id: str
    tenant: str
    workflow: str
    definition_version: int
    payload_version: int
    step: str
    attempt: int
    variables: dict[str, Any]
    tool_results: dict[str, Any]  # step -> confirmed response body
    approvals: tuple[ApprovalView, ...]
    memory: tuple[MemoryFact, ...]
    events: dict[str, Any]  # event key -> data, for events consumed so far

    def fingerprint(self) -> str:
        """A stable digest of the context, for comparing resumed and fault-free runs."""
        return fingerprint_of(self.model_dump_json())


def fingerprint_of(context_json: str) -> str:
    """:meth:`ModelContext.fingerprint` of the context whose
    ``model_dump_json()`` is ``context_json``."""
    return hashlib.sha256(context_json.encode()).hexdigest()


# -- actions ---------------------------------------------------------------


class Proceed(_Frozen):
    """Pure computation: update variables, move to ``next_step``."""

    kind: Literal["proceed"] = "proceed"
    next_step: str
    updates: dict[str, Any] = Field(default_factory=dict)


class CallTool(_Frozen):
    """A side effect at an external service, run with the effect protocol."""

    kind: Literal["call_tool"] = "call_tool"
    service: str
    action: str
    request: dict[str, Any]
    business_key: str | None = None
    delivery: Delivery = Delivery.EXACTLY_ONCE
    next_step: str
    #: If set, the step is consequential and needs this approval, re-checked
    #: against the current parameters and expiry right before the call.
    requires_approval: str | None = None


class RequestApproval(_Frozen):
    kind: Literal["request_approval"] = "request_approval"
    approval_id: str
    action: str
    params: dict[str, Any]
    resource: str
    scope: str
    approver_role: str
    ttl_seconds: float
    next_step: str


class AwaitEvent(_Frozen):
    kind: Literal["await_event"] = "await_event"
    event_key: str
    timeout_seconds: float
    next_step: str


class WriteMemory(_Frozen):
    kind: Literal["write_memory"] = "write_memory"
    namespace: str
    key: str
    value: Any
    provenance: Provenance
    subject: str | None = None
    derived_from: tuple[str, ...] = ()
    ttl_seconds: float | None = None
    updates: dict[str, Any] = Field(default_factory=dict)
    next_step: str


class StoreArtifact(_Frozen):
    kind: Literal["store_artifact"] = "store_artifact"
    name: str
    content: str
    subject: str | None = None
    variable: str  # where the URI is kept in the working state
    next_step: str


class SpawnChild(_Frozen):
    """Delegate work to a child run with its own state envelope."""

    kind: Literal["spawn_child"] = "spawn_child"
    child_run_id: str
    workflow: str
    objective: str
    input: dict[str, Any]
    allowed_tools: tuple[str, ...]
    deadline_seconds: float
    next_step: str


class Complete(_Frozen):
    kind: Literal["complete"] = "complete"
    output: dict[str, Any] = Field(default_factory=dict)


class Fail(_Frozen):
    kind: Literal["fail"] = "fail"
    reason: str


class Cancel(_Frozen):
    kind: Literal["cancel"] = "cancel"
    reason: str


Action = (
    Proceed
    | CallTool
    | RequestApproval
    | AwaitEvent
    | WriteMemory
    | StoreArtifact
    | SpawnChild
    | Complete
    | Fail
    | Cancel
)


class Model(Protocol):
    """Decides the next action from a rebuilt context. Must be a pure function
    of the context: the runtime may call it again after a crash."""

    def decide(self, context: ModelContext) -> Action: ...
