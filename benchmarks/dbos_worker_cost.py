"""Where a DBOS ``ci`` run's CPU goes: the parent, the fork server, each worker's phases.

Run: ``python benchmarks/dbos_worker_cost.py [--budget 600] [--database sqlite]
[--app examples.dbos_refund.careful:APP] [--shard K/N]``

Runs ``harness run --profile ci --seed 0`` of the DBOS adapter in this
process, with every worker's target wrapped by :func:`marked` (preloaded by
the fork server, so the wrapper costs no import), and prints:

- the CPU of the harness process, of the fork server itself (its forks) and
  of everything it reaped (the workers, from ``/proc``), per scenario;
- per worker, medians and means of CPU (``time.process_time``: every thread
  of the worker) and minor page faults between phases: fork -> target,
  ``DBOS(config)``, ``DBOS.launch()``, then the rest of its life (queue
  polls, workflows, the idle probe);
- what the main thread spent (``time.thread_time``) in each system-database
  call of the launch and in the idle probe (``DBOS.list_workflows`` before
  issue 33's cut, the adapter's ``_pending_probe`` query since).

The workers run the adapter's own ``worker_main``; only the wrapper is added.
CPU that the workers spend after :func:`marked` returns (their exit) shows as
the gap between the fork server's reaped CPU and the workers' own sum.
Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the system-database calls of a launch, timed on the main thread
LAUNCH_CALLS = (
    ("dbos._sys_db", "SystemDatabase", "create", "system database object"),
    ("dbos._sys_db_sqlite", "SQLiteSystemDatabase", "run_migrations", "migrations (SQLite)"),
    ("dbos._sys_db_postgres", "PostgresSystemDatabase", "run_migrations", "migrations (Postgres)"),
    ("dbos._sys_db", "SystemDatabase", "create_application_version", "register app version"),
    ("dbos._sys_db", "SystemDatabase", "get_latest_application_version", "latest app version"),
    ("dbos._sys_db", "SystemDatabase", "get_pending_workflows", "pending workflows"),
    ("dbos._dbos", "DBOS", "list_workflows", "idle probe (list_workflows)"),
)


def _now() -> tuple[float, int]:
    return time.process_time(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def marked(args: dict[str, Any]) -> int:
    """A worker target: the adapter's ``worker_main(args)``, its phases marked."""
    import importlib

    out = args.pop("cost_out")
    marks = [("target", *_now())]
    calls: dict[str, float] = {}

    def timed(owner: Any, name: str, label: str) -> None:
        orig = owner.__dict__[name]
        fn = orig.__func__ if isinstance(orig, staticmethod | classmethod) else orig

        def wrapper(*a: Any, **k: Any) -> Any:
            t = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                calls[label] = calls.get(label, 0.0) + time.thread_time() - t

        setattr(owner, name, type(orig)(wrapper) if fn is not orig else wrapper)

    for module, cls, name, label in LAUNCH_CALLS:
        timed(getattr(importlib.import_module(module), cls), name, label)
    from dbos import DBOS

    from harness.adapters.dbos import _app

    real_init, real_launch = DBOS.__init__, DBOS.__dict__["launch"].__func__

    def init(self: Any, *a: Any, **k: Any) -> None:
        first = not any(name == "before DBOS()" for name, *_ in marks)
        if first:  # DBOS's constructor may run once more for the same object
            marks.append(("before DBOS()", *_now()))
        real_init(self, *a, **k)
        if first:
            marks.append(("after DBOS()", *_now()))

    def launch(cls: Any) -> None:
        marks.append(("before launch", *_now()))
        real_launch(cls)
        marks.append(("after launch", *_now()))

    DBOS.__init__ = init  # type: ignore[method-assign]
    DBOS.launch = classmethod(launch)  # type: ignore[method-assign,assignment]
    make_probe = getattr(_app, "_pending_probe", None)
    if make_probe is not None:  # the adapter's own probe (older trees: list_workflows)

        def pending_probe(*a: Any) -> Any:
            probe = make_probe(*a)

            def timed_probe() -> Any:
                t = time.thread_time()
                try:
                    return probe()
                finally:
                    label = "idle probe (the adapter's query)"
                    calls[label] = calls.get(label, 0.0) + time.thread_time() - t

            return timed_probe

        _app._pending_probe = pending_probe  # type: ignore[attr-defined]
    try:
        return _app.worker_main(args)
    finally:
        marks.append(("end", *_now()))
        Path(out).write_text(json.dumps({"marks": marks, "calls": calls}))


