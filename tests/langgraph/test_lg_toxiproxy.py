"""The network faults on LangGraph's PostgresSaver through Toxiproxy: each
worker reaches Postgres through a proxy of its own (the kit's routing), so
the kinds only a proxy can inflict -- a reply held back, fragmented or cut,
a COMMIT lost on its way -- fire on it too, and the correct refund app
(``sync`` durability, an idempotency key) passes each. No root needed."""

from __future__ import annotations

from pathlib import Path

import pytest
from lg_support import CORRECT, R1, execute, failed

from harness.adapters.langgraph import LangGraphAdapter
from harness.history import History
from harness.model import (
    Approve,
    CrashSpec,
    EventF,
    NetworkFault,
    NetworkKind,
    Quiesce,
    RunWorker,
    Scenario,
    Submit,
)

# a Toxiproxy server, and the faults run on it (tests/conftest.py)
pytestmark = [pytest.mark.postgres, pytest.mark.usefixtures("toxiproxy")]

#: seconds a silent connection lives (the adapter's default is 5)
TIMEOUT = "2"


def network(site: str, nth: int, kind: NetworkKind) -> Scenario:
    """The worker that resumes the approved run is paused at hit ``nth`` of
    ``site``, and the fault fired on it."""
    return Scenario(
        name=f"{kind}-{site}-{nth}",
        steps=(
            Submit(run=R1),
            RunWorker(worker_id="w0"),
            Approve(run_id="r1"),
            RunWorker(worker_id="n1", crash=CrashSpec(site=site, nth=nth, action="pause")),
            NetworkFault(kind=kind, worker_id="n1"),
            Quiesce(),
        ),
    )


def test_the_adapter_routes_its_workers_only_with_the_network_faults(postgres_url: str) -> None:
    pg = LangGraphAdapter(app=CORRECT, checkpointer="postgres", postgres_url=postgres_url)
    assert pg.routes_workers is True
    assert LangGraphAdapter(app=CORRECT).routes_workers is False
    bare = LangGraphAdapter(
        app=CORRECT, checkpointer="postgres", postgres_url=postgres_url, network_timeout="0"
    )
    assert bare.routes_workers is False


@pytest.mark.parametrize(
    ("kind", "site", "nth"),
    [
        # the checkpoint after the approval: its acknowledgement lost
        ("commit_ack_lost", "checkpoint_put_commit", 1),
        # ... its COMMIT lost on the way: nothing committed
        ("commit_lost", "checkpoint_put_commit", 1),
        # the refund's writes: the reply held back
        ("latency", "checkpoint_writes_commit", 3),
        # between the blobs and the row of the checkpoint after the approval
        ("reset_mid_transaction", "checkpoint_put_stmt_2", 1),
        ("slow_reply", "checkpoint_put_stmt_2", 1),
        ("cut_reply", "checkpoint_put_stmt_2", 1),
    ],
)
def test_each_kind_fires_on_the_workers_own_proxy_and_the_correct_app_passes(
    postgres_url: str, tmp_path: Path, kind: NetworkKind, site: str, nth: int
) -> None:
    app = LangGraphAdapter(
        app=CORRECT, checkpointer="postgres", postgres_url=postgres_url, network_timeout=TIMEOUT
    )
    ex = execute(app, network(site, nth, kind), tmp_path)
    history = History.load(ex.folder / "history.jsonl")
    (fault,) = [e.value for e in history.events if e.f is EventF.FAULT and e.value["kind"] == kind]
    assert fault["fired"] is True, fault
    assert fault["backend"] == "toxiproxy", fault
    (proxy,) = fault["proxies"]
    assert proxy["service"] == "postgres" and proxy["server"].endswith(":5432"), fault
    assert failed(ex) == [], [(r.name, r.message) for r in ex.results if r.message]


@pytest.mark.parametrize(
    ("site", "nth"),
    [
        # the checkpoint after the approval: the refund has not run
        ("checkpoint_put_commit", 1),
        # the refund's writes, saved in the background: the worker goes on
        ("checkpoint_writes_commit", 3),
    ],
)
def test_a_partitioned_worker_runs_on_while_another_takes_over_and_the_correct_app_passes(
    postgres_url: str, tmp_path: Path, site: str, nth: int
) -> None:
    # LangGraph has no clock and no lease: the correct app's single writer
    # is a session's advisory lock, gone once the proxy closed the session.
    app = LangGraphAdapter(
        app=CORRECT, checkpointer="postgres", postgres_url=postgres_url, network_timeout=TIMEOUT
    )
    ex = execute(app, network(site, nth, "partition"), tmp_path)
    history = History.load(ex.folder / "history.jsonl")
    (fault,) = [
        e.value for e in history.events if e.f is EventF.FAULT and e.value["kind"] == "partition"
    ]
    assert fault["fired"] is True, fault
    assert fault["backend"] == "toxiproxy" and fault["lease_wait"] is False, fault
    assert fault["server_let_go"] >= 1, fault  # the store let go of its sessions
    order = [
        ("continue" if e.value.get("kind") == "continue" else "start", e.value["worker_id"])
        for e in history.events
        if "crash" in e.value or e.value.get("kind") == "continue"
    ]
    # the partitioned worker went on before another took the run over: not held
    assert order.index(("continue", "n1")) < order.index(("start", "n1-peer")), order
    assert failed(ex) == [], [(r.name, r.message) for r in ex.results if r.message]
