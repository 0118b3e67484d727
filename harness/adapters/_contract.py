"""The adapter contract: the only way the harness touches a runtime.

An :class:`Adapter` describes a runtime and declares its *capabilities*; for
every scenario it opens a fresh, isolated :class:`Environment` (its own
database or schema, its own world, its own clock) and closes it afterwards.
What a runtime cannot do is declared, never faked: a scenario that needs a
missing capability is skipped and reported as *not tested*.

Required of every environment: start / kill (SIGKILL) / pause (SIGSTOP) /
continue workers that are real OS processes; submit a run; deliver an inbound
message (the harness decides about duplicates, order and delay); observe runs
in a normalized form; route every side effect through :attr:`Environment.world`
so the world can count it and kill the calling worker at the effect boundary.

Optional, by capability:

=================  ==========================================================
capability          what the environment then offers
=================  ==========================================================
crash_points        ``crash_points()`` and ``RunWorker(crash=...)`` at named sites
clock               ``advance_clock()`` drives leases, expiry and timers
approvals           signed approval decisions through ``approval_message()``
memory_injection    ``inject_memory()`` plants records in long-term memory
version_switch      ``RunWorker(code_version=...)`` runs older or newer code
context             ``observe()`` returns the model contexts workers built
storage_faults      ``storage_fault()`` cuts a worker's database connection
concurrent_workers  two workers may run at once (pause + continue barriers)
cancel              ``cancel()``: an operator cancels a run out of band
durable_state       ``durable_state()``: every run's durable state, normalized
operations          ``observe()`` returns the runs' ledger entries
                    (:attr:`Observation.operations`)
network_faults      ``network_endpoints()`` names the storage connection a
                    paused worker was using (the network fault family)
model_endpoint      the app reaches its model only through the world's
                    model endpoint (``World.serve_http(model=...)``), so
                    model faults fire there (the model fault family)
=================  ==========================================================

Optional methods, looked up with ``getattr`` (an environment without them
still satisfies the protocol):

``storage_kinds() -> Sequence[str]``
    Which :data:`STORAGE_KINDS` ``storage_fault()`` can inflict in this
    deployment (``pg_terminate`` needs Postgres, ``redis_client_kill`` Redis).
    Without it, an environment with the ``storage_faults`` capability is taken
    to offer every kind; a kind it cannot inflict then shows in the report as
    armed but never fired. See :func:`offered_storage_kinds`.

``observation_cursor() -> Hashable``
    Cheap to read, and moves whenever what ``observe()`` would report
    changes (a commit counter of the store, the length of a log it
    reads). The harness then calls ``observe()`` again only when the cursor
    moved since the last call, and otherwise takes the last observation as
    it stood (nothing new in it). None: no cursor this time, observe.
    Without it, every observation reads everything.

``runnable() -> bool``
    Whether a worker started now could move anything: False promises that
    every run is finished, or waits for what only the harness gives (an
    approval, an operator's answer, a timer the harness moves), so a worker
    would start, find nothing and exit. The final quiesce then ends with
    the first round whose worker exited 0, with nothing delivered and no
    world fault fired, after which ``runnable()`` says False -- instead of
    starting one more worker to see that nothing moves (``Adapter.drains``
    is the same promise made once for every worker that exits 0). Read it
    from the same durable records a worker reads to pick its runs. Without
    it, a worker is started to see.

``memory_versions(tenant, namespace, key) -> int`` and
``memory_id(tenant, namespace, key, version) -> str``
    With ``memory_injection``: the highest version of the key the runtime
    has stored, live or not (0: none), and the id the runtime gives a
    version of a key. Planted records are then numbered past the stored
    ones and named as the runtime names its own, so a runtime that numbers
    a new version wrongly (past the live versions only, after the newest
    lapsed) meets a planted record at the same id, as it would meet its
    own. Without them, planted records are numbered from 1 and named
    ``planted:...``.

``crash_point_trace() -> Sequence[tuple[Any, str, int]]`` and a
``trace_crash_points`` attribute (environment)
    With ``trace_crash_points`` set True, the workers record every crash
    point they pass; ``crash_point_trace()`` returns them in order as
    ``(worker, site, hit)`` (``worker``: any id of the process, its pid
    say). The harness profiles each workflow with it once, fault-free, and
    aims its targeted schedules at what it saw (a kill after every commit,
    a zombie before every effect).

``network_endpoints(worker: WorkerHandle) -> Sequence[Endpoint]``
    With the ``network_faults`` capability: the TCP connections to its
    stores that ``worker``, stopped at a ``pause`` crash point, was using
    there, the one in use first (an empty list: none). The harness then
    drops or resets that one connection's packets (:mod:`harness._netfilter`)
    and lets the worker go on. An adapter whose workers cannot say it may
    read it from ``/proc``: :func:`harness.adapters.tcp_connections`.

``route_worker(env, worker_id, services) -> dict[str, str]`` (the harness's hook)
    With ``network_faults``: before it starts a worker, the environment asks
    the harness for the URLs that worker is to use for its stores
    (``services``: name -> URL, as ``network_services()`` names them) and
    starts the worker with those. On the Toxiproxy backend each comes back
    pointing at a proxy of that worker's own (every connection it opens,
    its pool's new ones too, passes it, and a fault on it touches that
    worker alone); otherwise the URLs come back as given. The environment
    calls ``release_routes(env)`` in ``close()``. Both are
    :mod:`harness.adapters` functions; without them the network faults
    fall back to the kernel backend.

``Adapter.network_services() -> Mapping[str, str]``
    With ``network_faults``: the servers the workers' connections go to,
    service name -> URL, the store their transactions use first. The
    kernel backend matches TCP ports: a service reached over a Unix socket
    (``postgresql:///db``) cannot be faulted, so the faults aimed at it are
    never armed and the report lists them as not tested, with why (see
    :func:`harness.adapters._netinfo.offered_network_kinds`). Without it,
    every kind is armed, and one that finds no TCP connection is reported
    as never fired, with that cause.

``operator_message(run_id, applied, external_ref, message_id) -> dict | None``
    With ``operations``: the message that tells a run stopped at
    ``needs_operator`` what an operator found -- whether the call in doubt
    was applied (the world's record of it) and the reference it got. The
    final quiesce delivers it with ``deliver()``; the run must then move
    on. None: the run waits for no answer now. See
    :mod:`harness.nemesis._operator`.

``Adapter.lease_seconds: float``
    How long a worker's claim on a run lasts (default 30): the clock
    family's jumps and the zombie family's pauses are sized to outlast it.

``Adapter.rolls_back: bool``
    With ``version_switch``: True promises that an older release's workers
    may meet runs this release already touched (a rollback, a rolling
    deploy whose old workers still serve), and must then park such a run
    loudly or finish it right. The migration family then also runs
    rollback orders (this release, the previous one, this one again).
    Default False: many deployments drain old workers before a migration
    and never roll back past one, and an app that fails a run its previous
    release cannot read breaks no promise it made; rollback orders are
    then not tested, and the plan says so.

``Adapter.drains: bool``
    True promises that a worker which exits 0 has left nothing a worker
    started right after it could run now (it worked until nothing was
    claimable, or waited until its runtime was idle: ``kit.work_until_idle``).
    The final quiesce then ends with the first round whose worker exits 0
    with nothing delivered and no world fault fired, instead of starting one
    more worker to see that nothing moves. Default False: a worker that
    makes one pass over its runs and leaves one that raised for the next
    worker does not drain.

``Adapter.scenario_seconds: float``
    The real time one scenario takes, about (a runtime on real time: a
    server round trip, a 2 s activity timeout after every kill). The
    harness plans the budget with it: it says before the search how many
    planned scenarios fit in ``--budget`` (without it: measured from the
    fault-free runs, which no fault slows). See ``docs/architecture.md``,
    "Planning on real time".

``Adapter.worker_timeout: float``
    How long one of its workers may run before the harness kills it and
    calls it stuck (default 120 s; the ``worker_timeout`` setting,
    ``--worker-timeout``, overrides it): a runtime on real time declares
    what its slowest honest worker needs. See
    :func:`harness.nemesis.resolve_worker_timeout`.

``Adapter.migrated_input(workflow, input, code_version) -> dict``
    The input of a run that release ``code_version`` accepted, as today's
    code holds it after the upgrade: the oracle of a run carried across a
    release runs it (the ``version_switch`` capability).

``Adapter.setup() -> None`` and ``Adapter.close() -> None``
    The run-level lifecycle (:class:`AdapterLifecycle`): start and release
    what a whole harness run shares (a server, a database, a connection
    pool), as opposed to one scenario's (``Adapter.open`` /
    ``Environment.close``). See :class:`AdapterLifecycle`.
"""

