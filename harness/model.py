"""The harness's data model: history events, scenario steps, verdicts.

This module sits at the bottom of the one-way flow (scenarios -> runner ->
adapter -> runtime and world -> history -> checkers -> report): everything may
import it, it imports nothing of the harness but its vocabulary
(:mod:`harness.vocabulary`). All values are frozen and
round-trip through JSON with a type tag (``f`` for events, ``op`` for steps)
and a schema version, so a history or a scenario written today can be replayed
and re-checked later.

History events follow Jepsen: an operation is an ``invoke`` followed by its
completion -- ``ok``, ``fail`` (certainly did not happen) or ``info`` (may
have happened: a timeout, a killed worker). Everything the harness merely
observes (an effect at the world, a state transition in the runtime, a fault
that fired) is an ``info`` event.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from .vocabulary import MODEL_FAULT_MODES, Capability

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


# -- scenario steps ------------------------------------------------------------


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


class _Step(_Frozen):
    """A scenario step. A kind of step that needs a capability of the
    adapter says which in ``needs`` (checked before a scenario runs:
    ``harness.nemesis.validate``), and may describe itself in a line
    (:meth:`describe`; else :func:`describe_step` knows it)."""

    needs: ClassVar[Needs] = None

    def describe(self) -> str | None:
        """The step as a short readable line (a counterexample's)."""
        return None


class Submit(_Step):
    op: Literal["submit"] = "submit"
    run: RunSpec


class RunWorker(_Step):
    """Start a worker and let it work until idle -- or until its crash spec fires."""

    op: Literal["run_worker"] = "run_worker"
    worker_id: str
    crash: CrashSpec | None = None
    code_version: int | None = None


class ContinueWorker(_Step):
    """SIGCONT a worker that a ``pause`` crash spec stopped; wait for it to end."""

    op: Literal["continue_worker"] = "continue_worker"
    worker_id: str


class KillWorker(_Step):
    """SIGKILL a (paused) worker."""

    op: Literal["kill_worker"] = "kill_worker"
    worker_id: str


class Approve(_Step):
    """Deliver the run's planned decision for the approval it waits on.

    ``variant``: ``valid`` (signed, right role and parameters), ``forged`` (bad
    signature), ``wrong_role`` (two messages, signed by roles the approver
    does not hold: one sorting below the required role, asked of the
    environment as ``wrong_role``, and one above it, ``wrong_role_above``),
    ``wrong_params`` (signed, for other parameters),
    ``cross_tenant`` (a message of another tenant naming the run: the decision
    genuinely signed by that tenant's approver with that tenant's own key;
    if the run waits for an event instead, that event as the other tenant
    sends it, made by the environment's optional ``event_message``).
    ``changed_mind``: the planned decision (valid), then at once the same
    approver's genuine opposite decision in a message of its own, both
    before any worker reads either: the first decision delivered is the
    one that counts, so the run must end as if only it had come (it is
    not named by the fault). A runtime whose outcome depends on how many
    messages a worker finds waiting lets the last one win.
    ``misdirected``: a decision the approver genuinely signed, with the
    right role and parameters, for the approval run ``signed_for`` waits on
    (another approval of the same tenant), delivered to this run: signed
    for another approval, it decides nothing here.
    ``copies`` > 1 delivers the same message again (same message id);
    ``fresh_copies`` > 0 delivers further distinct messages with the same decision.
    ``decision``: ``planned`` (the run's own) or ``opposite`` (the other one:
    a forged message that approves what the approver will reject tells a
    runtime that trusts it from one that checks). Nothing is delivered if the
    run does not wait for an approval.
    """

    op: Literal["approve"] = "approve"
    run_id: str
    variant: Literal[
        "valid",
        "forged",
        "wrong_role",
        "wrong_params",
        "cross_tenant",
        "changed_mind",
        "misdirected",
    ] = "valid"
    decision: Literal["planned", "opposite"] = "planned"
    copies: int = 1
    fresh_copies: int = 0
    #: ``misdirected``: the run whose approval the decision is genuinely
    #: signed for (another run of the same tenant, or this run for an
    #: approval it asked for before)
    signed_for: str | None = None


class AdvanceClock(_Step):
    op: Literal["advance_clock"] = "advance_clock"
    needs: ClassVar[Needs] = (Capability.CLOCK, "advancing the clock needs the clock capability")
    seconds: float


class ArmWorldFault(_Step):
    """Arm a fault at the world: modes as in :class:`harness.world.FaultRule`
    (``delay`` only for ``slow``). ``calls`` > 1 fires it on that many
    consecutive calls from the ``nth`` on: a persistent outage (mode
    ``unavailable``) is every call of a service failing for a while.
    ``action`` ``lookup`` aims it at the service's lookups (``reject`` or
    ``timeout_before_apply``: the reconciliation of an effect in doubt
    refused, or its answer lost)."""

    op: Literal["arm_world_fault"] = "arm_world_fault"
    service: str
    action: str | None = None
    nth: int = 1
    mode: str
    delay: float = 0.0
    calls: int = Field(1, ge=1, le=1000)


class ArmModelFault(_Step):
    """Arm a fault at the world's model endpoint (``harness.world._chat``):
    a ``mode`` of the ``model`` family on the ``nth`` model call from now,
    or (``action`` ``tool_call`` / ``answer``) on the ``nth`` reply of that
    kind. ``calls`` > 1 fires it on that many consecutive calls."""

    op: Literal["arm_model_fault"] = "arm_model_fault"
    needs: ClassVar[Needs] = (
        Capability.MODEL_ENDPOINT,
        "model faults need the model_endpoint capability",
    )
    mode: Literal[MODEL_FAULT_MODES]  # type: ignore[valid-type]
    action: Literal["tool_call", "answer"] | None = None
    nth: int = Field(1, ge=1)
    calls: int = Field(1, ge=1, le=100)

    def describe(self) -> str:
        what = {"tool_call": "reply that calls a tool", "answer": "text answer"}
        which = f"{what[self.action]} {self.nth}" if self.action else f"call {self.nth}"
        more = f" (and the next {self.calls - 1})" if self.calls > 1 else ""
        return f"arm model fault {self.mode} on the model's {which}{more}"


class KillAfter(_Step):
    """Start a worker and SIGKILL it ``delay`` wall-clock seconds later (if it
    is still running). Only the ``random-kill`` mode uses it: where the kill
    lands depends on the OS scheduler, so such a scenario neither shrinks nor
    replays exactly -- the baseline that event-triggered faults are measured
    against."""

    op: Literal["kill_after"] = "kill_after"
    worker_id: str
    delay: float


class RaceWorkers(_Step):
    """Start several workers at once, then wait for each to end.

    The race for runtimes without pause points to use as barriers: armed
    after a ``slow`` world fault, the first worker is still in flight inside
    that effect when the others start, so they work the same runs at the
    same time. Needs the ``concurrent_workers`` capability.
    """

    op: Literal["race_workers"] = "race_workers"
    needs: ClassVar[Needs] = (
        Capability.CONCURRENT_WORKERS,
        "racing workers need the concurrent_workers capability",
    )
    worker_ids: tuple[str, ...]


class InjectMemory(_Step):
    """Plant a memory record: ``kind`` says what is wrong with it.

    ``stale``: an older version, then the newer one that supersedes it;
    ``stale_reordered``: the same two versions arriving out of order (the
    newer first, the older late): the older must still never be read.
    ``lapsed_newest``: a live version, then a newer one that has already
    expired: the key's newest version lapsed, so the key is absent; the
    older, live version is superseded and must never answer for it.
    ``untrusted_newest``: a verified version, then a newer one only a user
    supplied: read at a trust floor above the newer one's, the key is
    absent; below it, the newer one answers; the older never does.
    ``expires_in`` (``expired`` only): the record is live when planted and
    expires that many seconds later, so it is expired only once the clock
    has moved past it (without it, it expired a second before planting).
    """

    op: Literal["inject_memory"] = "inject_memory"
    needs: ClassVar[Needs] = (
        Capability.MEMORY_INJECTION,
        "planting memory needs the memory_injection capability",
    )
    tenant: str
    namespace: str
    key: str
    value: Any
    kind: Literal[
        "poisoned",
        "cross_tenant",
        "expired",
        "stale",
        "stale_reordered",
        "trusted",
        "lapsed_newest",
        "untrusted_newest",
    ]
    provenance: Literal["user_supplied", "system_verified", "tool_output"] = "user_supplied"
    expires_in: float | None = Field(None, gt=0)
    #: the key is one the run writes itself: anything planted there, even a
    #: record it must never read, may legitimately change what it writes
    #: (its version numbers), so the tenant's runs are named by the fault
    at_written_key: bool = False


class ReleaseWorkers(_Step):
    """Continue several paused workers at once (SIGCONT to each before
    waiting for any): workers held at the same crash point are released
    together from that barrier and work the same runs truly concurrently.
    Needs the ``concurrent_workers`` capability."""

    op: Literal["release_workers"] = "release_workers"
    needs: ClassVar[Needs] = (
        Capability.CONCURRENT_WORKERS,
        "releasing workers together needs the concurrent_workers capability",
    )
    worker_ids: tuple[str, ...]


#: ``pg_terminate``: end the worker's Postgres sessions (``pg_terminate_backend``);
#: ``redis_client_kill``: end its Redis connections (``CLIENT KILL``).
StorageKind = Literal["pg_terminate", "redis_client_kill"]


class StorageFault(_Step):
    """Cut a worker's storage connection (Postgres backend terminate, Redis CLIENT KILL)."""

    op: Literal["storage_fault"] = "storage_fault"
    needs: ClassVar[Needs] = (
        Capability.STORAGE_FAULTS,
        "storage faults need the storage_faults capability",
    )
    kind: StorageKind


#: ``commit_ack_lost``: what the server sends the worker's connection is
#: dropped, so the COMMIT it sends next commits and its acknowledgement never
#: arrives; ``reset_mid_transaction``: the connection is reset (both ends)
#: between two statements of a transaction; ``partition``: every connection
#: the worker holds to the store goes silent both ways while the clock moves
#: past its lease and another worker takes over, then heals and the worker
#: goes on (a zombie by the network); ``latency``: the worker's store
#: traffic delayed -- not available on the kernel backend (no netem): armed,
#: never fired, and said why; ``commit_lost`` (Toxiproxy only): the worker's
#: COMMIT never reaches the server, which rolls the transaction back, and
#: the connection ends with no reply (to the worker, the same as a lost
#: acknowledgement: a commit whose outcome it cannot know).
NetworkKind = Literal[
    "commit_ack_lost",
    "reset_mid_transaction",
    "partition",
    "latency",
    "slow_reply",
    "cut_reply",
    "commit_lost",
]


class NetworkFault(_Step):
    """A network fault on the storage connection a paused worker was using
    at its crash point (``network_faults`` capability), then the worker goes
    on and the step waits for it to end; the fault heals when it has.

    Fired by event: pause the worker at the crash point first (for
    ``commit_ack_lost``, right before a checkpoint's COMMIT; for
    ``reset_mid_transaction``, between two statements of one; for
    ``partition``, anywhere it holds the run's lease, most tellingly right
    before an effect). A partition on the kernel backend needs the clock
    capability too; through a worker's own proxies (Toxiproxy) it fires
    without one, the clock left alone."""

    op: Literal["network_fault"] = "network_fault"
    needs: ClassVar[Needs] = (
        Capability.NETWORK_FAULTS,
        "network faults need the network_faults capability",
    )
    kind: NetworkKind
    worker_id: str


class Cancel(_Step):
    """An operator cancels a run out of band (``cancel`` capability): a write
    that takes no lease, racing whichever worker holds the run."""

    op: Literal["cancel"] = "cancel"
    needs: ClassVar[Needs] = (Capability.CANCEL, "cancelling a run needs the cancel capability")
    run_id: str


class Quiesce(_Step):
    """Faults stop: run workers (approving validly what waits) until nothing moves.

    With ``code_version``, the workers are the older release's (a rollback
    that stays: only old workers serve for a while): it keeps what it meets
    past every retry and backoff it would take, before today's code returns
    (the scenario's final quiesce). Left out of the JSON when unset."""

    op: Literal["quiesce"] = "quiesce"
    approve_waits: bool = True
    code_version: int | None = None

    @model_serializer(mode="wrap")
    def _unset_version_left_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and self.code_version is None:
            data.pop("code_version", None)
        return data


Step = Annotated[
    Submit
    | RunWorker
    | ContinueWorker
    | KillWorker
    | KillAfter
    | RaceWorkers
    | ReleaseWorkers
    | Approve
    | AdvanceClock
    | ArmWorldFault
    | ArmModelFault
    | InjectMemory
    | StorageFault
    | NetworkFault
    | Cancel
    | Quiesce,
    Field(discriminator="op"),
]


class Scenario(_Frozen):
    """A workload and a fault schedule: everything needed to replay a run."""

    schema_version: int = Field(SCHEMA_VERSION, ge=1)
    name: str = "scenario"
    seed: int = 0
    steps: tuple[Step, ...]

    @property
    def runs(self) -> tuple[RunSpec, ...]:
        return tuple(s.run for s in self.steps if isinstance(s, Submit))

    def fault_free(
        self,
        migrate: Callable[[RunSpec], dict[str, Any]] | None = None,
        *,
        keep_releases: bool = False,
    ) -> Scenario:
        """The oracle: the same submissions, no faults, then quiesce (which
        delivers each run's planned decision when it waits for one).

        Every run is submitted to the current code: a run accepted by an older
        release and carried across the upgrade must end as if today's code
        had taken it, so the oracle is the run that never saw an older
        release. ``migrate`` gives such a run's input as today's code holds
        it after the upgrade (what the older release could not record is
        lost: see the adapter's optional ``migrated_input``); without it the
        input is taken as is.

        With ``keep_releases`` (the adapter's ``keeps_definitions``: a run
        finishes on the definition it started on), such a run is submitted
        to the older release that accepted it, as is, and today's code
        finishes it with no fault: the run on the definition it started on.
        """
        submits: list[Step] = []
        for step in self.steps:
            if not isinstance(step, Submit):
                continue
            run = step.run
            if run.code_version is not None and not keep_releases:
                new_input = run.input if migrate is None else migrate(run)
                run = run.model_copy(update={"code_version": None, "input": dict(new_input)})
            submits.append(Submit(run=run))
        return Scenario(name=f"{self.name}/oracle", seed=self.seed, steps=(*submits, Quiesce()))

    def describe(self) -> list[str]:
        """The steps as short readable lines (used in counterexamples)."""
        return [describe_step(s) for s in self.steps]


def describe_step(step: BaseModel) -> str:
    own = step.describe() if isinstance(step, _Step) else None
    if own is not None:
        return own
    if isinstance(step, Submit):
        r = step.run
        old = f" under code v{r.code_version}" if r.code_version is not None else ""
        return f"submit {r.workflow} run {r.run_id} for {r.tenant} with {r.input}{old}"
    if isinstance(step, RunWorker):
        extra = ""
        if step.crash is not None:
            c = step.crash
            extra = f", {c.action} it at hit {c.nth} of {c.site}"
        if step.code_version is not None:
            extra += f", running code v{step.code_version}"
        return f"start worker {step.worker_id}{extra}"
    if isinstance(step, ContinueWorker):
        return f"continue paused worker {step.worker_id}"
    if isinstance(step, KillWorker):
        return f"SIGKILL worker {step.worker_id}"
    if isinstance(step, KillAfter):
        return f"start worker {step.worker_id}, SIGKILL it after {step.delay * 1000:.0f} ms"
    if isinstance(step, RaceWorkers):
        return f"start workers {', '.join(step.worker_ids)} at once"
    if isinstance(step, ReleaseWorkers):
        return f"release paused workers {', '.join(step.worker_ids)} at once"
    if isinstance(step, Approve):
        copies = f" x{step.copies}" if step.copies > 1 else ""
        fresh = f" (+{step.fresh_copies} more messages)" if step.fresh_copies else ""
        what = f"a {step.variant} decision"
        if step.variant == "cross_tenant":
            what = "another tenant's message (a decision it signed, or the event waited on)"
        if step.variant == "changed_mind":
            what = "the planned decision, then at once the approver's opposite one,"
        if step.variant == "misdirected":
            what = f"a decision genuinely signed for {step.signed_for}'s approval"
        return f"deliver {what} for {step.run_id}{copies}{fresh}"
    if isinstance(step, AdvanceClock):
        return f"advance the clock {step.seconds:g} s"
    if isinstance(step, ArmWorldFault):
        action = f".{step.action}" if step.action else ""
        delay = f" ({step.delay:g} s)" if step.delay else ""
        calls = f"calls {step.nth}..{step.nth + step.calls - 1}" if step.calls > 1 else None
        where = calls or f"call {step.nth}"
        if step.action == "lookup":  # harness.world.LOOKUP: the service's lookups
            where = where.replace("call", "lookup")
            return f"arm world fault {step.mode} on {where} of {step.service}"
        return f"arm world fault {step.mode}{delay} on {where} of {step.service}{action}"
    if isinstance(step, InjectMemory):
        lapse = f" expiring in {step.expires_in:g} s" if step.expires_in else ""
        return f"plant {step.kind} memory {step.namespace}/{step.key} for {step.tenant}{lapse}"
    if isinstance(step, StorageFault):
        return f"storage fault {step.kind}"
    if isinstance(step, NetworkFault):
        what = {
            "commit_ack_lost": "its COMMIT's acknowledgement is lost",
            "reset_mid_transaction": "its connection is reset mid-transaction",
            "partition": "partitioned from the store past its lease while another "
            "worker takes over, then healed",
            "latency": "its store traffic delayed",
            "slow_reply": "its store's replies arrive in fragments",
            "cut_reply": "its store's next reply is cut after a few bytes",
            "commit_lost": "its COMMIT is lost on the way (never applied) and the connection ends",
        }[step.kind]
        return f"network fault on paused worker {step.worker_id}: {what}; it goes on"
    if isinstance(step, Cancel):
        return f"an operator cancels run {step.run_id}"
    if isinstance(step, Quiesce):
        return "stop faults and run workers until nothing moves"
    return repr(step)
