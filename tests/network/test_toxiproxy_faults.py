"""Network faults on Toxiproxy, through the harness, no root needed: each
kind fires on the reference runtime on Postgres and Redis, every worker
through proxies of its own, and every property holds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Engine, Example, Settings
from harness.adapters._guard import guard
from harness.adapters.reference import ReferenceAdapter
from harness.history import History
from harness.model import (
    CrashSpec,
    NetworkFault,
    NetworkKind,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)

pytestmark = [pytest.mark.postgres, pytest.mark.redis, pytest.mark.usefixtures("toxiproxy")]

PROCUREMENT = {"item": "bolts", "quantity": 3}


def _scenario(kind: NetworkKind, site: str, nth: int) -> Scenario:
    return Scenario(
        name=f"{kind}-on-toxiproxy",
        steps=(
            Submit(
                run=RunSpec(run_id="r1", tenant="acme", workflow="procurement", input=PROCUREMENT)
            ),
            RunWorker(worker_id="n0", crash=CrashSpec(site=site, nth=nth, action="pause")),
            NetworkFault(kind=kind, worker_id="n0"),
            Quiesce(),
        ),
    )


def _run(postgres_url: str, redis_url: str, scenario: Scenario, tmp_path: Path) -> Example:
    adapter = ReferenceAdapter("postgres", "redis", postgres_url=postgres_url, redis_url=redis_url)
    # guarded, as the command line runs it (the nemesis finds the worker's
    # proxies behind the guard)
    engine = Engine(guard(adapter), Settings(), workdir=tmp_path / "engine")
    return engine.execute(scenario)


def _fault(example: Example, kind: str) -> dict[str, Any]:
    (history,) = example.folder.rglob("history.jsonl")
    (event,) = History.load(history).faults(kind)
    return dict(event.value)


def _verdicts(example: Example) -> dict[str, tuple[str, str]]:
    return {r.name: (r.verdict.value, r.message) for r in example.results}


CASES = [
    ("commit_ack_lost", "checkpoint_stmt_commit", 1),
    ("reset_mid_transaction", "checkpoint_stmt_3", 2),
    ("latency", "checkpoint_stmt_commit", 2),
    ("slow_reply", "checkpoint_stmt_commit", 1),
    ("cut_reply", "checkpoint_stmt_commit", 2),
    ("commit_lost", "checkpoint_stmt_commit", 2),
]


@pytest.mark.parametrize(("kind", "site", "nth"), CASES)
def test_each_kind_fires_through_the_workers_own_proxy_and_every_property_holds(
    postgres_url: str, redis_url: str, tmp_path: Path, kind: NetworkKind, site: str, nth: int
) -> None:
    example = _run(postgres_url, redis_url, _scenario(kind, site, nth), tmp_path)
    fault = _fault(example, kind)
    assert fault["fired"] is True, fault
    assert fault["backend"] == "toxiproxy", fault
    (proxy,) = fault["proxies"]
    assert proxy["service"] == "postgres" and proxy["server"].endswith(":5432"), fault
    assert {v for v, _ in _verdicts(example).values()} == {"pass"}, _verdicts(example)


@pytest.mark.parametrize(
    ("site", "nth"),
    [
        # right before the effect's call: it makes the call during the partition
        ("before_external_call", 1),
        # inside a checkpoint transaction, holding the run's row lock
        ("checkpoint_stmt_3", 2),
    ],
)
def test_a_partitioned_worker_runs_on_while_another_takes_over_and_every_property_holds(
    postgres_url: str, redis_url: str, tmp_path: Path, site: str, nth: int
) -> None:
    example = _run(postgres_url, redis_url, _scenario("partition", site, nth), tmp_path)
    fault = _fault(example, "partition")
    assert fault["fired"] is True, fault
    assert {p["service"] for p in fault["proxies"]} == {"postgres", "redis"}, fault
    # the store let go of the worker's sessions before the worker went on
    assert fault["server_let_go"] >= 1, fault
    (history,) = example.folder.rglob("history.jsonl")
    order = [
        ("continue" if e.value.get("kind") == "continue" else "start", e.value["worker_id"])
        for e in History.load(history).events
        if "crash" in e.value or e.value.get("kind") == "continue"
    ]
    # the partitioned worker went on before another took its run over: not held
    assert order.index(("continue", "n0")) < order.index(("start", "n0-peer")), order
    # and once the other worker had started, the store took no write of its
    # (the audit names each transition's writer): it wrote nothing after its
    # lease was taken
    events = History.load(history).events
    peer = next(
        e.index for e in events if e.type == "invoke" and e.value.get("worker_id") == "n0-peer"
    )
    late = [e.index for e in events if e.index > peer and e.value.get("actor") == "n0"]
    assert late == [], late
    assert any(e.value.get("actor") == "n0-peer" for e in events), "the other worker took over"
    assert {v for v, _ in _verdicts(example).values()} == {"pass"}, _verdicts(example)
