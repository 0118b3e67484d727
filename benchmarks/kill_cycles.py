"""How fast can the harness get a fresh worker and SIGKILL it?

Run: ``python benchmarks/kill_cycles.py [--seconds N] [--repeats R]``

One cycle = start a worker that needs pydantic and sqlite3, SIGKILL it, learn
that it died. Measured in the same run, each ``--repeats`` times for
``--seconds``, reporting the median:

(a) bare ``os.fork()`` + SIGKILL + ``waitpid`` in a fresh single-threaded
    process: the physical limit, no protocol, no imports; the child is
    usually killed before it ever runs;
(a2) the same from a process with pydantic and sqlite3 imported, where the
    child reaches Python code before the kill (as a worker must): the limit
    for a worker that actually starts;
(b) :class:`harness.procs.ForkServer` with pydantic and sqlite3 preloaded:
    ``spawn`` + ``kill`` + ``wait``;
(c) :class:`harness.procs.DirectSpawner`: a fresh interpreter per worker,
    which imports pydantic and sqlite3 itself;
(d) the standard library's ``multiprocessing`` "forkserver" with the same
    preloads: ``start`` + ``kill`` + ``join``, for comparison.

Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import signal
import sqlite3  # noqa: F401  (what a real worker needs; see TARGET)
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from multiprocessing.context import ForkServerContext
from pathlib import Path
from typing import Any

import pydantic

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.procs import DirectSpawner, Exit, ForkServer, Spawner

# The worker's target lives in this module, which imports what a real runtime
# worker needs: DirectSpawner pays those imports per worker, the fork server once.
TARGET = "kill_cycles:sleeping_worker"

BARE = """
import os, signal, sys, time
seconds, child_runs = float(sys.argv[1]), sys.argv[2] == "runs"
if child_runs:
    import pydantic, sqlite3
    ready_r, ready_w = os.pipe()
n, start = 0, time.perf_counter()
while time.perf_counter() - start < seconds:
    pid = os.fork()
    if pid == 0:
        if child_runs:
            os.write(ready_w, b"!")
        while True:
            signal.pause()
    if child_runs:
        os.read(ready_r, 1)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    n += 1
print(n / (time.perf_counter() - start))
"""


def sleeping_worker(args: dict[str, Any]) -> None:
    """The benchmark's worker: sleep until killed."""
    while True:
        time.sleep(3600)


def bare_rate(seconds: float, child_runs: bool) -> float:
    """One measurement in a fresh single-threaded process."""
    argv = [sys.executable, "-c", BARE, str(seconds), "runs" if child_runs else "never"]
    return float(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)


def spawner_rate(spawner: Spawner, seconds: float) -> float:
    """One measurement of spawn + kill + wait cycles."""
    killed = Exit.killed(signal.SIGKILL)
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        worker = spawner.spawn(TARGET)
        worker.kill()
        if worker.wait(30) != killed:
            raise SystemExit(f"worker {worker.pid} did not end by SIGKILL: {worker.exit}")
        n += 1
    return n / (time.perf_counter() - start)


def multiprocessing_rate(context: ForkServerContext, seconds: float) -> float:
    """One measurement of the standard library's forkserver: start + kill + join."""
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        process = context.Process(target=sleeping_worker, args=({},))
        process.start()
        process.kill()
        process.join()
        n += 1
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0, help="length of one measurement")
    parser.add_argument("--repeats", type=int, default=5, help="measurements per method")
    options = parser.parse_args()
    seconds, repeats = options.seconds, options.repeats

    context = multiprocessing.get_context("forkserver")
    assert isinstance(context, ForkServerContext)
    context.set_forkserver_preload(["__main__", "pydantic", "sqlite3"])
    with ForkServer(preload=["pydantic", "sqlite3"]) as server, DirectSpawner() as direct:
        methods: list[tuple[str, Callable[[], float]]] = [
            ("(a) bare os.fork + SIGKILL + waitpid", lambda: bare_rate(seconds, False)),
            ("(a2) same, pydantic loaded, child runs first", lambda: bare_rate(seconds, True)),
            ("(b) ForkServer, pydantic+sqlite3 preloaded", lambda: spawner_rate(server, seconds)),
            ("(c) DirectSpawner (fresh interpreter)", lambda: spawner_rate(direct, seconds)),
            (
                "(d) multiprocessing forkserver, same preloads",
                lambda: multiprocessing_rate(context, seconds),
            ),
        ]
        for spawner in (server, direct):  # warm up: the target's first import
            spawner.spawn(TARGET).kill()
        multiprocessing_rate(context, 0.1)  # starts the stdlib's server
        rates: dict[str, list[float]] = {name: [] for name, _ in methods}
        # Round-robin, so that a burst of load elsewhere on the machine
        # lands on every method rather than on one.
        for _ in range(repeats):
            for name, measure in methods:
                rates[name].append(measure())

    print(
        f"kill cycles: Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"pydantic {pydantic.VERSION}, load average {os.getloadavg()[0]:.2f}; "
        f"median of {repeats} x {seconds:g}s"
    )
    limit = statistics.median(rates[methods[0][0]])
    width = max(len(name) for name, _ in methods)
    print(f"{'method':<{width}}  {'cycles/s':>9}  {'vs (a)':>6}  {'min..max':>11}")
    for name, _ in methods:
        median = statistics.median(rates[name])
        spread = f"{min(rates[name]):.0f}..{max(rates[name]):.0f}"
        print(f"{name:<{width}}  {median:>9.1f}  {median / limit:>6.2f}  {spread:>11}")


if __name__ == "__main__":
    main()
