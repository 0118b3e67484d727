"""Prefect flows on a local Prefect server the adapter owns, behind the contract, on the kit.

The app is a Prefect ``@flow`` (option ``app=package.module:APP``) that
imports nothing from the harness: its tasks call their providers over HTTP at
URLs they read from the environment, which a :class:`PrefectWorkload` points
at the world's HTTP face (option ``workload``, by default ``WORKLOAD`` in the
``workload`` module beside the app's).

One Prefect server (``prefect server start --no-services``, its SQLite file in
a folder owned through the kit) serves a whole harness run, like the Temporal
dev server: :meth:`PrefectAdapter.setup` starts it, :meth:`PrefectAdapter.close`
stops it, a SIGKILLed harness takes it along (a parent-death signal) and the
next run sweeps its folder. Each environment has a deployment of the flow of
its own; a run is a flow run of that deployment (name = run id), created
``SCHEDULED``. Statuses and transitions are Prefect's state history.

**Settings.** Prefect reads its settings once, when it is imported, and the
fork server imports it before any run's server exists: a worker sets
``PREFECT_API_URL`` and re-reads them (``refresh_global_settings_context``)
before any Prefect call, and refuses to start if Prefect would still talk to
an ephemeral server of its own (``PREFECT_SERVER_ALLOW_EPHEMERAL_MODE=false``).

**Recovery is the deployment's, played by the worker.** Prefect resumes
nothing by itself: a flow run whose process was SIGKILLed stays ``RUNNING``
for ever, and the server refuses to reschedule a run without a deployment.
In production a Prefect *worker* marks ``Crashed`` a flow run whose process it
saw exit, an *automation* reschedules crashed runs (``AwaitingRetry``, what
``prefect flow-run retry`` does) and a worker of the work pool claims each
scheduled run (``Pending``, recording its ``infrastructure_pid``) and executes
it. Each harness worker plays all three, one at a time under a lock (the
server's single dispatcher), and then exits when nothing is left to claim.
``crash_detection`` says how a run's owner is found gone:

* ``exit`` (default): its process (``infrastructure_pid``) has exited -- a
  Prefect worker watching the flow-run processes it started;
* ``heartbeat``: its heartbeat is older than :data:`LEASE` on the harness's
  virtual clock (``clock``) -- Prefect's flow-run heartbeats
  (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, events) and the documented "detect
  zombie flows" automation (no heartbeat within 90 s: ``Crashed``), with the
  heartbeat kept in a file per flow run on the virtual clock. A process that
  merely stalls past it is taken for dead, as there.

Declared: ``crash_points`` (``flow_state`` before each flow-run state the
engine proposes to the server, ``task_state`` before each task-run state;
both pausable), ``concurrent_workers`` (the server serializes claims), and
``clock`` with heartbeat detection. Not declared: durable state, approvals,
memory, code versions, storage faults, cancel, operations, context.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pkgutil
import socket
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import Flow, states
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId
from prefect.client.schemas.objects import FlowRun
from prefect.task_engine import SyncTaskRunEngine

from ...model import CrashSpec, RunSpec, RunState
from ...world import Caller, World, WorldClient
from .. import _contract as c
from .. import kit

_ENDS = ["COMPLETED", "FAILED", "CANCELLED"]
#: Prefect's flow-run states as this deployment moves them; an ended run moves no more
TABLE: dict[str, list[str]] = {
    "SCHEDULED": ["PENDING", "CANCELLED"],
    "PENDING": ["RUNNING", "CRASHED", "CANCELLED"],
    "RUNNING": ["COMPLETED", "FAILED", "CRASHED", "CANCELLED"],
    "CRASHED": ["SCHEDULED"],  # AwaitingRetry: the retry automation
    **{end: [] for end in _ENDS},
}
_STATES = {"SCHEDULED": "pending", "COMPLETED": "completed", "FAILED": "failed"}
SITES = ("flow_state", "task_state")
#: heartbeat detection: a run whose heartbeat is older is crashed (the zombie automation's 90 s)
LEASE = 90.0
_PROPOSE = SyncPrefectClient.set_flow_run_state  # the recovery's own calls hit no crash point


@dataclass(frozen=True)
class PrefectWorkload:
    """What the harness knows of a flow that knows nothing of it: the
    workflows (each run's input is the flow's parameters), the delivery per
    effect kind, and ``env``, each value formatted with ``url`` (the world's
    HTTP face), set in each worker before the app is imported."""

    workflows: tuple[c.WorkflowSpec, ...]
    delivery: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)


def _alive(owner: str | None) -> bool:
    """Whether the process ``host:pid`` (an ``infrastructure_pid``) still lives."""
    pid = (owner or ":").rpartition(":")[2]
    try:
        stat = Path(f"/proc/{int(pid)}/stat").read_text()
    except (ValueError, OSError):
        return False
    return stat.rpartition(")")[2].split()[0] not in ("Z", "X")  # not a dead zombie


def gone(run: FlowRun, work: Path, clock: kit.FileClock | None) -> bool:
    """Whether a claimed run's owner is gone (module docstring), as of now."""
    if clock is None:
        return not _alive(run.infrastructure_pid)
    beat = kit.FileClock(work / "heartbeats" / str(run.id))
    return not beat.path.exists() or beat.now() + LEASE <= clock.now()


