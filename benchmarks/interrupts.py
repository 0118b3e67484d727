"""Interrupted runs leave nothing behind (issue 13): a soak of 30 signals.

Run: ``python benchmarks/interrupts.py [--per-signal 10] [--seed 13]
[--min-delay 0.5] [--max-delay 8] [--postgres-url URL] [--redis-url URL]``

Starts ``harness run --adapter reference --profile ci`` again and again, each
run in a process group of its own, and signals its leader (the ``harness``
process, as ``kill PID`` or a CI runner does; its fork server and workers are
left to the harness) after a seeded random delay: ``--per-signal`` runs for
each of SIGINT, SIGTERM and SIGKILL, half on SQLite, half with
``--adapter-opt backend=postgres --adapter-opt queue=redis``. Per run it
records the exit code (shell convention: 128 + signal for a process the
signal killed), whether stderr holds a Python traceback, and whether a
partial ``report.json`` exists and says ``interrupted``.

Then it waits ``--settle`` seconds (a SIGKILLed run's Redis ``alive`` key
lives 30 s after its last renewal), starts one more short run
(``--max-examples 1``, Postgres and Redis) whose start-up sweep removes what
no live run owns, and counts what is left behind:

* scratch folders ``harness-*`` under the janitor's root: every run here gets
  ``TMPDIR`` set to a fresh folder of its own (``tempfile.gettempdir()``, the
  janitor's root), so every folder counted is one of these runs'; report
  folders live elsewhere and are not counted;
* Postgres schemas ``rr_lk_*``/``lg_lk_*`` whose advisory lock no session
  holds, and pid-tagged ``rr_<pid>_*``/``lg_<pid>_*`` of earlier versions
  whose pid is gone (schemas a live run holds -- other people's tests on the
  same server -- are shown, not counted);
* Redis keys ``rr:rr_*`` under a prefix whose ``alive`` key has expired;
* processes still in any of the runs' process groups.

Every leftover count must be 0. Exits 1 if one is not (or a run hung).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from harness._janitor import FOLDER_PREFIX, _advisory_key  # noqa: E402

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)
BACKENDS = {
    "sqlite": [],
    "postgres+redis": ["--adapter-opt", "backend=postgres", "--adapter-opt", "queue=redis"],
}
#: seconds a signalled run may take to exit before it counts as hung
EXIT_WAIT = 120.0
_LEASED = re.compile(r"^(?:rr|lg)_lk_[0-9a-f]{16}$")
_LEGACY = re.compile(r"^(?:rr|lg)_(\d+)_")


@dataclass
class Outcome:
    """What one interrupted run did."""

    n: int
    sig: signal.Signals
    backend: str
    delay: float
    pgid: int
    code: int | None = None
    finished_first: bool = False  # it exited before the signal was sent
    traceback: bool = False
    partial: bool = False  # report.json exists and says interrupted
    report_json: bool = False
    exit_seconds: float | None = None  # from the signal to the exit
    hung: bool = False
    stderr_tail: list[str] = field(default_factory=list)


def _env(root: Path, postgres_url: str, redis_url: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    )
    env["TMPDIR"] = str(root)
    env["HARNESS_POSTGRES_URL"] = postgres_url
    env["HARNESS_REDIS_URL"] = redis_url
    for var in ("CI", "GITHUB_STEP_SUMMARY"):
        env.pop(var, None)
    return env


def _shell_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def one_run(o: Outcome, work: Path, env: dict[str, str]) -> Outcome:
    """Start a run, signal its leader after ``o.delay`` seconds, wait for it."""
    report_dir = work / "reports" / f"run-{o.n:02d}"
    logs = work / "logs"
    argv = [
        sys.executable, "-m", "harness.cli", "run", "--adapter", "reference",
        "--profile", "ci", "--report-dir", str(report_dir), *BACKENDS[o.backend],
    ]  # fmt: skip
    with (
        open(logs / f"run-{o.n:02d}.out", "wb") as out,
        open(logs / f"run-{o.n:02d}.err", "wb") as err,
    ):
        proc = subprocess.Popen(
            argv, cwd=work, env=env, stdout=out, stderr=err, start_new_session=True
        )
        o.pgid = proc.pid
        try:
            proc.wait(o.delay)
            o.finished_first = True
        except subprocess.TimeoutExpired:
            proc.send_signal(o.sig)
        sent = time.monotonic()
        try:
            proc.wait(EXIT_WAIT)
        except subprocess.TimeoutExpired:
            o.hung = True
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        o.exit_seconds = None if o.finished_first else time.monotonic() - sent
        o.code = _shell_code(proc.returncode)
    stderr = (logs / f"run-{o.n:02d}.err").read_text(errors="replace")
    o.traceback = "Traceback" in stderr
    o.stderr_tail = stderr.strip().splitlines()[-3:]
    report = report_dir / "report.json"
    o.report_json = report.exists()
    if o.report_json:
        try:
            o.partial = json.loads(report.read_text()).get("interrupted") == o.sig.name
        except (OSError, ValueError):
            o.partial = False
    return o


def _group_members(pgids: set[int]) -> list[tuple[int, int, str]]:
    """(pid, pgid, command) of every live process in one of ``pgids``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        # pid (comm) state ppid pgrp ...: comm may hold spaces, split after ')'
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) in pgids:
            found.append((int(entry.name), int(fields[2]), cmd.strip()[:80]))
    return found