def _proc(pid: int) -> tuple[float, float]:
    """(own CPU s, reaped children's CPU s) of ``pid`` from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / tick, (int(fields[13]) + int(fields[14])) / tick


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budget", type=float, default=600.0)
    p.add_argument("--database", choices=("sqlite", "postgres"), default="sqlite")
    p.add_argument("--app", default="examples.dbos_refund.careful:APP")
    p.add_argument("--shard", default=None, help="run one shard K/N of the plan only")
    ns = p.parse_args()
    from harness.adapters import _workers
    from harness.adapters.dbos import _adapter
    from harness.adapters.kit import WorkerSet
    from harness.cli import main as harness

    outdir = Path(tempfile.mkdtemp(prefix="dbos-worker-cost-"))
    preload = _adapter.DBOSAdapter.preload
    _adapter.DBOSAdapter.preload = lambda self: (*preload(self), "dbos_worker_cost")  # type: ignore[method-assign]
    count = [0]
    spawn = WorkerSet.spawn

    def spawn_marked(self: Any, worker_id: str, target: str, args: Any, **kw: Any) -> Any:
        if target == "harness.adapters.dbos._app:worker_main":
            count[0] += 1
            target = "dbos_worker_cost:marked"
            args = {**args, "cost_out": str(outdir / f"w{count[0]}.json")}
        return spawn(self, worker_id, target, args, **kw)

    WorkerSet.spawn = spawn_marked  # type: ignore[method-assign]
    argv = ["run", "--adapter", "harness.adapters.dbos:DBOSAdapter"]
    argv += ["--adapter-opt", f"app={ns.app}", "--adapter-opt", f"database={ns.database}"]
    argv += ["--profile", "ci", "--seed", "0", "--budget", str(ns.budget)]
    argv += ["--report-dir", str(outdir / "report")]
    if ns.shard:
        argv += ["--shard", ns.shard]
    code = harness(argv)
    own = resource.getrusage(resource.RUSAGE_SELF)
    servers = {k: _proc(s.pid) for k, s in _workers._servers.items() if s.pid}
    report = json.loads((outdir / "report" / "report.json").read_text())
    ran = report.get("searched_scenarios") or 1
    runs = [json.loads(f.read_text()) for f in sorted(outdir.glob("w*.json"))]
    print(
        f"\nharness exit {code}, {ran} scenarios, {len(runs)} workers ({len(runs) / ran:.1f} each)"
    )
    print(f"harness process CPU: {(own.ru_utime + own.ru_stime) * 1000 / ran:.0f} ms/scenario")
    for (mods, _spares), (mine, reaped) in servers.items():
        if "dbos_worker_cost" in mods:
            print(f"fork server own CPU: {mine * 1000 / ran:.0f} ms/scenario (its forks)")
            print(f"reaped by it (workers): {reaped * 1000 / ran:.0f} ms/scenario")
    phases: dict[str, list[tuple[float, int]]] = {}
    for r in runs:
        m = r["marks"]
        phases.setdefault("fork -> target", []).append((m[0][1] * 1000, m[0][2]))
        for (a, t0, f0), (b, t1, f1) in itertools.pairwise(m):
            phases.setdefault(f"{a} -> {b}", []).append(((t1 - t0) * 1000, f1 - f0))
        phases.setdefault("TOTAL fork -> end", []).append((m[-1][1] * 1000, m[-1][2]))
    print("per worker: median CPU ms, mean CPU ms, median minor faults")
    for name, xs in phases.items():
        med = statistics.median(x[0] for x in xs)
        mean = statistics.mean(x[0] for x in xs)
        print(f"  {med:7.1f} {mean:7.1f} {statistics.median(x[1] for x in xs):6.0f}  {name}")
    print("main thread, per worker (mean CPU ms, thread_time):")
    labels = [label for *_, label in LAUNCH_CALLS] + ["idle probe (the adapter's query)"]
    for label in labels:
        ms = [r["calls"].get(label, 0.0) * 1000 for r in runs]
        if any(ms):
            print(f"  {statistics.mean(ms):7.1f}  {label}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