from __future__ import annotations

import string
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..model import CrashSpec, RunSpec, RunState, StorageKind
from ..vocabulary import Capability as Capability  # its home; adapters import it here
from ..world import World

#: The normalized status of a ledger entry (:attr:`Observation.operations`):
#: ``pending`` the intent is recorded and the call certainly not made;
#: ``in_doubt`` the call was (or may have been) made and its outcome is not
#: recorded; ``done`` the runtime holds the call as performed (confirmed, or
#: found performed by reconciliation); ``failed`` it holds the call as not
#: performed (refused, or found not performed).
OPERATION_STATUSES: tuple[str, ...] = ("pending", "in_doubt", "done", "failed")


#: Every storage fault kind a scenario may ask for (``StorageFault.kind``).
STORAGE_KINDS: tuple[StorageKind, ...] = ("pg_terminate", "redis_client_kill")


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


class MemoryTarget(_Frozen):
    """A long-term memory record a workflow's runs consult, where a planted
    one could change what they decide (``WorkflowSpec.memory_targets``):
    a policy fact that could waive an approval, a namespace whose records
    the run takes as evidence. The memory family plants its stale,
    expired, cross-tenant and poisoned records there, with ``value`` (what
    would do harm if the runtime believed it)."""

    #: the namespace the runs read; ``{field}`` names a field of the run's
    #: input (``"research/{topic}"``)
    namespace: str = Field(min_length=1)
    #: the record's key in it (``{field}`` too); a key the run reads but
    #: never writes itself, so a planted record changes nothing unless the
    #: runtime wrongly lets the run see it
    key: str = Field(min_length=1)
    value: Any = None

    @field_validator("namespace", "key")
    @classmethod
    def _template(cls, v: str) -> str:
        return _template(v)

    def at(self, run_input: dict[str, Any]) -> tuple[str, str]:
        """(namespace, key) for a run with ``run_input``; a field the input
        lacks is left as written."""
        fields = _Fields(run_input)
        return self.namespace.format_map(fields), self.key.format_map(fields)


