"""Kill-and-resume cycles per second against the reference runtime.

Run: ``python benchmarks/kill_resume.py [--seconds N] [--repeats R] [--backend sqlite|postgres]``

One cycle is what the harness does hundreds of times per test run: start a
fresh worker process, let it claim a run, load its durable state and commit
one checkpoint, SIGKILL it at the crash point right after that commit, learn
that it died, and move the virtual clock past its lease so the next worker may
resume. The run is a ``research`` workflow with enough sources that it never
finishes during the measurement, so every cycle resumes real state.

Printed beside it, measured in the same run (medians of ``--repeats``):

(a) bare ``os.fork()`` + SIGKILL + ``waitpid`` from a fresh process: the
    physical limit of the machine;
(a2) the same where the child reaches Python code before the kill (a worker
    must): the limit for a worker that actually starts.

Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kill_cycles import bare_rate

from harness.adapters.reference import ReferenceAdapter
from harness.model import CrashSpec, RunSpec


def resume_rate(adapter: ReferenceAdapter, seconds: float) -> tuple[float, int]:
    """(kill-and-resume cycles per second, checkpoints committed) for one window."""
    with tempfile.TemporaryDirectory(prefix="kill-resume-") as tmp:
        env = adapter.open(Path(tmp), seed=0)
        try:
            env.submit(
                RunSpec(
                    run_id="r1",
                    tenant="acme",
                    workflow="research",
                    input={"topic": "bench", "sources": 1_000_000, "requester": "u"},
                )
            )
            crash = CrashSpec(site="after_step_commit", nth=1)
            n, start = 0, time.perf_counter()
            while time.perf_counter() - start < seconds:
                worker = env.start_worker(f"w{n}", crash=crash)
                exit_ = worker.wait(30)
                if not exit_.killed:
                    raise SystemExit(f"cycle {n}: the worker was not killed ({exit_.describe()})")
                env.advance_clock(adapter.lease_seconds + 1)
                n += 1
            rate = n / (time.perf_counter() - start)
            progress = env.d.snapshot("r1").run.state_version
        finally:
            env.close()
    return rate, progress


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    p.add_argument("--postgres-url", default=None)
    args = p.parse_args()
    url = args.postgres_url
    if args.backend == "postgres" and url is None:
        from reference_runtime.service_urls import postgres_url

        url = postgres_url()
    adapter = ReferenceAdapter(args.backend, postgres_url=url)
    bare, bare_runs, cycles, checkpoints = [], [], [], []
    for _ in range(args.repeats):
        bare.append(bare_rate(args.seconds, child_runs=False))
        bare_runs.append(bare_rate(args.seconds, child_runs=True))
        rate, progress = resume_rate(adapter, args.seconds)
        cycles.append(rate)
        checkpoints.append(progress)
    med = statistics.median
    print(
        f"kill-and-resume on the reference runtime ({args.backend}) -- CPython "
        f"{platform.python_version()}, {len(__import__('os').sched_getaffinity(0))} CPUs, "
        f"{args.repeats} x {args.seconds:g} s windows, medians [min-max]"
    )
    rows = [
        ("(a) bare fork + SIGKILL + waitpid (limit)", bare),
        ("(a2) same, child reaches Python first", bare_runs),
        ("kill-and-resume cycles (fork server)", cycles),
    ]
    print(f"{'what':44} {'cycles/s':>9} {'vs (a)':>7} {'vs (a2)':>8}   range")
    for name, xs in rows:
        print(
            f"{name:44} {med(xs):9.1f} {med(xs) / med(bare):7.2f} {med(xs) / med(bare_runs):8.2f}"
            f"   {min(xs):.0f}..{max(xs):.0f}"
        )
    print(
        f"each cycle: fork a worker, claim, load state, commit one checkpoint, SIGKILL at "
        f"after_step_commit, reap, advance the clock past the lease; the run advanced "
        f"{med(checkpoints):.0f} state versions per window (median)"
    )


if __name__ == "__main__":
    time.sleep(0)
    main()
