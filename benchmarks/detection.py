"""Time to first detection of each seeded bug: the search versus random kills.

For every seeded bug of the reference runtime (``harness list bugs``) and
each of ``--seeds`` seeds, two cells:

* **search** -- ``harness run`` in its default mode with the ``ci`` profile's
  settings (event-triggered faults from generated scenarios), stopped at the
  first failing example (no shrinking: detection is what is timed);
* **random-kill** -- the baseline, ``harness run --mode random-kill``: the
  same workloads, workers SIGKILLed at uniformly random moments.

A cell runs in a fresh process (its own fork server), at most ``--jobs`` at a
time, and ends at the first failure or after its budget. Time to detection
counts from the probe of the adapter: the site profile the targeted schedules
are aimed by (one traced run per workflow, one per effect), the fault-free
oracle runs and the search itself are all included; the budget bounds the
search after the probe. A cell that finds nothing is "not found in N s"; the
median of a bug's cells is "not found" when at most half of them found it.
Kill-and-resume cycles per second: faults that stopped a worker (a crash
point kill or pause, an effect-boundary kill, a random kill) per second.

    python benchmarks/detection.py                      # the whole table (< 15 min)
    python benchmarks/detection.py --bugs no-fencing --seeds 5 --jobs 2

Most bugs run on the SQLite backend. Those of :data:`POSTGRES_BUGS` can only
show on a Postgres connection (a lost commit acknowledgement needs a
network between worker and store): they run with ``backend=postgres`` on
``HARNESS_POSTGRES_URL``, and are left out -- listed under ``skipped`` with
the reason, never counted as not found -- where there is no Postgres or no
iptables (the kernel backend of network faults needs it, and root).

Writes ``benchmarks/detection.json`` and ``docs/detection.png``.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STOPS = ("crash_point", "effect_boundary", "random_kill", "kill")
#: seeded bugs only a Postgres backend can show, run with backend=postgres
POSTGRES_BUGS = frozenset({"retry-unknown-commit", "commit-lost-as-applied"})


def adapter_options(bug: str) -> dict[str, str]:
    """The reference adapter's options for ``bug``'s cells."""
    if bug not in POSTGRES_BUGS:
        return {"bug": bug}
    from reference_runtime import service_urls

    return {"bug": bug, "backend": "postgres", "postgres_url": service_urls.postgres_url()}


def cannot_run(bug: str) -> str | None:
    """Why ``bug``'s cells cannot run here, or None."""
    if bug not in POSTGRES_BUGS:
        return None
    from harness import _netfilter
    from reference_runtime import service_urls

    try:
        service_urls.postgres_url()
    except service_urls.ServiceUnavailable as exc:
        return f"needs Postgres: {exc.reason}"
    reason = _netfilter.unavailable()
    return None if reason is None else f"needs network faults: {reason}"


def cell(bug: str, mode: str, seed: int, budget: float) -> dict[str, Any]:
    """One (bug, mode, seed) measurement, in this process."""
    from harness import Engine, load_adapter, load_settings, probe_universe
    from harness.session import run_random_kill

    adapter = load_adapter("reference", adapter_options(bug))
    settings = load_settings(
        "ci", seed=seed, budget_seconds=budget, max_examples=1_000, mode=mode
    ).with_(derandomize=False, stop_on_first=True)
    t0 = time.monotonic()
    universe = probe_universe(
        adapter,
        max_runs=settings.max_runs,
        max_episodes=settings.max_episodes,
        aim_effects=settings.targeted and settings.mode == "search",
    )
    probe = time.monotonic() - t0
    engine = Engine(adapter, settings, shrink=False)
    try:
        if mode == "random-kill":
            outcome = run_random_kill(engine, universe)
        else:
            outcome = engine.run(universe)
    finally:
        engine.close()
    found = outcome.first_failure_seconds
    failed = sorted({r.name for e in outcome.failures for r in e.results if r.verdict == "fail"})
    seconds = probe + (found if found is not None else outcome.seconds)
    stops = sum(outcome.faults_fired.get(k, 0) for k in STOPS)
    return {
        "bug": bug,
        "mode": mode,
        "seed": seed,
        "budget": budget,
        "found": found is not None,
        "seconds": round(seconds, 2),
        "probe_seconds": round(probe, 2),
        "examples": outcome.first_failure_examples or outcome.examples,
        "failed": failed,
        "cycles": stops,
        "cycles_per_second": round(stops / outcome.seconds, 1) if outcome.seconds else 0.0,
    }