class _Fields(dict[str, Any]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def _template(v: str) -> str:
    """``v`` if it is a template over a run's input fields (``{topic}``)."""
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(v) if f is not None]
    except ValueError as exc:
        raise ValueError(
            f"{v!r} is not a template: {exc} (write {{field}} for an input field, "
            "{{ and }} for a brace)"
        ) from None
    for f in fields:
        if not f.isidentifier():
            raise ValueError(f"{v!r} names {{{f}}}: give an input field's name, as {{topic}}")
    return v


def _trust(v: Any, what: str) -> float:
    """``v`` as a trust score: a real number from 0 to 1."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0.0 <= v <= 1.0:
        raise ValueError(
            f"{what} is {v!r}: give the lowest trust a record may have to reach the "
            "workflow's contexts, a number from 0.0 to 1.0 (the scale of a planted "
            "record's trust)"
        )
    return float(v)


class WorkflowSpec(_Frozen):
    """A workflow the adapter can run, for scenario generation."""

    name: str
    #: example inputs; generated workloads pick among and vary them
    inputs: tuple[dict[str, Any], ...]
    needs_approval: bool = False
    #: effect kinds ("service.action") this workflow performs when it succeeds
    effects: tuple[str, ...] = ()
    #: the most calls a run makes to one service action that keeps refusing
    #: (its first try and its retries) before it gives up; None: no limit
    #: declared (retrying until the service is back is then a fair policy).
    #: Declared, it is checked by ``progress`` under a persistent outage.
    retry_limit: int | None = Field(default=None, ge=1)
    #: memory the runs consult, where planted records are aimed (the memory
    #: family). None declared: the records the fault-free run's contexts
    #: listed (the ``context`` capability) tell the namespaces it reads;
    #: neither, and the memory family does not run (the report says so).
    memory_targets: tuple[MemoryTarget, ...] = ()
    #: the trust floor its runs read memory at: the lowest trust (0.0 to
    #: 1.0, the scale of a planted record's ``trust``) a record may have and
    #: still reach one of its contexts. One number for every namespace the
    #: runs read, or one per namespace (a template, as in ``memory_targets``:
    #: ``{"policy": 1.0, "notes/{user}": 0.0}``). Declared, ``memory_safety``
    #: fails a context that lists a planted record whose trust is below it;
    #: None: no floor declared, and none is judged.
    memory_floor: float | dict[str, float] | None = None
    #: the longest its runs wait (for a decision, an event, a child's answer)
    #: from the moment they start waiting: the deadline a waiting run reports
    #: (``RunView.wake_at``) is never further than this from the harness's
    #: clock. Declared, ``progress`` fails a wait whose deadline is further
    #: out: a deadline taken from another clock (wall time where the runtime
    #: runs on the harness's) or in other units (milliseconds for seconds),
    #: which would keep a run waiting long after it should have timed out.
    #: None: not declared, not judged.
    max_wait_seconds: float | None = Field(default=None, gt=0)

    @field_validator("memory_floor", mode="before")
    @classmethod
    def check_memory_floor(cls, v: Any) -> float | dict[str, float] | None:
        """``v`` as a ``memory_floor``; ValueError saying what is wrong and
        what to give instead."""
        if v is None:
            return None
        if not isinstance(v, Mapping):
            return _trust(v, "memory_floor")
        if not v:
            raise ValueError(
                "memory_floor is an empty mapping: name a namespace and its floor "
                '({"policy": 1.0}), or leave memory_floor None to declare none'
            )
        out: dict[str, float] = {}
        for namespace, floor in v.items():
            if not isinstance(namespace, str) or not namespace:
                raise ValueError(
                    f"memory_floor names namespace {namespace!r}: give a namespace "
                    'template, as "research/{topic}"'
                )
            try:
                _template(namespace)
            except ValueError as exc:
                raise ValueError(f"memory_floor: {exc}") from None
            out[namespace] = _trust(floor, f"memory_floor[{namespace!r}]")
        return out


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


@runtime_checkable
class WorkerHandle(Protocol):
    """A worker process: real, so that SIGKILL means what it means."""

    worker_id: str
    pid: int

    def wait(self, timeout: float) -> WorkerExit:
        """Block until the worker exits or stops itself (SIGSTOP at a crash point)."""
        ...

    def kill(self) -> None: ...

    def cont(self) -> None:
        """SIGCONT a stopped worker."""
        ...


class DurableState(_Frozen):
    """What the runtime keeps durably, per run, after the scenario (the
    ``durable_state`` capability): conversation items, checkpoint channel
    values, ledger entries, memory written -- JSON-able, normalized so that a
    correct runtime's faulted run equals its fault-free run. Keys named in
    ``volatile`` (ids, timestamps, attempt counters) are ignored at any depth."""

    runs: dict[str, Any] = Field(default_factory=dict)
    volatile: tuple[str, ...] = ()


class Declarations(_Frozen):
    """What a runtime promises, so checkers judge it by its own word."""

    #: effect kind ("service.action") -> "exactly_once" | "at_most_once" | "at_least_once"
    delivery: dict[str, str] = Field(default_factory=dict)
    #: legal transitions, raw status -> successors; None if the runtime has no table
    transitions: dict[str, list[str]] | None = None
    #: effect kinds that need an approval for their exact parameters
    needs_approval: dict[str, str] = Field(default_factory=dict)

    @field_validator("delivery")
    @classmethod
    def _known_promises(cls, value: dict[str, str]) -> dict[str, str]:
        """A promise the checkers do not know is refused where it is made:
        judged later, it would only make every run inconclusive."""
        known = ("exactly_once", "at_least_once", "at_most_once")
        for kind, promise in value.items():
            if promise not in known:
                close = promise.replace("-", "_").replace(" ", "_").lower()
                hint = f" (did you mean {close!r}?)" if close in known else ""
                raise ValueError(
                    f"the delivery of {kind!r} is {promise!r}, not one of {', '.join(known)}{hint}"
                )
        return value


@runtime_checkable
class Environment(Protocol):
    """One isolated deployment of the runtime under test, for one scenario."""

    world: World

    def declarations(self) -> Declarations: ...

    def crash_points(self) -> list[str]:
        """Named crash points (empty without the ``crash_points`` capability)."""
        ...

    def pause_points(self) -> list[str]:
        """Crash points where a worker may be held paused without holding a
        storage lock (outside any transaction): the barriers for races and
        zombies. A worker paused inside a transaction blocks every other
        writer for as long as the storage's lock timeout, which proves little
        and costs much."""
        ...

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> WorkerHandle:
        """Start a worker that works until idle, then exits 0."""
        ...

    def submit(self, run: RunSpec) -> None: ...

    def deliver(self, message: dict[str, Any]) -> bool:
        """Hand an inbound message to the runtime; False if it was a duplicate it
        recognised at the door. Raises for a message it refuses outright."""
        ...

    def approval_message(
        self, run_id: str, decision: str, variant: str, message_id: str
    ) -> dict[str, Any] | None:
        """A decision message for the approval ``run_id`` waits on (None if none)."""
        ...

    def observe(self) -> Observation: ...

    def now(self) -> float:
        """The environment's current (virtual) time."""
        ...

    def advance_clock(self, seconds: float) -> None: ...

    def inject_memory(self, record: dict[str, Any]) -> None: ...

    def storage_fault(self, kind: str) -> bool:
        """Cut the storage connections of running (or paused) workers, ``kind``
        one of :data:`STORAGE_KINDS`; True if one was cut, False if there was
        none to cut or the deployment has no such storage."""
        ...

    def cancel(self, run_id: str) -> bool:
        """An operator cancels ``run_id`` now, out of band, while a worker may
        hold it (``cancel`` capability); False if the run had already ended."""
        ...

    def durable_state(self) -> DurableState:
        """Every run's durable state, normalized (``durable_state`` capability);
        read once, after the scenario ended and workers stopped."""
        ...

    def close(self) -> None:
        """Stop every worker and remove every resource the environment created."""
        ...


