"""CPU and pace of whole ``harness run`` invocations, two harness trees side by side.

Run: ``python benchmarks/ci_pace.py [--baseline REV | --tree NAME=PATH ...]
[--repeats 2] -- HARNESS-RUN-ARGS...``, e.g.::

    python benchmarks/ci_pace.py --baseline HEAD~4 --repeats 2 -- \\
        --adapter reference --profile ci --max-examples 40 --budget 600

Each repetition runs ``harness run ARGS`` once per tree, alternating the
trees (a machine busy at one moment weighs on both alike), each in a fresh
interpreter with its tree first on ``sys.path`` (inherited by the fork server
and its workers). It measures the CPU of the whole process tree (user +
system of the child and every descendant it reaped, from ``os.wait4``) and
the wall time, and reads the report folder: the verdict, the scenarios run,
the plan's fit estimate (``scenario_seconds``) next to the measured seconds a
scenario, and two digests of ``scenarios.jsonl`` -- of the scenario ids and
their verdicts, and of their history hashes -- so that a change that must
not move the search shows it did not.

``--tree NAME=PATH`` names a folder holding a harness tree (``harness/``,
``reference_runtime/``, ``examples/``); ``--baseline REV`` extracts commit
REV's tree (``git archive``) and compares it with this checkout. On a loaded
machine read the CPU and the ratios, not the wall times. Timed numbers
belong here, never in the tests.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from harness.cli import main; sys.exit(main(sys.argv[2:]))"
)


def run_once(tree: Path, argv: list[str]) -> dict[str, Any]:
    """``harness run ARGV`` with ``tree``'s harness: CPU, wall, and what its report says."""
    work = Path(tempfile.mkdtemp(prefix="ci-pace-"))
    try:
        report = work / "report"
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        args = [sys.executable, "-c", CHILD, str(tree), "run", *argv, "--report-dir", str(report)]
        started = time.monotonic()
        with open(work / "out.txt", "wb") as out:
            proc = subprocess.Popen(args, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - started
        text = (work / "out.txt").read_text(errors="replace")
        if proc.returncode not in (0, 1, 3):
            raise SystemExit(f"harness run in {tree} exited {proc.returncode}:\n{text[-3000:]}")
        data = json.loads((report / "report.json").read_text())
        lines = [json.loads(x) for x in (report / "scenarios.jsonl").read_text().splitlines() if x]
        ids = [(x["id"], sorted(x["failed"])) for x in lines]
        histories = [(x["id"], x["history"]) for x in lines]
        ran = data.get("searched_scenarios") or len(lines)
        return {
            "cpu": usage.ru_utime + usage.ru_stime,
            "wall": wall,
            "exit": proc.returncode,
            "verdict": data.get("verdict"),
            "ran": ran,
            "planned": data.get("planned_scenarios"),
            "estimate": data.get("scenario_seconds"),
            "ids": hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:12],
            "histories": dict(histories),
            "search_seconds": data.get("duration_seconds"),
            "notices": [ln for ln in text.splitlines() if ln.startswith("harness: the first")],
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--" not in argv:
        print("give harness run's arguments after --: -- --adapter reference", file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", metavar="REV")
    parser.add_argument("--tree", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--repeats", type=int, default=2)
    ns = parser.parse_args(argv[:cut])
    run_args = argv[cut + 1 :]
    trees: list[tuple[str, Path]] = []
    for spec in ns.tree:
        name, _, path = spec.partition("=")
        if not path or not (Path(path) / "harness").is_dir():
            print(f"--tree {spec!r}: give NAME=PATH, a folder with harness/ in it", file=sys.stderr)
            return 2
        trees.append((name, Path(path).resolve()))
    baseline = None
    if ns.baseline:
        sys.path.insert(0, str(HERE))
        from _baseline import baseline_tree, describe

        print(f"baseline: {describe(ns.baseline)}")
        baseline = baseline_tree(ns.baseline)
        trees = [("baseline", baseline.__enter__()), ("this", ROOT)]
    if len(trees) < 1:
        trees = [("this", ROOT)]
    try:
        results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
        for rep in range(ns.repeats):
            for name, tree in trees if rep % 2 == 0 else list(reversed(trees)):
                r = run_once(tree, run_args)
                results[name].append(r)
                brief = {k: v for k, v in r.items() if k != "histories"}
                print(f"  {name} #{rep + 1}: {json.dumps(brief)}", flush=True)
    finally:
        if baseline is not None:
            baseline.__exit__(None, None, None)
    print(f"\nharness run {' '.join(run_args)}  ({ns.repeats} repetitions, medians)")
    head = f"{'tree':<10} {'CPU s':>7} {'wall s':>7} {'ran':>7} {'CPU/scen':>9} "
    head += f"{'est s':>6} {'search s/scen':>13}  verdict  ids"
    print(head)
    first_cpu = None
    for name, rs in results.items():
        cpu = statistics.median(r["cpu"] for r in rs)
        wall = statistics.median(r["wall"] for r in rs)
        ran = rs[0]["ran"]
        first_cpu = first_cpu or cpu
        est = rs[0]["estimate"]
        pace = statistics.median((r["search_seconds"] or 0) / max(r["ran"], 1) for r in rs)
        print(
            f"{name:<10} {cpu:7.1f} {wall:7.1f} {ran:>3}/{rs[0]['planned']:<3} "
            f"{cpu / max(ran, 1) * 1000:7.0f}ms {'-' if est is None else f'{est:.2f}':>6} "
            f"{pace:13.2f}  {rs[0]['verdict']:<7}  "
            f"{' '.join(sorted({r['ids'] for r in rs}))}  x{cpu / first_cpu:.2f} CPU"
        )
    # Histories: a scenario whose history differs between two runs of one
    # tree raced (concurrent workers, real time); only the others can show
    # a change between trees.
    every = [r for rs in results.values() for r in rs]
    common = set.intersection(*(set(r["histories"]) for r in every))
    for name, rs in results.items():
        steady = {i for i in common if len({r["histories"][i] for r in rs}) == 1}
        print(f"{name}: {len(steady)} of {len(common)} scenarios had one history in every run")
    if len(results) > 1:
        names = list(results)
        steady = {
            i
            for i in common
            if all(len({r["histories"][i] for r in results[n]}) == 1 for n in names)
        }
        same = {i for i in steady if len({results[n][0]["histories"][i] for n in names}) == 1}
        print(
            f"between trees: of the {len(steady)} steady scenarios, {len(same)} have the same "
            f"history in {' and '.join(names)}, {len(steady) - len(same)} differ"
        )
    for name, rs in results.items():
        for note in rs[0]["notices"]:
            print(f"{name}: {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
