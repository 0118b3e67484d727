"""The network fault family on LangGraph's PostgresSaver (issue 16), measured.

A worker is paused at a crash point inside one of PostgresSaver's writes
(``_points``), then the connection it writes on loses the server's replies
(the commit reaches the server, its acknowledgement never arrives) or is
reset between two statements; real iptables rules, real processes.

On the kernel backend (where Toxiproxy would be chosen, the workers are
routed through proxies instead: ``test_lg_toxiproxy``). What LangGraph does,
pinned here: it never retries a checkpoint write. The
failed write surfaces from ``invoke`` (``sync`` durability: before the next
node runs) or from the next write on the dead connection (a task's writes are
saved in the background and their error is not awaited); the next worker
resumes from whatever was committed. So the correct refund app (``sync``, an
idempotency key) passes at every commit kind; the naive one (``async``, no
key) charges twice after a lost acknowledgement, because its worker ran the
refund past the unacknowledged checkpoint on a connection already dead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from lg_support import CORRECT, NAIVE, R1, execute, failed, result

from harness.adapters import Capability
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
    Verdict,
)
from harness.testing import run_suite

pytestmark = [pytest.mark.slow, pytest.mark.postgres]


@pytest.fixture(autouse=True)
def kernel_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """These measure the kernel backend (real iptables rules on the one
    connection the worker names), even where a Toxiproxy server would be
    chosen: routed workers meet the proxy's faults instead
    (``test_lg_toxiproxy``)."""
    monkeypatch.setenv("HARNESS_NETWORK_BACKEND", "kernel")


ADAPTER = "harness.adapters.langgraph:LangGraphAdapter"
#: seconds a silent connection lives: each lost ack costs one (default 5)
TIMEOUT = "2"


def network(site: str, nth: int, kind: NetworkKind) -> Scenario:
    """The run waits at its approval; the worker that resumes it after the
    decision is paused at hit ``nth`` of ``site`` and the fault is fired."""
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


def fired(history: History, kind: str) -> dict[str, object]:
    """The one fault event of ``kind``, checked to have fired."""
    (event,) = [e for e in history.events if e.f is EventF.FAULT and e.value["kind"] == kind]
    assert event.value["fired"] is True, event.value
    return dict(event.value)


def refunds(history: History) -> list[dict[str, object]]:
    return [
        dict(e.value)
        for e in history.events
        if e.f is EventF.EFFECT and e.value["kind"] == "payments.refund"
    ]


def worker_log(folder: Path) -> str:
    return (folder / "env" / "workers.log").read_text()


def test_postgres_declares_the_family_sqlite_does_not(postgres_url: str) -> None:
    sqlite = LangGraphAdapter(app=CORRECT)
    assert Capability.CRASH_POINTS not in sqlite.capabilities
    assert Capability.NETWORK_FAULTS not in sqlite.capabilities
    pg = LangGraphAdapter(app=CORRECT, checkpointer="postgres", postgres_url=postgres_url)
    assert {Capability.CRASH_POINTS, Capability.NETWORK_FAULTS} <= pg.capabilities
    # No timeout, as from_conn_string opens it: a lost reply blocks the
    # worker for the kernel's retransmission timeout, so not offered.
    bare = LangGraphAdapter(
        app=CORRECT, checkpointer="postgres", postgres_url=postgres_url, network_timeout="0"
    )
    assert Capability.CRASH_POINTS in bare.capabilities
    assert Capability.NETWORK_FAULTS not in bare.capabilities
    with pytest.raises(ValueError, match="network_timeout='soon'"):
        LangGraphAdapter(
            app=CORRECT, checkpointer="postgres", postgres_url=postgres_url, network_timeout="soon"
        )


@pytest.mark.parametrize(
    ("site", "nth", "kind", "refunded_by"),
    [
        # the checkpoint after the approval: the refund has not run
        ("checkpoint_put_commit", 1, "commit_ack_lost", "q0"),
        # the refund task's writes: saved, their error never awaited
        ("checkpoint_writes_commit", 3, "commit_ack_lost", "n1"),
        # the checkpoint after the refund
        ("checkpoint_put_commit", 2, "commit_ack_lost", "n1"),
        # between the blobs and the row of the checkpoint after the approval
        ("checkpoint_put_stmt_2", 1, "reset_mid_transaction", "q0"),
    ],
)
def test_the_correct_app_survives_each_fault_at_each_checkpoint_write(
    postgres_url: str, site: str, nth: int, kind: NetworkKind, refunded_by: str, tmp_path: Path
) -> None:
    app = LangGraphAdapter(
        app=CORRECT, checkpointer="postgres", postgres_url=postgres_url, network_timeout=TIMEOUT
    )
    ex = execute(app, network(site, nth, kind), tmp_path)
    history = History.load(ex.folder / "history.jsonl")
    fault = fired(history, kind)
    # The connection the worker wrote on, as it named it from its socket.
    (logged,) = [
        json.loads(line)
        for line in (ex.folder / "env" / "crashpoints.jsonl").read_text().splitlines()
        if json.loads(line)["action"] == "pause"
    ]
    assert fault["endpoint"] == {
        "service": "postgres",
        "client": f"{logged['tcp'][0]}:{logged['tcp'][1]}",
        "server": f"{logged['tcp'][2]}:{logged['tcp'][3]}",
    }
    assert failed(ex) == []
    assert result(ex, "exactly_once_effects").verdict is Verdict.PASS
    applied = [r for r in refunds(history) if r["applied"] and not r["deduplicated"]]
    assert [r["worker_id"] for r in applied] == [refunded_by]
    # The worker learnt of the fault as an error, not a hang, and no retry.
    log = worker_log(ex.folder)
    assert "n1: run r1 raised" in log
    if kind == "commit_ack_lost":
        assert "Connection timed out" in log or "the connection is closed" in log
    else:
        assert "server closed the connection unexpectedly" in log


def test_a_lost_ack_makes_the_naive_app_refund_twice(postgres_url: str, tmp_path: Path) -> None:
    # async durability: the worker goes on to the refund (and the email)
    # while the checkpoint's commit waits for its lost reply; their writes
    # then fail on the dead connection, and the next worker resumes from
    # the checkpoint that did commit: the refund runs again, with no key.
    #
    # Unless LangGraph's background threads commit the refund's own writes
    # before that checkpoint (async durability does not order the two; seen
    # once under CI load): the next worker then finds the refund done and
    # repeats only the email, which may be sent twice -- a PASS, and a right
    # one. Each try must be one of the two, its verdict the one its refunds
    # earn; the double refund must be seen within three tries.
    app = LangGraphAdapter(
        app=NAIVE, checkpointer="postgres", postgres_url=postgres_url, network_timeout=TIMEOUT
    )
    seen = []
    for attempt in range(3):
        ex = execute(
            app, network("checkpoint_put_commit", 1, "commit_ack_lost"), tmp_path / str(attempt)
        )
        history = History.load(ex.folder / "history.jsonl")
        fired(history, "commit_ack_lost")
        assert "n1: run r1 raised" in worker_log(ex.folder)
        once = result(ex, "exactly_once_effects")
        charged = refunds(history)
        assert {r["idempotency_key"] for r in charged} == {None}
        emails = [
            e.value["worker_id"]
            for e in history.events
            if e.f is EventF.EFFECT and e.value["kind"] == "email.notify" and e.value["applied"]
        ]
        if len(charged) == 2:
            assert [r["worker_id"] for r in charged] == ["n1", "q0"]
            assert once.verdict is Verdict.FAIL
            assert "applied 2 times" in once.message
            return
        # the refund's writes committed first: one refund, the email twice
        assert [r["worker_id"] for r in charged] == ["n1"], charged
        assert emails == ["n1", "q0"], emails
        assert once.verdict is Verdict.PASS, once.message
        seen.append(attempt)
    pytest.fail(f"no double refund in 3 tries: the refund's writes committed first in {seen}")


def test_with_sync_durability_the_naive_app_does_not_run_past_a_lost_ack(
    postgres_url: str, tmp_path: Path
) -> None:
    # The same fault, the same app, sync durability: invoke raises before the
    # refund runs, so one refund (the next worker's), even without a key.
    app = LangGraphAdapter(
        app=NAIVE,
        checkpointer="postgres",
        postgres_url=postgres_url,
        durability="sync",
        network_timeout=TIMEOUT,
    )
    ex = execute(app, network("checkpoint_put_commit", 1, "commit_ack_lost"), tmp_path)
    history = History.load(ex.folder / "history.jsonl")
    fired(history, "commit_ack_lost")
    assert result(ex, "exactly_once_effects").verdict is Verdict.PASS
    assert [r["worker_id"] for r in refunds(history)] == ["q0"]


def test_a_short_network_search_of_the_correct_app_passes_with_both_kinds_fired(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESS_FAMILIES", "network")
    monkeypatch.setenv("HARNESS_MAX_EXAMPLES", "12")
    monkeypatch.setenv("HARNESS_SEED", "0")
    monkeypatch.setenv("HARNESS_BUDGET_SECONDS", "600")  # every planned scenario runs
    monkeypatch.chdir(tmp_path)  # no pyproject settings apply
    opts = {
        "app": CORRECT,
        "checkpointer": "postgres",
        "postgres_url": postgres_url,
        "network_timeout": TIMEOUT,
    }
    report = run_suite(ADAPTER, opts, None)
    assert report["verdict"] == "pass", report["_log"]
    assert report["families"] == ["network"]
    for kind in ("commit_ack_lost", "reset_mid_transaction"):
        coverage = report["faults"][kind]
        assert coverage["fired"] >= 1, (kind, report["faults"])
        assert coverage["survived"] == coverage["fired"], (kind, report["faults"])
    verdicts = {p["name"]: p["verdict"] for p in report["properties"]}
    for prop in ("exactly_once_effects", "resume_equivalence", "progress", "legal_transitions"):
        assert verdicts[prop] == "pass", report["_log"]
