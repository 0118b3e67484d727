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

Optional methods and attributes, found by name (an environment without
them still satisfies the protocol), are listed with what each does in
:mod:`harness.adapters._hooks`, which also refuses a misspelled one.

The records an environment reports are in ``_records``, what an adapter
offers and promises in ``_workflows``: every name is also here, and in
:mod:`harness.adapters`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..model import CrashSpec, RunSpec, StorageKind
from ..vocabulary import Capability as Capability  # its home; adapters import it here
from ..world import World
from ._records import (
    OPERATION_STATUSES,
    ApprovalRecord,
    ContextRecord,
    DurableState,
    Endpoint,
    Observation,
    RunView,
    Transition,
    WorkerExit,
)
from ._workflows import Declarations, MemoryTarget, WorkflowSpec

__all__ = [
    "OPERATION_STATUSES",
    "STORAGE_KINDS",
    "Adapter",
    "AdapterLifecycle",
    "ApprovalRecord",
    "BaseEnvironment",
    "Bug",
    "Capability",
    "ContextRecord",
    "Declarations",
    "DurableState",
    "Endpoint",
    "Environment",
    "MemoryTarget",
    "Observation",
    "RunView",
    "SeededBugs",
    "Transition",
    "WorkerExit",
    "WorkerHandle",
    "WorkflowSpec",
    "missing_capabilities",
    "offered_storage_kinds",
    "release_routes",
    "route_worker",
]

#: Every storage fault kind a scenario may ask for (``StorageFault.kind``).
STORAGE_KINDS: tuple[StorageKind, ...] = ("pg_terminate", "redis_client_kill")


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
