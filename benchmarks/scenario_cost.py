"""Where one scenario's time goes, next to the machine's physical limits.

Run: ``python benchmarks/scenario_cost.py [--scenarios 30] [--repeats 3]
[--adapter-opt KEY=VALUE ...] [--baseline REV]``

Runs the first ``--scenarios`` targeted schedules of the reference adapter
(fixed, so every run measures the same work) the way the engine does: the
fault-free oracle run (once per workload, cached like the engine's), the
faulted run, then the checkers. Each scenario runs under :mod:`cProfile`, and
the wall time is split by where it was spent, read from the adapter contract's
calls (``open`` an environment, ``close`` it, ``start_worker``, wait for a
worker, ``observe``/``durable_state``, ``submit``/``deliver``), the world's
fault arming and the checkers; what is left is the harness's own recording and
stepping. Waiting for a worker is the workers' own time: fork, configuration,
connections, claims, loads and commits (they run in other processes, so a
parent's profile sees only the wait).

A scenario's cost is its own wall time: its faulted run, its checkers, and
the oracle run when it was the first of its workload (the median over the
plan is the "median scenario"; the mean is the total over the count).

CPU time per scenario is printed too, per process kind (this process with
its profiler, the fork servers, the workers they reaped; user + system from
``/proc``): on a machine shared with other work, CPU time moves much less
than wall time does.

Printed beside it, measured in the same run (medians of ``--repeats``):

- a bare ``os.fork()`` + SIGKILL + ``waitpid`` from a fresh process, the floor
  for a worker started and killed;
- one SQLite commit (WAL, ``synchronous=NORMAL``, as the reference store),
  the floor for a durable step.

``--baseline REV`` measures commit REV's harness and runtime beside this
checkout's, alternating one repetition of each (see ``_baseline.py``), and
prints both tables and the ratios of their scenario costs.

Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import resource
import sqlite3
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baseline import ROOT, baseline_tree, describe, run_child
from kill_cycles import bare_rate

from harness.adapters import _workers
from harness.adapters._loading import load_adapter
from harness.checkers import check_all
from harness.history import History
from harness.runner import run_scenario
from harness.scenarios import probe_universe, targeted

#: (function name, file suffix) -> share; the first match of a frame wins.
#: Matched on the innermost such call, so nested time is not counted twice.
SHARES = (
    ("open", "_adapter.py", "environment setup"),
    ("close", "_adapter.py", "environment teardown"),
    ("start_worker", "_adapter.py", "worker spawn"),
    ("wait", "_workers.py", "worker run (fork, claim, load, commits)"),
    ("observe", "_adapter.py", "observation"),
    ("durable_state", "_adapter.py", "observation"),
    ("submit", "_adapter.py", "submit/deliver"),
    ("deliver", "_adapter.py", "submit/deliver"),
)


def _share_of(stats: pstats.Stats) -> dict[str, float]:
    """Seconds per share: the cumulative time of the matched functions, with
    the time of matched functions they call subtracted (no double count)."""
    raw: dict[tuple[str, int, str], float] = {}
    names: dict[tuple[str, int, str], str] = {}
    for func, (_cc, _nc, _tt, ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        filename, _line, name = func
        for fn, suffix, share in SHARES:
            if name == fn and filename.endswith(suffix):
                raw[func] = ct
                names[func] = share
                break
    out: dict[str, float] = defaultdict(float)
    for func, ct in raw.items():
        inner = 0.0
        for callee, (_cc, _nc, _tt, _ct2, callers) in stats.stats.items():  # type: ignore[attr-defined]
            if callee in raw and func in callers:
                inner += callers[func][3]
        out[names[func]] += max(0.0, ct - inner)
    return out


def measure(
    adapter_opts: dict[str, str], n: int
) -> tuple[dict[str, float], int, float, list[float]]:
    """(seconds per share over ``n`` scenarios, scenarios run, wall seconds,
    each scenario's own seconds)."""
    adapter = load_adapter("reference", adapter_opts)
    universe = probe_universe(adapter)
    plan = targeted(universe)[:n]
    shares: dict[str, float] = defaultdict(float)
    oracles: dict[str, Path] = {}
    each: list[float] = []
    cpu0 = _cpu_seconds()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="scenario-cost-") as tmp:
        for i, scenario in enumerate(plan):
            free = scenario.fault_free(lambda r: dict(r.input))
            key = free.model_copy(update={"name": ""}).model_dump_json()
            t0 = time.perf_counter()
            if key not in oracles:
                oracles[key] = run_scenario(
                    adapter, free, Path(tmp) / f"oracle-{i}", history_name="oracle.jsonl"
                ).history_path
            shares["oracle (fault-free run, cached per workload)"] += time.perf_counter() - t0
            profile = cProfile.Profile()
            t1 = time.perf_counter()
            profile.enable()
            result = run_scenario(adapter, scenario, Path(tmp) / f"example-{i}")
            profile.disable()
            run_wall = time.perf_counter() - t1
            split = _share_of(pstats.Stats(profile))
            for name, seconds in split.items():
                shares[name] += seconds
            shares["harness stepping and recording"] += max(0.0, run_wall - sum(split.values()))
            t2 = time.perf_counter()
            check_all(History.load(result.history_path), History.load(oracles[key]))
            shares["checkers"] += time.perf_counter() - t2
            each.append(time.perf_counter() - t0)
    wall = time.perf_counter() - started
    for name, seconds in _cpu_seconds().items():
        shares[f"{CPU}{name}"] = seconds - cpu0.get(name, 0.0)
    return dict(shares), len(plan), wall, each


