"""The adapter of the lease queue (``jobs.py``), written on the kit.

A queue with leases recovers by time: a job whose worker died is claimed
again once its lease expires. A harness that cannot move the runtime's
clock never sees that happen -- the run stays ``running`` and the repeat
the lease was hiding is never made. So the adapter declares
``Capability.CLOCK``, gives the environment and every worker one
``FileClock`` (the harness moves it through ``advance_clock``), and
reports a leased job as ``RunView(state=RUNNING, wake_at=<lease expiry>)``:
when nothing else moves, the harness moves the clock to the earliest
``wake_at``, as the queue's own time would, and the job runs again.

Options (``--adapter-opt``):

- ``job``: ``send_welcome`` (default: an email, no dedupe possible),
  ``charge`` (an idempotency key) or ``open_account`` (a lookup by
  business key): the workflow it offers.
- ``delivery``: the promise declared for the job's effect kind
  (``exactly_once`` by default; ``at_least_once`` is the honest promise
  for ``send_welcome``).
- ``clock``: ``virtual`` (default) as above, or ``constant``: no clock
  capability, a constant time and no ``wake_at`` -- the minimal adapter's
  pattern, kept to show what the harness says about a lease that can never
  expire.

    PYTHONPATH=. harness run --adapter examples.lease_queue.adapter:LeaseQueueAdapter
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.adapters import (
    BaseEnvironment,
    Capability,
    Declarations,
    ForkServerWorker,
    Observation,
    RunView,
    WorkflowSpec,
)
from harness.adapters.kit import EPOCH, ConstantClock, FileClock, RunRegistry, WorkerSet
from harness.model import CrashSpec, RunSpec, RunState
from harness.world import World, WorldClient

from .jobs import LEASE_SECONDS, JobQueue, work

#: the job kinds: the effect kind each performs, and an example payload
JOBS: dict[str, tuple[str, dict[str, Any]]] = {
    "send_welcome": ("email.send", {"to": "c-1", "template": "welcome"}),
    "charge": ("payments.charge", {"customer_id": "c-1", "amount_cents": 500}),
    "open_account": ("provisioning.create_account", {"customer_id": "c-1", "plan": "basic"}),
}
STATES = {"pending": RunState.PENDING, "running": RunState.RUNNING, "done": RunState.COMPLETED}
#: a job goes back to pending when a service refused its call
TABLE = {"pending": ["running", "done"], "running": ["running", "pending", "done"], "done": []}


def worker_main(args: dict[str, Any]) -> int:
    """A worker process: run what the queue hands out, then exit 0."""
    clock = FileClock(args["clock"]) if args["clock"] else ConstantClock()
    world = WorldClient(args["world"], clock=clock.now)
    work(JobQueue(args["jobs"]), world, clock.now, args["worker_id"])
    return 0


class LeaseQueueEnvironment(BaseEnvironment):
    """One deployment: the queue's file, a world, a clock, its workers."""

    def __init__(self, workdir: Path, adapter: LeaseQueueAdapter) -> None:
        workdir.mkdir(parents=True, exist_ok=True)  # the harness names it, not makes it
        virtual = Capability.CLOCK in adapter.capabilities
        self.clock = FileClock(workdir / "clock", start=EPOCH) if virtual else ConstantClock()
        self.world = World(workdir / "world.db", clock=self.clock.now).create()
        self.queue = JobQueue(str(workdir / "jobs.db"))
        self.adapter = adapter
        self.args = {
            "jobs": str(workdir / "jobs.db"),
            "world": self.world.path,
            "clock": str(workdir / "clock") if virtual else None,
        }
        self.workers = WorkerSet(workdir, [__name__])  # output in workdir/workers.log
        self.registry = RunRegistry(workdir / "registry.db", clock=self.clock.now)

    def declarations(self) -> Declarations:
        kind = JOBS[self.adapter.job][0]
        return Declarations(delivery={kind: self.adapter.delivery}, transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        self.queue.put(run.run_id, run.tenant, run.workflow, run.input)

    def observe(self) -> Observation:
        views = []
        for job in self.queue.jobs():
            state = STATES[job["status"]]
            # A leased job wakes up when its lease expires: say when.
            leased = state is RunState.RUNNING and isinstance(self.clock, FileClock)
            views.append(
                RunView(
                    run_id=job["id"],
                    tenant=job["tenant"],
                    state=state,
                    raw_status=job["status"],
                    output=job["result"],
                    wake_at=job["lease_until"] if leased else None,
                )
            )
        return self.registry.observation(views)

    def now(self) -> float:
        return self.clock.now()

    def advance_clock(self, seconds: float) -> None:
        if not isinstance(self.clock, FileClock):
            return super().advance_clock(seconds)  # raises: no clock capability
        self.clock.advance(seconds)

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.registry.close()
        self.queue.db.close()
        self.world.close()


class LeaseQueueAdapter:
    """The lease queue (options: ``job``, ``delivery``, ``clock``; see the module)."""

    name = "lease_queue"
    #: how long a claim lasts: after a kill the harness waits it out
    lease_seconds = LEASE_SECONDS

    def __init__(
        self, job: str = "send_welcome", delivery: str = "exactly_once", clock: str = "virtual"
    ) -> None:
        if job not in JOBS:
            raise ValueError(f"job must be one of {', '.join(JOBS)}; got {job!r}")
        if clock not in ("virtual", "constant"):
            raise ValueError(f"clock must be virtual or constant; got {clock!r}")
        self.job, self.delivery, self.clock = job, delivery, clock
        caps = {Capability.CLOCK} if clock == "virtual" else set()
        self.capabilities: frozenset[Capability] = frozenset(caps)

    def workflows(self) -> list[WorkflowSpec]:
        kind, payload = JOBS[self.job]
        return [WorkflowSpec(name=self.job, inputs=(payload,), effects=(kind,))]

    def open(self, workdir: Path, *, seed: int) -> LeaseQueueEnvironment:
        return LeaseQueueEnvironment(workdir, self)

    def describe(self) -> dict[str, Any]:
        return {"job": self.job, "delivery": self.delivery, "clock": self.clock}