def _runs(client: SyncPrefectClient, deployment: UUID) -> list[FlowRun]:
    ids = FlowRunFilterDeploymentId(any_=[deployment])
    return client.read_flow_runs(flow_run_filter=FlowRunFilter(deployment_id=ids))


def _claim(client: SyncPrefectClient, args: dict[str, Any], clock: kit.FileClock | None) -> Any:
    """Under the dispatch lock: crash what lost its owner, reschedule what
    crashed, claim one scheduled run (module docstring); its id, or None."""
    work = Path(args["workdir"])
    with open(work / "dispatch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for run in _runs(client, UUID(args["deployment"])):
            kind = run.state.type.value if run.state else "SCHEDULED"
            if kind in ("PENDING", "RUNNING") and gone(run, work, clock):
                if clock is not None:  # a live process refreshes within 50 ms: recheck
                    time.sleep(0.2)
                    run = client.read_flow_run(run.id)
                    if not gone(run, work, clock):
                        continue
                why = "its heartbeat stopped" if clock else "its process exited"
                kind = _PROPOSE(client, run.id, states.Crashed(message=why)).state.type.value  # type: ignore[union-attr]
            if kind == "CRASHED":
                kind = _PROPOSE(client, run.id, states.AwaitingRetry()).state.type.value  # type: ignore[union-attr]
            if kind == "SCHEDULED" and _PROPOSE(client, run.id, states.Pending()).status.value == "ACCEPT":
                client.update_flow_run(run.id, infrastructure_pid=f"{socket.gethostname()}:{os.getpid()}")
                if clock is not None:
                    kit.FileClock(work / "heartbeats" / str(run.id), start=clock.now())
                return run.id
    return None


@contextlib.contextmanager
def _heartbeat(path: Path, clock: kit.FileClock | None) -> Iterator[None]:
    """Beat on the virtual clock every 50 ms while the flow runs (a stopped
    process stops beating)."""
    done = threading.Event()

    def beat() -> None:
        while clock is not None and not done.wait(0.05):
            kit.FileClock(path, start=clock.now())

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def worker_main(args: dict[str, Any]) -> int:
    """A worker: recover, claim and execute flow runs until none is left, then exit 0."""
    from prefect.context import refresh_global_settings_context
    from prefect.flow_engine import run_flow
    from prefect.settings import get_current_settings

    workload: PrefectWorkload = pkgutil.resolve_name(args["workload"])
    os.environ.update({k: v.format(url=args["url"]) for k, v in workload.env.items()})
    os.environ.update(args["prefect_env"])
    refresh_global_settings_context()  # Prefect read its settings when the fork server imported it
    if get_current_settings().api.url != args["api"]:
        raise RuntimeError(f"Prefect's API is {get_current_settings().api.url}, not {args['api']}")
    flow, work = pkgutil.resolve_name(args["app"]), Path(args["workdir"])
    points = kit.CrashPoints(work / "crashpoints.jsonl", args["crash"], trace=args["trace"])

    def hit(original: Any, site: str) -> Any:
        def at_site(*a: Any, **kw: Any) -> Any:
            points.hit(site)
            return original(*a, **kw)

        return at_site

    SyncPrefectClient.set_flow_run_state = hit(_PROPOSE, "flow_state")  # type: ignore[method-assign]
    SyncTaskRunEngine.set_state = hit(SyncTaskRunEngine.set_state, "task_state")  # type: ignore[method-assign]
    clock = kit.FileClock(args["clock"]) if args["clock"] else None
    world, registry = WorldClient(work / "world.db"), kit.RunRegistry(work / "registry.db")
    with SyncPrefectClient(args["api"]) as client:
        while (run_id := _claim(client, args, clock)) is not None:
            flow_run = client.read_flow_run(run_id)
            run = registry.get(flow_run.name)
            assert run is not None, flow_run.name
            world.attribute(Caller(tenant=run.tenant, run_id=run.run_id, worker_id=args["worker_id"]))
            with _heartbeat(work / "heartbeats" / str(run_id), clock):
                run_flow(flow, flow_run=flow_run, return_type="state")
    return 0


class PrefectEnvironment(c.BaseEnvironment):
    """One deployment of the flow on the run's server, a world served over HTTP, a registry."""

    def __init__(self, adapter: PrefectAdapter, workdir: Path) -> None:
        (workdir / "heartbeats").mkdir(parents=True, exist_ok=True)
        self.client, self.work, self.workload = adapter.client, workdir, adapter.workload
        self.world = World(workdir / "world.db", clock=lambda: kit.EPOCH).create()
        self.face = self.world.serve_http()
        self.registry = kit.RunRegistry(workdir / "registry.db")
        self.clock = kit.FileClock(workdir / "clock", start=kit.EPOCH) if adapter.heartbeat else None
        flow_id = self.client.create_flow(adapter.flow)
        name = f"harness-{time.time_ns()}"  # unique on the run's server
        self.deployment = self.client.create_deployment(flow_id, name, entrypoint=adapter.app)
        self.workers, self.trace_crash_points = kit.WorkerSet(workdir, adapter.preload), False
        env = {"PREFECT_API_URL": adapter.api, "PREFECT_SERVER_ALLOW_EPHEMERAL_MODE": "false"}
        env |= {"PREFECT_LOCAL_STORAGE_PATH": str(workdir / "results")}  # persisted results
        self.args = {"app": adapter.app, "workload": adapter.workload_spec, "api": adapter.api}
        self.args |= {"workdir": str(workdir), "url": self.face.url, "prefect_env": env}
        self.args |= {"deployment": str(self.deployment), "clock": self.clock and str(self.clock.path)}

    def declarations(self) -> c.Declarations:
        return c.Declarations(delivery=dict(self.workload.delivery), transitions=TABLE)

    def crash_points(self) -> list[str]:
        return list(SITES)

    def pause_points(self) -> list[str]:
        return list(SITES)  # a state proposal is one request: nothing is held open

    def crash_point_trace(self) -> list[tuple[int, str, int]]:
        return kit.crash_point_trace(self.work / "crashpoints.jsonl")

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> c.WorkerHandle:
        crashed, trace = None if crash is None else crash.model_dump(), self.trace_crash_points
        args = {**self.args, "worker_id": worker_id, "crash": crashed, "trace": trace}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        made = self.client.create_flow_run_from_deployment(
            self.deployment, parameters=dict(run.input), name=run.run_id
        )
        self.registry.add(run.run_id, run.tenant, "SCHEDULED", data={"flow_run": str(made.id)})

    def _view(self, run: kit.RunRecord, flow_run: FlowRun) -> c.RunView:
        """The run as Prefect holds it; its new states recorded as transitions."""
        history = self.client.read_flow_run_states(flow_run.id)
        for version, state in enumerate(history[run.version :], start=run.version + 1):
            kind = state.type.value
            self.registry.record(run.run_id, kind, actor="prefect", action=state.name, state_version=version)
        raw = history[-1].type.value if history else "SCHEDULED"
        state = RunState(_STATES.get(raw, "cancelled" if raw == "CANCELLED" else "running"))
        wake = None
        if self.clock is not None and raw in ("PENDING", "RUNNING"):
            beat = kit.FileClock(self.work / "heartbeats" / str(flow_run.id))
            wake = beat.now() + LEASE if beat.path.exists() else self.clock.now()
        error = history[-1].message if raw == "FAILED" else None
        return c.RunView(run_id=run.run_id, tenant=run.tenant, state=state, raw_status=raw, error=error, wake_at=wake)

    def observe(self) -> c.Observation:
        held = {str(r.id): r for r in _runs(self.client, self.deployment)}
        views = [self._view(run, held[run.data["flow_run"]]) for run in self.registry.runs()]
        return c.Observation(runs=tuple(views), transitions=self.registry.new_transitions())

    def runnable(self) -> bool:
        """Whether a worker started now would recover or claim a run."""
        for run in _runs(self.client, self.deployment):
            kind = run.state.type.value if run.state else "SCHEDULED"
            if kind in ("SCHEDULED", "CRASHED"):
                return True
            if kind in ("PENDING", "RUNNING") and gone(run, self.work, self.clock):
                return True
        return False

    def now(self) -> float:
        return kit.EPOCH if self.clock is None else self.clock.now()

    def advance_clock(self, seconds: float) -> None:
        if self.clock is not None:
            self.clock.advance(seconds)

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.face.close(wait=False)
        self.registry.close()
        self.world.close()


class PrefectAdapter:
    """A Prefect flow: ``app=package.module:APP`` (a ``@flow``); ``workload`` (a
    :class:`PrefectWorkload`, default ``WORKLOAD`` in the app's package's
    ``workload`` module); ``crash_detection=exit|heartbeat`` (module docstring)."""

    name = "prefect"
    #: a worker exits 0 only when it found nothing to recover or claim
    drains = True
    lease_seconds = LEASE
    folder: kit.OwnedFolder | None = None
    client: SyncPrefectClient  # connected by setup()

    def __init__(self, app: str, workload: str | None = None, crash_detection: str = "exit") -> None:
        self.app, package = app, app.partition(":")[0].rpartition(".")[0]
        self.workload_spec = workload or f"{package}.workload:WORKLOAD"
        self.workload, self.flow = pkgutil.resolve_name(self.workload_spec), pkgutil.resolve_name(app)
        if not isinstance(self.workload, PrefectWorkload) or not isinstance(self.flow, Flow):
            raise ValueError(
                f"app={app!r} must name a Prefect flow (it is a {type(self.flow).__name__}) and "
                f"workload={self.workload_spec!r} a PrefectWorkload (a {type(self.workload).__name__})"
            )
        if crash_detection not in ("exit", "heartbeat"):
            raise ValueError(f"crash_detection={crash_detection!r}: exit or heartbeat")
        self.heartbeat, self.preload = crash_detection == "heartbeat", ("prefect.flow_engine", __name__)
        caps = {c.Capability.CRASH_POINTS, c.Capability.CONCURRENT_WORKERS}
        self.capabilities = frozenset(caps | ({c.Capability.CLOCK} if self.heartbeat else set()))

    def setup(self) -> None:
        """Start the run's Prefect server on a free loopback port (idempotent)."""
        if self.folder is not None:
            return
        with socket.socket() as free:  # a free loopback port, for the server to take
            free.bind(("127.0.0.1", 0))
            port = str(free.getsockname()[1])
        self.folder = kit.owned_folder("prefect")
        self.api, home = f"http://127.0.0.1:{port}/api", self.folder.path
        env = {**os.environ, "PREFECT_HOME": str(home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = f"sqlite+aiosqlite:///{home / 'prefect.db'}"
        argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
        argv += ["--port", port, "--no-services", "--no-ui", "--log-level", "WARNING"]
        server = kit.spawn_owned(argv, folder=self.folder, env=env, log=home / "prefect.log")
        deadline = time.monotonic() + 180  # its first start migrates the database
        while server.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{self.api}/health", timeout=5).close()
                self.client = SyncPrefectClient(self.api)
                self.client.__enter__()
                return
            time.sleep(0.1)
        log = (home / "prefect.log").read_text()
        raise RuntimeError(f"the Prefect server did not start on {self.api}:\n{log}")

    def workflows(self) -> list[c.WorkflowSpec]:
        return list(self.workload.workflows)

    def open(self, workdir: Path, *, seed: int) -> PrefectEnvironment:
        self.setup()  # for an engine driven without the run's hooks
        return PrefectEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        described = {"app": self.app, "workload": self.workload_spec}
        return {**described, "crash_detection": "heartbeat" if self.heartbeat else "exit",
                "prefect": metadata.version("prefect")}

    def close(self) -> None:
        """Stop the server and remove its folder (idempotent)."""
        if self.folder is not None:
            with contextlib.suppress(Exception):
                self.client.__exit__(None, None, None)
            self.folder.close(grace=2.0)
