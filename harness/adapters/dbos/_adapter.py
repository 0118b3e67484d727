"""A DBOS application behind the adapter contract.

Each environment has its own DBOS system database -- a SQLite file in the
workdir, or a schema of its own on a running Postgres, dropped at close --
its own run registry (the tenant of each run) and its own world. The first
SQLite file an adapter makes is migrated and gets the queue; later ones are
byte copies of it (the adapter's ``template``), as a deployment migrates
once, not per process. A run is a
DBOS workflow whose id is the run id, enqueued with ``DBOSClient`` on a queue
of the environment, stamped with the ``application_version`` of the code
version that accepted it. A worker is a process forked from a fork server
that imported DBOS once: it launches DBOS, which re-enqueues the pending
workflows of its version (recovery) and dequeues the enqueued ones, and it
exits once none of its version is left (see ``_app.worker_main``). Every
worker is executor ``local``: a launch recovers what any earlier worker left
pending, as a process restarted on the same host does, and as another
executor does when DBOS Conductor has it recover a dead one's workflows
(those of its application version, whichever release the process runs).

What DBOS cannot offer is declared, not faked: no crash points (the world
kills workers at effect boundaries), no clock, no approvals, no memory.
Network faults are offered on Postgres: each worker reaches the system
database through a proxy of its own on the Toxiproxy backend
(``route_worker``), so a partition right after the world applied a step's
call (``partition_after_apply``) loses the step's checkpoint.
Concurrent workers are offered (processes sharing one system database), and
version switching when the app maps code version 1 to an application
version. A
workflow's DBOS status is its raw status (``ENQUEUED`` -> ``PENDING`` ->
``SUCCESS``; recovery puts a ``PENDING`` workflow back to ``ENQUEUED``), and
the kit's registry turns the statuses it sees into transitions.
"""

from __future__ import annotations

import os
from importlib import metadata
from pathlib import Path
from typing import Any

from ..._janitor import SchemaLease, tag
from ...model import CrashSpec, RunSpec, RunState
from ...world import World
from .. import _contract as c
from .._workers import ForkServerWorker
from ..kit import EPOCH, RunRecord, RunRegistry, WorkerSet, transitions_from_sequence
from . import _app
from ._app import POLL, QUEUE, load_app

TABLE = transitions_from_sequence(
    ["ENQUEUED", "PENDING", "SUCCESS"],
    terminal=["ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"],
    extra={"PENDING": ["ENQUEUED"]},  # recovery re-enqueues a pending workflow
)
#: DBOS status -> RunState; ERROR and MAX_RECOVERY_ATTEMPTS_EXCEEDED: failed
_STATES = {"ENQUEUED": "pending", "DELAYED": "pending", "PENDING": "running"}
_STATES |= {"SUCCESS": "completed", "CANCELLED": "cancelled"}


