"""Measuring for ``runtime_throughput.py``: raw commit rates and runtime drains.

What is measured, and how the timed window is drawn, is in the script's
docstring. This module holds the parts a fork-server worker process must
import by name (``bench_worker``), the result records, and the probes.
"""

from __future__ import annotations

import os
import sqlite3
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.context import ForkServerContext
from multiprocessing.queues import SimpleQueue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

from harness.adapters.reference._deployment import Deployment
from reference_runtime import Runtime, RuntimeConfig
from reference_runtime.store import Store

DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
WORKFLOWS: dict[str, dict[str, Any]] = {
    "research": {"topic": "t", "sources": 3, "requester": "u"},
    "procurement": {"item": "bolts", "quantity": 2},
}
TERMINAL = frozenset({"Completed", "Failed", "Cancelled"})

#: Store methods that open a write transaction, and those that only read.
WRITE_CALLS = (
    "claim",
    "commit",
    "renew_lease",
    "release",
    "record_lease",
    "park",
    "unpark",
    "deliver",
    "put_memory",
    "create_run",
    "delete_subject",
    "prune",
)
READ_CALLS = (
    "load",
    "read_memory",
    "get_run",
    "runnable",
    "list_runs",
    "audit",
    "operations",
    "artifacts",
)

#: Preloaded once by the fork server, so that a worker starts in milliseconds.
PRELOAD = [
    "pydantic",
    "sqlite3",
    "psycopg",
    "psycopg_pool",
    "reference_runtime",
    "reference_runtime.store.sqlite",
    "reference_runtime.store.postgres",
    "harness.adapters.reference._services",
]


# -- results -----------------------------------------------------------------


@dataclass(frozen=True)
class WorkerReport:
    """What one worker process did inside the timed window."""

    worker_id: str
    started: float  # time.monotonic() when it left the barrier
    finished: float  # time.monotonic() when it found nothing runnable
    claims: int
    cpu_seconds: float  # this process's CPU time inside the window
    store_calls: dict[str, int]
    drained: bool  # False if it stopped at the safety deadline


@dataclass(frozen=True)
class RuntimeRep:
    """One repetition of one (backend, workers) configuration."""

    backend: str
    workers: int
    runs_submitted: int
    window_seconds: float
    steps: int
    steps_by_state_version: int
    terminal_runs: int
    total_runs: int
    cpu_seconds: float  # summed over the worker processes
    store_calls: dict[str, int]
    drained: bool

    @property
    def steps_per_second(self) -> float:
        return self.steps / self.window_seconds

    @property
    def write_tx_per_step(self) -> float:
        return sum(self.store_calls.get(n, 0) for n in WRITE_CALLS) / self.steps

    @property
    def read_tx_per_step(self) -> float:
        return sum(self.store_calls.get(n, 0) for n in READ_CALLS) / self.steps

    @property
    def cpu_ms_per_step(self) -> float:
        return 1000 * self.cpu_seconds / self.steps

    @property
    def busy(self) -> float:
        """Share of the window the workers spent on a CPU (the rest: waiting
        for the disk, the database server, or a lock)."""
        return self.cpu_seconds / (self.window_seconds * self.workers)


@dataclass
class BackendResults:
    """Everything measured for one backend, repetition by repetition."""

    backend: str
    raw_commits_per_second: list[float] = field(default_factory=list)
    reps: dict[int, list[RuntimeRep]] = field(default_factory=dict)


# -- raw commit rate ---------------------------------------------------------


def raw_sqlite_commits(path: Path, synchronous: str, busy_timeout: float, seconds: float) -> float:
    """Commits/s of one connection doing ``BEGIN IMMEDIATE; UPDATE one row;
    COMMIT``, opened the way :class:`SqliteStore` opens its own."""
    path.unlink(missing_ok=True)
    db = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout = {int(busy_timeout * 1000)}")
        db.execute("PRAGMA journal_mode = WAL")
        db.execute(f"PRAGMA synchronous = {synchronous}")
        db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, n INTEGER NOT NULL, doc TEXT)")
        db.execute("INSERT INTO t VALUES (1, 0, '')")
        n, start = 0, time.perf_counter()
        while (elapsed := time.perf_counter() - start) < seconds:
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE t SET n = ?, doc = ? WHERE id = 1", (n, f'{{"n": {n}}}'))
            db.execute("COMMIT")
            n += 1
        return n / elapsed
    finally:
        db.close()
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def raw_postgres_commits(url: str, seconds: float) -> float:
    """Commits/s of one psycopg connection (not autocommit, as the store's
    pool uses it) doing ``UPDATE one row; COMMIT`` on a regular, logged table."""
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(f'CREATE TABLE "{schema}".t (id INT PRIMARY KEY, n BIGINT, doc TEXT)')
        conn.execute(f"INSERT INTO \"{schema}\".t VALUES (1, 0, '')")
        conn.commit()
        try:
            sql = f'UPDATE "{schema}".t SET n = %s, doc = %s WHERE id = 1'
            n, start = 0, time.perf_counter()
            while (elapsed := time.perf_counter() - start) < seconds:
                conn.execute(sql, (n, f'{{"n": {n}}}'))
                conn.commit()
                n += 1
            return n / elapsed
        finally:
            conn.rollback()
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
            conn.commit()


