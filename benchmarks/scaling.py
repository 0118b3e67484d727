"""One search in 1 and in N processes: the speedup of ``harness run --jobs N``.

Run: ``python benchmarks/scaling.py [--jobs 1,2] [--repeats R] [--profile ci]
[--adapter-opt KEY=VALUE ...]``

Runs ``harness run --adapter reference --profile ci --jobs N`` (a fresh
process each time, timed from start to exit: start-up, probing and merging
included) for every N, alternating the Ns across ``--repeats`` rounds so
that a machine busy at one moment weighs on every N alike, and prints each
N's median wall time, its speedup over the first N, its median CPU seconds
(the run and every process under it: what the N processes cost in all,
which a busy machine changes less than the wall time), and whether every N
produced the same verdicts (the run's and each property's) and the same set
of scenario ids (``scenarios.jsonl``: the plan's scenarios, shrinking
aside). Exits 1 if they differ.

Timed numbers belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def run_once(n: int, profile: str, opts: list[str], folder: Path) -> dict[str, Any]:
    """One ``harness run --jobs n``: wall seconds, verdicts and scenario ids."""
    argv = [
        sys.executable, "-m", "harness.cli", "run", "--adapter", "reference",
        "--profile", profile, "--jobs", str(n), "--report-dir", str(folder),
    ]  # fmt: skip
    for opt in opts:
        argv += ["--adapter-opt", opt]
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "GITHUB_STEP_SUMMARY")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if proc.returncode not in (0, 1, 3):
        raise SystemExit(f"harness run --jobs {n} exited {proc.returncode}:\n{proc.stderr}")
    report = json.loads((folder / "report.json").read_text())
    ledger = [json.loads(line) for line in (folder / "scenarios.jsonl").read_text().splitlines()]
    ids = sorted(e["id"] for e in ledger if e["phase"] == "search")
    return {
        "seconds": seconds,
        "cpu": cpu,
        "search_seconds": report["duration_seconds"],
        "verdict": report["verdict"],
        "properties": {p["name"]: p["verdict"] for p in report["properties"]},
        "ids": ids,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", default="1,2", help="the Ns to compare, first is the baseline")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", default="ci")
    parser.add_argument("--adapter-opt", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    ns = [int(x) for x in args.jobs.split(",")]
    print(
        f"# {platform.node()}: {len(os.sched_getaffinity(0))} usable cores, load average "
        f"{os.getloadavg()[0]:.1f}; profile {args.profile}, {args.repeats} rounds, jobs {ns}"
    )
    results: dict[int, list[dict[str, Any]]] = {n: [] for n in ns}
    with tempfile.TemporaryDirectory(prefix="scaling-") as tmp:
        for r in range(args.repeats):
            order = ns if r % 2 == 0 else ns[::-1]
            for n in order:
                res = run_once(n, args.profile, args.adapter_opt, Path(tmp) / f"r{r}-j{n}")
                results[n].append(res)
                print(
                    f"round {r + 1}, --jobs {n}: {res['seconds']:.1f} s, {res['cpu']:.1f} CPU s "
                    f"({len(res['ids'])} scenarios, verdict {res['verdict']}; load average "
                    f"{os.getloadavg()[0]:.1f})",
                    flush=True,
                )
    base = statistics.median(x["seconds"] for x in results[ns[0]])
    base_cpu = statistics.median(x["cpu"] for x in results[ns[0]])
    print()
    print(
        f"| --jobs | median wall s (range) | speedup over --jobs {ns[0]} "
        f"| median CPU s | CPU over --jobs {ns[0]} |"
    )
    print("|---|---|---|---|---|")
    for n in ns:
        times = [x["seconds"] for x in results[n]]
        med = statistics.median(times)
        cpu = statistics.median(x["cpu"] for x in results[n])
        print(
            f"| {n} | {med:.1f} ({min(times):.1f}-{max(times):.1f}) | {base / med:.2f}x "
            f"| {cpu:.1f} | {cpu / base_cpu:.2f}x |"
        )
    first = results[ns[0]][0]
    same_verdicts = all(
        x["verdict"] == first["verdict"] and x["properties"] == first["properties"]
        for n in ns
        for x in results[n]
    )
    same_ids = all(x["ids"] == first["ids"] for n in ns for x in results[n])
    print()
    print(f"same verdicts for every N and round: {'yes' if same_verdicts else 'NO'}")
    print(
        f"same set of scenario ids ({len(first['ids'])}) for every N and round: "
        f"{'yes' if same_ids else 'NO'}"
    )
    return 0 if same_verdicts and same_ids else 1


if __name__ == "__main__":
    sys.exit(main())
