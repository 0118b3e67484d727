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
fork server imports it before any run's server exists: each worker gets
``PREFECT_API_URL`` in its env and re-reads them
(``refresh_global_settings_context``, the kit's ``configure`` hook) before
its target runs, which refuses to start if Prefect would still talk to an
ephemeral server of its own (``PREFECT_SERVER_ALLOW_EPHEMERAL_MODE=false``).

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
  (``PREFECT_FLOWS_HEARTBEAT_FREQUENCY``, events every 30 s or more) and the
  documented "detect zombie flows" automation (no heartbeat within 90 s:
  ``Crashed``). The heartbeat is a file per flow run, written at the claim
  and at each flow-run state the engine proposes: the harness moves its
  clock only between steps, while every worker is stopped or gone, so a
  worker that runs never falls behind, and one stopped past the lease is
  taken for dead, as Prefect's automation takes it.

Output: none (Prefect keeps a flow's return value only when results are
persisted, which the apps choose). Declared: ``crash_points`` (``flow_state``
before each flow-run state the engine proposes to the server: pausable, a
proposal is one request), ``concurrent_workers`` (the server serializes
claims), and ``clock`` with heartbeat detection. Not declared: durable state,
approvals, memory, code versions, storage faults, cancel, operations, context.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pkgutil
import socket
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from prefect import Flow, __version__, states
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId

from ...model import CrashSpec, RunSpec, RunState
from ...world import Caller, World, WorldClient
from .. import _contract as c
from .. import kit

#: Prefect's flow-run states as this deployment moves them; an ended run moves no more
TABLE = {"SCHEDULED": ["PENDING"], "PENDING": ["RUNNING", "CRASHED"], "CRASHED": ["SCHEDULED"]}
TABLE |= {"RUNNING": ["COMPLETED", "FAILED", "CRASHED"], "COMPLETED": [], "FAILED": []}
#: RunState by Prefect's state; any other (PENDING, RUNNING, CRASHED) is on its way: running
_STATES = dict(SCHEDULED="pending", COMPLETED="completed", FAILED="failed", CANCELLED="cancelled")
SITES = ["flow_state"]
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


def _beat(work: Path, run_id: Any) -> kit.FileClock:
    return kit.FileClock(work / f"heartbeat-{run_id}")


def due(run: Any, work: Path, clock: kit.FileClock | None) -> str | None:
    """What the recovery does to ``run`` now: ``crash`` (its owner is gone:
    its process exited, or with ``clock`` its heartbeat is older than
    :data:`LEASE`), ``retry`` (crashed), ``claim`` (scheduled), or None."""
    kind = run.state_type.value if run.state_type else "SCHEDULED"
    if kind not in ("PENDING", "RUNNING"):
        return {"CRASHED": "retry", "SCHEDULED": "claim"}.get(kind)
    if clock is None:  # its process, ``host:pid``: reaped before the harness goes on
        with contextlib.suppress(AttributeError, ValueError, OSError):  # none, or gone
            os.kill(int(run.infrastructure_pid.rpartition(":")[2]), 0)
            return None
        return "crash"
    return "crash" if _beat(work, run.id).now() + LEASE <= clock.now() else None


def _moved(client: SyncPrefectClient, run_id: UUID, state: Any) -> bool:
    return _PROPOSE(client, run_id, state).status.value == "ACCEPT"


def _claim(client: SyncPrefectClient, work: Path, deployment: UUID, clock: Any) -> UUID | None:
    """Under the dispatch lock: crash what lost its owner, reschedule what
    crashed, claim one scheduled run (module docstring); its id, or None."""
    with open(work / "dispatch.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        mine = FlowRunFilter(deployment_id=FlowRunFilterDeploymentId(any_=[deployment]))
        cause = "its heartbeat stopped" if clock else "its process exited"
        gone: Any = states.Crashed(message=cause)
        for run in client.read_flow_runs(flow_run_filter=mine):
            todo = due(run, work, clock)
            if todo == "crash" and _moved(client, run.id, gone):
                todo = "retry"
            if todo == "retry" and _moved(client, run.id, states.AwaitingRetry()):
                todo = "claim"
            if todo == "claim" and _moved(client, run.id, states.Pending()):
                owner = f"{socket.gethostname()}:{os.getpid()}"  # as a Prefect worker records it
                client.update_flow_run(run.id, infrastructure_pid=owner)
                _beat(work, run.id).set(clock.now() if clock else kit.EPOCH)
                return run.id
    return None


#: the configuration hook of every worker (``kit.WorkerSet(configure=...)``):
#: Prefect read its settings when the fork server imported it
REREAD = "prefect.context:refresh_global_settings_context"


def worker_main(args: dict[str, Any]) -> int:
    """A worker: recover, claim and execute flow runs until none is left, then exit 0."""
    from prefect.flow_engine import run_flow
    from prefect.settings import get_current_settings

    work = Path(args["workdir"])
    # the env is set and Prefect's settings read again (REREAD)
    # by the time the target runs: check that Prefect took them
    if (api := get_current_settings().api.url) != args["api"]:
        raise RuntimeError(f"Prefect's API is {api}, not {args['api']}: settings not re-read")
    flow, clock = pkgutil.resolve_name(args["app"]), kit.FileClock(work / "clock")
    points = kit.CrashPoints(work / "crashpoints.jsonl", args["crash"], trace=args["trace"])

    def proposing(client: Any, run_id: UUID, *a: Any, **kw: Any) -> Any:
        points.hit("flow_state")
        _beat(work, run_id).set(clock.now())  # a heartbeat at each step (see ``due``)
        return _PROPOSE(client, run_id, *a, **kw)

    SyncPrefectClient.set_flow_run_state = proposing  # type: ignore[method-assign,assignment]
    world, registry = WorldClient(work / "world.db"), kit.RunRegistry(work / "registry.db")
    beats = clock if args["heartbeat"] else None
    deployment, me = UUID(args["deployment"]), args["worker_id"]
    with SyncPrefectClient(args["api"]) as client:
        while (run_id := _claim(client, work, deployment, beats)) is not None:
            flow_run = client.read_flow_run(run_id)
            run = {r.run_id: r for r in registry.runs()}[flow_run.name]
            world.attribute(Caller(tenant=run.tenant, run_id=run.run_id, worker_id=me))
            run_flow(flow, flow_run=flow_run, return_type="state")
    return 0


class PrefectEnvironment(c.BaseEnvironment):
    """One deployment of the flow on the run's server, a world served over HTTP, a registry."""

    def __init__(self, adapter: PrefectAdapter, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.client, self.work, self.heartbeat = adapter.client, workdir, adapter.heartbeat
        self.delivery = dict(adapter.workload.delivery)
        self.world = World(workdir / "world.db", clock=lambda: kit.EPOCH).create()
        self.face, self.registry = self.world.serve_http(), kit.RunRegistry(workdir / "registry.db")
        self.clock = kit.FileClock(workdir / "clock", start=kit.EPOCH)  # moves only with heartbeats
        flow_id, name = self.client.create_flow(adapter.flow), f"harness-{time.time_ns()}"
        self.deployment = self.client.create_deployment(flow_id, name, entrypoint=adapter.app)
        self.workers = kit.WorkerSet(workdir, adapter.preload, configure=(REREAD,))
        self.trace_crash_points = False
        self.args = {**adapter.args, "workdir": str(workdir), "url": self.face.url}
        self.args["deployment"] = str(self.deployment)
        # the app's providers at the world, Prefect's API and never a server
        # of its own, persisted results here
        self.env = {k: v.format(url=self.face.url) for k, v in adapter.workload.env.items()}
        self.env["PREFECT_API_URL"] = self.args["api"]
        self.env["PREFECT_SERVER_ALLOW_EPHEMERAL_MODE"] = "false"
        self.env["PREFECT_LOCAL_STORAGE_PATH"] = str(workdir / "results")

    def declarations(self) -> c.Declarations:
        return c.Declarations(delivery=self.delivery, transitions=TABLE)

    def crash_points(self) -> list[str]:
        return list(SITES)

    pause_points = crash_points  # a state proposal is one request: nothing is held open

    def crash_point_trace(self) -> list[tuple[int, str, int]]:
        return kit.crash_point_trace(self.work / "crashpoints.jsonl")

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> c.WorkerHandle:
        crashed, trace = None if crash is None else crash.model_dump(), self.trace_crash_points
        args = {**self.args, "worker_id": worker_id, "crash": crashed, "trace": trace}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args, env=self.env)

    def submit(self, run: RunSpec) -> None:
        create, params = self.client.create_flow_run_from_deployment, dict(run.input)
        made = create(self.deployment, parameters=params, name=run.run_id)
        self.registry.add(run.run_id, run.tenant, "SCHEDULED", data={"flow_run": str(made.id)})

    def _view(self, run: kit.RunRecord) -> c.RunView:
        """The run as Prefect holds it; its new states recorded as transitions."""
        history = self.client.read_flow_run_states(UUID(run.data["flow_run"]))
        for n, s in enumerate(history[run.version :], start=run.version + 1):
            kind, record = s.type.value, self.registry.record
            record(run.run_id, kind, actor="prefect", action=s.name or kind, state_version=n)
        raw, beat = history[-1].type.value, _beat(self.work, run.data["flow_run"])
        wake = beat.now() + LEASE if self.heartbeat and raw in ("PENDING", "RUNNING") else None
        view = {"raw_status": raw, "state": RunState(_STATES.get(raw, "running")), "wake_at": wake}
        error = history[-1].message if raw == "FAILED" else None
        return c.RunView(run_id=run.run_id, tenant=run.tenant, error=error, **view)

    def observe(self) -> c.Observation:
        views = tuple(self._view(run) for run in self.registry.runs())
        return c.Observation(runs=views, transitions=self.registry.new_transitions())

    def now(self) -> float:
        return self.clock.now()

    def advance_clock(self, seconds: float) -> None:
        self.clock.advance(seconds)

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.face.close(wait=False)
        self.registry.close()
        self.world.close()


class PrefectAdapter:
    """A Prefect flow: ``app=package.module:APP`` (a ``@flow``); ``workload`` (a
    :class:`PrefectWorkload`, default ``WORKLOAD`` in the app's package's
    ``workload`` module); ``crash_detection=exit|heartbeat`` (module
    docstring); ``api``: the API URL of a Prefect server you run
    (``prefect server start``: ``http://127.0.0.1:4200/api``), which the
    adapter uses instead of starting one of its own and leaves running."""

    name = "prefect"
    #: a worker exits 0 only when it found nothing to recover or claim
    drains = True
    lease_seconds = LEASE
    folder: kit.OwnedFolder | None = None

    def __init__(self, app: str, workload: str = "", crash_detection: str = "exit", api: str = ""):
        self.app, self.api, package = app, api, app.partition(":")[0].rpartition(".")[0]
        self.workload_spec = workload or f"{package}.workload:WORKLOAD"
        self.workload = pkgutil.resolve_name(self.workload_spec)
        self.flow, self.heartbeat = pkgutil.resolve_name(app), crash_detection == "heartbeat"
        want = "app: a Prefect flow, workload: a PrefectWorkload, crash_detection: exit|heartbeat"
        got = f"{type(self.flow).__name__}, {type(self.workload).__name__}, {crash_detection!r}"
        ok = isinstance(self.flow, Flow) and isinstance(self.workload, PrefectWorkload)
        if not ok or crash_detection not in ("exit", "heartbeat"):
            raise ValueError(f"{want}; not {got}")
        self.preload = ("prefect.flow_engine", __name__)  # the app: per worker, after its env
        self.args = {"app": app, "workload": self.workload_spec, "heartbeat": self.heartbeat}
        caps = {c.Capability.CRASH_POINTS, c.Capability.CONCURRENT_WORKERS}
        self.capabilities = frozenset(caps | ({c.Capability.CLOCK} if self.heartbeat else set()))

    def setup(self) -> None:
        """Start the run's Prefect server on a free loopback port, or with
        ``api`` connect to the user's (idempotent)."""
        if "api" in self.args:
            return
        server, log = None, None
        if not self.api:
            with socket.create_server(("127.0.0.1", 0)) as free:  # a port for the server to take
                port = str(free.getsockname()[1])
            self.folder = kit.owned_folder("prefect")
            self.api, log = f"http://127.0.0.1:{port}/api", self.folder.path / "prefect.log"
            env = {**os.environ, "PREFECT_HOME": str(self.folder.path)}  # its database: prefect.db
            argv = [sys.executable, "-m", "prefect", "server", "start", "--host", "127.0.0.1"]
            argv += ["--port", port, "--no-services", "--no-ui", "--analytics-off"]
            server = kit.spawn_owned(argv, folder=self.folder, env=env, log=log)
        self.args["api"], deadline = self.api, time.monotonic() + (10 if server is None else 180)
        self.client = SyncPrefectClient(self.api).__enter__()  # a first start migrates: 180 s
        while (server is None or server.poll() is None) and time.monotonic() < deadline:
            if self.client.api_healthcheck() is None:
                return
            time.sleep(0.1)
        why = log.read_text() if log else "is the server you run (`prefect server start`) up?"
        raise RuntimeError(f"no Prefect server answers on {self.api}:\n{why}")

    def workflows(self) -> list[c.WorkflowSpec]:
        return list(self.workload.workflows)

    def open(self, workdir: Path, *, seed: int) -> PrefectEnvironment:
        self.setup()  # for an engine driven without the run's hooks
        return PrefectEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        described = {"app": self.app, "workload": self.workload_spec, "prefect": __version__}
        return {**described, "crash_detection": "heartbeat" if self.heartbeat else "exit"}

    def close(self) -> None:
        """Stop the server it started and remove its folder (idempotent); a
        server the user runs goes on."""
        if (client := vars(self).pop("client", None)) is not None:
            client.__exit__(None, None, None)
        if self.folder is not None:
            self.folder.close(grace=2.0)  # idempotent; the server keeps nothing
