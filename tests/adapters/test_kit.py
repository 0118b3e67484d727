"""The adapter kit does what its docstrings promise, with real processes
(the shared fork server, real SIGKILL and SIGSTOP) and real files."""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import harness
from harness import AdapterError
from harness.adapters import RunView
from harness.adapters.kit import (
    EPOCH,
    GAVE_UP,
    CompiledCache,
    ConstantClock,
    DedupInbox,
    FileClock,
    IdlePolicy,
    RunRegistry,
    UnsyncedSQLite,
    WorkerSet,
    transitions_from_sequence,
)
from harness.checkers import check_legal_transitions
from harness.history import History
from harness.model import Event, EventF, RunState, Verdict

SUPPORT = "kit_support"
TABLE = transitions_from_sequence(["pending", "running", "completed"], terminal=["failed"])


def _judge(transitions: tuple[dict[str, Any], ...], table: dict[str, list[str]] | None) -> Any:
    """The real ``legal_transitions`` checker over a history holding ``transitions``."""
    decl = {"delivery": {}, "transitions": table, "needs_approval": {}, "capabilities": []}
    values = [(EventF.DECLARATION, decl), *((EventF.TRANSITION, t) for t in transitions)]
    events = [
        Event(index=i, time=float(i), process="runner", type="info", f=f, value=v)
        for i, (f, v) in enumerate(values)
    ]
    return check_legal_transitions(History(events), None)


def _wait_for(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists() or not path.read_text():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)
    return path.read_text()


def _version(reg: RunRegistry, run_id: str) -> int:
    run = reg.get(run_id)
    assert run is not None
    return run.version


# -- WorkerSet -----------------------------------------------------------------


def test_workers_fork_from_a_server_that_preloaded_the_modules(tmp_path: Path) -> None:
    workers = WorkerSet(tmp_path, [SUPPORT])
    try:
        out = tmp_path / "out.json"
        w = workers.spawn("w1", f"{SUPPORT}:report_preload", {"worker_id": "w1", "out": str(out)})
        assert w.wait(30.0).code == 0
        assert json.loads(out.read_text()) == {"preloaded": True}
        # stdout and stderr both go to workers.log in the workdir
        assert workers.log == tmp_path / "workers.log"
        log = workers.log.read_text()
        assert "hello from w1" in log and "and from stderr" in log
        assert workers.workers == [w] and workers.alive() == []
    finally:
        workers.close()


def test_a_prebuilt_object_is_built_once_in_the_fork_server_else_in_the_worker(
    tmp_path: Path,
) -> None:
    seen: dict[str, list[dict[str, Any]]] = {}
    for kind, prebuild in (("prebuilt", ["kit_support:built_here"]), ("not", [])):
        (tmp_path / kind).mkdir()
        workers = WorkerSet(tmp_path / kind, [SUPPORT], prebuild=prebuild)
        try:
            for i in range(2):
                out = tmp_path / f"{kind}{i}.json"
                w = workers.spawn(f"w{i}", f"{SUPPORT}:write_prebuilt", {"out": str(out)})
                assert w.wait(30.0).code == 0
                seen.setdefault(kind, []).append(json.loads(out.read_text()))
        finally:
            workers.close()
    # prebuilt: one object, built by neither worker (by their fork server)
    first, second = seen["prebuilt"]
    assert first["text"] == second["text"]
    assert first["text"] not in (f"built by {first['pid']}", f"built by {second['pid']}")
    # not prebuilt: each worker builds its own
    assert [s["text"] for s in seen["not"]] == [f"built by {s['pid']}" for s in seen["not"]]


def test_engines_of_equivalent_dialects_share_a_compiled_statement(tmp_path: Path) -> None:
    """``CompiledCache``: SQLAlchemy keys a compiled statement by the dialect
    object, so two engines never share one; the kit's cache files it under
    the first equivalent dialect. An engine whose dialect compiles otherwise
    (another paramstyle) keeps its own."""
    sa = pytest.importorskip("sqlalchemy")
    cache = CompiledCache()
    query = sa.select(sa.literal_column("1").label("one")).where(sa.bindparam("x") == 1)

    def compiled(name: str, **kw: Any) -> Any:
        options = {"compiled_cache": cache}
        engine = sa.create_engine(f"sqlite:///{tmp_path / name}", execution_options=options, **kw)
        try:
            with engine.connect() as conn:
                result = conn.execute(query, {"x": 1})
                assert result.scalar() == 1
                return result.context.compiled
        finally:
            engine.dispose()

    first = compiled("a.db")
    assert compiled("b.db") is first and len(cache) == 1
    named = compiled("c.db", paramstyle="named")
    assert named is not first and len(cache) == 2
    assert ":x" in str(named) and "?" in str(first)


