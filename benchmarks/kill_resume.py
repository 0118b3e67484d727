"""Kill-and-resume cycles per second against the reference runtime.

Run: ``python benchmarks/kill_resume.py [--seconds N] [--repeats R] [--backend sqlite|postgres]
[--baseline REV]``

One cycle is what the harness does hundreds of times per test run: start a
fresh worker process, let it claim a run, load its durable state and commit
one checkpoint, SIGKILL it at the crash point right after that commit, learn
that it died, and move the virtual clock past its lease so the next worker may
resume. The runs are ``research`` workflows of 100 sources (the most an input
may name), enough of them that they never all finish during the measurement,
so every cycle resumes real state (the oldest unfinished run first).

Printed beside it, measured in the same run (medians of ``--repeats``):

(a) bare ``os.fork()`` + SIGKILL + ``waitpid`` from a fresh process: the
    physical limit of the machine;
(a2) the same where the child reaches Python code before the kill (a worker
    must): the limit for a worker that actually starts;
(f) the floor of a cycle: a worker forked from the same preloaded fork
    server that reaches the runtime's first durable read (configuration, the
    store opened and set up, the run read back), SIGKILLed there
    (``_first_read.py``). The cycle does that and also claims, loads, builds
    a context and commits: ``cycle / floor`` (CPU per cycle, and cycles/s)
    is what the harness's cycle costs above a worker that merely starts.

Per cycle, from ``/proc``: the workers' CPU time and page faults (reaped by
the fork server, so counted in its children's times), the fork server's own
CPU time and the harness's: on a machine shared with other work they move
much less than the cycle rate does.

``--baseline REV`` measures commit REV's harness and runtime beside this
checkout's, alternating one repetition of each (see ``_baseline.py``), and
prints both and the ratio of their cycle rates.

Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _baseline import ROOT, baseline_tree, describe, run_child
from kill_cycles import bare_rate

from harness.adapters.reference import ReferenceAdapter
from harness.adapters.reference._deployment import fork_server
from harness.model import CrashSpec, RunSpec

#: sources of one research run: the most its input may name (one checkpoint each)
SOURCES = 100
#: cycles per second the runs are provisioned for (more than any machine does)
PROVISIONED_RATE = 2_000


def _cpu(server_pid: int) -> list[float]:
    """[harness CPU s, fork server CPU s, its reaped workers' CPU s, their
    page faults] so far (user + system, from ``/proc``)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    fields = Path(f"/proc/{server_pid}/stat").read_text().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return [
        own.ru_utime + own.ru_stime,
        (int(fields[11]) + int(fields[12])) / tick,
        (int(fields[13]) + int(fields[14])) / tick,
        float(fields[8]),
    ]


#: the floor's worker target, preloaded by the fork server (see ``_first_read.py``)
FLOOR_TARGET = "_first_read:first_read"


def resume_rate(
    adapter: ReferenceAdapter, seconds: float, *, floor: bool = False
) -> tuple[float, int, list[float]]:
    """(kill-and-resume cycles per second, checkpoints committed, per cycle:
    harness CPU ms, fork server CPU ms, worker CPU ms, worker page faults)
    for one window; ``floor``: the same for workers that stop at their first
    durable read (the cycle's floor, checkpoints 0)."""
    with tempfile.TemporaryDirectory(prefix="kill-resume-") as tmp:
        env = adapter.open(Path(tmp), seed=0)
        # one fork server for the cycle and its floor: the runtime's preloads
        # and the floor's target
        env._server = fork_server(("_first_read",), backend=adapter.backend, queue=adapter.queue)
        try:
            runs = int(seconds * PROVISIONED_RATE / SOURCES) + 1
            for i in range(runs):
                env.submit(
                    RunSpec(
                        run_id=f"r{i}",
                        tenant="acme",
                        workflow="research",
                        input={"topic": f"bench{i}", "sources": SOURCES, "requester": "u"},
                    )
                )
            crash = CrashSpec(site="after_step_commit", nth=1)
            server = env._server.pid
            assert server is not None
            cpu0 = _cpu(server)
            n, start = 0, time.perf_counter()
            wenv = env.d.worker_env()
            while time.perf_counter() - start < seconds:
                if floor:
                    args = {"env": wenv, "run_id": "r0"}
                    log = Path(tmp) / "workers.log"
                    proc = env._server.spawn(FLOOR_TARGET, args=args, env=wenv, log=log)
                    got = proc.wait(30)
                    if not got.was_killed:
                        raise SystemExit(f"floor {n}: the worker was not killed ({got})")
                else:
                    worker = env.start_worker(f"w{n}", crash=crash)
                    exit_ = worker.wait(30)
                    if not exit_.killed:
                        raise SystemExit(
                            f"cycle {n}: the worker was not killed ({exit_.describe()})"
                        )
                    env.advance_clock(adapter.lease_seconds + 1)
                n += 1
            rate = n / (time.perf_counter() - start)
            spent = [b - a for a, b in zip(cpu0, _cpu(server), strict=True)]
            per_cycle = [x * 1000 / n for x in spent[:3]] + [spent[3] / n]
            if floor:
                return rate, 0, per_cycle
            progress = sum(env.d.snapshot(f"r{i}").run.state_version for i in range(runs))
            if env.d.snapshot(f"r{runs - 1}").run.status.value == "Completed":
                raise SystemExit("every run finished inside the window: provision more runs")
        finally:
            env.close()
    return rate, progress, per_cycle


#: per cycle, read from /proc (CPU: user + system)
CPU_KEYS = ("harness_cpu_ms", "server_cpu_ms", "worker_cpu_ms", "worker_faults")
#: the same for the floor's workers
FLOOR_KEYS = tuple(f"floor_{k}" for k in CPU_KEYS)


