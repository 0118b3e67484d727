"""Where the time of one ``harness run --jobs N`` goes, process by process.

Run: ``python benchmarks/jobs_breakdown.py [--jobs 2] [--profile ci]
[--adapter-opt KEY=VALUE ...]``

Runs ``harness run --adapter reference --profile ci --jobs N`` once, with a
``sitecustomize`` module on the import path of the run and of every process
it starts (the jobs pass their parent's path on). It wraps the phases of a
run in timers and, as each process exits, appends what it spent to a file:
importing the harness, probing the adapter (``probe_universe``, its site
profiles), checking declarations (each workflow's fault-free probe), the
parent's one probe for its jobs (``Session._prepare``), fault-free oracle
runs (count and seconds), scenarios (``Engine.execute`` less its oracle
runs), the search (``Engine.run``), writing the report, a job's wait for
its parent's probe, following the jobs and merging, with the wall time and
own CPU seconds of each process (its fork server's and workers' not
included: ``scaling.py`` gives a run's whole CPU). Printed as one table,
a row per harness process.

The timers cost a few function calls per scenario; timed numbers belong
here, never in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

#: installed as sitecustomize.py in a temporary folder on PYTHONPATH
_HOOK = r"""
import atexit, functools, json, os, resource, sys, time

_T0 = time.monotonic()
_OUT = os.environ.get("JOBS_BREAKDOWN_OUT")
_ACC = {}


def _wrap(owner, name, key):
    real = getattr(owner, name, None)
    if real is None:  # an older commit's harness (--jobs without a shared probe)
        return

    @functools.wraps(real)
    def timed(*args, **kwargs):
        started = time.monotonic()
        try:
            return real(*args, **kwargs)
        finally:
            entry = _ACC.setdefault(key, [0.0, 0])
            entry[0] += time.monotonic() - started
            entry[1] += 1

    setattr(owner, name, timed)


def _dump():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    row = {
        "argv": sys.argv,
        "wall": time.monotonic() - _T0,
        "cpu": usage.ru_utime + usage.ru_stime,
        "phases": _ACC,
    }
    with open(_OUT, "a") as fh:
        fh.write(json.dumps(row) + "\n")


# sys.argv is not set yet here; the fork servers (python -m
# harness.procs._forkserver) are left alone
if _OUT and "harness.procs._forkserver" not in sys.orig_argv:
    _started = time.monotonic()
    import harness._api as _api
    import harness._jobs as _jobs
    import harness.cli  # noqa: F401
    from harness.scenarios import _universe
    from harness.session import _engine, _executor

    _ACC["import"] = [time.monotonic() - _started, 1]
    _wrap(_api, "probe_universe", "probe")
    _wrap(_api, "check_declarations", "declarations")
    _wrap(_api.Session, "_prepare", "prepare")  # Session.prepare and run_share
    _wrap(_api.Session, "_write", "report")
    _run_job = _api.run_job

    def _waited(*args, **kwargs):
        # a job's wait for its parent's probe (the ready() it is given)
        ready = kwargs.get("ready")
        if ready is not None:

            def timed():
                started = time.monotonic()
                try:
                    return ready()
                finally:
                    entry = _ACC.setdefault("wait", [0.0, 0])
                    entry[0] += time.monotonic() - started
                    entry[1] += 1

            kwargs["ready"] = timed
        return _run_job(*args, **kwargs)

    _api.run_job = _waited
    _run_scenario = _executor.run_scenario

    def _counted(adapter, scenario, folder, **kwargs):
        # a fault-free run actually run (one another job ran is not)
        key = "oracle" if kwargs.get("history_name") == "oracle.jsonl" else "scenario"
        started = time.monotonic()
        try:
            return _run_scenario(adapter, scenario, folder, **kwargs)
        finally:
            entry = _ACC.setdefault(key, [0.0, 0])
            entry[0] += time.monotonic() - started
            entry[1] += 1

    _executor.run_scenario = _counted
    _wrap(_engine.Engine, "execute", "execute")
    _wrap(_engine.Engine, "run", "search")
    _wrap(_jobs, "_follow", "follow")
    _wrap(_jobs, "_merge", "merge")
    atexit.register(_dump)
"""


def _name(argv: list[str]) -> str:
    if argv and argv[0].endswith("_job.py"):
        try:
            k, n = json.loads(argv[1])["shard"]
        except (IndexError, KeyError, ValueError):
            return "job"
        return f"job {k}/{n}"
    return "parent"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--adapter-opt", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="jobs-breakdown-") as tmp:
        hook = Path(tmp) / "hook"
        hook.mkdir()
        (hook / "sitecustomize.py").write_text(_HOOK)
        out = Path(tmp) / "phases.jsonl"
        env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook), env.get("PYTHONPATH")) if p)
        env["JOBS_BREAKDOWN_OUT"] = str(out)
        argv = [
            sys.executable, "-m", "harness.cli", "run", "--adapter", "reference",
            "--profile", args.profile, "--jobs", str(args.jobs),
            "--report-dir", str(Path(tmp) / "report"),
        ]  # fmt: skip
        for opt in args.adapter_opt:
            argv += ["--adapter-opt", opt]
        load = os.getloadavg()
        started = time.monotonic()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        wall = time.monotonic() - started
        if proc.returncode not in (0, 1, 3):
            raise SystemExit(f"harness run exited {proc.returncode}:\n{proc.stderr}")
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    print(
        f"# harness run --profile {args.profile} --jobs {args.jobs}: {wall:.1f} s wall "
        f"(exit {proc.returncode}); load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
        f"before, {os.getloadavg()[0]:.1f} after; {len(os.sched_getaffinity(0))} usable cores"
    )
    print()
    cols = [
        ("import", "import"),
        ("prepare", "parent's probe"),
        ("wait", "waiting for it"),
        ("probe", "probe (profiles)"),
        ("declarations", "declarations"),
        ("oracle", "fault-free runs"),
        ("scenarios", "scenarios"),
        ("search", "search"),
        ("report", "report"),
        ("follow", "following jobs"),
        ("merge", "merge"),
    ]
    print("| process | wall s | own CPU s | " + " | ".join(t for _, t in cols) + " |")
    print("|---" * (len(cols) + 3) + "|")
    for row in sorted(rows, key=lambda r: _name(r["argv"])):
        phases = row["phases"]
        if "execute" in phases:
            ran = phases["execute"][0] - phases.get("oracle", [0.0, 0])[0]
            phases["scenarios"] = [ran, phases["execute"][1]]
        cells = []
        for key, _ in cols:
            seconds, count = phases.get(key, [0.0, 0])
            if not count:
                cells.append("-")
            elif key in ("oracle", "scenarios"):
                cells.append(f"{seconds:.2f} ({count})")
            else:
                cells.append(f"{seconds:.2f}")
        print(
            f"| {_name(row['argv'])} | {row['wall']:.1f} | {row['cpu']:.1f} | "
            + " | ".join(cells)
            + " |"
        )
    print()
    print(
        "fault-free runs: seconds (count), the probe's included; scenarios: seconds "
        "(count) of Engine.execute less its fault-free runs; the parent's probe "
        "includes its probe (profiles), declarations and fault-free runs columns"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