def test_close_kills_and_reaps_running_and_stopped_workers_only(tmp_path: Path) -> None:
    workers = WorkerSet(tmp_path, [SUPPORT])
    done = workers.spawn("w0", "harness.procs._selftest:noop", {})
    assert done.wait(30.0).code == 0
    running = workers.spawn("w1", "harness.procs._selftest:sleep_forever", {})
    stopped = workers.spawn("w2", "harness.procs._selftest:stop_self_then_exit", {})
    assert stopped.wait(30.0).stopped
    assert {w.worker_id for w in workers.alive()} == {"w1", "w2"}
    workers.close()
    for w in (running, stopped):
        assert w.proc.exit is not None and w.proc.exit.signal == signal.SIGKILL
        with pytest.raises(ProcessLookupError):
            os.kill(w.pid, 0)  # reaped: not even a zombie is left
    assert done.proc.exit is not None and done.proc.exit.code == 0  # left as it ended
    assert workers.alive() == []
    workers.close()  # idempotent


# -- clocks ----------------------------------------------------------------------


def test_a_file_clock_is_the_time_workers_read_and_the_harness_advances(tmp_path: Path) -> None:
    clock = FileClock(tmp_path / "clock", start=EPOCH)
    out = tmp_path / "seen"
    workers = WorkerSet(tmp_path, [SUPPORT])
    try:
        args = {"clock": str(clock.path), "out": str(out)}
        assert workers.spawn("w1", f"{SUPPORT}:read_clock", args).wait(30.0).code == 0
        clock.advance(90.0)
        assert workers.spawn("w2", f"{SUPPORT}:read_clock", args).wait(30.0).code == 0
    finally:
        workers.close()
    assert [float(x) for x in out.read_text().split()] == [EPOCH, EPOCH + 90.0]
    assert clock.now() == EPOCH + 90.0


def test_a_file_clock_refuses_to_go_back_or_leave_the_numbers(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        FileClock(tmp_path / "never-set").now()
    clock = FileClock(tmp_path / "clock", start=10.0)
    for bad in (-1.0, math.nan):
        with pytest.raises(ValueError, match="only moves forward"):
            clock.advance(bad)
    with pytest.raises(ValueError, match="finite"):
        clock.set(math.inf)
    assert clock.now() == 10.0
    assert ConstantClock().now() == EPOCH == ConstantClock(EPOCH).at


# -- the run registry --------------------------------------------------------------


def test_each_transition_is_handed_out_once_chained_and_versioned(tmp_path: Path) -> None:
    reg = RunRegistry(tmp_path / "registry.db", clock=lambda: 5.0)
    reg.add("r1", "acme", "pending", data={"input": 1})
    reg.record("r1", "running", actor="w1", action="claim")
    first = reg.new_transitions()
    assert [(t["from"], t["to"], t["state_version"]) for t in first] == [
        (None, "pending", 1),
        ("pending", "running", 2),
    ]
    assert first[1] == {
        "run_id": "r1",
        "tenant": "acme",
        "from": "pending",
        "to": "running",
        "state_version": 2,
        "actor": "w1",
        "action": "claim",
        "detail": None,
        "at": 5.0,
    }
    assert reg.new_transitions() == ()
    reg.record("r1", "completed", actor="w1", action="finish", data={"output": 2})
    then = reg.new_transitions()
    assert [t["to"] for t in then] == ["completed"]
    run = reg.get("r1")
    assert run is not None and (run.status, run.version, run.data) == (
        "completed",
        3,
        {"output": 2},
    )
    assert _judge(first + then, TABLE).verdict is Verdict.PASS
    # a second registry object on the file has its own cursor, from the start
    assert len(RunRegistry(tmp_path / "registry.db").new_transitions()) == 3
    with pytest.raises(ValueError, match="registered already"):
        reg.add("r1", "acme", "pending")
    with pytest.raises(KeyError, match="never added"):
        reg.record("r9", "running", actor="w1", action="claim")


def test_one_registry_serves_a_runtimes_executor_threads(tmp_path: Path) -> None:
    """A runtime that runs steps in threads (DBOS) records from each: a
    connection is never used from another thread than the one that opened it."""
    from concurrent.futures import ThreadPoolExecutor

    reg = RunRegistry(tmp_path / "registry.db", clock=lambda: 1.0)
    for i in range(8):
        reg.add(f"r{i}", "acme", "pending")
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: reg.record(f"r{i}", "running", actor="w", action="go"), range(8)))
    runs = {r: reg.get(r) for r in (f"r{i}" for i in range(8))}
    assert {run.status for run in runs.values() if run is not None} == {"running"}
    assert _judge(reg.new_transitions(), TABLE).verdict is Verdict.PASS
    reg.close()


