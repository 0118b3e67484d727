"""One network scenario's cost on each backend, beside the same scenario without its fault.

Run: ``python benchmarks/network_cost.py [--repeats N] [--kinds K,...] [--json]``, e.g.::

    nice python benchmarks/network_cost.py --repeats 5

Each measurement is one ``harness replay FILE`` with
``HARNESS_NETWORK_BACKEND=B``, of the reference runtime on Postgres + Redis
(``HARNESS_POSTGRES_URL``, ``HARNESS_REDIS_URL``): a fresh interpreter that
opens the adapter, runs the scenario and its fault-free oracle and judges
it, as a user replaying a network counterexample does (issue 32). The scenario is the
one the tests use for each kind: a procurement run, its worker paused at
a commit's crash point, the fault on that worker's storage connection,
then a quiesce. The **floor** is the same scenario with the fault step
left out (the worker still paused and continued at the same point), run
the same way in the same rounds: what the fault itself adds is the row
minus the floor.

The CPU is the whole process tree's (user + system of the run and of
every descendant reaped under it, from ``os.wait4``: the fork server, the
workers, the Toxiproxy server the run started); the Postgres and Redis
servers' CPU is read from ``/proc`` before and after each run and shown
apart (other users of the servers add to it). The backends alternate
within each round, so a change in the machine's load touches all rows
alike; the table shows medians. The kernel backend's rows need root and
iptables, the Toxiproxy rows a server (``HARNESS_TOXIPROXY_URL``, or
``HARNESS_TOXIPROXY_BIN`` / ``toxiproxy-server`` on ``PATH``); a backend
that is not available here is left out with the reason. On a loaded
machine read the CPU and the ratios, not the wall times.
"""

from __future__ import annotations

import argparse
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

from adapter_cost import server_cpu

from harness._toxiproxy import choose
from harness.history import History
from harness.model import CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit

REPO = Path(__file__).resolve().parents[1]

#: per kind: the crash point the worker pauses at and its hit (as in
#: tests/network/test_toxiproxy_faults.py), and the backends that offer it
KINDS: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "commit_ack_lost": ("checkpoint_stmt_commit", 1, ("kernel", "toxiproxy")),
    "reset_mid_transaction": ("checkpoint_stmt_3", 2, ("kernel", "toxiproxy")),
    "partition": ("checkpoint_stmt_3", 2, ("kernel", "toxiproxy")),
    "latency": ("checkpoint_stmt_commit", 2, ("toxiproxy",)),
    "slow_reply": ("checkpoint_stmt_commit", 1, ("toxiproxy",)),
    "cut_reply": ("checkpoint_stmt_commit", 2, ("toxiproxy",)),
    "commit_lost": ("checkpoint_stmt_commit", 2, ("toxiproxy",)),
}
PROCUREMENT = {"item": "bolts", "quantity": 3}


def scenario(kind: str | None, site: str, nth: int) -> Scenario:
    """The kind's scenario; ``kind=None``: its floor, the fault step left out."""
    fault = [] if kind is None else [NetworkFault(kind=kind, worker_id="n0")]  # type: ignore[arg-type]
    return Scenario(
        name=f"{kind or 'no-fault'}-at-{site}-{nth}",
        steps=(
            Submit(
                run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=PROCUREMENT)
            ),
            RunWorker(worker_id="n0", crash=CrashSpec(site=site, nth=nth, action="pause")),
            *fault,
            Quiesce(),
        ),
    )


def backends() -> tuple[list[str], dict[str, str]]:
    """The backends this machine offers, and why each other one is left out."""
    ok, why = [], {}
    for backend in ("kernel", "toxiproxy"):
        choice = choose(backend)
        if choice.backend is None:
            why[backend] = choice.why
        else:
            ok.append(backend)
    return ok, why


def fired(work: Path, kind: str | None) -> str | None:
    """Why the replay in ``work`` does not measure ``kind`` (None: it does):
    its history must show the kind's fault fired (a fault that stopped
    firing would be timed as if it had), and a floor's no network fault."""
    histories = sorted(work.rglob("history.jsonl"))
    if len(histories) != 1:
        return f"{len(histories)} histories where one was expected"
    faults = [e.value for e in History.load(histories[0]).events if e.value.get("network")]
    if kind is None:
        return None if not faults else f"a floor fired {[f.get('kind') for f in faults]}"
    if any(f.get("kind") == kind and f.get("fired") is True for f in faults):
        return None
    seen = [(f.get("kind"), f.get("fired"), f.get("reason")) for f in faults]
    return f"{kind} did not fire: {seen}"


_EXECUTE = """
import sys
from pathlib import Path
from harness import Engine, Settings
from harness.adapters._loading import load_adapter
from harness.model import Scenario
pg, redis, scenario, folder = sys.argv[1:5]
opts = {"backend": "postgres", "queue": "redis", "postgres_url": pg, "redis_url": redis}
engine = Engine(load_adapter("reference", opts), Settings(), workdir=Path(folder) / "engine")
engine.execute(Scenario.model_validate_json(Path(scenario).read_text()), Path(folder) / "run")
"""


