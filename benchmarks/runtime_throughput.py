"""How many workflow steps per second does the reference runtime checkpoint?

Run: ``python benchmarks/runtime_throughput.py [--seconds N] [--repeats R]
[--backends sqlite,postgres] [--workflows research,procurement] [--json out.json]``

A *step* is one checkpointed state transition of a run: one ``Store.commit``,
which bumps the run's ``state_version`` and appends one audit event carrying
it. Steps are counted after each repetition from ``store.audit()`` (events with
``state_version >= 1``; the ``created`` event at version 0 is the submission,
not a step) and cross-checked against the sum of the runs' final
``state_version``.

For every backend, each repetition measures, back to back on the same machine:

* **raw commits/s** -- what the database itself sustains: a SQLite file in WAL
  mode with the ``synchronous`` setting the store uses, or Postgres over one
  connection; one small transaction per commit that updates one row;
* **steps/s with 1 and with 2 worker processes** -- a fresh
  :class:`~harness.adapters.reference._deployment.Deployment` (own SQLite file
  or Postgres schema, simulated services, virtual clock) gets a batch of runs
  that need no human input (``research`` and ``procurement``, alternating),
  then N worker processes from a ``multiprocessing`` fork server drain it.

The timed window starts when the workers pass a shared barrier (each one has
already imported everything, opened its store, set the schema up and built its
executor) and ends when the last worker finds nothing runnable: it excludes
process start-up and connection set-up, and includes claims, lease renewals
and releases, loading snapshots, reading memory, calls to the simulated
services (the world's own SQLite file) and the checkpoints. Wall time is
measured with ``time.monotonic`` (one system-wide clock on Linux); the audit
log's timestamps come from the deployment's virtual clock and say nothing
about speed.

Workers count every store call they make, so the table can explain its ratio:
the store does more write transactions than steps (a claim and a release per
claimed run, a lease renewal before each external call), and the ceiling for
steps/s is the raw commit rate divided by write transactions per step.

The machine is noisy: the table shows medians over ``--repeats`` (at least 3)
with the range, and ratios taken within one repetition before the median.
Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
import traceback
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.context import ForkServerContext
from multiprocessing.queues import SimpleQueue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

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


# -- orchestration and report --------------------------------------------------


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


def median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def spread(xs: Sequence[float], fmt: str = "{:,.0f}") -> str:
    return f"{fmt.format(median(xs))} [{fmt.format(min(xs))}-{fmt.format(max(xs))}]"


def summarize(results: list[BackendResults]) -> list[dict[str, Any]]:
    """One row per (backend, workers): medians, ranges, per-repetition ratios."""
    rows = []
    for res in results:
        raw = res.raw_commits_per_second
        for workers, reps in sorted(res.reps.items()):
            sps = [r.steps_per_second for r in reps]
            # Ratio within a repetition first (raw and runtime measured back to
            # back), then the median: drift between repetitions cancels.
            ratio = [r.steps_per_second / raw[i] for i, r in enumerate(reps)]
            wtx = [r.write_tx_per_step for r in reps]
            ceiling = [raw[i] / r.write_tx_per_step for i, r in enumerate(reps)]
            rows.append(
                {
                    "backend": res.backend,
                    "workers": workers,
                    "steps_per_s": sps,
                    "raw_commits_per_s": raw,
                    "ratio": ratio,
                    "write_tx_per_step": wtx,
                    "read_tx_per_step": [r.read_tx_per_step for r in reps],
                    "cpu_ms_per_step": [r.cpu_ms_per_step for r in reps],
                    "busy": [r.busy for r in reps],
                    "of_ceiling": [s / c for s, c in zip(sps, ceiling, strict=True)],
                    "steps": [r.steps for r in reps],
                    "window_s": [r.window_seconds for r in reps],
                    "drained": all(r.drained and r.terminal_runs == r.total_runs for r in reps),
                    "calls_per_step": {
                        name: median([r.store_calls.get(name, 0) / r.steps for r in reps])
                        for name in (*WRITE_CALLS, *READ_CALLS)
                        if any(r.store_calls.get(name) for r in reps)
                    },
                }
            )
    return rows


def print_table(rows: list[dict[str, Any]], repeats: int) -> None:
    headers = (
        "backend",
        "workers",
        "steps/s",
        "raw commits/s",
        "steps/s / raw",
        "write tx/step",
        "read tx/step",
        "of ceiling",
        "CPU ms/step",
        "busy",
        "drained",
    )
    table = [
        (
            row["backend"],
            str(row["workers"]),
            spread(row["steps_per_s"]),
            spread(row["raw_commits_per_s"]),
            f"{median(row['ratio']):.3f}",
            f"{median(row['write_tx_per_step']):.2f}",
            f"{median(row['read_tx_per_step']):.2f}",
            f"{median(row['of_ceiling']):.0%}",
            f"{median(row['cpu_ms_per_step']):.2f}",
            f"{median(row['busy']):.0%}",
            "yes" if row["drained"] else "NO",
        )
        for row in rows
    ]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(headers)]
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("  ".join("-" * w for w in widths))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)))
    print(
        f"\nmedian [min-max] of {repeats} repetitions; ratios are taken within a repetition, "
        "then the median.\n"
        "steps/s / raw: steps/s divided by the raw commit rate of the same database.\n"
        "write tx/step, read tx/step: store transactions the workers opened per step "
        "(every step is exactly one checkpoint commit; the rest is overhead).\n"
        "of ceiling: steps/s divided by (raw commits/s / write tx/step).\n"
        "CPU ms/step: worker processes' CPU time per step (Postgres server not included); "
        "busy: that CPU time / (window x workers)."
    )
    for row in rows:
        calls = ", ".join(f"{k} {v:.2f}" for k, v in row["calls_per_step"].items())
        print(f"  {row['backend']} {row['workers']}w store calls per step: {calls}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--seconds",
        type=float,
        default=4.0,
        help="target length of each timed window (runtime drain); raw commit "
        "rates are measured for half of it (default 4)",
    )
    parser.add_argument("--repeats", type=int, default=3, help="repetitions, at least 3")
    parser.add_argument("--backends", default="sqlite,postgres")
    parser.add_argument("--workers", default="1,2", help="worker-process counts (default 1,2)")
    parser.add_argument("--workflows", default="research,procurement")
    parser.add_argument(
        "--postgres-url",
        default=os.environ.get("HARNESS_POSTGRES_URL", DEFAULT_POSTGRES_URL),
    )
    parser.add_argument("--json", type=Path, help="also write every measurement here")
    args = parser.parse_args(argv)

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    workflows = [w.strip() for w in args.workflows.split(",") if w.strip()]
    worker_counts = sorted({int(w) for w in args.workers.split(",")})
    if args.repeats < 3:
        parser.error(f"--repeats must be at least 3 (got {args.repeats}): medians need 3")
    if args.seconds <= 0:
        parser.error(f"--seconds must be positive (got {args.seconds})")
    if bad := [b for b in backends if b not in ("sqlite", "postgres")]:
        parser.error(f"unknown backend(s) {bad}; choose from sqlite, postgres")
    if bad := [w for w in workflows if w not in WORKFLOWS]:
        parser.error(f"workflow(s) {bad} need human input or do not exist; use {list(WORKFLOWS)}")
    if not worker_counts or min(worker_counts) < 1:
        parser.error(f"--workers needs positive counts, got {args.workers!r}")

    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(PRELOAD)
    wall = time.monotonic()
    results: list[BackendResults] = []
    with tempfile.TemporaryDirectory(prefix="rt-throughput-") as tmp:
        root = Path(tmp)
        synchronous, busy_timeout = store_settings(root)
        for backend in backends:
            if backend == "postgres" and (why := postgres_reachable(args.postgres_url)):
                print(f"skipping postgres: cannot connect ({why})", file=sys.stderr)
                continue
            res = BackendResults(backend)
            results.append(res)
            # An untimed warm-up drain starts the fork server, warms the
            # database's caches and gives a first rate to size batches with:
            # each drain should take about --seconds.
            warm = run_rep(ctx, root, backend, 1, 20, workflows, args.postgres_url, 60.0)
            steps_per_run = warm.steps / warm.runs_submitted
            rate: dict[int, float] = {}
            for rep in range(args.repeats):
                if backend == "sqlite":
                    raw = raw_sqlite_commits(
                        root / "raw.db", synchronous, busy_timeout, args.seconds / 2
                    )
                else:
                    raw = raw_postgres_commits(args.postgres_url, args.seconds / 2)
                res.raw_commits_per_second.append(raw)
                for workers in worker_counts:
                    guess = rate.get(workers) or rate.get(1) or warm.steps_per_second
                    runs = max(10, round(guess * args.seconds / steps_per_run))
                    r = run_rep(
                        ctx,
                        root,
                        backend,
                        workers,
                        runs,
                        workflows,
                        args.postgres_url,
                        max_seconds=4 * args.seconds + 10,
                    )
                    res.reps.setdefault(workers, []).append(r)
                    rate[workers] = median([x.steps_per_second for x in res.reps[workers]])
                    steps_per_run = r.steps / r.runs_submitted
                    print(
                        f"  {backend} rep {rep + 1}/{args.repeats} {workers}w: raw {raw:,.0f} "
                        f"commits/s; {r.runs_submitted} runs, {r.steps} steps in "
                        f"{r.window_seconds:.2f}s = {r.steps_per_second:,.0f} steps/s",
                        file=sys.stderr,
                    )
                    if r.steps != r.steps_by_state_version:
                        print(
                            f"  warning: {r.steps} audited steps but state_version sums to "
                            f"{r.steps_by_state_version}",
                            file=sys.stderr,
                        )
    if not results:
        print("nothing measured: no backend was available", file=sys.stderr)
        return 1

    rows = summarize(results)
    print(
        f"\nreference runtime throughput -- {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, SQLite {sqlite3.sqlite_version} "
        f"(WAL, synchronous={synchronous}), workflows {'+'.join(workflows)}, "
        f"~{args.seconds:g}s windows\n"
        "window: workers released together from a barrier -> last worker idle (all runs "
        "terminal); excludes process start-up, imports, connections and schema set-up; "
        "includes claims, leases, snapshot loads, memory reads, simulated-service calls "
        "and checkpoints.\n"
        "raw: one connection, one transaction per commit updating one row "
        f"(~{args.seconds / 2:g}s each, measured before each repetition's runtime runs).\n"
    )
    print_table(rows, args.repeats)
    print(f"\ntotal wall time {time.monotonic() - wall:.0f}s", file=sys.stderr)
    if args.json:
        doc = {
            "seconds": args.seconds,
            "repeats": args.repeats,
            "workflows": workflows,
            "sqlite_synchronous": synchronous,
            "summary": rows,
            "repetitions": [
                {**asdict(r), "steps_per_second": r.steps_per_second}
                for res in results
                for reps in res.reps.values()
                for r in reps
            ],
        }
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