def test_workers_recording_at_once_keep_one_chain_the_checker_accepts(tmp_path: Path) -> None:
    path = tmp_path / "registry.db"
    reg = RunRegistry(path)
    reg.add("r1", "acme", "waiting")
    workers = WorkerSet(tmp_path, [SUPPORT])
    try:
        args = {"registry": str(path), "run_id": "r1", "n": 40}
        handles = [
            workers.spawn(w, f"{SUPPORT}:record_many", {**args, "worker_id": w})
            for w in ("w1", "w2", "w3")
        ]
        assert [h.wait(60.0).code for h in handles] == [0, 0, 0]
    finally:
        workers.close()
    got = reg.new_transitions()
    assert len(got) == 121
    assert [t["state_version"] for t in got] == list(range(1, 122))
    assert all(b["from"] == a["to"] for a, b in itertools.pairwise(got))
    loop = {"waiting": ["running", "waiting"], "running": ["waiting", "running"]}
    assert _judge(got, loop).verdict is Verdict.PASS


def test_a_worker_killed_while_recording_leaves_a_chain_the_next_worker_extends(
    tmp_path: Path,
) -> None:
    path = tmp_path / "registry.db"
    reg = RunRegistry(path)
    reg.add("r1", "acme", "waiting")
    workers = WorkerSet(tmp_path, [SUPPORT])
    try:
        args = {"registry": str(path), "run_id": "r1", "n": 100_000}
        victim = workers.spawn("w1", f"{SUPPORT}:record_many", {**args, "worker_id": "w1"})
        deadline = time.monotonic() + 30.0
        while _version(reg, "r1") < 20:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        victim.kill()
        assert victim.wait(30.0).signal == signal.SIGKILL
        args["n"] = 5
        after = workers.spawn("w2", f"{SUPPORT}:record_many", {**args, "worker_id": "w2"})
        assert after.wait(30.0).code == 0
    finally:
        workers.close()
    got = reg.new_transitions()
    assert [t["state_version"] for t in got] == list(range(1, len(got) + 1))
    assert got[-1]["actor"] == "w2" and got[-6]["actor"] == "w1"
    loop = {"waiting": ["running", "waiting"], "running": ["waiting", "running"]}
    assert _judge(got, loop).verdict is Verdict.PASS


def test_transitions_derived_from_observed_statuses(tmp_path: Path) -> None:
    reg = RunRegistry(tmp_path / "registry.db")

    def view(status: str) -> RunView:
        state = RunState.COMPLETED if status == "completed" else RunState.PENDING
        return RunView(run_id="r1", tenant="acme", state=state, raw_status=status)

    first = reg.observation([view("pending")])
    assert [(t["from"], t["to"], t["actor"]) for t in first.transitions] == [
        (None, "pending", "observer")
    ]
    assert reg.observation([view("pending")]).transitions == ()  # no change, no transition
    # a status passed between two looks ("running") is skipped: the table allows it
    last = reg.observation([view("completed")], approvals=({"run_id": "r1"},))
    assert [(t["from"], t["to"], t["state_version"]) for t in last.transitions] == [
        ("pending", "completed", 2)
    ]
    assert last.runs == (view("completed"),) and last.approvals == ({"run_id": "r1"},)
    assert _judge(first.transitions + last.transitions, TABLE).verdict is Verdict.PASS
    # ... and a run seen going back is caught by the same table
    back = reg.observation([view("running")]).transitions
    result = _judge(first.transitions + last.transitions + back, TABLE)
    assert result.verdict is Verdict.FAIL and "completed -> running" in result.message


