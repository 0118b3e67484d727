"""What a fault handler may touch: the step context the runner hands it.

A handler is a function ``handler(ctx, step)``. It acts on the environment
(``ctx.env``, whose ``world`` and clock it may use), and says what it did
through ``ctx.recorder``: events into the history and faults into the
coverage. It never orders anything itself; the runner calls it, and syncs
the history after it returns.

Both protocols are implemented by the runner (``harness.runner``), which
sits above this package: the nemesis knows the runner only by these shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from ..adapters import Adapter, Capability, Environment, Observation, WorkerExit, WorkerHandle
from ..model import CrashSpec, EventF, RunSpec


class ScenarioError(Exception):
    """The scenario cannot be executed as written (a bug in the scenario or
    the harness, not a finding about the runtime).

    ``problems`` lists every reason found, one line each, when the scenario
    was checked before it ran (:func:`~harness.nemesis.validate`).
    """

    def __init__(self, message: str, problems: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.problems = problems


class Recorder(Protocol):
    """The history of one run, and the coverage of its faults."""

    def record(self, type_: str, f: EventF, process: str, value: dict[str, Any]) -> None:
        """Append one event, stamped with the environment's time."""
        ...

    def fault(self, kind: str, fired: bool, *, armed: bool = True, **value: Any) -> None:
        """Count one fault of ``kind`` in the coverage and record it; ``value``
        says where (``runs`` names the runs whose outcome it may change)."""
        ...

    def arm(self, kind: str) -> None:
        """Count one fault of ``kind`` as armed, not fired: its firing is
        recorded later, when the history syncs (a world rule)."""
        ...

    def observe(self) -> Observation:
        """Observe the runtime, recording what is new."""
        ...


class StepContext(Protocol):
    """One run in progress, as a fault handler sees it."""

    @property
    def recorder(self) -> Recorder: ...

    @property
    def env(self) -> Environment: ...

    @property
    def adapter(self) -> Adapter:
        """The adapter (its declared workflows, e.g. their retry limits)."""
        ...

    @property
    def capabilities(self) -> frozenset[Capability]:
        """What the adapter declares (checked before the run: see ``validate``)."""
        ...

    @property
    def paused(self) -> dict[str, WorkerHandle]:
        """Workers stopped by a ``pause`` crash point, by worker id."""
        ...

    @property
    def serialized(self) -> dict[str, list[str]]:
        """Workers armed to pause that ended without reaching their site
        while others were held at a crash point, with those others: the
        runtime serialized them (a lock, a lease, a claim taken earlier)."""
        ...

    @property
    def worker_timeout(self) -> float:
        """Longest a worker may run before it is killed as stuck (seconds)."""
        ...

    @property
    def runs(self) -> Mapping[str, RunSpec]:
        """The scenario's runs, by run id."""
        ...

    @property
    def decided(self) -> set[str]:
        """Approval ids a valid decision was delivered for."""
        ...

    def start(self, worker_id: str) -> WorkerHandle:
        """Record the start of a worker (no crash point, today's code) and start it."""
        ...

    def await_worker(self, handle: WorkerHandle, crash: CrashSpec | None = None) -> WorkerExit:
        """Wait for a worker to end or stop, sync the history and record how
        it ended (and, after a kill, wait out its lease)."""
        ...

    def message_id(self, run_id: str, tag: str) -> str:
        """A fresh, deterministic message id."""
        ...
