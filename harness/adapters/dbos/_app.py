"""What an application hands the adapter, and what its workflows call.

A :class:`DBOSApp` names a module of ``@DBOS.workflow()`` functions (each
registered under its :class:`WorkflowSpec`'s name), the delivery each effect
kind promises, and which DBOS ``application_version`` each code version
runs. Inside a ``@DBOS.step()``, :func:`call` reaches the harness's world on
behalf of the current workflow, and :func:`release` says which code version
this worker runs. The worker itself is :func:`worker_main`.
"""

from __future__ import annotations

import importlib
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...world import Caller, Response, WorldClient
from .._contract import WorkflowSpec
from ..kit import EPOCH, CompiledCache, IdlePolicy, RunRegistry, UnsyncedSQLite, work_until_idle

#: Busy while a workflow of the worker's version is enqueued or pending. The
#: probe reads those statuses from the system database, where a run is
#: enqueued or pending until its final status is written: one quiet poll
#: is enough, and no DBOS polling interval is waited out (a run stuck
#: pending gives up after 30 s).
IDLE = IdlePolicy(quiet=1, interval=0.02, give_up=30.0)
#: DBOS's internal queue (where recovery re-enqueues a pending workflow)
#: polls every second by default; the workers poll it faster.
POLL = 0.05
#: The queue runs are enqueued on.
QUEUE = "harness_runs"
#: The compiled SQL of every worker's system database engine (SQLite): what
#: the fork server's :func:`warm` compiled, shared (see the kit's class).
CACHE = CompiledCache()
#: The workflow :func:`warm` runs, registered only while it runs.
WARM = "harness.warm"

_worker: dict[str, Any] = {}
#: DBOS runs workflows in threads; the kit's registry keeps one SQLite
#: connection per process, usable only by the thread that opened it.
_local = threading.local()


@dataclass(frozen=True)
class DBOSApp:
    """A DBOS application as the harness runs it.

    ``module`` holds the ``@DBOS.workflow()`` functions, one per workflow,
    registered under the workflow's name or the one ``entry`` gives it;
    ``versions`` maps a code version (``None`` today, ``1`` the previous
    release) to the DBOS ``application_version`` it runs under: DBOS
    recovers and dequeues only workflows of its own version.
    """

    name: str
    module: str
    workflows: tuple[WorkflowSpec, ...]
    delivery: Mapping[str, str]
    versions: Mapping[int | None, str] = field(default_factory=lambda: {None: "current"})
    #: the DBOS name of a workflow registered under another name than its spec's
    entry: Mapping[str, str] = field(default_factory=dict)


def load_app(spec: str) -> DBOSApp:
    """``"package.module:attr"`` -> the :class:`DBOSApp` it names."""
    module, _, attr = spec.partition(":")
    app = getattr(importlib.import_module(module), attr or "APP")
    if not isinstance(app, DBOSApp):
        raise TypeError(f"{spec} is a {type(app).__name__}, not a DBOSApp")
    return app


def release() -> int | None:
    """The code version this worker runs: ``None`` today, ``1`` the previous release."""
    return _worker.get("code_version")


def call(service: str, action: str, request: Mapping[str, Any], key: str | None = None) -> Response:
    """From a ``@DBOS.step()``: perform ``service.action`` in the harness's
    world for the current workflow (the run), with idempotency key ``key``."""
    from dbos import DBOS

    run_id = str(DBOS.workflow_id)
    _local.registry = getattr(_local, "registry", None) or RunRegistry(_worker["registry"])
    who = Caller(_local.registry.get(run_id).tenant, run_id, action, _worker["worker_id"])
    world: WorldClient = _worker["world"]
    return world.call(service, action, request, idempotency_key=key, caller=who)