def _run_cell(args: tuple[str, str, int, float]) -> dict[str, Any]:
    bug, mode, seed, budget = args
    # No harness settings from the environment; where the services are
    # stays (a Toxiproxy server too: commit-lost-as-applied needs one).
    keep = (
        "HARNESS_POSTGRES_URL",
        "HARNESS_REDIS_URL",
        "HARNESS_TOXIPROXY_URL",
        "HARNESS_TOXIPROXY_BIN",
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "CI" and (not k.startswith("HARNESS_") or k in keep)
    }
    proc = subprocess.run(
        [sys.executable, __file__, "--cell", bug, mode, str(seed), str(budget)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=budget * 4 + 120,
        check=False,
    )
    if proc.returncode != 0:
        # One broken cell must not lose the others: it is shown as an error.
        print(f"cell {args} failed:\n{proc.stderr[-2000:]}", file=sys.stderr, flush=True)
        return {
            "bug": bug,
            "mode": mode,
            "seed": seed,
            "budget": budget,
            "found": False,
            "seconds": budget,
            "examples": 0,
            "failed": [],
            "cycles": 0,
            "cycles_per_second": 0.0,
            "error": proc.stderr.strip().splitlines()[-1:],
        }
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def summarize(cells: list[dict[str, Any]], bugs: list[str]) -> list[dict[str, Any]]:
    rows = []
    for bug in bugs:
        row: dict[str, Any] = {"bug": bug}
        for mode in ("search", "random-kill"):
            mine = [c for c in cells if c["bug"] == bug and c["mode"] == mode]
            found = [c for c in mine if c["found"]]
            # Not found counts as +infinity: the median is a time only when
            # more than half of the seeds found the bug.
            times = sorted(c["seconds"] if c["found"] else float("inf") for c in mine)
            median = statistics.median(times) if times else float("inf")
            row[mode] = {
                "median_seconds": None if median == float("inf") else round(median, 2),
                "found": f"{len(found)}/{len(mine)}",
                "budget": max((c["budget"] for c in mine), default=0),
                "cycles_per_second": round(
                    statistics.median(c["cycles_per_second"] for c in mine), 1
                )
                if mine
                else 0.0,
                "properties": sorted({p for c in found for p in c["failed"]}),
            }
        s, r = row["search"]["median_seconds"], row["random-kill"]["median_seconds"]
        if s is None:
            row["ratio"] = None
        elif r is None:
            # At least this much faster: the baseline's budget over the search's median.
            row["ratio"] = f">{row['random-kill']['budget'] / max(s, 0.01):.0f}"
        else:
            row["ratio"] = round(r / max(s, 0.01), 1)
        rows.append(row)
    return rows


def overall(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The median over bugs of each mode's median time to detection; a bug a
    mode did not find counts as its budget (so the baseline's is a lower bound)."""
    out: dict[str, Any] = {}
    for mode in ("search", "random-kill"):
        times = [r[mode]["median_seconds"] or r[mode]["budget"] for r in rows]
        missed = sum(r[mode]["median_seconds"] is None for r in rows)
        out[mode] = {
            "median_seconds": round(statistics.median(times), 2) if times else None,
            "bugs_not_found": missed,
        }
    s, r = out["search"]["median_seconds"], out["random-kill"]["median_seconds"]
    if s and r:
        bound = ">=" if out["random-kill"]["bugs_not_found"] * 2 >= len(rows) else ""
        out["ratio"] = f"{bound}{r / s:.1f}"
    return out


def _fmt(mode: dict[str, Any]) -> str:
    if mode["median_seconds"] is None:
        return f"not found in {mode['budget']:.0f} s ({mode['found']})"
    return f"{mode['median_seconds']:.1f} s ({mode['found']})"


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| seeded bug | search: median time to detection (found/seeds) | random-kill baseline "
        "| ratio | cycles/s search / random-kill |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        s, r = row["search"], row["random-kill"]
        ratio = "--" if row["ratio"] is None else f"{row['ratio']}x"
        lines.append(
            f"| `{row['bug']}` | {_fmt(s)} | {_fmt(r)} | {ratio} "
            f"| {s['cycles_per_second']} / {r['cycles_per_second']} |"
        )
    o = overall(rows)
    lines.append(
        f"| **median over bugs** (not found = budget) | {o['search']['median_seconds']} s "
        f"| {o['random-kill']['median_seconds']} s ({o['random-kill']['bugs_not_found']} bugs "
        f"not found) | {o.get('ratio', '--')}x | |"
    )
    return "\n".join(lines)


def chart(rows: list[dict[str, Any]], path: Path) -> None:
    """A horizontal bar chart (log scale) of both medians per bug."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["bug"] for r in rows]
    fig, ax = plt.subplots(figsize=(9, 0.45 * len(rows) + 1.2))
    ys = range(len(rows))
    for offset, mode, color in ((-0.2, "search", "#2b6cb0"), (0.2, "random-kill", "#c05621")):
        vals, hatches = [], []
        for r in rows:
            m = r[mode]
            vals.append(m["median_seconds"] or m["budget"])
            hatches.append("" if m["median_seconds"] is not None else "//")
        bars = ax.barh([y + offset for y in ys], vals, height=0.38, color=color, label=mode)
        for bar, hatch in zip(bars, hatches, strict=True):
            if hatch:
                bar.set_hatch(hatch)
                bar.set_alpha(0.45)
    ax.set_yticks(list(ys), names)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("median seconds to first detection (hatched: not found within the budget)")
    ax.legend(loc="lower right")
    ax.set_title("Seeded bugs: time to detection, harness search vs random SIGKILL")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cell", nargs=4, metavar=("BUG", "MODE", "SEED", "BUDGET"))
    p.add_argument("--bugs", help="comma-separated subset (default: every seeded bug)")
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--search-budget", type=float, default=60.0)
    p.add_argument("--random-budget", type=float, default=30.0)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "detection.json")
    p.add_argument("--png", type=Path, default=ROOT / "docs" / "detection.png")
    ns = p.parse_args()
    if ns.cell:
        bug, mode, seed, budget = ns.cell
        print(json.dumps(cell(bug, mode, int(seed), float(budget))))
        return 0
    from reference_runtime._bugs import BUGS

    bugs = ns.bugs.split(",") if ns.bugs else list(BUGS)
    skipped = {bug: why for bug in bugs if (why := cannot_run(bug)) is not None}
    for bug, why in skipped.items():
        print(f"  {bug:28} skipped: {why}", flush=True)
    bugs = [bug for bug in bugs if bug not in skipped]
    work = [
        (bug, mode, seed, ns.search_budget if mode == "search" else ns.random_budget)
        for bug in bugs
        for seed in range(1, ns.seeds + 1)
        for mode in ("search", "random-kill")
    ]
    started = time.monotonic()
    cells = []
    with cf.ThreadPoolExecutor(max_workers=ns.jobs) as pool:
        for result in pool.map(_run_cell, work):
            cells.append(result)
            print(
                f"  {result['bug']:28} {result['mode']:11} seed {result['seed']}: "
                + (f"found in {result['seconds']} s" if result["found"] else "not found")
                + f" ({result['examples']} scenarios, {result['cycles_per_second']} cycles/s)",
                flush=True,
            )
    rows = summarize(cells, bugs)
    doc = {
        "date": datetime.date.today().isoformat(),
        "command": "python benchmarks/detection.py " + " ".join(sys.argv[1:]),
        "seeds": ns.seeds,
        "wall_seconds": round(time.monotonic() - started, 1),
        "rows": rows,
        "overall": overall(rows),
        "skipped": skipped,
        "cells": cells,
    }
    ns.json.write_text(json.dumps(doc, indent=2) + "\n")
    print(table(rows))
    for bug, why in skipped.items():
        print(f"not run: {bug} ({why})")
    print(f"wall time {doc['wall_seconds']} s; wrote {ns.json}")
    try:
        chart(rows, ns.png)
        print(f"wrote {ns.png}")
    except ImportError:
        print("matplotlib is not installed: no chart (pip install -e '.[dev]')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