class BaseEnvironment:
    """Defaults for what an environment need not do: subclass it and write
    only the required methods (``declarations``, ``start_worker``,
    ``submit``, ``observe``, ``now``, ``close``) and those your declared
    capabilities need.

    A default answers "nothing" where nothing is a true answer (no crash
    points, no decision message, no storage connection cut) and otherwise
    raises ``NotImplementedError`` naming the capability: the harness never
    calls those unless the adapter declares it, so the error only reaches a
    declaration that promises more than the environment does.
    """

    def _lacks(self, what: str, capability: str) -> NotImplementedError:
        return NotImplementedError(
            f"{type(self).__name__} {what} (the {capability} capability is not declared)"
        )

    def crash_points(self) -> list[str]:
        return []

    def pause_points(self) -> list[str]:
        return []

    def deliver(self, message: dict[str, Any]) -> bool:
        # Only a message approval_message() made is delivered: by default, none.
        raise NotImplementedError(f"{type(self).__name__} takes no inbound messages")

    def approval_message(
        self, run_id: str, decision: str, variant: str, message_id: str
    ) -> dict[str, Any] | None:
        return None

    def advance_clock(self, seconds: float) -> None:
        raise self._lacks("has no clock the harness can drive", "clock")

    def inject_memory(self, record: dict[str, Any]) -> None:
        raise self._lacks("cannot plant memory", "memory_injection")

    def storage_fault(self, kind: str) -> bool:
        return False

    def cancel(self, run_id: str) -> bool:
        raise self._lacks("cannot cancel runs", "cancel")

    def durable_state(self) -> DurableState:
        raise self._lacks("cannot show its durable state", "durable_state")


