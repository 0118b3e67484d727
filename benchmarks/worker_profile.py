"""Where one kill-and-resume worker's own CPU time and page faults go.

Run: ``python benchmarks/worker_profile.py [--cycles 30] [--top 25]
[--mode marks|faults|profile|sql] [--backend sqlite|postgres] [--queue store|redis]``

Runs the cycle of ``kill_resume.py`` (a forked worker claims a ``research``
run, loads its state, commits one checkpoint and is SIGKILLed right after
that commit), but each worker runs through :func:`profiled`, which wraps the
reference worker's entry point, from a fork server that also preloads this
module (which marks the spare's life before its target):

- ``marks``: CPU time (``time.process_time``, 0 at fork) and minor page
  faults between phases, medians over the workers;
- ``faults``: page faults charged to the innermost Python or C function
  running when they happened (``sys.setprofile`` and ``getrusage``);
- ``profile``: ``cProfile`` of the worker (its overhead inflates every number);
- ``sql``: the statements one worker sent to SQLite.

Each worker writes what it measured to a file just before the SIGKILL fires;
this process sums them over ``--cycles`` workers and prints them.

Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import cProfile
import itertools
import json
import os
import pstats
import resource
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

TARGET = "worker_profile:profiled"

_marks: list[tuple[str, float, int]] = []


def _mark(name: str) -> None:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    _marks.append((name, time.process_time(), ru.ru_minflt))


#: minor page faults charged to the innermost function (Python or C) running
#: when they happened: where a forked worker copies pages (``--mode faults``)
_fault_counts: dict[str, int] = {}
_fault_stack: list[str] = ["<before any call>"]
_fault_last = [0]


def _on_event(frame: Any, event: str, arg: Any) -> None:
    now = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    top = _fault_stack[-1]
    _fault_counts[top] = _fault_counts.get(top, 0) + now - _fault_last[0]
    if event == "call":
        code = frame.f_code
        _fault_stack.append(f"{code.co_filename.rsplit('/', 2)[-1]}:{code.co_name}")
    elif event == "c_call":
        _fault_stack.append(f"C {getattr(arg, '__qualname__', arg)}")
    elif len(_fault_stack) > 1:
        _fault_stack.pop()
    _fault_last[0] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _count_faults() -> None:
    _fault_last[0] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    sys.setprofile(_on_event)


def _patch_server() -> None:
    """Mark the phases of a spare's life before its target runs (imported as
    a preload of the fork server, whose ``_Server`` lives in ``__main__``)."""
    server = getattr(sys.modules["__main__"], "_Server", None)
    if server is None:
        return
    from harness.procs import _child

    become, resolve, run = server.become_worker, _child.resolve, _child.run

    def become_worker(self: Any, assignment: int) -> Any:
        _marks.clear()  # the server's own
        _mark("become_worker")
        if os.environ.get("WORKER_PROFILE_FAULTS") == "1":
            _count_faults()
        return become(self, assignment)

    def resolve_(target: str) -> Any:
        _mark("assignment read")
        return resolve(target)

    def run_(func: Any, args: dict[str, Any], hooks: Any = ()) -> int:
        _mark("log, env set")
        return run(func, args, hooks)

    server.become_worker = become_worker
    _child.resolve, _child.run = resolve_, run_


_patch_server()


def profiled(args: dict[str, Any]) -> int:
    """A worker target: the reference worker's ``main`` under measurement."""
    out = args.pop("profile_out")
    mode = args.pop("profile_mode")
    if not _marks:
        _mark("target entered")
    from reference_runtime import _config, _runtime, _worker

    prof = cProfile.Profile(time.process_time) if mode == "profile" else None
    real_kill = os.kill

    before = set(sys.modules)

    def dump() -> None:
        _mark("killed")
        Path(out + ".modules").write_text("\n".join(sorted(set(sys.modules) - before)))
        if prof is not None:
            prof.disable()
            prof.dump_stats(out + ".prof")
        Path(out + ".json").write_text(json.dumps(_marks))

    def kill(pid: int, sig: int) -> None:
        if pid == os.getpid() and sig == signal.SIGKILL:
            dump()
        real_kill(pid, sig)

    os.kill = kill  # crashpoints' kill action
    if mode == "marks":
        # phases: configuration, open + setup of the store, claim, load, commit
        from reference_runtime import _services
        from reference_runtime._executor import _loop, _step
        from reference_runtime.store import sqlite

        wrap = [
            (_config.RuntimeConfig, "from_env", "config"),
            (sqlite.SqliteStore, "setup", "store setup (connect, checks)"),
            (_services, "load_services", "load_services"),
            (_runtime.Worker, "claim", "claim"),
            (sqlite.SqliteStore, "load", "load"),
            (_loop, "build_context", "build_context"),
            (_runtime.Worker, "_on_context", "_on_context"),
            (_step.StepContext, "commit", "commit"),
        ]
        if "psycopg" in sys.modules:  # preloaded for Postgres deployments
            from reference_runtime.store import postgres

            wrap += [
                (postgres.PostgresStore, "setup", "store setup (connect, checks)"),
                (postgres.PostgresStore, "load", "load"),
            ]
        for owner, name, label in wrap:
            orig = getattr(owner, name)

            def wrapped(*a: Any, _orig: Any = orig, _label: str = label, **k: Any) -> Any:
                _mark("before " + _label)
                try:
                    return _orig(*a, **k)
                finally:
                    _mark("after " + _label)

            static = name == "from_env" or not isinstance(owner, type)
            setattr(
                owner,
                name,
                staticmethod(wrapped) if static and isinstance(owner, type) else wrapped,
            )
    if mode == "sql":
        import sqlite3

        connect = sqlite3.connect

        def traced(*a: Any, **k: Any) -> Any:
            db = connect(*a, **k)
            db.set_trace_callback(lambda sql: sys.stderr.write(f"SQL {sql[:150]!r}\n"))
            return db

        sqlite3.connect = traced
    if mode == "faults":

        def dump_faults() -> None:
            sys.setprofile(None)
            Path(out + ".faults").write_text(json.dumps(_fault_counts))

        inner_dump = dump

        def dump() -> None:
            dump_faults()
            inner_dump()

        if sys.getprofile() is None:
            _count_faults()
    if prof is not None:
        prof.enable()
    _mark("main")
    return _worker.main(args)