def test_a_runtimes_own_versions_pass_through_so_a_stale_write_shows(tmp_path: Path) -> None:
    reg = RunRegistry(tmp_path / "registry.db")
    reg.add("r1", "acme", "pending")
    reg.record("r1", "running", actor="w1", action="claim")
    # a zombie writes from the version it read, as the runtime reports it
    reg.record("r1", "running", actor="w0", action="claim", from_="pending", state_version=2)
    result = _judge(reg.new_transitions(), TABLE)
    assert result.verdict is Verdict.FAIL and "forked" in result.message


# -- transition tables ------------------------------------------------------------


def test_a_sequence_gives_a_forward_only_table() -> None:
    assert TABLE == {
        "pending": ["running", "completed", "failed"],
        "running": ["completed", "failed"],
        "completed": [],
        "failed": [],
    }
    strict = transitions_from_sequence(
        ["pending", "running", "completed"], skip=False, extra={"running": ["running"]}
    )
    assert strict == {
        "pending": ["running"],
        "running": ["completed", "running"],
        "completed": [],
    }
    for bad in ([], ["a", "a"]):
        with pytest.raises(ValueError, match="distinct statuses"):
            transitions_from_sequence(bad)


# -- idling -----------------------------------------------------------------------


def test_idle_means_quiet_for_the_number_of_polls_in_a_row() -> None:
    seen = iter([1, 2, 2, 3, 3, 3, 3, 3])
    polls: list[int] = []

    def probe() -> int:
        polls.append(1)
        return next(seen)

    assert IdlePolicy(quiet=3, interval=0.001, give_up=10.0).wait(probe)
    assert len(polls) == 7  # 1, 2, 2 (one quiet), 3 (loud again), 3, 3, 3
    counter = iter(range(10**9))
    start = time.monotonic()
    assert not IdlePolicy(quiet=2, interval=0.01, give_up=0.3).wait(lambda: next(counter))
    assert 0.3 <= time.monotonic() - start < 5.0
    with pytest.raises(ValueError, match="quiet >= 1"):
        IdlePolicy(quiet=0)


@pytest.mark.parametrize(("steps", "code"), [(6, 0), (-1, GAVE_UP)])
def test_a_worker_waits_for_its_background_runtime_before_exiting(
    steps: int, code: int, tmp_path: Path
) -> None:
    counter = tmp_path / "counter"
    args = {
        "counter": str(counter),
        "steps": steps,
        "pause": 0.05,
        "quiet": 4,
        "interval": 0.05,
        "give_up": 3.0,
    }
    workers = WorkerSet(tmp_path, [SUPPORT])
    try:
        w = workers.spawn("w1", f"{SUPPORT}:background_runtime", args)
        assert w.wait(30.0).code == code, workers.log.read_text()
    finally:
        workers.close()
    if steps > 0:
        assert counter.read_text() == str(steps)  # it did not leave before the work was done


# -- the inbox --------------------------------------------------------------------


def test_a_duplicate_is_recognised_across_processes_and_a_kill(tmp_path: Path) -> None:
    inbox_path = tmp_path / "inbox.db"
    inbox = DedupInbox(inbox_path)
    out = tmp_path / "out.json"
    workers = WorkerSet(tmp_path, [SUPPORT])
    try:
        args = {"inbox": str(inbox_path), "message_id": "m1", "out": str(out)}
        w = workers.spawn("w1", f"{SUPPORT}:deliver_then_sleep", args)
        assert json.loads(_wait_for(out)) == {"fresh": True}
        w.kill()
        assert w.wait(30.0).signal == signal.SIGKILL
        assert inbox.seen("m1")
        assert inbox.deliver({"message_id": "m1", "run_id": "r1", "payload": 2}) is False
        assert inbox.deliver({"message_id": "m2", "run_id": "r2"}) is True
        out.unlink()
        w2 = workers.spawn("w2", f"{SUPPORT}:deliver_then_sleep", {**args, "message_id": "m2"})
        assert json.loads(_wait_for(out)) == {"fresh": False}
        w2.kill()
    finally:
        workers.close()
    assert [m["message_id"] for m in inbox.messages()] == ["m1", "m2"]
    assert inbox.messages("r1") == [{"message_id": "m1", "run_id": "r1"}]  # the first copy
    assert DedupInbox(inbox_path).seen("m2") and not inbox.seen("m3")
    with pytest.raises(ValueError, match="message_id"):
        inbox.deliver({"run_id": "r1"})