def _alive_pid(name: str) -> bool:
    """Whether ``name`` is pid-tagged (an earlier version's) and its pid is
    alive here: the janitor keeps those (the only rule such a name allows)."""
    m = _LEGACY.match(name)
    if m is None:
        return False
    try:
        os.kill(int(m.group(1)), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _schemas(url: str) -> tuple[list[str], list[str]]:
    """(harness schemas no live run owns, schemas a live run holds)."""
    import psycopg

    left, live = [], []
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT nspname FROM pg_namespace "
                "WHERE nspname LIKE 'rr\\_%' OR nspname LIKE 'lg\\_%'"
            ).fetchall()
        ]
        for name in names:
            if _LEASED.match(name):
                key = _advisory_key(name)
                got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
                if got and got[0]:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                    left.append(name)
                else:
                    live.append(name)
            elif _alive_pid(name):
                live.append(name)
            else:
                left.append(name)
    return left, live


def _redis_keys(url: str) -> tuple[list[str], list[str]]:
    """(harness keys under a prefix whose owner is gone, prefixes still alive)."""
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=5)
    try:
        by_prefix: dict[str, list[str]] = collections.defaultdict(list)
        for key in client.scan_iter(match="rr:rr_*"):
            parts = key.decode(errors="replace").split(":", 2)
            by_prefix[parts[1] if len(parts) == 3 else "?"].append(key.decode(errors="replace"))
        left, live = [], []
        for prefix, keys in by_prefix.items():
            if _alive_pid(prefix) or (
                _LEASED.match(prefix) and client.exists(f"rr:{prefix}:alive")
            ):
                live.append(prefix)
            else:
                left.extend(keys)
        return left, live
    finally:
        client.close()