@runtime_checkable
class Adapter(Protocol):
    """A runtime, as the harness knows it.

    Optional, looked up with ``getattr``: the run-level hooks ``setup()``
    and ``close()`` (:class:`AdapterLifecycle`), and
    ``migrated_input(workflow, input, code_version)``, the input of a run an
    older release accepted as today's code holds it (``docs/adapters.md``).
    ``name``, ``capabilities``, ``workflows()`` and ``describe()`` are read
    when the adapter is loaded, before ``setup()``: they must not need it.
    """

    name: str
    capabilities: frozenset[Capability]

    def workflows(self) -> list[WorkflowSpec]: ...

    def open(self, workdir: Path, *, seed: int) -> Environment: ...

    def describe(self) -> dict[str, Any]:
        """Options and versions, for the report."""
        ...


@runtime_checkable
class AdapterLifecycle(Protocol):
    """The optional run-level hooks of an :class:`Adapter`: an adapter may
    define either, both or neither (the harness looks each up with
    ``getattr``; this protocol documents them and lets a type checker check
    an adapter that has both).

    Both are called in the harness process, from its main thread, by
    ``harness.run`` (so the CLI's ``run`` and the pytest suite),
    ``harness replay`` and ``harness check-adapter``. What either raises is
    an adapter error (exit 2, "adapter error: X.setup() raised ...").

    What ``setup()`` leaves on the adapter object (a server's URL, a port,
    a pool) is seen by ``open()`` and every environment, which run in the
    same process. Workers do not share that memory: they are forked from a
    fork server, a separate interpreter started at the first worker spawn
    and kept for the whole harness process (so a second run in one process,
    a pytest session say, reuses the first run's server). Hand a worker what
    it needs in its spawn arguments (``WorkerSet.spawn(..., args)``) or
    ``env=`` (applied per worker); an ``os.environ`` change made in
    ``setup()`` reaches only a fork server started after it. Processes and
    folders ``setup()`` starts should be owned
    (``harness.adapters.kit.owned_folder``, ``spawn_owned``), so that a
    SIGKILL of the harness leaves nothing the next run does not sweep.
    """

    def setup(self) -> None:
        """Start what the whole run shares. Called once, before the run uses
        the adapter for anything else: before the probe, the site profile
        and the search (a replay: before its scenario; a check: before its
        workflows). Folders of runs killed before are swept first, with their
        owned processes."""
        ...

    def close(self) -> None:
        """Release what the run shares. Called once, when the run ends,
        after every environment is closed -- also when it ends in an error,
        an interruption, or a ``setup()`` that raised or never ran (a
        refused report folder): release only what exists. When the run is
        already ending with an error, that error is reported and the close
        error is added to it as a note."""
        ...