#: shares whose name starts with this are CPU seconds, not wall seconds
CPU = "cpu: "


def _cpu_seconds() -> dict[str, float]:
    """CPU seconds so far of this process (its profiler included), of the fork
    servers, and of the workers they have reaped (user + system, from
    ``/proc``): on a shared machine, less noisy than wall time."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    out = {"harness (profiled)": own.ru_utime + own.ru_stime, "fork server": 0.0, "workers": 0.0}
    tick = os.sysconf("SC_CLK_TCK")
    for server in list(_workers._servers.values()):
        try:
            fields = Path(f"/proc/{server.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out["fork server"] += (int(fields[11]) + int(fields[12])) / tick
        out["workers"] += (int(fields[13]) + int(fields[14])) / tick
    return out


def sqlite_commit_seconds(commits: int = 500) -> float:
    """Seconds per commit of one small row, WAL and synchronous=NORMAL."""
    with tempfile.TemporaryDirectory(prefix="sqlite-commit-") as tmp:
        conn = sqlite3.connect(Path(tmp) / "c.db", isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)")
        start = time.perf_counter()
        for k in range(commits):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?, ?)", (k, "x" * 200))
            conn.execute("COMMIT")
        took = time.perf_counter() - start
        conn.close()
    return took / commits


Runs = list[tuple[dict[str, float], int, float, list[float]]]


def limits(repeats: int) -> dict[str, float]:
    """The physical limits, medians of ``repeats``."""
    return {
        "fork_rate": statistics.median(bare_rate(1.0, child_runs=False) for _ in range(repeats)),
        "commit": statistics.median(sqlite_commit_seconds() for _ in range(repeats)),
    }


def print_table(runs: Runs) -> dict[str, float]:
    """The shares table of ``runs``; returns the mean and median scenario (ms)."""
    count = runs[0][1]
    names = sorted(
        {k for s, _, _, _ in runs for k in s if not k.startswith(CPU)},
        key=lambda k: -runs[0][0].get(k, 0.0),
    )
    cpu_names = sorted({k for s, _, _, _ in runs for k in s if k.startswith(CPU)})
    total = statistics.median(w for _, _, w, _ in runs)
    mean_ms = total / count * 1000
    medians = [statistics.median(each) * 1000 for _, _, _, each in runs]
    median_ms = statistics.median(medians)
    print(
        f"median of {len(runs)}: {mean_ms:.0f} ms per scenario (mean over the plan); "
        f"median scenario {median_ms:.0f} ms ({min(medians):.0f}-{max(medians):.0f})\n"
    )
    print("| share | ms per scenario | % |")
    print("|---|---:|---:|")
    for name in names:
        ms = statistics.median(s.get(name, 0.0) for s, _, _, _ in runs) / count * 1000
        print(f"| {name} | {ms:.1f} | {ms / mean_ms * 100:.0f} |")
    cpu_ms = 0.0
    if cpu_names:
        print("\n| CPU, every process (oracles and checkers included) | ms per scenario |")
        print("|---|---:|")
        for name in cpu_names:
            ms = statistics.median(s.get(name, 0.0) for s, _, _, _ in runs) / count * 1000
            cpu_ms += ms
            print(f"| {name.removeprefix(CPU)} | {ms:.1f} |")
        print(f"| total | {cpu_ms:.1f} |")
    return {"mean": mean_ms, "median": median_ms, "cpu": cpu_ms}


def print_limits(got: dict[str, float]) -> None:
    print("\nphysical limits, same run:")
    rate = got["fork_rate"]
    print(f"- bare fork + SIGKILL + waitpid: {1000 / rate:.2f} ms ({rate:.0f}/s)")
    print(f"- one SQLite commit (WAL, synchronous=NORMAL): {got['commit'] * 1000:.3f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scenarios", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--adapter-opt", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure commit REV, alternating with this checkout (e.g. HEAD~1)",
    )
    p.add_argument("--json", action="store_true", help="print the measurements as one JSON line")
    ns = p.parse_args()
    opts = dict(o.split("=", 1) for o in ns.adapter_opt)
    head = f"# scenario cost: reference {opts or '(sqlite)'}, {platform.python_version()}"
    if ns.baseline:
        base_name = describe(ns.baseline)
        argv = ["--scenarios", str(ns.scenarios), "--repeats", "1"]
        for o in ns.adapter_opt:
            argv += ["--adapter-opt", o]
        got: dict[str, Runs] = {"this": [], "base": []}
        lim: list[dict[str, float]] = []
        plans: dict[str, list[str]] = {}
        with baseline_tree(ns.baseline) as tree:
            for r in range(ns.repeats):
                order = [("this", ROOT), ("base", tree)]
                for side, root in order if r % 2 == 0 else order[::-1]:
                    one = run_child(root, "scenario_cost.py", argv)
                    got[side] += [tuple(x) for x in one["runs"]]  # type: ignore[misc]
                    lim.append(one["limits"])
                    plans[side] = one["plan"]
                print(
                    f"round {r + 1}: this {got['this'][-1][2]:.1f} s, "
                    f"{ns.baseline} {got['base'][-1][2]:.1f} s",
                    flush=True,
                )
        print(f"\n{head}; rounds alternate with {ns.baseline} = {base_name}\n")
        if plans["this"] != plans["base"]:
            print(f"NOTE: {ns.baseline} plans other scenarios than this checkout\n")
        print("## this checkout\n")
        mine = print_table(got["this"])
        print(f"\n## {ns.baseline} ({base_name})\n")
        theirs = print_table(got["base"])
        print(
            f"\n{ns.baseline} / this: {theirs['median'] / mine['median']:.2f}x the median "
            f"scenario, {theirs['mean'] / mine['mean']:.2f}x the mean, "
            f"{theirs['cpu'] / mine['cpu']:.2f}x the CPU (higher: this is cheaper)"
        )
        print_limits({k: statistics.median(x[k] for x in lim) for k in lim[0]})
        return
    runs: Runs = []
    for r in range(ns.repeats):
        runs.append(measure(opts, ns.scenarios))
        if not ns.json:
            print(f"repeat {r + 1}: {runs[-1][1]} scenarios in {runs[-1][2]:.1f} s")
    if ns.json:
        plan = [sc.name for sc in targeted(probe_universe(load_adapter("reference", opts)))]
        print(
            json.dumps({"runs": runs, "limits": limits(ns.repeats), "plan": plan[: ns.scenarios]})
        )
        return
    print(head)
    print()
    print_table(runs)
    print_limits(limits(ns.repeats))


if __name__ == "__main__":
    main()
