"""One environment of a LangGraph application: its checkpointer storage,
registry, world and workers behind the contract."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any, Protocol

from ..._janitor import SchemaLease, tag
from ...model import CrashSpec, RunSpec, RunState
from ...world import World, request_hash
from .._contract import (
    BaseEnvironment,
    Declarations,
    DurableState,
    Endpoint,
    Observation,
    RunView,
    WorkerHandle,
)
from .._workers import ForkServerWorker
from ..kit import WorkerSet
from . import _worker
from ._app import LangGraphApp
from ._points import SITES, read_log
from ._store import Backend, Registry, RunRow, SaverSpec, create_storage, drop_storage, open_saver
from ._worker import EPOCH, TARGET, bound_graph, maybe_store, resumption, thread_config


class AdapterSettings(Protocol):
    """What an environment reads of its adapter (a ``LangGraphAdapter``,
    named here by what it offers: the adapter's module imports this one)."""

    @property
    def app(self) -> LangGraphApp: ...
    @property
    def app_spec(self) -> str: ...
    @property
    def checkpointer(self) -> Backend: ...
    @property
    def durability(self) -> str | None: ...
    @property
    def postgres_url(self) -> str | None: ...
    @property
    def network_timeout(self) -> float: ...
    @property
    def thread_prefix(self) -> str: ...
    @property
    def routes_workers(self) -> bool: ...
    def network_services(self) -> dict[str, str]: ...
    def preload(self) -> tuple[str, ...]: ...


#: Key of the long-term store's items in a run's durable state (LangGraph
#: reserves channel names that start with ``__``, so no channel has it).
STORE_KEY = "__store__"
#: Items read per page of ``store.search`` (its default is 10).
_PAGE = 100

_STATES = {
    "completed": RunState.COMPLETED,
    "failed": RunState.FAILED,
    "cancelled": RunState.CANCELLED,
}


class LangGraphEnvironment(BaseEnvironment):
    """One isolated deployment of a LangGraph application (see the contract)."""

    def __init__(self, adapter: AdapterSettings, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.adapter = adapter
        self.app = adapter.app
        self.workdir = workdir
        self.lock_dir = workdir / "locks"
        self.lock_dir.mkdir(exist_ok=True)
        self._lease: SchemaLease | None = None
        if adapter.checkpointer == "sqlite":
            self.saver = SaverSpec("sqlite", sqlite_path=str(workdir / "checkpoints.db"))
        else:
            # Leased before it exists: a later run sweeps it only once this
            # process is gone, from whatever PID namespace (_janitor).
            schema = f"lg_{tag()}"
            assert adapter.postgres_url is not None  # checked by the adapter
            self._lease = SchemaLease(adapter.postgres_url, schema)
            self.saver = SaverSpec(
                "postgres",
                postgres_url=adapter.postgres_url,
                schema=schema,
                network_timeout=adapter.network_timeout,
            )
        try:
            create_storage(self.saver, store=self.app.store)
        except BaseException:
            if self._lease is not None:
                self._lease.release()
            raise
        self.registry = Registry(workdir / "runs.db").create()
        self.world = World(workdir / "world.db", clock=lambda: EPOCH).create()
        self._stack = contextlib.ExitStack()
        self.store = self._stack.enter_context(maybe_store(self.app, self.saver))
        self._graph = bound_graph(
            adapter.app_spec,
            self.app,
            self.app.current_version,
            self._stack.enter_context(open_saver(self.saver, ready=True)),
            self.store,
        )
        # On PostgresSaver with network faults, each worker reaches Postgres
        # through a proxy of its own on the Toxiproxy backend (the kit's
        # routing): its checkpointer's, guard's and store's connections alike.
        # each code version's graph is compiled once in the fork server
        warm = ((f"{_worker.__name__}:prebuild", {"app": adapter.app_spec}),)
        self.workers = WorkerSet(workdir, adapter.preload(), environment=self, warm=warm)
        self._seen: set[str] = set()
        self.crash_log = workdir / "crashpoints.jsonl"
        #: trace every crash point hit of the workers started from now on
        #: (the harness's site profile; see crash_point_trace)
        self.trace_crash_points = False

    # -- declarations ---------------------------------------------------------

    def declarations(self) -> Declarations:
        # LangGraph has no state machine of its own to declare: transitions
        # are judged on versions and lineage only.
        return Declarations(
            delivery=dict(self.app.delivery),
            transitions=None,
            needs_approval=dict(self.app.needs_approval),
        )

    # -- crash points (PostgresSaver only) -------------------------------------------

    def crash_points(self) -> list[str]:
        return sorted(SITES) if self.saver.backend == "postgres" else []

    def crash_point_trace(self) -> list[tuple[int, str, int]]:
        """Every traced crash point hit so far, in order, as (worker pid, site,
        hit) (optional in the contract: the harness's site profile)."""
        return [
            (int(e["pid"]), str(e["site"]), int(e["hit"]))
            for e in read_log(str(self.crash_log))
            if e.get("action") == "trace"
        ]

    def network_endpoints(self, worker: WorkerHandle) -> list[Endpoint]:
        """The checkpointer connection ``worker`` was writing on when it
        paused at a crash point (optional in the contract: the
        ``network_faults`` capability). The worker read it from its own
        socket and logged it: the one connection the write uses, not a guess
        among the worker's connections (its long-term store's, its guard's)."""
        out = []
        for e in read_log(str(self.crash_log)):
            if e.get("pid") != worker.pid or e.get("action") != "pause" or not e.get("tcp"):
                continue
            local_host, local_port, remote_host, remote_port = e["tcp"]
            out.append(
                Endpoint(
                    local_host=local_host,
                    local_port=local_port,
                    remote_host=remote_host,
                    remote_port=remote_port,
                    service="postgres",
                )
            )
        return out[-1:]  # where it is paused now

    # -- workers --------------------------------------------------------------

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        if crash is not None and crash.site not in self.crash_points():
            if self.saver.backend != "postgres":
                raise NotImplementedError(
                    "LangGraph has no crash points on SQLite; kill at effect boundaries, or "
                    "use checkpointer=postgres (crash points in PostgresSaver's writes)"
                )
            raise ValueError(
                f"crash point {crash.site!r}: the LangGraph adapter's sites are "
                f"{', '.join(self.crash_points())}"
            )
        if code_version is not None and code_version not in self.app.versions:
            raise ValueError(
                f"code_version={code_version}: app {self.app.name!r} builds versions "
                f"{list(self.app.versions)}"
            )
        args = {
            "worker_id": worker_id,
            "app": self.adapter.app_spec,
            "code_version": code_version,
            "durability": self.adapter.durability,
            "thread_prefix": self.adapter.thread_prefix,
            "registry": self.registry.path,
            "saver": self.saver.to_dict(),
            "world": self.world.path,
            "lock_dir": str(self.lock_dir),
            "crash": None if crash is None else crash.model_dump(),
            "crash_log": str(self.crash_log),
            "trace": self.trace_crash_points,
        }
        return self.workers.spawn(worker_id, TARGET, args, services=self._services())

    def _services(self) -> dict[str, str]:
        """The stores a worker is routed to (``network_services()``), with
        the network faults only: ``saver.postgres_url`` in its args is
        replaced by its own proxy's URL on the Toxiproxy backend."""
        if not self.adapter.routes_workers:
            return {}
        return self.adapter.network_services()

    # -- ingress ----------------------------------------------------------------

    def _thread(self, run_id: str) -> str:
        return f"{self.adapter.thread_prefix}{run_id}"

    def submit(self, run: RunSpec) -> None:
        if run.workflow not in {w.name for w in self.app.workflows}:
            raise ValueError(f"app {self.app.name!r} has no workflow {run.workflow!r}")
        version = run.code_version
        if version is not None:
            if version not in self.app.versions:
                raise ValueError(f"code_version={version} is not one of {self.app.versions}")
            # Accepted by an older deployment: its input checkpoint is written
            # in that version's schema, before any node runs.
            from langgraph.graph import START

            with open_saver(self.saver, ready=True) as saver:
                old = bound_graph(self.adapter.app_spec, self.app, version, saver, self.store)
                old.update_state(
                    thread_config(self._thread(run.run_id)),
                    self.app.start_input(run.input, version),
                    as_node=START,
                )
        self.registry.add_run(RunRow(run.run_id, run.tenant, run.workflow, run.input, version))

    def deliver(self, message: dict[str, Any]) -> bool:
        payload = message["payload"]
        return self.registry.deliver(
            str(message["message_id"]), str(message["run_id"]), payload["approval_id"], payload
        )

    def approval_message(
        self, run_id: str, decision: str, variant: str, message_id: str
    ) -> dict[str, Any] | None:
        if variant != "valid":
            raise NotImplementedError(
                f"{variant} approvals need signed decisions, which LangGraph does not have "
                "(the approvals capability is not declared)"
            )
        snap = self._graph.get_state(thread_config(self._thread(run_id)))
        if not snap.interrupts:
            return None
        interrupt = snap.interrupts[0]
        value = interrupt.value if isinstance(interrupt.value, dict) else {}
        payload = {
            "approval_id": interrupt.id,
            "decision": decision,
            "approver": "alice",
            "role": value.get("role"),
        }
        return {"message_id": message_id, "run_id": run_id, "kind": "approval", "payload": payload}

    # -- observation --------------------------------------------------------------

    def observe(self) -> Observation:
        runs: list[RunView] = []
        transitions: list[dict[str, Any]] = []
        approvals: list[dict[str, Any]] = []
        for row in self.registry.runs():
            config = thread_config(self._thread(row.run_id))
            snap = self._graph.get_state(config)
            runs.append(self._view(row, snap))
            for a in snap.values.get(self.app.approvals_key) or ():
                params = a.get("params") or {}
                approvals.append({**a, "run_id": row.run_id, "params_hash": request_hash(params)})
            transitions += self._transitions(row, config)
        return Observation(
            runs=tuple(runs), transitions=tuple(transitions), approvals=tuple(approvals)
        )

    def runnable(self) -> bool:
        """Whether a worker started now would resume a thread: what it reads to
        decide (``_worker.resumption``), read here (optional in the contract)."""
        return any(
            resumption(
                self._graph.get_state(thread_config(self._thread(row.run_id))),
                self.app,
                self.registry,
                row.run_id,
            )
            is not None
            for row in self.registry.runs()
        )

    def durable_state(self) -> DurableState:
        """Each thread's channel values at its last checkpoint (JSON-able; what
        is not JSON shows as its ``str``), and with a long-term store, under
        ``__store__``, the items of the run's namespace; volatile: approval ids
        (interrupt ids) and the app's ``volatile`` keys."""
        runs: dict[str, Any] = {}
        for row in self.registry.runs():
            snap = self._graph.get_state(thread_config(self._thread(row.run_id)))
            values = dict(snap.values)
            if self.store is not None:
                values[STORE_KEY] = self._memories(row)
            runs[row.run_id] = json.loads(json.dumps(values, sort_keys=True, default=str))
        # An interrupt's id names the task that raised it, and a task's id
        # the checkpoint it ran from: another run, another id.
        return DurableState(runs=runs, volatile=("approval_id", *self.app.volatile))

    def _memories(self, row: RunRow) -> list[dict[str, Any]]:
        """The store's items under the run's namespace, as ``{namespace,
        value}`` in a fixed order. Keys and times are left out: an app may
        key an item by a fresh uuid, which differs from the oracle's even
        when nothing went wrong; an item written twice shows as two."""
        prefix: tuple[str, ...] = ()
        if self.app.store_namespace is not None:
            prefix = tuple(self.app.store_namespace(row.tenant, row.input))
        items: list[dict[str, Any]] = []
        while True:
            page = self.store.search(prefix, limit=_PAGE, offset=len(items))
            items += [{"namespace": list(i.namespace), "value": i.value} for i in page]
            if len(page) < _PAGE:
                break
        return sorted(items, key=lambda i: json.dumps(i, sort_keys=True, default=str))

    def _view(self, row: RunRow, snap: Any) -> RunView:
        base = {"run_id": row.run_id, "tenant": row.tenant}
        if snap.created_at is None:
            return RunView(**base, state=RunState.PENDING, raw_status="no checkpoint")
        outcome = snap.values.get(self.app.outcome_key)
        if isinstance(outcome, dict):
            status = str(outcome.get("status"))
            return RunView(
                **base,
                state=_STATES.get(status, RunState.UNKNOWN),
                raw_status=status,
                output=outcome.get("output"),
                error=outcome.get("error"),
            )
        # A node that raised keeps its error (and any earlier interrupt) in
        # the checkpoint's pending writes: the error wins.
        errors = [t for t in snap.tasks if t.error]
        if errors:
            return RunView(
                **base,
                state=RunState.FAILED,
                raw_status=f"error in node {errors[0].name}",
                error=str(errors[0].error),
            )
        if snap.interrupts:
            interrupt = snap.interrupts[0]
            value = interrupt.value if isinstance(interrupt.value, dict) else {}
            approval = {
                "approval_id": interrupt.id,
                "action": value.get("action"),
                "params_hash": request_hash(value.get("params") or {}),
                "role": value.get("role"),
            }
            return RunView(
                **base,
                state=RunState.WAITING_APPROVAL,
                raw_status="interrupted",
                waiting_on=f"approval:{interrupt.id}",
                approval=approval,
            )
        if snap.next:
            return RunView(**base, state=RunState.RUNNING, raw_status=f"next {list(snap.next)}")
        if snap.tasks:
            # Their writes are saved, the checkpoint that applies them is not
            # (a worker died in between): invoke(None) goes on from them.
            names = [t.name for t in snap.tasks]
            return RunView(
                **base, state=RunState.RUNNING, raw_status=f"next=() after {names} saved writes"
            )
        # LangGraph says "nothing next", but the app never marked the run
        # finished: the work was lost (e.g. a task's writes saved in part,
        # as in autocommit, so that the graph routed nowhere).
        return RunView(
            **base, state=RunState.RUNNING, raw_status="next=() without completion marker"
        )

    def _transitions(self, row: RunRow, config: dict[str, Any]) -> list[dict[str, Any]]:
        """New checkpoints of the thread, oldest first, as transitions.

        The checkpointer's own list of the thread's root namespace, which
        ``get_state_history`` reads too, without the state snapshot it builds
        of every checkpoint (its channels and next tasks: three quarters of
        this environment's ``observe`` in a profiled ci run): the ids,
        parents and metadata are the same."""
        root = {"configurable": {**config["configurable"], "checkpoint_ns": ""}}
        history = list(self._graph.checkpointer.list(root))
        children: dict[str | None, list[str]] = {}
        for snap in history:
            children.setdefault(_parent_id(snap), []).append(_checkpoint_id(snap))
        out = []
        for snap in sorted(history, key=_checkpoint_id):
            cid = _checkpoint_id(snap)
            if cid in self._seen:
                continue
            self._seen.add(cid)
            parent = _parent_id(snap)
            meta = snap.metadata or {}
            step = int(meta.get("step", -1))
            siblings = children.get(parent, [])
            detail = f"checkpoint {cid}, parent {parent}"
            if len(siblings) > 1:
                detail += (
                    f"; checkpoint {parent} has {len(siblings)} children: two writers resumed "
                    "this thread from the same checkpoint (LangGraph takes no lock per thread)"
                )
            out.append(
                {
                    "run_id": row.run_id,
                    "tenant": row.tenant,
                    "from": None if parent is None else _label(parent),
                    "to": _label(cid),
                    # step -1 is the input checkpoint: versions count from 1
                    "state_version": step + 2,
                    "action": str(meta.get("source", "checkpoint")),
                    "actor": str(meta.get("worker_id") or "api"),
                    "detail": detail,
                    "at": EPOCH,
                }
            )
        return out

    # -- no clock, memory, storage faults or cancel: BaseEnvironment's defaults --------

    def now(self) -> float:
        return EPOCH

    def close(self) -> None:
        self.workers.close()  # its routes go with its workers
        try:
            self.registry.close()
            self._stack.close()
            self.world.close()
            drop_storage(self.saver)
        finally:
            if self._lease is not None:
                self._lease.release()


def _checkpoint_id(snap: Any) -> str:
    return str(snap.config["configurable"]["checkpoint_id"])


def _parent_id(snap: Any) -> str | None:
    parent = snap.parent_config
    return None if not parent else str(parent["configurable"]["checkpoint_id"])


def _label(checkpoint_id: str) -> str:
    return f"checkpoint {checkpoint_id}"