class Bug(Protocol):
    """One seeded bug of a runtime (:class:`SeededBugs`); the reference
    runtime's ``SeededBug`` records are such."""

    @property
    def name(self) -> str:
        """What ``--adapter-opt bug=NAME`` calls it."""
        ...

    @property
    def breaks(self) -> str:
        """The property it breaks: the one a detection must name."""
        ...

    @property
    def description(self) -> str:
        """What goes wrong, in a sentence."""
        ...


@runtime_checkable
class SeededBugs(Protocol):
    """The optional hook of an :class:`Adapter` whose runtime carries seeded
    bugs: realistic mistakes behind a flag, switched on with
    ``--adapter-opt bug=NAME``, which show that the harness finds them.
    ``harness list bugs --adapter NAME`` asks the adapter for them (the
    reference adapter by default); what the hook raises is an adapter
    error."""

    def seeded_bugs(self) -> Iterable[Bug]:
        """Every seeded bug, in the order to list them."""
        ...


def route_worker(env: object, worker_id: str, services: Mapping[str, str]) -> dict[str, str]:
    """The URLs worker ``worker_id`` of ``env`` is to use for ``services``
    (name -> URL): through proxies of its own on the Toxiproxy backend of
    the network faults, else unchanged. Call it before starting the worker;
    call :func:`release_routes` when the environment closes. An adapter that
    does says so with a class attribute ``routes_workers = True``: only then
    are the faults only a proxy can inflict (a reply held back, fragmented
    or cut) aimed at its workers."""
    from .. import _toxiproxy

    return _toxiproxy.route_worker(env, worker_id, services)


def release_routes(env: object) -> None:
    """Remove the proxies :func:`route_worker` made for ``env`` (a no-op
    without them)."""
    from .. import _toxiproxy

    _toxiproxy.release_routes(env)


def missing_capabilities(adapter: Adapter, needed: set[Capability]) -> set[Capability]:
    return set(needed) - set(adapter.capabilities)


def offered_storage_kinds(
    env: Environment, capabilities: frozenset[Capability]
) -> tuple[StorageKind, ...]:
    """The storage fault kinds ``env`` offers: none without the
    ``storage_faults`` capability, else what its optional ``storage_kinds()``
    says (unknown kinds dropped), else every kind."""
    if Capability.STORAGE_FAULTS not in capabilities:
        return ()
    kinds = getattr(env, "storage_kinds", None)
    if kinds is None:
        return STORAGE_KINDS
    offered = set(kinds())
    return tuple(k for k in STORAGE_KINDS if k in offered)