# -- worker processes ---------------------------------------------------------


def _count_calls(store: Store, counts: Counter[str]) -> None:
    """Count every store call this process makes, by method name."""
    for name in (*WRITE_CALLS, *READ_CALLS):
        method: Callable[..., Any] = getattr(store, name)

        def counted(*args: Any, _m: Callable[..., Any] = method, _n: str = name, **kw: Any) -> Any:
            counts[_n] += 1
            return _m(*args, **kw)

        # An instance attribute shadows the method: the executor, which holds
        # this very store object, goes through it too.
        setattr(store, name, counted)


def bench_worker(
    worker_id: str,
    env: dict[str, str],
    barrier: Barrier,
    max_seconds: float,
    out: SimpleQueue[tuple[str, Any]],
) -> None:
    """A worker process: set everything up, wait for the others, then drain.

    Mirrors ``reference_runtime._worker.main`` (configuration from ``RR_*``
    variables, ``run_until_idle``), with a barrier between set-up and work and
    a safety deadline so that a stuck run cannot hang the benchmark.
    """
    try:
        config = RuntimeConfig.from_env({**os.environ, **env})
        counts: Counter[str] = Counter()
        with Runtime(config) as runtime:
            worker = runtime.worker(worker_id)
            store = runtime.store  # opens the connection and runs setup()
            store.get_run("warm-up")
            if worker.services is not None:
                worker.services.capabilities("email")
            _count_calls(store, counts)
            try:
                barrier.wait(timeout=120)
                started, cpu = time.monotonic(), time.process_time()
                claims, drained = 0, True
                while True:
                    if time.monotonic() - started > max_seconds:
                        drained = False
                        break
                    if worker.run_once() is None:
                        break
                    claims += 1
                finished, cpu = time.monotonic(), time.process_time() - cpu
            finally:
                worker.close()
        report = WorkerReport(worker_id, started, finished, claims, cpu, dict(counts), drained)
        out.put(("ok", report))
    except BaseException:
        out.put(("error", f"worker {worker_id}:\n{traceback.format_exc()}"))
        raise


def run_rep(
    ctx: ForkServerContext,
    root: Path,
    backend: str,
    workers: int,
    runs: int,
    workflows: Sequence[str],
    postgres_url: str,
    max_seconds: float,
) -> RuntimeRep:
    """Submit ``runs`` runs to a fresh deployment and drain them with ``workers``."""
    with Deployment(
        root / f"{backend}-{workers}w-{uuid.uuid4().hex[:8]}",
        backend=backend,
        postgres_url=postgres_url if backend == "postgres" else None,
    ) as dep:
        for i in range(runs):
            workflow = workflows[i % len(workflows)]
            payload = dict(WORKFLOWS[workflow])
            if workflow == "research":
                payload["topic"] = f"topic-{i}"
            dep.submit(workflow, payload, tenant=("acme", "globex")[i % 2], run_id=f"run-{i:06d}")
        env = dep.worker_env()
        barrier = ctx.Barrier(workers)
        out: SimpleQueue[tuple[str, Any]] = ctx.SimpleQueue()
        procs = [
            ctx.Process(
                target=bench_worker,
                args=(f"w{k}", env, barrier, max_seconds, out),
                name=f"bench-w{k}",
            )
            for k in range(workers)
        ]
        for p in procs:
            p.start()
        reports: list[WorkerReport] = []
        try:
            for _ in procs:
                kind, value = out.get()
                if kind != "ok":
                    raise RuntimeError(f"a benchmark worker failed: {value}")
                reports.append(value)
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join()
        store = dep.runtime.store
        events = store.audit()
        all_runs = store.list_runs()
        calls: Counter[str] = Counter()
        for r in reports:
            calls.update(r.store_calls)
        return RuntimeRep(
            backend=backend,
            workers=workers,
            runs_submitted=runs,
            window_seconds=max(r.finished for r in reports) - min(r.started for r in reports),
            steps=sum(1 for e in events if e.state_version is not None and e.state_version >= 1),
            steps_by_state_version=sum(r.state_version for r in all_runs),
            terminal_runs=sum(1 for r in all_runs if r.status.value in TERMINAL),
            total_runs=len(all_runs),
            cpu_seconds=sum(r.cpu_seconds for r in reports),
            store_calls=dict(calls),
            drained=all(r.drained for r in reports),
        )


def store_settings(root: Path) -> tuple[str, float]:
    """The ``synchronous`` mode and busy timeout the runtime's SQLite store uses."""
    from reference_runtime.store import open_store
    from reference_runtime.store.sqlite import SqliteStore

    store = open_store(f"sqlite:///{(root / 'probe.db').resolve()}")
    assert isinstance(store, SqliteStore)
    settings = (store.synchronous, store.busy_timeout)
    store.close()
    return settings


def postgres_reachable(url: str) -> str | None:
    """None if ``url`` accepts a connection, else why not."""
    try:
        import psycopg

        with psycopg.connect(url, connect_timeout=5) as conn:
            conn.execute("SELECT 1")
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}".strip()
    return None
