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

This script parses options and runs the repetitions; the measuring (and the
worker processes' entry point) is in ``_throughput_measure.py``, the table in
``_throughput_report.py``, both beside it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _throughput_measure import (
    DEFAULT_POSTGRES_URL,
    PRELOAD,
    WORKFLOWS,
    BackendResults,
    postgres_reachable,
    raw_postgres_commits,
    raw_sqlite_commits,
    run_rep,
    store_settings,
)
from _throughput_report import median, print_table, summarize


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
