"""A partition: one worker's connections to the store go silent both ways
(real iptables rules), the clock moves past its lease, another worker takes
the run over, the partition heals and the first worker goes on -- a zombie
by the network. No effect twice, no step lost, every property holds; the
rules are gone afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness import Engine, Example, Settings, _netfilter
from harness.adapters.reference import ReferenceAdapter
from harness.history import History
from harness.model import CrashSpec, NetworkFault, Quiesce, RunSpec, RunWorker, Scenario, Submit

pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("netfilter")]

PROCUREMENT = {"item": "bolts", "quantity": 3}


def _scenario(site: str, nth: int) -> Scenario:
    return Scenario(
        name="partition-by-hand",
        steps=(
            Submit(
                run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=PROCUREMENT)
            ),
            RunWorker(worker_id="z1", crash=CrashSpec(site=site, nth=nth, action="pause")),
            NetworkFault(kind="partition", worker_id="z1"),
            Quiesce(),
        ),
    )


def _run(adapter: ReferenceAdapter, scenario: Scenario, tmp_path: Path) -> Example:
    return Engine(adapter, Settings(), workdir=tmp_path / "engine").execute(scenario)


def _fault(example: Example, kind: str) -> dict[str, Any]:
    (history,) = example.folder.rglob("history.jsonl")
    (event,) = History.load(history).faults(kind)
    return event.value


def _tagged() -> list[str]:
    token = _netfilter.owner().token
    out = subprocess.run(["iptables", "-S"], capture_output=True, text=True, check=True)
    return [line for line in out.stdout.splitlines() if token in line]


@pytest.mark.parametrize(
    ("queue", "site", "nth"),
    [
        # right before the effect's call: the zombie comes back to call it
        ("store", "before_external_call", 1),
        # inside a checkpoint transaction, holding the run's row lock: the
        # server lets go of it only when its keepalives give up
        ("redis", "checkpoint_stmt_3", 2),
    ],
)
def test_a_worker_partitioned_past_its_lease_comes_back_a_zombie_and_every_property_holds(
    postgres_url: str, redis_url: str, tmp_path: Path, queue: str, site: str, nth: int
) -> None:
    adapter = ReferenceAdapter("postgres", queue, postgres_url=postgres_url, redis_url=redis_url)
    example = _run(adapter, _scenario(site, nth), tmp_path)
    fault = _fault(example, "partition")
    assert fault["fired"] is True, fault
    services = {ep["service"] for ep in fault["endpoints"]}
    assert "postgres" in services, fault
    if queue == "redis":
        assert "redis" in services, fault
    # the server noticed the silence and let go of the worker's sessions
    assert fault["server_let_go"] >= 1, fault
    verdicts = {r.name: (r.verdict.value, r.message) for r in example.results}
    assert {v for v, _ in verdicts.values()} == {"pass"}, verdicts
    assert _tagged() == []  # healed: no rule of ours is left


#: a harness-like process holding a partition's two rules, waiting to be killed
PARTITION_HOLDER = """
import time
from harness import _netfilter
from harness.nemesis._network import _partition_rules
from harness.adapters import Endpoint
owner = _netfilter.owner()
ep = Endpoint(local_host="127.0.0.1", local_port=7, remote_host="127.0.0.1", remote_port=5432)
for rule in _partition_rules([ep]):
    owner.add(rule)
print(owner.token, flush=True)
time.sleep(600)
"""


def test_a_killed_harness_partition_rules_are_swept(listed: Any, kill_reaper: Any) -> None:
    import os
    import signal
    import sys

    from harness import _janitor

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen(
        [sys.executable, "-c", PARTITION_HOLDER],
        stdout=subprocess.PIPE,
        text=True,
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )
    assert proc.stdout is not None
    token = proc.stdout.readline().strip()
    assert token, "the holder process did not add its rules"
    kill_reaper(token)  # the sweep is tested here, not the reaper
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    lines = listed(token)
    assert len(lines) == 2, lines  # both directions: INPUT and OUTPUT, DROP
    assert {line.split()[1] for line in lines} == {"INPUT", "OUTPUT"}
    assert all(line.endswith("-j DROP") for line in lines), lines
    swept = _janitor.sweep()["netfilter"]
    assert isinstance(swept, list) and sum(token in line for line in swept) == 2
    assert listed(token) == []
