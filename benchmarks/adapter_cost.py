"""CPU per scenario of every shipped adapter's ``ci`` run, in one run (issue 33).

Run: ``python benchmarks/adapter_cost.py [--adapters NAME,...] [--budget S]
[--seed N] [--baseline REV] [--json]``, e.g.::

    nice python benchmarks/adapter_cost.py
    nice python benchmarks/adapter_cost.py --adapters reference-pg --baseline HEAD~1

Each row is one ``harness run --profile ci`` of a shipped adapter on its
example's careful app (the reference runtime on SQLite and on Postgres +
Redis, LangGraph ``correct``, OpenAI Agents, DBOS and Temporal ``careful``),
in a fresh interpreter. It measures the CPU of the whole process tree (user
+ system of the run and of every descendant reaped under it, from
``os.wait4``: the fork server, the workers, a Temporal dev server the run
started) and reads the report: the verdict, the scenarios run against the
plan, the plan's own fit estimate (``scenario_seconds``) and what the
budget left unrun (``not_run``). The table divides the CPU by the scenarios
run and compares each row with the reference on SQLite measured in the
same run.

The Postgres and Redis servers are not descendants of the run: their CPU
is read from ``/proc`` (the postmaster with its reaped backends, and the
live backends; ``redis-server``) before and after the row, and shown in a
column of its own. Other users of the same servers add to it, so on a
shared machine it is an upper bound.

``--this REV`` (a commit, or a folder holding a harness tree) measures
that tree instead of this checkout's working tree (which other people may
be editing at the time). ``--baseline REV`` (the same) runs
each row twice, REV's tree (``git archive``) and
this checkout alternately, so that a change is measured before and after
in the same run. Rows needing Postgres and Redis read
``HARNESS_POSTGRES_URL`` and ``HARNESS_REDIS_URL`` from the environment;
without them those rows are skipped with the reason. On a loaded machine
read the CPU and the ratios, not the wall times. Timed numbers belong
here, never in the tests.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

CHILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from harness.cli import main; sys.exit(main(sys.argv[2:]))"
)
#: the same under cProfile (the main thread of the parent only), its
#: statistics dumped to the file named by the environment
PROFILED_CHILD = (
    "import cProfile, os, sys; sys.path.insert(0, sys.argv[1]); "
    "from harness.cli import main; p = cProfile.Profile(); p.enable()\n"
    "try: code = main(sys.argv[2:])\n"
    "finally: p.disable(); p.dump_stats(os.environ['ADAPTER_COST_PROFILE'])\n"
    "sys.exit(code)"
)
#: the parent's functions whose share of its profiled time --profile-parent
#: prints (cumulative: each with what it calls)
WATCHED = (
    ("_recorder.py", "sync"),
    ("_recorder.py", "observe"),
    ("_adapter.py", "observe"),
    ("_recorder.py", "record"),
    ("_interpreter.py", "run"),
)


def _framework(adapter: str, app: str) -> tuple[list[str], bool]:
    """A framework adapter's row: ``--adapter harness.adapters.ADAPTER`` on ``examples.APP``."""
    args = ["--adapter", f"harness.adapters.{adapter}", "--adapter-opt", f"app=examples.{app}"]
    return args, False


#: row name -> (harness run arguments, needs Postgres and Redis)
ROWS: dict[str, tuple[list[str], bool]] = {
    "reference": (["--adapter", "reference"], False),
    "reference-pg": (
        [
            *("--adapter", "reference"),
            *("--adapter-opt", "backend=postgres"),
            *("--adapter-opt", "queue=redis"),
        ],
        True,
    ),
    "langgraph": _framework("langgraph:LangGraphAdapter", "langgraph_refund.correct:APP"),
    "openai_agents": _framework(
        "openai_agents:OpenAIAgentsAdapter", "openai_agents_refund.careful:APP"
    ),
    "dbos": _framework("dbos:DBOSAdapter", "dbos_refund.careful:APP"),
    "temporal": _framework("temporal:TemporalAdapter", "temporal_refund.careful:APP"),
}

LABELS = {
    "reference": "reference, SQLite",
    "reference-pg": "reference, Postgres + Redis",
    "langgraph": "LangGraph `correct`",
    "openai_agents": "OpenAI Agents `careful`",
    "dbos": "DBOS `careful`",
    "temporal": "Temporal `careful`",
}

TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int, with_children: bool) -> float:
    """CPU seconds of ``pid`` (and of its reaped children), from /proc; 0 if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = text.rsplit(")", 1)[1].split()
    # after the command: state is field 3, so utime (14) is index 11
    ticks = int(fields[11]) + int(fields[12])
    if with_children:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


def server_cpu() -> dict[str, float]:
    """CPU seconds so far of the local postgres and redis-server processes."""
    totals = {"postgres": 0.0, "redis": 0.0}
    procs: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        procs[int(entry.name)] = (ppid, comm)
    for pid, (ppid, comm) in procs.items():
        if comm.startswith("redis-server"):
            totals["redis"] += _proc_cpu(pid, with_children=False)
        elif comm == "postgres":
            # the postmaster carries its reaped backends; a live backend its own
            is_master = procs.get(ppid, (0, ""))[1] != "postgres"
            totals["postgres"] += _proc_cpu(pid, with_children=is_master)
    return totals


def profile_shares(path: Path) -> dict[str, float]:
    """Of the profiled parent's time: each watched function's share (cumulative)."""
    import pstats

    stats: Any = pstats.Stats(str(path)).stats
    total = sum(tt for _cc, _nc, tt, _ct, _callers in stats.values())
    shares: dict[str, float] = {}
    for (file, _line, func), (_cc, _nc, _tt, ct, _callers) in stats.items():
        for suffix, name in WATCHED:
            if func == name and file.endswith(suffix):
                key = f"{Path(file).parent.name}/{suffix}:{name}"
                shares[key] = shares.get(key, 0.0) + ct / total
    return dict(sorted(shares.items(), key=lambda kv: -kv[1]))


def run_row(
    tree: Path,
    args: list[str],
    budget: float | None,
    seed: int,
    profile: bool = False,
    by_process: bool = False,
) -> dict[str, Any]:
    """``harness run --profile ci ARGS`` with ``tree``'s harness: CPU, wall, the report."""
    work = Path(tempfile.mkdtemp(prefix="adapter-cost-"))
    try:
        report = work / "report"
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
        argv = [*args, "--profile", "ci", "--seed", str(seed), "--report-dir", str(report)]
        if budget is not None:
            argv += ["--budget", str(budget)]
        if profile:
            env["ADAPTER_COST_PROFILE"] = str(work / "parent.prof")
        before = server_cpu()
        started = time.monotonic()
        code = PROFILED_CHILD if profile else CHILD
        with open(work / "out.txt", "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", code, str(tree), "run", *argv],
                cwd=work,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
            sampler = None
            if by_process:
                sys.path.insert(0, str(HERE))
                from _tree_cpu import TreeSampler

                sampler = TreeSampler(proc.pid)
            _, status, usage = os.wait4(proc.pid, 0)
            if sampler is not None:
                sampler.stop()
        wall = time.monotonic() - started
        after = server_cpu()
        code = os.waitstatus_to_exitcode(status)
        text = (work / "out.txt").read_text(errors="replace")
        if code not in (0, 1, 3) or not (report / "report.json").exists():
            return {"exit": code, "error": text[-2000:], "wall": wall}
        data = json.loads((report / "report.json").read_text())
        shares = profile_shares(work / "parent.prof") if profile else None
        cpu = usage.ru_utime + usage.ru_stime
        kinds = None
        if sampler is not None:
            kinds = sampler.by_kind()
            # what the last readings missed (each process's last interval)
            kinds["unsampled"] = cpu - sum(kinds.values())
        return {
            "by_process": kinds,
            "parent_profile": shares,
            "exit": code,
            "cpu": cpu,
            "wall": wall,
            "server_cpu": {k: after[k] - before[k] for k in after},
            "verdict": data.get("verdict"),
            "ran": data.get("searched_scenarios"),
            "planned": data.get("planned_scenarios"),
            "executed": data.get("scenarios"),
            "estimate": data.get("scenario_seconds"),
            "search_seconds": data.get("duration_seconds"),
            "not_run": data.get("not_run"),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _per_scenario(r: dict[str, Any]) -> float | None:
    if "cpu" not in r or not r.get("ran"):
        return None
    return float(r["cpu"]) / int(r["ran"])


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1000:,.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def render(results: list[tuple[str, str, dict[str, Any]]]) -> str:
    """The issue's table, one line per row (and tree), then the not_run lines."""
    ref = {
        tree: _per_scenario(r) for name, tree, r in results if name == "reference" and "cpu" in r
    }
    lines = [
        "| adapter | tree | CPU per scenario | vs reference SQLite | server CPU (pg / redis) "
        "| scenarios run / plan | fit estimate s | measured s / scenario | verdict (exit) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    notes = []
    for name, tree, r in results:
        if "cpu" not in r:
            lines.append(f"| {LABELS[name]} | {tree} | error (exit {r['exit']}) |||||||")
            notes.append(f"{LABELS[name]} ({tree}): {r.get('error', '')[-600:]}")
            continue
        per = _per_scenario(r)
        base = ref.get(tree)
        ratio = f"{per / base:.1f}x" if per and base else "-"
        ran = r["ran"] or 0
        srv = r["server_cpu"]
        pg, rd = (srv[k] / max(ran, 1) * 1000 for k in ("postgres", "redis"))
        server = f"{pg:.0f} / {rd:.0f} ms" if name == "reference-pg" else "-"
        pace = (r["search_seconds"] or 0) / max(ran, 1)
        est = "-" if r["estimate"] is None else f"{r['estimate']:.2f}"
        lines.append(
            f"| {LABELS[name]} | {tree} | {_ms(per)} | {ratio} | {server} "
            f"| {ran} / {r['planned']} | {est} | {pace:.2f} | {r['verdict']} ({r['exit']}) |"
        )
        if r["not_run"]:
            notes.append(f"{LABELS[name]} ({tree}): {r['not_run']}")
    return "\n".join(lines + [""] + [f"not_run: {n}" for n in notes])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adapters", default=",".join(ROWS), help="rows to run, comma-separated")
    parser.add_argument("--budget", type=float, default=None, help="--budget for every run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", metavar="REV", help="also run REV's tree, alternating")
    parser.add_argument(
        "--this",
        metavar="REV",
        help="run REV's tree (git archive) instead of this checkout's working tree, which "
        "others may be editing",
    )
    parser.add_argument(
        "--profile-parent",
        action="store_true",
        help="run each harness parent under cProfile and print the share of its time in "
        "observation and recording (the CPU figures then include the profiler's cost)",
    )
    parser.add_argument(
        "--by-process",
        action="store_true",
        help="sample the run's process tree from /proc (every 0.1 s) and print its CPU per "
        "kind of process: the harness parent, fork servers, workers, the Toxiproxy server",
    )
    parser.add_argument("--json", action="store_true", help="print the results as JSON at the end")
    ns = parser.parse_args(argv)
    names = [n.strip() for n in ns.adapters.split(",") if n.strip()]
    unknown = [n for n in names if n not in ROWS]
    if unknown:
        print(
            f"--adapters: unknown row(s) {', '.join(unknown)}; choose from {', '.join(ROWS)}",
            file=sys.stderr,
        )
        return 2
    if "reference" not in names:
        names.insert(0, "reference")  # every ratio is against it, measured in the same run
    services = bool(os.environ.get("HARNESS_POSTGRES_URL") and os.environ.get("HARNESS_REDIS_URL"))
    results: list[tuple[str, str, dict[str, Any]]] = []
    with ExitStack() as stack:
        sys.path.insert(0, str(HERE))
        from _baseline import baseline_tree, describe

        def tree_of(name: str, rev: str) -> Path:
            if (Path(rev) / "harness").is_dir():  # a folder holding a harness tree
                print(f"{name}: the tree in {rev}", flush=True)
                return Path(rev).resolve()
            print(f"{name}: {describe(rev)}", flush=True)
            return stack.enter_context(baseline_tree(rev))

        trees: list[tuple[str, Path]] = [("this", ROOT)]
        if ns.this:
            trees = [("this", tree_of("this", ns.this))]
        if ns.baseline:
            trees.insert(0, ("baseline", tree_of("baseline", ns.baseline)))
        print(f"load average at start: {os.getloadavg()}", flush=True)
        for i, name in enumerate(names):
            args, needs_services = ROWS[name]
            if needs_services and not services:
                print(f"{name}: skipped, set HARNESS_POSTGRES_URL and HARNESS_REDIS_URL")
                continue
            order = trees if i % 2 == 0 else list(reversed(trees))
            for tree_name, tree in order:
                r = run_row(tree, args, ns.budget, ns.seed, ns.profile_parent, ns.by_process)
                results.append((name, tree_name, r))
                brief = {k: v for k, v in r.items() if k != "error"}
                print(f"  {name} [{tree_name}]: {json.dumps(brief)}", flush=True)
    results.sort(key=lambda x: (names.index(x[0]), x[1]))
    print(f"\nload average at end: {os.getloadavg()}")
    budget = f" --budget {ns.budget:g}" if ns.budget else ""
    print(f"harness run --profile ci --seed {ns.seed}{budget}")
    print(render(results))
    for name, tree_name, r in results:
        if r.get("by_process") and r.get("ran"):
            ran = int(r["ran"])
            parts = ", ".join(
                f"{k} {v / ran * 1000:.0f} ms"
                for k, v in sorted(r["by_process"].items(), key=lambda kv: -kv[1])
            )
            print(f"CPU per scenario by process, {LABELS[name]} ({tree_name}): {parts}")
        if r.get("parent_profile"):
            parts = ", ".join(f"{k} {v:.1%}" for k, v in r["parent_profile"].items())
            print(f"parent profile, {LABELS[name]} ({tree_name}): {parts}")
    if ns.json:
        print(json.dumps([{"row": n, "tree": t, **r} for n, t, r in results]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