def verify(scenario_file: Path, backend: str, pg: str, redis: str, kind: str | None) -> None:
    """Run ``scenario_file`` once on ``backend`` (untimed, as the harness
    executes a scenario, its history kept) and refuse (exit) unless
    ``kind`` fired there (see :func:`fired`): ``harness replay``, which is
    what is timed, keeps no history to read."""
    work = Path(tempfile.mkdtemp(prefix="network-cost-check-"))
    try:
        env = {**os.environ, "HARNESS_NETWORK_BACKEND": backend}
        argv = [sys.executable, "-c", _EXECUTE, pg, redis, str(scenario_file), str(work)]
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
        why = f"exit {proc.returncode}: {proc.stderr[-1500:]}" if proc.returncode else None
        why = why or fired(work / "run", kind)
        if why is not None:
            raise SystemExit(f"{scenario_file.name} on {backend}: not measured: {why}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def measure(scenario_file: Path, backend: str, pg: str, redis: str) -> dict[str, Any]:
    """One ``harness replay`` of ``scenario_file`` on ``backend``."""
    work = Path(tempfile.mkdtemp(prefix="network-cost-"))
    try:
        argv = [
            sys.executable, "-c", "import sys; from harness.cli import main; sys.exit(main())",
            "replay", str(scenario_file), "--adapter", "reference",
            "--adapter-opt", "backend=postgres", "--adapter-opt", "queue=redis",
            "--adapter-opt", f"postgres_url={pg}", "--adapter-opt", f"redis_url={redis}",
        ]  # fmt: skip
        env = {**os.environ, "HARNESS_NETWORK_BACKEND": backend}
        before, started = server_cpu(), time.monotonic()
        with open(work / "out.txt", "wb") as out:
            proc = subprocess.Popen(argv, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
            _, status, usage = os.wait4(proc.pid, 0)
        wall, after = time.monotonic() - started, server_cpu()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            tail = (work / "out.txt").read_text(errors="replace")[-1500:]
            raise SystemExit(f"{scenario_file.name} on {backend}: exit {code}\n{tail}")
        servers = sum(after[k] - before[k] for k in after)
        return {"cpu": usage.ru_utime + usage.ru_stime, "wall": wall, "servers": servers}
    finally:
        shutil.rmtree(work, ignore_errors=True)


def floor_label(site: str, nth: int) -> str:
    return f"no fault (paused at {site} #{nth})"


def render(rows: dict[tuple[str, str], list[dict[str, Any]]]) -> str:
    def med(samples: list[dict[str, Any]], key: str) -> float:
        return statistics.median(s[key] for s in samples)

    lines = [
        "| scenario | backend | CPU (median) | vs its floor | servers' CPU | wall (median) |",
        "|---|---|---|---|---|---|",
    ]
    for (kind, backend), samples in rows.items():
        ratio = "-"
        if kind in KINDS:
            floor = rows.get((floor_label(*KINDS[kind][:2]), backend))
            if floor:
                ratio = f"{med(samples, 'cpu') / med(floor, 'cpu'):.2f}x"
        lines.append(
            f"| {kind} | {backend} | {med(samples, 'cpu'):.2f} s | {ratio} | "
            f"{med(samples, 'servers'):.2f} s | {med(samples, 'wall'):.2f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="rounds (default 3)")
    ap.add_argument("--kinds", help="comma-separated kinds (default: every one)")
    ap.add_argument("--json", action="store_true", help="print the samples as JSON too")
    args = ap.parse_args(argv)
    pg, redis = os.environ.get("HARNESS_POSTGRES_URL"), os.environ.get("HARNESS_REDIS_URL")
    if not pg or not redis:
        print("network_cost: set HARNESS_POSTGRES_URL and HARNESS_REDIS_URL", file=sys.stderr)
        return 2
    kinds = args.kinds.split(",") if args.kinds else list(KINDS)
    unknown = [k for k in kinds if k not in KINDS]
    if unknown:
        print(f"network_cost: unknown kinds {unknown}; known: {', '.join(KINDS)}", file=sys.stderr)
        return 2
    offered, why = backends()
    for backend, reason in why.items():
        print(f"network_cost: {backend} left out: {reason}")
    if not offered:
        return 2
    folder = Path(tempfile.mkdtemp(prefix="network-cost-scenarios-"))
    plan: list[tuple[str, str, Path, str | None]] = []
    floors: set[tuple[str, int]] = set()
    for kind in kinds:
        site, nth, on = KINDS[kind]
        path = folder / f"{kind}.json"
        path.write_text(scenario(kind, site, nth).model_dump_json())
        plan += [(kind, b, path, kind) for b in offered if b in on]
        floors.add((site, nth))
    for site, nth in sorted(floors):
        path = folder / f"floor-{site}-{nth}.json"
        path.write_text(scenario(None, site, nth).model_dump_json())
        plan += [(floor_label(site, nth), b, path, None) for b in offered]
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for _, backend, path, kind in plan:
        verify(path, backend, pg, redis, kind)
    load = os.getloadavg()[0]
    print(f"network_cost: {len(plan)} runs a round, {args.repeats} rounds (load {load:.1f})")
    for i in range(args.repeats):
        for label, backend, path, _ in plan if i % 2 == 0 else reversed(plan):
            rows.setdefault((label, backend), []).append(measure(path, backend, pg, redis))
    shutil.rmtree(folder, ignore_errors=True)
    print(render(dict(sorted(rows.items(), key=lambda kv: (kv[0][0] in KINDS, kv[0])))))
    if args.json:
        print(json.dumps({f"{k}/{b}": v for (k, b), v in rows.items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