# -- Adapter.close -----------------------------------------------------------------


def test_the_adapters_close_hook_runs_once_when_the_run_ends(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    report = harness.run(
        f"{SUPPORT}:ClosingToy",
        options={"marker": str(marker)},
        max_examples=2,
        report_dir=tmp_path / "r",
    )
    assert report.verdict in ("pass", "unknown")
    assert marker.read_text() == "closed\n"


def test_a_failing_run_still_closes_and_its_first_error_wins(tmp_path: Path) -> None:
    marker = tmp_path / "closed"
    with pytest.raises(AdapterError, match="observe is broken") as caught:
        harness.run(
            f"{SUPPORT}:BrokenClosingToy",
            options={"marker": str(marker)},
            max_examples=2,
            report_dir=tmp_path / "r",
        )
    assert marker.read_text() == "closed\n"
    notes = getattr(caught.value, "__notes__", [])
    assert any("close() raised OSError: the server would not stop" in n for n in notes), notes


def test_a_signed_decision_verifies_and_each_refused_variant_is_refused_its_own_way() -> None:
    from harness.adapters.kit import WRONG_PARAMS, signed_decision
    from harness.world import ApprovalAuthority

    authority = ApprovalAuthority({"acme": b"k" * 32})
    common = {
        "tenant": "acme",
        "run_id": "r1",
        "approval_id": "ap1",
        "decision": "approved",
        "role": "finance",
        "params_hash": "a" * 64,
    }
    made = {
        v: signed_decision(authority, v, message_id=f"m-{v}", **common)
        for v in ("valid", "duplicate", "forged", "wrong_role", "wrong_role_above", "wrong_params")
    }
    assert {v for v, m in made.items() if authority.verify(m)} == {
        "valid",
        "duplicate",
        "wrong_role",
        "wrong_role_above",
        "wrong_params",
    }
    assert made["valid"]["payload"]["role"] == "finance"
    assert made["wrong_role"]["payload"]["role"] < "finance"
    assert made["wrong_role_above"]["payload"]["role"] > "finance"
    assert made["wrong_params"]["payload"]["params_hash"] == WRONG_PARAMS
    assert made["valid"]["message_id"] == "m-valid" and made["valid"]["run_id"] == "r1"
    with pytest.raises(ValueError, match="unknown decision variant"):
        signed_decision(authority, "sneaky", message_id="m", **common)


@pytest.mark.parametrize("role", ["finance", "manager", "a", "Z", "approver.level-2", "é"])
def test_the_wrong_roles_sort_on_each_side_of_the_expected_one_and_are_not_it(role: str) -> None:
    from harness.adapters.kit import wrong_roles

    below, above = wrong_roles(role)
    assert below < role < above
    assert below and below != role != above


def test_no_role_sorts_below_an_empty_one() -> None:
    from harness.adapters.kit import wrong_roles

    with pytest.raises(ValueError, match="no role sorts below"):
        wrong_roles("")


def test_an_unsynced_commit_survives_a_kill_and_an_open_transaction_does_not(
    tmp_path: Path,
) -> None:
    db = tmp_path / "runtime.sqlite"
    conn = sqlite3.connect(db, factory=UnsyncedSQLite, isolation_level=None)
    assert conn.execute("PRAGMA synchronous").fetchone() == (0,)  # OFF
    conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    # Another process commits one row, leaves a second transaction open and
    # dies of SIGKILL (a fresh interpreter: no fork of this threaded one).
    child = (
        "import os, signal, sqlite3, sys\n"
        "from harness.adapters.kit import UnsyncedSQLite\n"
        "c = sqlite3.connect(sys.argv[1], factory=UnsyncedSQLite, isolation_level=None)\n"
        "c.execute('INSERT INTO t VALUES (1)')\n"
        "c.execute('BEGIN IMMEDIATE')\n"
        "c.execute('INSERT INTO t VALUES (2)')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    done = subprocess.run([sys.executable, "-c", child, str(db)], timeout=60, check=False)
    assert done.returncode == -signal.SIGKILL
    assert sqlite3.connect(db).execute("SELECT x FROM t").fetchall() == [(1,)]