def _folders(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob(f"{FOLDER_PREFIX}*") if p.is_dir())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--per-signal", type=int, default=10, help="runs per signal (default 10)")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--min-delay", type=float, default=0.5)
    ap.add_argument("--max-delay", type=float, default=8.0)
    ap.add_argument("--settle", type=float, default=35.0, help="seconds before the sweep run")
    ap.add_argument(
        "--postgres-url",
        default=os.environ.get("HARNESS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    ap.add_argument(
        "--redis-url", default=os.environ.get("HARNESS_REDIS_URL", "redis://127.0.0.1:6379/0")
    )
    ap.add_argument("--keep", action="store_true", help="keep the work folder (logs, reports)")
    args = ap.parse_args()

    rng = random.Random(args.seed)
    plan = [
        (sig, backend)
        for sig in SIGNALS
        for backend in [list(BACKENDS)[i % 2] for i in range(args.per_signal)]
    ]
    rng.shuffle(plan)
    work = Path(tempfile.mkdtemp(prefix="interrupts-"))
    root = work / "tmp"  # the janitor's root for every run here (TMPDIR)
    for sub in (root, work / "reports", work / "logs"):
        sub.mkdir()
    env = _env(root, args.postgres_url, args.redis_url)
    print(
        f"{datetime.date.today()}: {len(plan)} interrupted `harness run --adapter reference "
        f"--profile ci` runs, seed {args.seed}, delays {args.min_delay}-{args.max_delay} s; "
        f"work folder {work}",
        flush=True,
    )
    outcomes: list[Outcome] = []
    started = time.monotonic()
    for n, (sig, backend) in enumerate(plan, 1):
        delay = round(rng.uniform(args.min_delay, args.max_delay), 2)
        o = one_run(Outcome(n, sig, backend, delay, pgid=0), work, env)
        outcomes.append(o)
        how = "finished before the signal" if o.finished_first else f"exit {o.code}"
        print(
            f"  {n:2}. {sig.name:7} {backend:14} at {delay:4.2f} s: {how}"
            f"{', HUNG' if o.hung else ''}{', traceback' if o.traceback else ''}"
            f"{', partial report' if o.partial else ''}",
            flush=True,
        )

    time.sleep(args.settle)
    sweep = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness.cli",
            "run",
            "--adapter",
            "reference",
            "--max-examples",
            "1",
            "--report-dir",
            str(work / "reports" / "sweep"),
            *BACKENDS["postgres+redis"],
        ],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    folders = _folders(root)
    schemas, live_schemas = _schemas(args.postgres_url)
    keys, live_prefixes = _redis_keys(args.redis_url)
    procs = _group_members({o.pgid for o in outcomes})
    elapsed = time.monotonic() - started

    print(f"\nper signal x backend ({elapsed:.0f} s in all):")
    header = "| signal | backend | runs | exit codes | tracebacks | partial report | s to exit |"
    print(header)
    print("|" + "---|" * 7)
    for sig in SIGNALS:
        for backend in BACKENDS:
            rows = [o for o in outcomes if o.sig is sig and o.backend == backend]
            codes = collections.Counter(
                "done" if o.finished_first else ("hung" if o.hung else str(o.code)) for o in rows
            )
            waits = sorted(o.exit_seconds for o in rows if o.exit_seconds is not None)
            print(
                f"| {sig.name} | {backend} | {len(rows)} | "
                + ", ".join(f"{c} x{k}" for c, k in sorted(codes.items()))
                + f" | {sum(o.traceback for o in rows)} | {sum(o.partial for o in rows)} | "
                + (f"{waits[len(waits) // 2]:.2f} ({waits[0]:.2f}-{waits[-1]:.2f})" if waits
                   else "-")
                + " |"
            )  # fmt: skip
    print(f"\nafter {args.settle:.0f} s and one sweeping run (exit {sweep.returncode}):")
    print("| left behind | count |\n|---|---|")
    print(f"| scratch folders harness-* under {root} | {len(folders)} |")
    print(f"| Postgres schemas rr_/lg_ no live run owns | {len(schemas)} |")
    print(f"| Redis keys rr:rr_* of dead prefixes | {len(keys)} |")
    print(f"| processes in the runs' process groups | {len(procs)} |")
    print(
        f"(other people's live schemas on the server, not counted: {len(live_schemas)}; "
        f"live Redis prefixes: {len(live_prefixes)})"
    )
    for what, items in (("folder", folders), ("schema", schemas), ("key", keys[:20])):
        for item in items:
            print(f"  left {what}: {item}")
    for pid, pgid, cmd in procs:
        print(f"  left process {pid} (group {pgid}): {cmd}")
    for o in outcomes:
        expected = 128 + o.sig.value
        if o.traceback or o.hung or (not o.finished_first and o.code != expected):
            print(f"  run {o.n} ({o.sig.name}, {o.backend}, {o.delay} s): {o.stderr_tail}")
    if sweep.returncode not in (0, 3):
        print(f"  the sweeping run exited {sweep.returncode}: {sweep.stderr[-500:]}")
    # Leftover processes are ours: end them by group, not by name.
    for pgid in {p[1] for p in procs}:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    bad = len(folders) + len(schemas) + len(keys) + len(procs) + sum(o.hung for o in outcomes)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