def measure(args: argparse.Namespace) -> dict[str, list[float]]:
    """``--repeats`` windows of each measurement in this process's tree."""
    url = args.postgres_url
    if args.backend == "postgres" and url is None:
        from reference_runtime.service_urls import postgres_url

        url = postgres_url()
    adapter = ReferenceAdapter(args.backend, postgres_url=url)
    out: dict[str, list[float]] = {"bare": [], "bare_runs": [], "cycles": [], "checkpoints": []}
    out["floor"] = []
    for key in CPU_KEYS + FLOOR_KEYS:
        out[key] = []
    for _ in range(args.repeats):
        out["bare"].append(bare_rate(args.seconds, child_runs=False))
        out["bare_runs"].append(bare_rate(args.seconds, child_runs=True))
        rate, _, per_cycle = resume_rate(adapter, args.seconds, floor=True)
        for key, value in zip(FLOOR_KEYS, per_cycle, strict=True):
            out[key].append(value)
        out["floor"].append(rate)
        rate, progress, per_cycle = resume_rate(adapter, args.seconds)
        for key, value in zip(CPU_KEYS, per_cycle, strict=True):
            out[key].append(value)
        out["cycles"].append(rate)
        out["checkpoints"].append(progress)
    return out


def print_table(title: str, got: dict[str, list[float]]) -> None:
    med = statistics.median
    bare, bare_runs = got["bare"], got["bare_runs"]
    print(title)
    rows = [
        ("(a) bare fork + SIGKILL + waitpid (limit)", bare),
        ("(a2) same, child reaches Python first", bare_runs),
        ("(f) floor: worker reaches its first read", got.get("floor") or [float("nan")]),
        ("kill-and-resume cycles (fork server)", got["cycles"]),
    ]
    print(f"{'what':44} {'cycles/s':>9} {'vs (a)':>7} {'vs (a2)':>8}   range")
    for name, xs in rows:
        print(
            f"{name:44} {med(xs):9.1f} {med(xs) / med(bare):7.2f} {med(xs) / med(bare_runs):8.2f}"
            f"   {min(xs):.0f}..{max(xs):.0f}"
        )
    if all(got.get(k) for k in CPU_KEYS):
        h, sv, w, f = (med(got[k]) for k in CPU_KEYS)
        print(
            f"per cycle: worker CPU {w:.2f} ms ({f:.0f} page faults), fork server CPU "
            f"{sv:.2f} ms, harness CPU {h:.2f} ms (medians, from /proc)"
        )
    if got.get("floor") and all(got.get(k) for k in FLOOR_KEYS):
        fh, fs, fw, ff = (med(got[k]) for k in FLOOR_KEYS)
        print(
            f"per floor cycle: worker CPU {fw:.2f} ms ({ff:.0f} page faults), fork server CPU "
            f"{fs:.2f} ms, harness CPU {fh:.2f} ms"
        )
        cycle = sum(med(got[k]) for k in CPU_KEYS[:3])
        floor = fh + fs + fw
        print(
            f"cycle / floor: {cycle / floor:.2f}x in CPU per cycle (all three: {cycle:.2f} / "
            f"{floor:.2f} ms), {med(got['floor']) / med(got['cycles']):.2f}x in cycles/s"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--postgres-url", default=None)
    p.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure commit REV, alternating with this checkout (e.g. HEAD~1)",
    )
    p.add_argument("--json", action="store_true", help="print the measurements as one JSON line")
    args = p.parse_args()
    head = (
        f"kill-and-resume on the reference runtime ({args.backend}) -- CPython "
        f"{platform.python_version()}, {len(os.sched_getaffinity(0))} CPUs, "
        f"{args.repeats} x {args.seconds:g} s windows, medians [min-max]"
    )
    if args.baseline:
        base_name = describe(args.baseline)
        argv = ["--seconds", str(args.seconds), "--repeats", "1", "--backend", args.backend]
        if args.postgres_url:
            argv += ["--postgres-url", args.postgres_url]
        got: dict[str, dict[str, list[float]]] = {"this": {}, "base": {}}
        with baseline_tree(args.baseline) as tree:
            for r in range(args.repeats):
                order = [("this", ROOT), ("base", tree)]
                for side, root in order if r % 2 == 0 else order[::-1]:
                    one = run_child(root, "kill_resume.py", argv)
                    for key, xs in one.items():
                        got[side].setdefault(key, []).extend(xs)
                print(
                    f"round {r + 1}: this {got['this']['cycles'][-1]:.0f}/s, "
                    f"{args.baseline} {got['base']['cycles'][-1]:.0f}/s",
                    flush=True,
                )
        print(head + f"; rounds alternate with {args.baseline} = {base_name}")
        print_table("\nthis checkout:", got["this"])
        print_table(f"\n{args.baseline} ({base_name}):", got["base"])
        med = statistics.median
        mine, theirs = got["this"]["cycles"], got["base"]["cycles"]
        ratios = [a / b for a, b in zip(mine, theirs, strict=True)]
        print(
            f"\nthis / {args.baseline}: {med(mine) / med(theirs):.2f}x cycles/s "
            f"(per round {min(ratios):.2f}..{max(ratios):.2f})"
        )
        return
    got_one = measure(args)
    if args.json:
        print(json.dumps(got_one))
        return
    print_table(head, got_one)
    print(
        f"each cycle: fork a worker, claim, load state, commit one checkpoint, SIGKILL at "
        f"after_step_commit, reap, advance the clock past the lease; the runs advanced "
        f"{statistics.median(got_one['checkpoints']):.0f} state versions per window (median)"
    )


if __name__ == "__main__":
    time.sleep(0)
    main()