def worker_main(args: dict[str, Any]) -> int:
    """A worker: launch DBOS (it re-enqueues this version's pending workflows
    and dequeues its enqueued ones), run until none is left, exit."""
    app, version = load_app(args["app"]), args["version"]
    _worker.update(args, world=WorldClient(args["world"], clock=lambda: EPOCH))
    dbos = _launch(app.name, args["url"], args["schema"], version)
    return work_until_idle(_pending_probe(dbos, version), IDLE)


def _launch(name: str, url: str, schema: str, version: str) -> Any:
    from dbos import DBOS

    config: Any = {"name": name, "system_database_url": url, "executor_id": "local"}
    config |= {"dbos_system_schema": schema, "application_version": version}
    if url.startswith("sqlite"):  # commits reach the OS, not the disk (see the kit),
        # and the statements are those the fork server compiled (warm)
        engine = {"connect_args": {"factory": UnsyncedSQLite}}
        config["db_engine_kwargs"] = engine | {"execution_options": {"compiled_cache": CACHE}}
    dbos = DBOS(config={**config, "log_level": "WARNING"})  # type: ignore[typeddict-item]
    dbos._registry.get_internal_queue()._polling_interval_sec = POLL
    DBOS.launch()
    return dbos


def warm(args: dict[str, Any]) -> None:
    """The fork server's warm call (SQLite): one worker's life on a scratch
    system database -- launch, the queues' polls, a workflow with a step
    enqueued by a client, the idle probe -- so that :data:`CACHE` holds what
    every worker's new engine would compile; then DBOS is destroyed, its
    threads joined and the scratch workflow unregistered (a worker forks
    from a server as it was, plus the cache)."""
    from dbos import DBOS, DBOSClient
    from dbos._dbos import _get_or_create_dbos_registry

    app, workflows = load_app(args["app"]), _get_or_create_dbos_registry().workflow_info_map
    version, before = app.versions[None], set(workflows)
    step = DBOS.step(name=f"{WARM}.step")(lambda value: value)
    DBOS.workflow(name=WARM)(lambda value: step(value))
    with tempfile.TemporaryDirectory() as scratch:
        url = f"sqlite:///{scratch}/warm.sqlite"
        DBOS.migrate(url, schema="dbos")  # a worker's database is migrated too
        client = DBOSClient(system_database_url=url, application_name=app.name)
        client.register_queue(QUEUE, polling_interval_sec=POLL)
        dbos = _launch(app.name, url, "dbos", version)
        options: Any = {"queue_name": QUEUE, "workflow_name": WARM, "app_version": version}
        client.enqueue(options, 0).get_result()
        work_until_idle(_pending_probe(dbos, version), IDLE)
        client.destroy()
        DBOS.destroy()
    for thread in threading.enumerate():
        if thread is not threading.current_thread():
            thread.join(10.0)  # DBOS's executor threads end after destroy()
    for name in set(workflows) - before:
        del workflows[name]


def _pending_probe(dbos: Any, version: str) -> Callable[[], float]:
    """The idle probe: a fresh time while a workflow of ``version`` is
    enqueued or pending in the system database, else 0. What
    ``DBOS.list_workflows(status=["ENQUEUED", "PENDING"], app_version=version)``
    filters, asked as one small query (built once, on DBOS's own engine and
    its schema's table) rather than a full listing of the workflows, their
    outputs joined (about 0.1 ms against 0.9 ms a poll), and retried as
    DBOS retries its own calls (a lost connection, a locked SQLite file)."""
    import sqlalchemy as sa
    from dbos._sys_db import db_retry

    sys_db, t = dbos._sys_db, dbos._sys_db.tables.workflow_status
    busy = t.c.status.in_(["ENQUEUED", "PENDING"]) & (t.c.application_version == version)
    query = sa.select(t.c.workflow_uuid).where(busy).limit(1)

    @db_retry(sys_db=sys_db)
    def probe() -> float:
        with sys_db.engine.connect() as conn:
            return time.monotonic() if conn.execute(query).first() is not None else 0

    return probe
