"""How long a netfilter rule outlives a SIGKILLed harness (issue 27, defect 6).

Run (as root, iptables installed, Postgres up):
``python benchmarks/rules_after_kill.py [--rounds 5] [--postgres-url URL]``

Each round starts a harness (the engine on one scenario that partitions a
worker paused right before an effect, as
``tests/hostile/test_rules_die_with_owner.py`` does), waits until its
partition's rules are in the kernel, SIGKILLs it, and measures the time from
the kill until ``iptables -S`` lists no rule of its owner token (polled every
10 ms; no harness runs meanwhile, so nothing sweeps: only the reaper can
remove them). Prints each round and the median.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "hostile"))

from test_rules_die_with_owner import (  # type: ignore[import-not-found]  # noqa: E402
    HARNESS,
    _owner_token,
    _tagged,
)


def one_round(postgres_url: str, work: Path) -> float:
    proc = subprocess.Popen(
        [sys.executable, "-c", HARNESS, postgres_url, str(work)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    token: str | None = None
    rules: list[str] = []
    deadline = time.monotonic() + 180
    while len(rules) < 2 and proc.poll() is None and time.monotonic() < deadline:
        token = token or _owner_token(proc.pid)
        rules = _tagged(token) if token else []
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    killed = time.monotonic()
    proc.wait()
    if token is None or len(rules) < 2:
        raise SystemExit("the harness never held a partition's rules")
    while _tagged(token) and time.monotonic() - killed < 60:
        time.sleep(0.01)
    took = time.monotonic() - killed
    if _tagged(token):
        raise SystemExit(f"rules of {token} still there 60 s after the kill")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--postgres-url",
        default=os.environ.get(
            "HARNESS_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
        ),
    )
    args = ap.parse_args()
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.rounds):
            took = one_round(args.postgres_url, Path(tmp) / f"engine{i}")
            times.append(took)
            print(f"round {i + 1}: rules gone {took:.3f} s after the SIGKILL", flush=True)
    print(f"median of {len(times)}: {statistics.median(times):.3f} s (max {max(times):.3f} s)")


if __name__ == "__main__":
    main()
