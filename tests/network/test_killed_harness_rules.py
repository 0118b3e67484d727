"""A harness SIGKILLed while a network fault holds its rule, its reaper
killed first, leaves the rule behind; the next run's sweep removes it
(listed with ``iptables -S``). The reaper alone: tests/hostile."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from harness import _janitor

ROOT = Path(__file__).resolve().parents[2]
#: A harness run whose one scenario loses a COMMIT's acknowledgement: its
#: rule is in force while the worker waits out its TCP timeout.
HARNESS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from harness import Engine, Settings, _netfilter
    from harness.adapters.reference import ReferenceAdapter
    from harness.model import (
        CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit,
    )
    adapter = ReferenceAdapter("postgres", postgres_url=sys.argv[1])
    scenario = Scenario(steps=(
        Submit(run=RunSpec(run_id="r1", tenant="acme", workflow="procurement",
                           input={"item": "bolts", "quantity": 3})),
        RunWorker(worker_id="n0", crash=CrashSpec(site="checkpoint_stmt_commit",
                                                  action="pause")),
        NetworkFault(kind="commit_ack_lost", worker_id="n0"),
        Quiesce(),
    ))
    print(_netfilter.owner().token, flush=True)  # the tag of this process's rules
    Engine(adapter, Settings(), workdir=Path(sys.argv[2])).execute(scenario)
    """
)
#: harnesses killed, one after another, before the sweep
ROUNDS = 3
#: The longest a harness may take to reach its network fault (a bound, not
#: a measurement: the test waits for the rule to appear).
REACH = 180.0


def _tagged(token: str) -> set[str]:
    """The rules of one owner: other processes' runs (other tests under
    pytest-xdist, other harnesses on the machine) add and remove their own."""
    out = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True)
    return {line for line in out.stdout.splitlines() if f"sah-net:{token}" in line}


@pytest.mark.postgres
@pytest.mark.usefixtures("netfilter")
def test_rules_of_harnesses_killed_mid_fault_are_gone_after_the_next_sweep(
    postgres_url: str, tmp_path: Path, kill_reaper: Callable[[str], None]
) -> None:
    left: dict[str, set[str]] = {}
    for round_ in range(ROUNDS):
        proc = subprocess.Popen(
            [sys.executable, "-c", HARNESS, postgres_url, str(tmp_path / f"engine{round_}")],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        token = proc.stdout.readline().strip()
        proc.stdout.close()
        assert token, f"round {round_}: the harness did not start"
        deadline = time.monotonic() + REACH
        fresh: set[str] = set()
        while not fresh and proc.poll() is None and time.monotonic() < deadline:
            fresh = _tagged(token)
            time.sleep(0.05)
        if fresh:
            kill_reaper(token)  # the sweep is tested here, not the reaper
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert fresh, f"round {round_}: the harness never held a rule"
        # Killed holding it: nothing removed it.
        assert fresh <= _tagged(token)
        left[token] = fresh
    _janitor.sweep(postgres_url)
    remaining = sorted(line for token in left for line in _tagged(token))
    assert not remaining, remaining