def main() -> None:
    from harness.adapters.reference import ReferenceAdapter, from_options
    from harness.adapters.reference._adapter import ReferenceEnvironment
    from harness.model import CrashSpec, RunSpec

    p = argparse.ArgumentParser()
    p.add_argument("--cycles", type=int, default=30)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--mode", choices=["profile", "marks", "sql", "faults"], default="marks")
    p.add_argument("--backend", default="sqlite")
    p.add_argument("--queue", default="store")
    ns = p.parse_args()
    if ns.mode == "faults":
        os.environ["WORKER_PROFILE_FAULTS"] = "1"  # the fork server's spares count too
    adapter: ReferenceAdapter = from_options(backend=ns.backend, queue=ns.queue)
    with tempfile.TemporaryDirectory(prefix="worker-profile-") as tmp:
        env: ReferenceEnvironment = adapter.open(Path(tmp), seed=0)
        from harness.adapters.reference._deployment import fork_server

        env._server = fork_server(extra=("worker_profile",), backend=ns.backend, queue=ns.queue)
        try:
            for i in range(ns.cycles // 50 + 2):
                env.submit(
                    RunSpec(
                        run_id=f"r{i}",
                        tenant="acme",
                        workflow="research",
                        input={"topic": f"bench{i}", "sources": 100, "requester": "u"},
                    )
                )
            crash = CrashSpec(site="after_step_commit", nth=1)
            outs = []
            for n in range(ns.cycles):
                spec = f"{crash.site}={crash.action}@{crash.nth}"
                wenv = env.d.worker_env(crash=spec)
                wenv["RR_CONTEXT_LOG"] = str(env._context_log)
                out = f"{tmp}/w{n}"
                proc = env._server.spawn(
                    TARGET,
                    args={
                        "worker_id": f"w{n}",
                        "env": wenv,
                        "profile_out": out,
                        "profile_mode": ns.mode,
                    },
                    env=wenv,
                    log=Path(tmp) / "workers.log",
                )
                got = proc.wait(30)
                if not got.was_killed:
                    log = (Path(tmp) / "workers.log").read_text()
                    raise SystemExit(f"cycle {n}: not killed ({got}):\n{log[-3000:]}")
                env.advance_clock(adapter.lease_seconds + 1)
                outs.append(out)
                time.sleep(0.01)  # let the server refill its spares
            report(outs, ns)
            if ns.mode == "sql":
                lines = (Path(tmp) / "workers.log").read_text().splitlines()
                last = [i for i, line in enumerate(lines) if "PRAGMA query_only = ON" in line]
                print("\n".join(lines[last[-1] if last else 0 :]))
        finally:
            env.close()


def report(outs: list[str], ns: argparse.Namespace) -> None:
    phases: dict[str, list[tuple[float, int]]] = {}
    for out in outs:
        marks = json.loads(Path(out + ".json").read_text())
        for (a, t0, f0), (b, t1, f1) in itertools.pairwise(marks):
            phases.setdefault(f"{a} -> {b}", []).append(((t1 - t0) * 1000, f1 - f0))
        first, last = marks[0], marks[-1]
        # CPU time and faults restart at 0 in a forked child
        phases.setdefault(f"fork -> {first[0]}", []).append((first[1] * 1000, first[2]))
        phases.setdefault(f"TOTAL {first[0]} -> killed", []).append(
            ((last[1] - first[1]) * 1000, last[2] - first[2])
        )
    print(f"{len(outs)} workers, medians per worker (CPU ms by process_time, minor faults):")
    for name, vals in phases.items():
        ms = statistics.median(v[0] for v in vals)
        faults = statistics.median(v[1] for v in vals)
        print(f"  {ms:7.2f} ms {faults:7.0f} faults  {name}")
    imported = Path(outs[-1] + ".modules").read_text().split()
    print(f"modules the last worker imported itself: {imported}")
    if ns.mode == "faults":
        total: dict[str, int] = {}
        for out in outs:
            for key, n in json.loads(Path(out + ".faults").read_text()).items():
                total[key] = total.get(key, 0) + n
        print("page faults per worker by innermost function:")
        for key, n in sorted(total.items(), key=lambda kv: -kv[1])[: ns.top]:
            print(f"  {n / len(outs):7.1f}  {key}")
    if ns.mode == "profile":
        stats = pstats.Stats(outs[0] + ".prof")
        for out in outs[1:]:
            stats.add(out + ".prof")
        stats.sort_stats("cumulative").print_stats(ns.top)
        stats.sort_stats("tottime").print_stats(ns.top)


if __name__ == "__main__":
    main()
