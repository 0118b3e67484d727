"""The steps of a scenario: one pydantic model per kind, tagged by ``op``,
and :data:`Step`, their union."""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)

from ..vocabulary import MODEL_FAULT_MODES, Capability
from ._records import (
    CrashSpec,
    Needs,
    RunSpec,
    _Frozen,
)


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
    """Move virtual time ``seconds`` on; or, with ``until`` (a run id), to
    that run's own deadline (the ``wake_at`` it reports: a wait's timeout,
    an approval's expiry) plus ``seconds`` (0: exactly the deadline, the
    first instant it has passed; negative: just before it). Off-by-one
    comparisons with a deadline (``>`` where ``>=`` belongs) show only at
    the deadline itself."""

    op: Literal["advance_clock"] = "advance_clock"
    needs: ClassVar[Needs] = (Capability.CLOCK, "advancing the clock needs the clock capability")
    seconds: float
    until: str | None = None

    @model_serializer(mode="wrap")
    def _unset_until_left_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        # a plain jump keeps the form (and the identity) it always had
        data = handler(self)
        if isinstance(data, dict) and self.until is None:
            data.pop("until", None)
        return data

    def describe(self) -> str | None:
        if self.until is None:
            return None
        if self.seconds == 0:
            return f"set the clock to exactly {self.until}'s deadline (its wake_at)"
        side = "before" if self.seconds < 0 else "after"
        return f"set the clock {abs(self.seconds):g} s {side} {self.until}'s deadline (its wake_at)"


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
#: acknowledgement: a commit whose outcome it cannot know);
#: ``partition_after_apply`` (Toxiproxy only; no crash point needed): the
#: world applies the worker's call of ``effect``, then the worker is cut
#: off from its runtime's server or database (every proxy of its own) so it
#: cannot report the result; another worker runs; then it heals.
NetworkKind = Literal[
    "commit_ack_lost",
    "reset_mid_transaction",
    "partition",
    "latency",
    "slow_reply",
    "cut_reply",
    "commit_lost",
    "partition_after_apply",
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
    without one, the clock left alone.

    ``partition_after_apply`` pauses at no crash point: the step starts
    worker ``worker_id`` itself, the world holds it right after applying
    its ``nth`` call of ``effect`` (``"service.action"``) from now, and the
    worker's proxies to its runtime's server or database are switched off
    before it goes on: it cannot report what it did. Another worker runs
    until idle (with the clock capability, past the first one's lease),
    then the partition heals and the first worker ends as it can."""

    op: Literal["network_fault"] = "network_fault"
    needs: ClassVar[Needs] = (
        Capability.NETWORK_FAULTS,
        "network faults need the network_faults capability",
    )
    kind: NetworkKind
    worker_id: str
    #: ``partition_after_apply`` only: the effect (``service.action``) whose
    #: call the worker is held after, and which call of it from now
    effect: str | None = None
    nth: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _effect_with_its_kind(self) -> NetworkFault:
        if self.kind == "partition_after_apply":
            service, dot, action = (self.effect or "").partition(".")
            if not (service and dot and action):
                raise ValueError(
                    "a partition_after_apply names the effect it follows, as "
                    f"effect='service.action' (e.g. 'payments.refund'); got {self.effect!r}"
                )
        elif self.effect is not None or self.nth != 1:
            raise ValueError(
                f"effect and nth belong to a partition_after_apply, not to a {self.kind}"
            )
        return self

    @model_serializer(mode="wrap")
    def _unset_effect_left_out(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and self.effect is None:
            data.pop("effect", None)
            data.pop("nth", None)
        return data

    def describe(self) -> str | None:
        if self.kind != "partition_after_apply":
            return None
        which = f" (call {self.nth} from now)" if self.nth != 1 else ""
        return (
            f"network fault partition_after_apply: {self.worker_id} cut off from its runtime "
            f"right after {self.effect} was applied{which}"
        )


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
