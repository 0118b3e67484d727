"""What an ADK worker costs, with and without the adapter's preload list.

ADK imports most of itself on a runner's first ``run_async``, after the fork:
a fork server that preloads ``google.adk`` alone leaves every worker seconds
of imports (issue 34: 2.5-4.8 s a worker). ``harness.adapters.adk`` preloads
the modules one worker imported (``harness/adapters/adk/modules.json``).
This script measures one worker taking one refund run of
``examples/adk_refund/careful.py`` end to end (start, the run, exit),
``preload=false`` (the baseline: the adapter's module only) and
``preload=true`` interleaved in the same run, and prints medians: the
worker's CPU seconds (user + system, counted from the fork), its wall
seconds from the spawn request to its exit, and the modules it imported
after the fork.

    PYTHONPATH=. python benchmarks/adk_worker_start.py [--repeats 5]
    PYTHONPATH=. python benchmarks/adk_worker_start.py --capture   # rewrite modules.json

``--capture`` runs one worker's work in a fresh interpreter that imported
what a fork server imports without the list, and writes every module it
imported after that (the app's own left out) to ``modules.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODULES = ROOT / "harness" / "adapters" / "adk" / "modules.json"
APP = "examples.adk_refund.careful:APP"
INPUT = {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"}


def timed_worker(args: dict[str, Any]) -> int:
    """The adapter's worker, then one line: its CPU since the fork, modules."""
    from harness.adapters.adk._adapter import worker_main

    before = len(sys.modules)
    code = worker_main(args)
    line = {"cpu": time.process_time(), "modules": len(sys.modules) - before, "end": time.time()}
    with open(args["out"], "a", encoding="utf-8") as out:
        out.write(json.dumps(line) + "\n")
    return code


def one(preload: str, work: Path) -> dict[str, float]:
    from harness.adapters.adk import ADKAdapter
    from harness.model import RunSpec

    adapter = ADKAdapter(app=APP, preload=preload)
    env = adapter.open(work, seed=0)
    try:
        env.submit(RunSpec(run_id="r1", tenant="t1", workflow="refund", input=INPUT))
        out = work / "timing.jsonl"
        args = {**env.args, "worker_id": "w0", "crash": None, "trace": False, "out": str(out)}
        start = time.time()
        worker = env.workers.spawn("w0", "benchmarks.adk_worker_start:timed_worker", args)
        exit_ = worker.wait(300)
        if exit_.code != 0 or env.observe().runs[0].raw_status != "completed":
            raise SystemExit(f"worker {exit_}: see {env.workers.log}")
        line = json.loads(out.read_text())
        return {"cpu": line["cpu"], "wall": line["end"] - start, "modules": line["modules"]}
    finally:
        env.close()


def capture() -> None:
    """Write modules.json from a worker's imports (module docstring)."""
    code = f"""
import json, sys, tempfile
from pathlib import Path
import harness.adapters.adk._adapter as adapter
from harness.adapters.adk import ADKAdapter
from harness.model import RunSpec
work = Path(tempfile.mkdtemp(prefix="adk-capture-"))
env = ADKAdapter(app={APP!r}, preload="false").open(work, seed=0)
env.submit(RunSpec(run_id="r1", tenant="t1", workflow="refund", input={INPUT!r}))
before = set(sys.modules)
adapter.worker_main({{**env.args, "worker_id": "w0", "crash": None, "trace": False}})
assert env.observe().runs[0].raw_status == "completed"
new = sorted(m for m in set(sys.modules) - before
             if not m.startswith(("examples", "__main__")) and sys.modules[m] is not None)
env.close()
print(json.dumps(new))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    modules = json.loads(done.stdout.strip().splitlines()[-1])
    MODULES.write_text(json.dumps(modules, indent=0) + "\n")
    print(f"{len(modules)} modules written to {MODULES.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--capture", action="store_true")
    opts = parser.parse_args()
    if opts.capture:
        capture()
        return
    sys.path.insert(0, str(ROOT))
    runs: dict[str, list[dict[str, float]]] = {"false": [], "true": []}
    with tempfile.TemporaryDirectory(prefix="adk-start-") as tmp:
        for i in range(opts.repeats):
            for preload in ("false", "true"):  # interleaved: the same load for both
                runs[preload].append(one(preload, Path(tmp) / f"{preload}-{i}"))
    print(f"one worker, one refund run, median of {opts.repeats} (google-adk, 2 shared cores)")
    for preload, label in (("false", "baseline (no list)"), ("true", "preload list")):
        cpu = statistics.median(r["cpu"] for r in runs[preload])
        wall = statistics.median(r["wall"] for r in runs[preload])
        mods = statistics.median(r["modules"] for r in runs[preload])
        print(
            f"  {label:20} cpu {cpu:6.2f} s   wall {wall:6.2f} s   modules after fork {mods:5.0f}"
        )
    base, fast = (statistics.median(r["cpu"] for r in runs[p]) for p in ("false", "true"))
    print(f"  cpu per worker: {base / fast:.1f}x less with the list")


if __name__ == "__main__":
    main()
