"""What an environment reports to the harness, as records: what it
observes (:class:`Observation`: runs, checkpointed transitions, model
contexts, approvals, ledger entries), every run's durable state, how a
worker ended, and the connections a worker holds. Part of the adapter
contract (:mod:`harness.adapters._contract`), exported by
:mod:`harness.adapters`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..model import RunState

#: The normalized status of a ledger entry (:attr:`Observation.operations`):
#: ``pending`` the intent is recorded and the call certainly not made;
#: ``in_doubt`` the call was (or may have been) made and its outcome is not
#: recorded; ``done`` the runtime holds the call as performed (confirmed, or
#: found performed by reconciliation); ``failed`` it holds the call as not
#: performed (refused, or found not performed).
OPERATION_STATUSES: tuple[str, ...] = ("pending", "in_doubt", "done", "failed")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Endpoint(_Frozen):
    """One TCP connection a worker holds to a server it depends on (the
    ``network_faults`` capability): its own end, and the server's."""

    local_host: str
    local_port: int = Field(ge=1, le=65535)
    remote_host: str
    remote_port: int = Field(ge=1, le=65535)
    #: what the server is, for the report ("postgres", "redis", ...)
    service: str = "storage"


class RunView(_Frozen):
    """A run as the adapter sees it, normalized."""

    run_id: str
    tenant: str
    state: RunState
    raw_status: str
    output: dict[str, Any] | None = None
    #: the runtime's own message on what went wrong: why the run failed,
    #: parked, or -- ``RunState.RETRYING`` -- keeps failing (the last
    #: attempt's error). Shown in the checkers' witnesses. Keep it the same
    #: from one attempt to the next (no attempt count, no time): the final
    #: quiesce takes a changed message for progress.
    error: str | None = None
    waiting_on: str | None = None
    #: when a timer (retry backoff, wait timeout) will make the run runnable
    wake_at: float | None = None
    #: approval the run waits on: {approval_id, action, params_hash, role, expires_at}
    approval: dict[str, Any] | None = None


class _Record(BaseModel):
    """A record an adapter reports, typed; extra keys are kept (shown in
    messages, read by no checker)."""

    model_config = ConfigDict(frozen=True, extra="allow", populate_by_name=True)


class Transition(_Record):
    """One checkpointed state change (``Observation.transitions``): raw
    statuses, ``from_`` None at creation. ``legal_transitions`` holds them
    to the runtime's table and to their order (docs/adapters.md, section 6)."""

    run_id: str
    tenant: str | None = None
    from_: str | None = Field(default=None, alias="from")
    to: str
    #: strictly increasing per run; two transitions sharing one are a fork
    state_version: int
    actor: str | None = None
    action: str | None = None
    detail: Any = None
    #: on the environment's clock
    at: float | None = None


class ContextRecord(_Record):
    """The model input one worker built for one step of a run
    (``Observation.contexts``, the ``context`` capability): compared with
    the fault-free run's context at the same run and step."""

    run_id: str
    step: str | int
    worker_id: str | None = None
    fingerprint: str | None = None
    #: the model context itself, JSON-able (an SDK: the items sent to the model)
    context: Any
    #: the memory records it contains, by id (``memory_safety``)
    memory_ids: tuple[str, ...] = ()


class ApprovalRecord(_Record):
    """An approval as the runtime recorded it (``Observation.approvals``, the
    ``approvals`` capability); ``approval_integrity`` holds every approved
    one against what the approver genuinely said."""

    run_id: str
    approval_id: str
    action: str | None = None
    params_hash: str | None = None
    decision: str | None = None
    approver: str | None = None
    role: str | None = None
    expires_at: float | None = None
    decided_at: float | None = None


def _plain(items: Any) -> Any:
    """Records given as models become the dicts the history holds."""
    if isinstance(items, (list, tuple)):
        return tuple(
            i.model_dump(by_alias=True, mode="json") if isinstance(i, _Record) else i for i in items
        )
    return items


class Observation(_Frozen):
    """What changed in the runtime since the last observation (``cursor``).

    ``transitions``, ``contexts`` and ``approvals`` take plain dicts or the
    typed :class:`Transition`, :class:`ContextRecord` and
    :class:`ApprovalRecord` (validated, then held as dicts)."""

    runs: tuple[RunView, ...]
    #: checkpointed transitions: {run_id, from, to, state_version, actor, action, detail, at}
    transitions: tuple[dict[str, Any], ...] = ()
    #: model contexts: {run_id, step, worker_id, fingerprint, context}
    contexts: tuple[dict[str, Any], ...] = ()
    #: approval records: {run_id, approval_id, action, params_hash, decision, expires_at, ...}
    approvals: tuple[dict[str, Any], ...] = ()
    #: ledger entries, every one (not only the new ones), with the
    #: ``operations`` capability: {run_id, kind, status, external_ref, and
    #: optionally op_id, step, request_hash, business_key, raw_status}. ``status`` is one
    #: of :data:`OPERATION_STATUSES`; ``external_ref`` is the reference the
    #: runtime recorded for the call (None if it recorded none);
    #: ``request_hash`` the sha256 of the request's canonical JSON, as the
    #: world computes it. One entry per logical call; a runtime that keeps
    #: one entry per attempt may list them all.
    operations: tuple[dict[str, Any], ...] = ()

    @field_validator("transitions", "contexts", "approvals", mode="before")
    @classmethod
    def _records(cls, items: Any) -> Any:
        return _plain(items)


class WorkerExit(_Frozen):
    """How a worker ended (or stopped): exactly one of the three is set."""

    code: int | None = None
    signal: int | None = None
    stopped: bool = False

    @property
    def killed(self) -> bool:
        return self.signal is not None

    def describe(self) -> str:
        if self.stopped:
            return "stopped"
        if self.signal is not None:
            return f"killed by signal {self.signal}"
        return f"exited {self.code}"


class DurableState(_Frozen):
    """What the runtime keeps durably, per run, after the scenario (the
    ``durable_state`` capability): conversation items, checkpoint channel
    values, ledger entries, memory written -- JSON-able, normalized so that a
    correct runtime's faulted run equals its fault-free run. Keys named in
    ``volatile`` (ids, timestamps, attempt counters) are ignored at any depth."""

    runs: dict[str, Any] = Field(default_factory=dict)
    volatile: tuple[str, ...] = ()