class DBOSEnvironment(c.BaseEnvironment):
    """One isolated deployment of a DBOS application (see the contract)."""

    def __init__(self, adapter: DBOSAdapter, workdir: Path) -> None:
        from dbos import DBOS, DBOSClient

        workdir.mkdir(parents=True, exist_ok=True)
        self.app, self.lease = adapter.app, None
        db = workdir / "dbos.sqlite"
        url, schema = f"sqlite:///{db}", "dbos"
        if adapter.postgres_url is not None:
            url, schema = adapter.postgres_url, f"dbos_{tag()}"
            self.lease = SchemaLease(url, schema)  # taken before it exists (_janitor)
        self.args: dict[str, Any] = {"app": adapter.app_spec, "url": url, "schema": schema}
        # A SQLite system database is a copy of the adapter's template: the
        # first one, migrated and with the queue registered, as it was then.
        template = None if self.lease else adapter.template
        try:
            if template is None:
                DBOS.migrate(url, schema=schema)
            else:
                db.write_bytes(template)
            self.client = DBOSClient(
                system_database_url=url, dbos_system_schema=schema, application_name=self.app.name
            )
            if self.lease is None:  # its statements compiled once per process, not per client
                sys_db = self.client._sys_db
                sys_db.engine = sys_db.engine.execution_options(compiled_cache=_app.CACHE)
            if template is None:
                self.client.register_queue(QUEUE, polling_interval_sec=POLL)
                adapter.template = None if self.lease else db.read_bytes()
        except BaseException:
            self._drop()
            raise
        self.world = World(workdir / "world.db", clock=lambda: EPOCH).create()
        self.registry = RunRegistry(workdir / "registry.db")
        # On SQLite, the fork server compiles what a worker runs, once (_app.warm)
        warm = [(f"{_app.__name__}:warm", {"app": adapter.app_spec})]
        warm = warm if adapter.preloaded and self.lease is None else []
        self.workers = WorkerSet(workdir, adapter.preload(), environment=self, warm=warm)
        self.args.update(world=self.world.path, registry=str(self.registry.path))
        self.submitted = 0  # runs enqueued: a move of the observation cursor

    def declarations(self) -> c.Declarations:
        return c.Declarations(delivery=dict(self.app.delivery), transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        version = self.app.versions[code_version]
        args = {**self.args, "worker_id": worker_id, "code_version": code_version}
        target, db = "harness.adapters.dbos._app:worker_main", {"postgres": args["url"]}
        # On Postgres, through a proxy of its own (Toxiproxy backend); a SQLite URL stays
        return self.workers.spawn(worker_id, target, {**args, "version": version}, services=db)

    def submit(self, run: RunSpec) -> None:
        self.registry.add(run.run_id, run.tenant, "ENQUEUED")  # its tenant, for workers
        self.submitted += 1  # registered, whether or not the enqueue below raises
        name = self.app.entry.get(run.workflow, run.workflow)
        # Stamped with the version of the release that accepted it.
        version = self.app.versions[run.code_version]
        options: Any = {"queue_name": QUEUE, "workflow_id": run.run_id, "app_version": version}
        self.client.enqueue(options | {"workflow_name": name}, run.input)

    def observe(self) -> c.Observation:
        runs = self.registry.runs()
        found = self.client.list_workflows(workflow_ids=[r.run_id for r in runs], load_input=False)
        status = {s.workflow_id: s for s in found}
        return self.registry.observation(_view(r, status.get(r.run_id)) for r in runs)

    def observation_cursor(self) -> tuple[int, int] | None:
        """Moves when a run is enqueued or a worker ends; None while one
        runs. Only a launched DBOS process moves a workflow's status (the
        parent's client enqueues, and the harness sets no timeout, delay or
        schedule), and the registry changes only with what observe() sees."""
        return None if self.workers.alive() else (len(self.workers.workers), self.submitted)

    def now(self) -> float:
        return EPOCH

    def close(self) -> None:
        try:
            self.workers.close()  # no worker outlives its environment (nor its proxies)
            self.client.destroy()
            self.registry.close()
            self.world.close()
        finally:
            self._drop()

    def _drop(self) -> None:
        if self.lease is None:
            return  # the SQLite file goes with the workdir
        import psycopg

        try:
            with psycopg.connect(self.args["url"], autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{self.args["schema"]}" CASCADE')
        finally:
            self.lease.release()


def _view(run: RunRecord, status: Any) -> c.RunView:
    raw = "none" if status is None else str(status.status)  # none: the enqueue raised
    state = RunState(_STATES.get(raw, "unknown" if status is None else "failed"))
    output, error = getattr(status, "output", None), getattr(status, "error", None)
    out, err = output if isinstance(output, dict) else None, None if error is None else str(error)
    return c.RunView(
        run_id=run.run_id, tenant=run.tenant, state=state, raw_status=raw, output=out, error=err
    )


class DBOSAdapter:
    """A DBOS application (``app="package.module:attr"``, a :class:`DBOSApp`).

    Options: ``database`` ``sqlite`` (a file per environment) or ``postgres``
    (a schema per environment on ``postgres_url``, default
    ``$HARNESS_POSTGRES_URL``); ``preload`` (default true) imports DBOS and
    the app once in the fork server (false: in every worker, to measure).
    """

    name = "dbos"
    #: a worker exits 0 only when none of its release's workflows is pending
    drains = True
    #: on Postgres, each worker reaches the system database through a proxy
    #: of its own on the Toxiproxy backend (``route_worker``)
    routes_workers = True

    def __init__(
        self, app: str, database: str = "sqlite", postgres_url: str = "", preload: str = "true"
    ) -> None:
        self.app_spec, self.app = app, load_app(app)
        if database not in ("sqlite", "postgres"):
            raise ValueError(f"database={database!r}: choose sqlite or postgres")
        self.database, self.postgres_url = database, None
        if database == "postgres":
            self.postgres_url = postgres_url or os.environ.get("HARNESS_POSTGRES_URL")
            if not self.postgres_url:
                raise ValueError("database=postgres needs postgres_url=... or HARNESS_POSTGRES_URL")
        self.preloaded = preload.lower() == "true"
        #: the first environment's SQLite system database, migrated (bytes)
        self.template: bytes | None = None
        # Any number of DBOS processes may share a system database: a queue's
        # ENQUEUED -> PENDING dequeue admits one runner per workflow.
        switch = {c.Capability.VERSION_SWITCH} if 1 in self.app.versions else set()
        # network faults (partition_after_apply) on Postgres, the system
        # database a worker reaches over TCP; a SQLite file has no connection
        net = {c.Capability.NETWORK_FAULTS} if self.postgres_url else set()
        self.capabilities = frozenset({c.Capability.CONCURRENT_WORKERS} | switch | net)

    def network_services(self) -> dict[str, str]:
        """The server the workers' connections go to (none on SQLite)."""
        return {"postgres": self.postgres_url} if self.postgres_url else {}

    def preload(self) -> tuple[str, ...]:
        """Modules the fork server imports once, so a worker costs a fork."""
        mine = ("harness.adapters.dbos._app", self.app.module)
        # What DBOS.launch() imports: the system database of each kind.
        dbs = ("dbos._sys_db_sqlite", "dbos._sys_db_postgres", "sqlalchemy.dialects.sqlite")
        return ("dbos", "psycopg", *dbs, *mine) if self.preloaded else mine[:1]

    def workflows(self) -> list[c.WorkflowSpec]:
        return list(self.app.workflows)

    def open(self, workdir: Path, *, seed: int) -> DBOSEnvironment:
        return DBOSEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        options = {"app": self.app_spec, "database": self.database, "preload": self.preloaded}
        return {**options, "dbos": metadata.version("dbos")}
