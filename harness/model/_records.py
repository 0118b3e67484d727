"""The records of a history and a verdict: events, run states, verdicts,
property results, and the run and crash specs a scenario's steps carry."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
)

from ..vocabulary import Capability

#: Version of the history/scenario JSON this code writes and reads.
SCHEMA_VERSION = 1


#: What a kind of step needs of the adapter, and the reason given when it is
#: missing (a step's ``needs``; None: any adapter can run it).
Needs = tuple[Capability, str] | None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- history -----------------------------------------------------------------

EventType = Literal["invoke", "ok", "fail", "info"]


class EventF(StrEnum):
    """What an event is about."""

    SUBMIT = "submit"  # invoke/ok/fail: a run was submitted
    DELIVER = "deliver"  # invoke/ok/fail/info: an inbound message was delivered
    WORKER = "worker"  # invoke: started; ok: exited 0; fail: crashed; info: killed/stopped
    FAULT = "fault"  # info: the nemesis did (or armed) something
    EFFECT = "effect"  # info: a request the world received (from the world's records)
    TRANSITION = "transition"  # info: a checkpointed state change (from the runtime)
    CONTEXT = "context"  # info: the model context a worker built at a step
    APPROVAL = "approval"  # info: an approval record as the runtime holds it
    MEMORY = "memory"  # info: a memory record the harness planted (with its kind)
    FINAL = "final"  # info: a run's state when the scenario ended
    STATE = "state"  # info: a run's durable state when the scenario ended
    DECLARATION = "declaration"  # info: what the runtime promises per effect kind
    NOTE = "note"  # info: anything else worth keeping (adapter limits, ...)
    WAIT = "wait"  # info: a run seen waiting, with the deadline it reported then
    MODEL = "model"  # info: a call of the world's model endpoint (no side effect)


#: the ``variant`` a ``deliver`` event records for an operator's answer to a
#: run at ``needs_operator`` (the runner's, from the world's record)
OPERATOR_ANSWER = "operator_answer"


class Event(_Frozen):
    """One line of a history."""

    index: int
    time: float  # virtual time when recorded
    process: str  # "runner", "nemesis", "world", a worker id, ...
    type: EventType
    f: EventF
    value: dict[str, Any] = Field(default_factory=dict)


# -- run views (what an adapter reports about a run) -----------------------------


class RunState(StrEnum):
    """A runtime's status, normalized so checkers can reason across runtimes."""

    PENDING = "pending"  # created, nothing done yet
    RUNNING = "running"  # in progress (including retry backoff and reconciliation)
    WAITING_APPROVAL = "waiting_approval"
    WAITING_EVENT = "waiting_event"
    NEEDS_OPERATOR = "needs_operator"  # an effect's outcome is unknown and unknowable
    PARKED = "parked"  # the runtime refused to read it (e.g. a future schema)
    #: the runtime keeps failing it and will not give up: a workflow task that
    #: fails on every attempt (Temporal's nondeterminism error), a step retried
    #: forever. Neither ended nor a legitimate wait: ``progress`` and
    #: ``migration_safety`` fail it, with ``RunView.error`` (the runtime's
    #: message) in the witness.
    RETRYING = "retrying"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    UNKNOWN = "unknown"  # the adapter cannot tell

    @property
    def terminal(self) -> bool:
        return self in (RunState.COMPLETED, RunState.FAILED, RunState.CANCELLED)

    @property
    def legitimate_wait(self) -> bool:
        """A state a run may rest in once faults stop, without being stuck."""
        return self in (
            RunState.WAITING_APPROVAL,
            RunState.WAITING_EVENT,
            RunState.NEEDS_OPERATOR,
            RunState.PARKED,
        )


# -- verdicts ------------------------------------------------------------------


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNKNOWN = "unknown"  # should have been judged, could not be (no data, a crash)
    #: nothing in the run could exercise it (over a whole search only: a
    #: capability not declared, a family switched off, or armed but never fired)
    NOT_TESTED = "not_tested"

    def merge(self, other: Verdict) -> Verdict:
        """Jepsen's priority, with not_tested lowest: not_tested < pass <
        unknown < fail."""
        order = [Verdict.NOT_TESTED, Verdict.PASS, Verdict.UNKNOWN, Verdict.FAIL]
        return max(self, other, key=order.index)


class PropertyResult(_Frozen):
    """A checker's verdict on one history, with the evidence."""

    name: str
    verdict: Verdict
    message: str
    #: indexes of the history events that prove the verdict (the witness)
    witness: tuple[int, ...] = ()
    #: counts worth reporting even on a pass (e.g. duplicates absorbed)
    counts: dict[str, int] = Field(default_factory=dict)
    #: how many things this history gave the property to judge (effects,
    #: runs, transitions, planted records read...): a ``pass`` with 0 held
    #: vacuously, and says why in its message
    evidence: int = 0


# -- what a scenario's steps carry -------------------------------------------


class RunSpec(_Frozen):
    """One run of the workload. ``decision`` is the business decision its
    approver makes (if it needs one): part of the workload, so the fault-free
    oracle makes the same one."""

    run_id: str
    tenant: str
    workflow: str
    input: dict[str, Any]
    decision: Literal["approved", "rejected"] = "approved"
    #: submit it with an older code version (its payload in that version's schema)
    code_version: int | None = None


class CrashSpec(_Frozen):
    """Stop a worker at the ``nth`` hit of a crash point (or effect boundary)."""

    site: str
    nth: int = 1
    action: Literal["kill", "pause"] = "kill"
