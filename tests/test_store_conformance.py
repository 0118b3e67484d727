"""The store contract, run against every backend (the ``store`` fixture).

Each test states one promise of :class:`reference_runtime.store.Store`. Time is
a parameter (``T0`` plus offsets), never the wall clock. The tests that race or
kill real processes open the same store from fresh interpreters.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from reference_runtime import crashpoints
from reference_runtime._errors import (
    ConfigError,
    DuplicateRunError,
    InputError,
    LeaseLostError,
    MemoryConflictError,
    StaleWriteError,
)
from reference_runtime._records import (
    Approval,
    ArtifactRef,
    AuditEvent,
    Delivery,
    InboxMessage,
    MemoryRecord,
    Operation,
    OperationStatus,
    Provenance,
    Run,
    WorkingState,
)
from reference_runtime._states import RunStatus
from reference_runtime.store import Claim, Commit, RetentionPolicy, Store, open_store

T0 = 1_700_000_000.0
S = RunStatus


# -- record factories ----------------------------------------------------
def make_run(run_id: str, status: S = S.RUNNING, at: float = T0, **kw: Any) -> Run:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "created_at": at,
        "updated_at": at,
        "run_id": run_id,
        "workflow": "refund",
        "definition_version": 1,
        "status": status,
        "current_step": "start",
    }
    return Run(**(fields | kw))


def make_state(run_id: str, payload: dict[str, Any] | None = None) -> WorkingState:
    return WorkingState(
        tenant="t1",
        created_at=T0,
        updated_at=T0,
        run_id=run_id,
        workflow="refund",
        payload_version=1,
        payload=payload if payload is not None else {"plan": ["a", "b"], "vars": {"n": 1}},
    )


def make_audit(run_id: str, action: str = "created", at: float = T0) -> AuditEvent:
    return AuditEvent(
        tenant="t1", created_at=at, updated_at=at, run_id=run_id, at=at, actor="test", action=action
    )


def make_op(
    run_id: str, op_id: str, status: OperationStatus = OperationStatus.PREPARED
) -> Operation:
    return Operation(
        tenant="t1",
        created_at=T0,
        updated_at=T0,
        op_id=op_id,
        run_id=run_id,
        step="refund",
        kind="payments.refund",
        idempotency_key=f"idem-{op_id}",
        request_hash="h",
        request={"amount": 10},
        status=status,
        delivery=Delivery.EXACTLY_ONCE,
    )


def make_approval(run_id: str, approval_id: str) -> Approval:
    return Approval(
        tenant="t1",
        created_at=T0,
        updated_at=T0,
        approval_id=approval_id,
        run_id=run_id,
        action="refund",
        params={"amount": 10},
        params_hash="h",
        resource="order:1",
        scope="refund",
        requester="agent",
        approver_role="manager",
        expires_at=T0 + 3600,
        policy_version=1,
    )


def make_message(run_id: str, message_id: str, **kw: Any) -> InboxMessage:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "created_at": T0,
        "updated_at": T0,
        "message_id": message_id,
        "run_id": run_id,
        "kind": "event",
        "payload": {"n": 1},
        "received_at": T0,
    }
    return InboxMessage(**(fields | kw))


def make_memory(memory_id: str, key: str = "k", **kw: Any) -> MemoryRecord:
    fields: dict[str, Any] = {
        "tenant": "t1",
        "created_at": T0,
        "updated_at": T0,
        "memory_id": memory_id,
        "namespace": "prefs",
        "key": key,
        "value": {"v": memory_id},
        "provenance": Provenance.SYSTEM_VERIFIED,
        "trust": 1.0,
    }
    return MemoryRecord(**(fields | kw))


def create(store: Store, run: Run) -> Run:
    store.create_run(run, make_state(run.run_id), make_audit(run.run_id))
    return run


def next_commit(claim: Claim, now: float, **parts: Any) -> Commit:
    """A commit that advances the claimed run by one version."""
    run = parts.pop("run", claim.run)
    new = run.model_copy(update={"state_version": claim.run.state_version + 1, "updated_at": now})
    return Commit(
        run=new,
        expected_version=claim.run.state_version,
        worker_id=claim.worker_id,
        fencing_token=claim.fencing_token,
        now=now,
        **parts,
    )


def everything(store: Store, run_id: str) -> tuple[Any, ...]:
    """All durable data a commit to ``run_id`` could touch, for before/after checks."""
    return (
        store.load(run_id),
        store.audit(),
        store.operations(),
        store.artifacts(),
        store.read_memory_unfiltered("prefs"),
        store.list_runs(),
    )


def claimed(store: Store, run_id: str, worker: str = "w1", now: float = T0) -> Claim:
    claim = store.claim(worker, now, 10.0, run_id)
    assert claim is not None, f"{run_id} should be claimable at {now}"
    return claim


# -- runs ----------------------------------------------------------------
def test_a_created_run_reads_back_equal_to_what_was_written(store: Store) -> None:
    run = create(store, make_run("r1", wake_at=T0 + 5, waiting_on="event:x"))
    state = make_state("r1", {"ünïcode": "✓", "nested": {"list": [1, 2.5, None, True]}})
    other = make_run("r2")
    store.create_run(other, state.model_copy(update={"run_id": "r2"}), make_audit("r2"))
    assert store.get_run("r1") == run
    assert store.get_run("r1").model_dump_json() == run.model_dump_json()  # type: ignore[union-attr]
    assert store.load("r2").state.payload == state.payload
    assert store.get_run("missing") is None


def test_creating_a_run_twice_raises_duplicate_run_error_and_keeps_the_first(store: Store) -> None:
    create(store, make_run("r1"))
    with pytest.raises(DuplicateRunError, match="r1"):
        store.create_run(
            make_run("r1", workflow="other"), make_state("r1", {"x": 2}), make_audit("r1")
        )
    assert store.get_run("r1").workflow == "refund"  # type: ignore[union-attr]
    assert store.load("r1").state.payload == make_state("r1").payload
    assert len(store.audit("r1")) == 1


def test_list_runs_filters_by_tenant_and_orders_by_creation_time(store: Store) -> None:
    create(store, make_run("b", at=T0 + 2))
    create(store, make_run("a", at=T0 + 2))
    create(store, make_run("c", at=T0 + 1))
    create(store, make_run("x", tenant="t2"))
    assert [r.run_id for r in store.list_runs("t1")] == ["c", "a", "b"]
    assert [r.run_id for r in store.list_runs()] == ["x", "c", "a", "b"]


def test_load_returns_the_run_state_operations_approvals_and_pending_inbox(store: Store) -> None:
    create(store, make_run("r1", S.WAITING_FOR_EVENT))
    store.deliver(make_message("r1", "m2", received_at=T0 + 2))
    store.deliver(make_message("r1", "m1", received_at=T0 + 1))
    store.deliver(make_message("r1", "done", processed_at=T0))
    claim = claimed(store, "r1")
    op, approval = make_op("r1", "op1"), make_approval("r1", "ap1")
    store.commit(next_commit(claim, T0, operations=(op,), approvals=(approval,)))
    snap = store.load("r1")
    assert snap.run.state_version == 1
    assert snap.state == make_state("r1")
    assert snap.operations == (op,)
    assert snap.approvals == (approval,)
    assert [m.message_id for m in snap.pending_inbox] == ["m1", "m2"]


def test_load_of_an_unknown_run_raises_key_error(store: Store) -> None:
    with pytest.raises(KeyError, match="nope"):
        store.load("nope")


def test_setup_is_idempotent_and_records_each_migration_once(store: Store) -> None:
    create(store, make_run("r1"))
    store.setup()
    store.setup()
    assert store.applied_migrations() == [1, 2, 3]  # type: ignore[attr-defined]
    assert store.get_run("r1") is not None


# -- commit --------------------------------------------------------------
def test_commit_bumps_state_version_and_writes_every_part(store: Store) -> None:
    create(store, make_run("r1"))
    store.deliver(make_message("r1", "m1"))
    claim = claimed(store, "r1")
    child = make_run("r1.child", parent_run_id="r1", status=S.CREATED)
    art = ArtifactRef(
        tenant="t1", created_at=T0, updated_at=T0, uri="s3://b/1", sha256="ab", owner="r1"
    )
    parts: dict[str, Any] = {
        "run": claim.run.model_copy(update={"current_step": "pay", "status": S.RUNNING}),
        "state": make_state("r1", {"step": 2}),
        "operations": (make_op("r1", "op1"),),
        "approvals": (make_approval("r1", "ap1"),),
        "audit": (make_audit("r1", "transition", T0 + 1),),
        "inbox_acked": ("m1",),
        "memory": (make_memory("mem1"),),
        "artifacts": (art,),
        "children": ((child, make_state("r1.child")),),
    }
    store.commit(next_commit(claim, T0 + 1, **parts))
    snap = store.load("r1")
    assert (snap.run.state_version, snap.run.current_step) == (1, "pay")
    assert snap.state.payload == {"step": 2}
    assert [o.op_id for o in snap.operations] == ["op1"]
    assert [a.approval_id for a in snap.approvals] == ["ap1"]
    assert snap.pending_inbox == ()
    assert snap.artifacts == (art,)
    assert [e.action for e in store.audit("r1")] == ["created", "transition"]
    assert store.read_memory("t1", "prefs", T0) == [make_memory("mem1")]
    assert store.get_run("r1.child") == child


def test_a_memory_version_another_run_committed_first_is_refused_not_overwritten(
    store: Store,
) -> None:
    # Both runs read v1 as the newest and numbered their write v2.
    for run_id in ("r1", "r2"):
        create(store, make_run(run_id))
    store.commit(next_commit(claimed(store, "r1"), T0 + 1, memory=(make_memory("k:v2"),)))
    claim = claimed(store, "r2")
    before = everything(store, "r2")
    late = make_memory("k:v2", value={"v": "r2's"}, derived_from=("k:v1",))
    with pytest.raises(MemoryConflictError) as err:
        store.commit(next_commit(claim, T0 + 2, memory=(late,)))
    assert err.value.memory_ids == ["k:v2"]
    assert everything(store, "r2") == before  # the run did not move either
    assert store.read_memory("t1", "prefs", T0) == [make_memory("k:v2")]


def test_two_runs_storing_equal_content_each_keep_their_own_artifact_reference(
    store: Store,
) -> None:
    refs = []
    for run_id, tenant in [("r1", "t1"), ("r2", "t2")]:
        create(store, make_run(run_id, tenant=tenant))
        claim = claimed(store, run_id)
        ref = ArtifactRef(
            tenant=tenant, created_at=T0, updated_at=T0, uri="cas://same", sha256="ab",
            owner=run_id, subject=f"user-of-{tenant}",
        )  # fmt: skip
        store.commit(next_commit(claim, T0 + 1, artifacts=(ref,)))
        refs.append(ref)
    assert store.load("r1").artifacts == (refs[0],)
    assert store.load("r2").artifacts == (refs[1],)
    assert store.artifacts() == refs


def test_commit_keeps_the_stored_lease_fields_whatever_the_new_row_says(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    forged = claim.run.model_copy(update={"lease_owner": "evil", "fencing_token": 99})
    store.commit(next_commit(claim, T0, run=forged))
    run = store.get_run("r1")
    assert run is not None
    assert (run.lease_owner, run.fencing_token, run.lease_expiry) == ("w1", 1, T0 + 10)


def test_operations_and_approvals_are_upserted_by_id(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    store.commit(next_commit(claim, T0, operations=(make_op("r1", "op1"),)))
    claim = Claim(store.get_run("r1"), "w1", claim.fencing_token, claim.lease_expiry)  # type: ignore[arg-type]
    done = make_op("r1", "op1", OperationStatus.CONFIRMED)
    store.commit(next_commit(claim, T0, operations=(done, make_op("r1", "op2"))))
    assert [(o.op_id, o.status) for o in store.operations("r1")] == [
        ("op1", OperationStatus.CONFIRMED),
        ("op2", OperationStatus.PREPARED),
    ]


def test_commit_with_an_old_expected_version_raises_stale_write_and_writes_nothing(
    store: Store,
) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    store.commit(next_commit(claim, T0))
    before = everything(store, "r1")
    stale = next_commit(
        claim, T0, audit=(make_audit("r1", "late"),), operations=(make_op("r1", "x"),)
    )
    with pytest.raises(StaleWriteError) as err:
        store.commit(stale)
    assert (err.value.expected, err.value.actual) == (0, 1)
    assert everything(store, "r1") == before


def test_commit_after_the_lease_expired_raises_lease_lost_and_writes_nothing(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")  # lease until T0 + 10
    store.commit(next_commit(claim, T0 + 10))  # the last instant of the lease still counts
    claim = Claim(store.get_run("r1"), "w1", claim.fencing_token, claim.lease_expiry)  # type: ignore[arg-type]
    before = everything(store, "r1")
    with pytest.raises(LeaseLostError, match="expired"):
        store.commit(next_commit(claim, T0 + 10.5, audit=(make_audit("r1", "zombie"),)))
    assert everything(store, "r1") == before


def test_commit_with_an_older_fencing_token_raises_lease_lost_and_writes_nothing(
    store: Store,
) -> None:
    create(store, make_run("r1"))
    zombie = claimed(store, "r1", "w1", T0)
    fresh = claimed(store, "r1", "w2", T0 + 11)
    assert fresh.fencing_token == zombie.fencing_token + 1
    before = everything(store, "r1")
    with pytest.raises(LeaseLostError, match="fencing token"):
        # The zombie's own clock may lag: the token alone must fence it.
        store.commit(next_commit(zombie, T0 + 5, operations=(make_op("r1", "dup"),)))
    assert everything(store, "r1") == before
    store.commit(next_commit(fresh, T0 + 12))
    assert store.get_run("r1").state_version == 1  # type: ignore[union-attr]


def test_commit_whose_new_row_skips_a_version_is_refused_before_writing(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    bad = next_commit(claim, T0)
    bad = Commit(**{**bad.__dict__, "run": bad.run.model_copy(update={"state_version": 5})})
    before = everything(store, "r1")
    with pytest.raises(InputError, match="version 1"):
        store.commit(bad)
    assert everything(store, "r1") == before


def test_commit_that_creates_an_existing_child_run_writes_nothing(store: Store) -> None:
    create(store, make_run("r1"))
    create(store, make_run("kid"))
    claim = claimed(store, "r1")
    before = everything(store, "r1")
    with pytest.raises(DuplicateRunError):
        store.commit(next_commit(claim, T0, children=((make_run("kid"), make_state("kid")),)))
    assert everything(store, "r1") == before


# -- crash points --------------------------------------------------------
def test_a_crash_at_checkpoint_stmt_2_leaves_no_partial_write(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    commit = next_commit(
        claim, T0, state=make_state("r1", {"new": 1}), audit=(make_audit("r1", "step"),)
    )
    before = everything(store, "r1")
    crashpoints.arm("checkpoint_stmt_2=raise")
    try:
        with pytest.raises(crashpoints.CrashPointHit, match="checkpoint_stmt_2"):
            store.commit(commit)
    finally:
        crashpoints.disarm()
    assert everything(store, "r1") == before
    store.commit(commit)  # the store is usable, and the same commit now applies whole
    assert store.load("r1").state.payload == {"new": 1}


def spec_of(store: Store, **extra: Any) -> dict[str, Any]:
    """How a child process opens the same store."""
    url = getattr(store, "url", None) or f"sqlite://{store.path}"  # type: ignore[attr-defined]
    return {"url": url, "schema": getattr(store, "schema", None), **extra}


CHILD_PRELUDE = """
import json, os, sys, time
from reference_runtime.store import Claim, Commit, open_store
spec = json.loads(sys.argv[1])
store = open_store(spec["url"], schema=spec["schema"])
def barrier(name):
    # A real barrier: every child leaves a file and waits for all of them, so
    # none goes on before the last one (imports and connection done) arrives.
    folder = spec["barrier"]
    open(os.path.join(folder, f"{name}-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 60
    while sum(f.startswith(name + "-") for f in os.listdir(folder)) < spec["parties"]:
        if time.monotonic() > deadline:
            sys.exit(f"barrier {name!r}: {spec['parties']} children did not all arrive in 60 s")
        time.sleep(0.001)
"""

KILL_CHILD = """
from reference_runtime import crashpoints
from reference_runtime._records import AuditEvent, Operation, Run, WorkingState
c = spec["commit"]
commit = Commit(
    run=Run.model_validate_json(c["run"]), expected_version=c["expected"],
    worker_id=c["worker"], fencing_token=c["token"], now=c["now"],
    state=WorkingState.model_validate_json(c["state"]),
    operations=(Operation.model_validate_json(c["op"]),),
    audit=(AuditEvent.model_validate_json(c["audit"]),),
)
crashpoints.arm("checkpoint_stmt_2=kill")
store.commit(commit)
print("survived the crash point")
"""


def run_child(body: str, spec: dict[str, Any]) -> subprocess.Popen[str]:
    code = textwrap.dedent(CHILD_PRELUDE) + textwrap.dedent(body)
    return subprocess.Popen(
        [sys.executable, "-c", code, json.dumps(spec)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "RR_CRASHPOINTS": ""},
    )


def test_a_sigkill_in_the_middle_of_a_commit_leaves_no_partial_write(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1", "doomed")
    commit = next_commit(
        claim,
        T0 + 1,
        state=make_state("r1", {"new": 1}),
        operations=(make_op("r1", "op1"),),
        audit=(make_audit("r1", "step"),),
    )
    before = everything(store, "r1")
    parts = {
        "run": commit.run.model_dump_json(),
        "expected": commit.expected_version,
        "worker": commit.worker_id,
        "token": commit.fencing_token,
        "now": commit.now,
        "state": commit.state.model_dump_json(),  # type: ignore[union-attr]
        "op": commit.operations[0].model_dump_json(),
        "audit": commit.audit[0].model_dump_json(),
    }
    child = run_child(KILL_CHILD, spec_of(store, commit=parts))
    out, err = child.communicate(timeout=60)
    assert child.returncode == -9, f"child was not killed: rc={child.returncode} {out} {err}"
    assert everything(store, "r1") == before
    store.commit(commit)  # no lock or half transaction left behind
    assert store.load("r1").state.payload == {"new": 1}
    assert [o.op_id for o in store.operations("r1")] == ["op1"]


# -- claims and leases ---------------------------------------------------
def test_claim_picks_only_runnable_runs(store: Store) -> None:
    now = T0 + 100
    cases = [  # (run id, status, wake_at, runnable?)
        ("a_running", S.RUNNING, None, True),
        ("b_retry_due_now", S.RETRY_SCHEDULED, now, True),
        ("c_retry_later", S.RETRY_SCHEDULED, now + 1, False),
        ("d_waiting_idle", S.WAITING_FOR_APPROVAL, None, False),
        ("e_waiting_inbox", S.WAITING_FOR_EVENT, None, True),
        ("f_wait_timed_out", S.WAITING_FOR_EVENT, now - 1, True),
        ("g_completed", S.COMPLETED, None, False),
        ("h_waiting_acked", S.WAITING_FOR_EVENT, None, False),
        ("i_created", S.CREATED, None, True),
        ("j_wait_not_due", S.WAITING_FOR_APPROVAL, now + 5, False),
    ]
    for n, (run_id, status, wake_at, _) in enumerate(cases):
        # Created in reverse id order: "oldest first" must not mean "by id".
        create(store, make_run(run_id, status, at=T0 - n, wake_at=wake_at))
    store.deliver(make_message("e_waiting_inbox", "m-e"))
    store.deliver(make_message("h_waiting_acked", "m-h", processed_at=T0))
    expected = [run_id for run_id, *_, ok in reversed(cases) if ok]
    assert store.runnable(now) == expected
    assert store.runnable(now, limit=2) == expected[:2]
    got = []
    while (claim := store.claim("w1", now, 30.0)) is not None:
        got.append(claim.run.run_id)
    assert got == expected


def test_claim_skips_leased_runs_and_sets_the_lease(store: Store) -> None:
    create(store, make_run("r1"))
    create(store, make_run("r2", at=T0 + 1))
    first = store.claim("w1", T0, 10.0)
    second = store.claim("w2", T0, 10.0)
    assert first is not None and second is not None
    assert (first.run.run_id, second.run.run_id) == ("r1", "r2")
    assert store.claim("w3", T0 + 5, 10.0) is None
    stored = store.get_run("r1")
    assert stored is not None
    assert (stored.lease_owner, stored.lease_expiry, stored.fencing_token) == ("w1", T0 + 10, 1)
    assert first == Claim(stored, "w1", 1, T0 + 10)


def test_claim_takes_an_expired_lease_and_increments_the_fencing_token(store: Store) -> None:
    create(store, make_run("r1"))
    first = claimed(store, "r1", "w1", T0)
    assert store.claim("w2", T0 + 10, 10.0) is None  # expiry instant: still w1's
    second = store.claim("w2", T0 + 10.5, 10.0)
    assert second is not None
    assert (second.worker_id, second.fencing_token) == ("w2", first.fencing_token + 1)


def test_claiming_a_named_run_fails_when_it_is_leased_or_not_runnable(store: Store) -> None:
    create(store, make_run("busy"))
    create(store, make_run("later", wake_at=T0 + 50))
    claimed(store, "busy")
    assert store.claim("w2", T0, 10.0, "busy") is None
    assert store.claim("w2", T0, 10.0, "later") is None
    assert store.claim("w2", T0, 10.0, "missing") is None
    assert store.claim("w2", T0 + 50, 10.0, "later") is not None


def test_racing_worker_processes_claim_each_run_exactly_once(store: Store, tmp_path: Path) -> None:
    ids = [f"r{n:03}" for n in range(60)]
    for n, run_id in enumerate(ids):
        create(store, make_run(run_id, at=T0 + n))
    # Every child claims one run, then waits until all three hold one: the
    # claims overlap for certain, however the machine schedules them.
    body = """
    barrier("start")
    got = []
    while (c := store.claim(spec["worker"], spec["now"], 3600.0)) is not None:
        got.append([c.run.run_id, c.fencing_token])
        if len(got) == 1:
            barrier("holding")
    print(json.dumps(got))
    """
    spec = spec_of(store, barrier=str(tmp_path), parties=3, now=T0)
    children = [run_child(body, {**spec, "worker": f"w{k}"}) for k in range(3)]
    results = []
    for child in children:
        out, err = child.communicate(timeout=60)
        assert child.returncode == 0, err
        results.append(json.loads(out))
    assert all(got for got in results), f"a worker claimed nothing: {results}"
    claims = [run_id for got in results for run_id, _ in got]
    assert sorted(claims) == ids, "every run claimed exactly once"
    assert all(token == 1 for got in results for _, token in got)
    assert store.runnable(T0, limit=100) == ids  # lease ignored by runnable()


def test_renew_lease_extends_a_held_lease(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    renewed = store.renew_lease(claim, T0 + 8, 10.0)
    assert (renewed.lease_expiry, renewed.fencing_token) == (T0 + 18, claim.fencing_token)
    assert store.claim("w2", T0 + 15, 10.0) is None
    store.commit(next_commit(renewed, T0 + 17))


def test_renew_lease_after_expiry_or_takeover_raises_lease_lost(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    with pytest.raises(LeaseLostError, match="expired"):
        store.renew_lease(claim, T0 + 11, 10.0)
    claimed(store, "r1", "w2", T0 + 11)
    with pytest.raises(LeaseLostError, match="fencing token"):
        store.renew_lease(claim, T0 + 5, 10.0)


def test_release_frees_the_run_and_the_next_claim_gets_a_larger_token(store: Store) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")
    store.release(claim)
    stored = store.get_run("r1")
    assert stored is not None
    assert (stored.lease_owner, stored.lease_expiry, stored.fencing_token) == (None, None, 1)
    again = claimed(store, "r1", "w2", T0)
    assert again.fencing_token == 2
    with pytest.raises(LeaseLostError):
        store.commit(next_commit(claim, T0))


def test_release_of_a_lost_lease_leaves_the_new_holder_alone(store: Store) -> None:
    create(store, make_run("r1"))
    old = claimed(store, "r1", "w1", T0)
    other = claimed(store, "r1", "w2", T0 + 11)
    store.release(old)
    assert store.get_run("r1") == other.run
    # The same worker id again (a restarted worker): only the token tells them apart.
    again = claimed(store, "r1", "w1", T0 + 22)
    store.release(old)
    assert store.get_run("r1") == again.run


def test_record_lease_adopts_only_a_larger_token(store: Store) -> None:
    create(store, make_run("r1"))
    assert store.record_lease("r1", "w9", 5, T0 + 30)
    run = store.get_run("r1")
    assert run is not None
    assert (run.lease_owner, run.fencing_token, run.lease_expiry) == ("w9", 5, T0 + 30)
    assert not store.record_lease("r1", "w8", 5, T0 + 40)
    assert not store.record_lease("r1", "w8", 3, T0 + 40)
    assert not store.record_lease("missing", "w8", 9, T0 + 40)
    assert store.get_run("r1") == run
    assert store.record_lease("r1", "w8", 6, T0 + 40)


# -- inbox ---------------------------------------------------------------
def test_deliver_inserts_a_message_once_per_message_id(store: Store) -> None:
    create(store, make_run("r1", S.WAITING_FOR_EVENT))
    assert store.deliver(make_message("r1", "m1", payload={"first": True}))
    assert not store.deliver(make_message("r1", "m1", payload={"second": True}))
    pending = store.load("r1").pending_inbox
    assert [m.payload for m in pending] == [{"first": True}]


def test_an_acked_message_no_longer_makes_its_waiting_run_runnable(store: Store) -> None:
    create(store, make_run("r1", S.WAITING_FOR_EVENT))
    create(store, make_run("r2", S.WAITING_FOR_EVENT))
    store.deliver(make_message("r1", "m1"))
    store.deliver(make_message("r2", "m2"))
    assert store.runnable(T0) == ["r1", "r2"]
    claim = claimed(store, "r1")
    # m2 belongs to another run: acking it from r1 must not touch it.
    store.commit(next_commit(claim, T0 + 1, inbox_acked=("m1", "m2")))
    store.release(Claim(store.get_run("r1"), "w1", claim.fencing_token, 0.0))  # type: ignore[arg-type]
    assert store.runnable(T0 + 2) == ["r2"]
    assert store.load("r1").pending_inbox == ()
    assert [m.message_id for m in store.load("r2").pending_inbox] == ["m2"]


# -- memory --------------------------------------------------------------
def keys(records: list[MemoryRecord]) -> list[tuple[str, str]]:
    return [(r.key, r.memory_id) for r in records]


def test_read_memory_returns_only_the_tenants_own_records(store: Store) -> None:
    store.put_memory(make_memory("mine", "a"))
    store.put_memory(make_memory("theirs", "a", tenant="t2", version=2))
    store.put_memory(make_memory("other-ns", "a", namespace="secrets"))
    assert keys(store.read_memory("t1", "prefs", T0)) == [("a", "mine")]
    assert keys(store.read_memory("t2", "prefs", T0)) == [("a", "theirs")]


def test_read_memory_excludes_deleted_and_expired_records(store: Store) -> None:
    store.put_memory(make_memory("live", "a", expires_at=T0 + 1))
    store.put_memory(make_memory("gone", "b", deleted=True))
    store.put_memory(make_memory("expired", "c", expires_at=T0))
    assert keys(store.read_memory("t1", "prefs", T0)) == [("a", "live")]
    assert store.read_memory("t1", "prefs", T0 + 1) == []


def test_read_memory_returns_only_the_newest_version_of_each_key(store: Store) -> None:
    store.put_memory(make_memory("b1", "b", version=1))
    store.put_memory(make_memory("a2", "a", version=2))
    store.put_memory(make_memory("a1", "a", version=1))  # written last, still older
    store.put_memory(make_memory("b3", "b", version=3))
    assert keys(store.read_memory("t1", "prefs", T0)) == [("a", "a2"), ("b", "b3")]


def test_read_memory_never_falls_back_to_a_superseded_version(store: Store) -> None:
    store.put_memory(make_memory("a1", "a", version=1))
    store.put_memory(make_memory("a2", "a", version=2, expires_at=T0 + 5))
    store.put_memory(make_memory("b1", "b", version=1))
    store.put_memory(make_memory("b2", "b", version=2, trust=0.2))
    assert keys(store.read_memory("t1", "prefs", T0 + 6)) == [("b", "b2")]
    assert store.read_memory("t1", "prefs", T0, min_trust=0.5) == [
        make_memory("a2", "a", version=2, expires_at=T0 + 5)
    ]


def test_read_memory_applies_min_trust(store: Store) -> None:
    store.put_memory(make_memory("user", "a", trust=0.2, provenance=Provenance.USER_SUPPLIED))
    store.put_memory(make_memory("tool", "b", trust=0.5, provenance=Provenance.TOOL_OUTPUT))
    store.put_memory(make_memory("sys", "c", trust=1.0))
    assert [r.memory_id for r in store.read_memory("t1", "prefs", T0)] == ["user", "tool", "sys"]
    assert [r.memory_id for r in store.read_memory("t1", "prefs", T0, min_trust=0.5)] == [
        "tool",
        "sys",
    ]
    assert [r.memory_id for r in store.read_memory("t1", "prefs", T0, min_trust=0.9)] == ["sys"]


def test_read_memory_unfiltered_returns_every_version_of_every_tenant(store: Store) -> None:
    records = [
        make_memory("a1", "a"),
        make_memory("a2", "a", version=2),
        make_memory("x", "a", tenant="t2", deleted=True),
    ]
    for record in records:
        store.put_memory(record)
    store.put_memory(make_memory("elsewhere", namespace="other"))
    assert store.read_memory_unfiltered("prefs") == records


def test_delete_subject_deletes_the_subjects_records_and_everything_derived(store: Store) -> None:
    store.put_memory(make_memory("a", "k1", subject="alice"))
    store.put_memory(make_memory("b", "k2", derived_from=("a",)))
    store.put_memory(make_memory("c", "k3", derived_from=("b",)))
    store.put_memory(make_memory("d", "k4", subject="bob"))
    store.put_memory(make_memory("e", "k5", derived_from=("d", "c")))
    store.put_memory(make_memory("f", "k6", derived_from=("d",)))
    store.put_memory(make_memory("alice-elsewhere", "k7", subject="alice", tenant="t2"))
    assert store.delete_subject("t1", "alice", T0 + 1) == 4
    deleted = {r.memory_id for r in store.read_memory_unfiltered("prefs") if r.deleted}
    assert deleted == {"a", "b", "c", "e"}
    assert [r.memory_id for r in store.read_memory("t1", "prefs", T0 + 1)] == ["d", "f"]
    assert store.delete_subject("t1", "alice", T0 + 2) == 0


# -- audit, park, prune --------------------------------------------------
def test_audit_events_come_back_in_append_order(store: Store) -> None:
    create(store, make_run("r1"))
    create(store, make_run("r2"))
    claim = claimed(store, "r1")
    # Same timestamp throughout: only the append order can order them.
    events = tuple(make_audit(run_id, f"e{n}") for n, run_id in enumerate(["r1", "r2", "r1", "r2"]))
    store.commit(next_commit(claim, T0, audit=events))
    assert [e.action for e in store.audit()] == ["created", "created", "e0", "e1", "e2", "e3"]
    assert [e.action for e in store.audit("r2")] == ["created", "e1", "e3"]


def test_park_sets_the_error_and_audits_it_without_touching_status_or_payload(
    store: Store,
) -> None:
    create(store, make_run("r1", S.WAITING_FOR_EVENT))
    claim = claimed(store, "r1", now=T0) if store.runnable(T0) else None
    assert claim is None  # waiting, nothing pending: not claimable, still parkable
    store.park("r1", "payload_version 9 is newer than this code", T0 + 1)
    snap = store.load("r1")
    assert snap.run.error == "payload_version 9 is newer than this code"
    assert snap.run.status == S.WAITING_FOR_EVENT
    assert snap.state == make_state("r1")
    assert snap.run.state_version == 1  # the row changed: stale writers must be refused
    last = store.audit("r1")[-1]
    assert (last.action, last.detail["reason"]) == ("parked", snap.run.error)


def test_a_parked_run_is_not_claimable_until_it_is_unparked(store: Store) -> None:
    create(store, make_run("r1", S.RUNNING))
    store.park("r1", "payload from the future", T0)
    assert store.runnable(T0 + 100) == []
    assert store.claim("w1", T0 + 100, 10.0) is None
    assert store.unpark("r1", T0 + 101, "operator") is True
    assert store.get_run("r1").error is None  # type: ignore[union-attr]
    assert store.runnable(T0 + 102) == ["r1"]
    assert store.audit("r1")[-1].action == "unparked"
    assert store.unpark("r1", T0 + 103, "operator") is False


def test_an_operator_cancel_makes_the_holders_next_commit_stale_and_writes_nothing_more(
    store: Store,
) -> None:
    create(store, make_run("r1"))
    claim = claimed(store, "r1")  # a worker holds the run, version 0
    assert store.cancel("r1", T0 + 1, "operator", "customer withdrew") is True
    cancelled = store.get_run("r1")
    assert cancelled is not None
    assert (cancelled.status, cancelled.state_version) == (S.CANCELLED, 1)
    assert cancelled.fencing_token == claim.fencing_token  # no lease was taken
    last = store.audit("r1")[-1]
    assert (last.action, last.from_status, last.to_status) == ("cancelled", S.RUNNING, S.CANCELLED)
    before = everything(store, "r1")
    with pytest.raises(StaleWriteError):
        store.commit(next_commit(claim, T0 + 2, audit=(make_audit("r1", "late"),)))
    assert everything(store, "r1") == before
    assert store.cancel("r1", T0 + 3, "operator", "again") is False  # already ended
    assert store.claim("w2", T0 + 100, 10.0) is None


def test_outbox_messages_and_child_runs_commit_with_the_parent_checkpoint(store: Store) -> None:
    create(store, make_run("parent", S.WAITING_FOR_EVENT))
    create(store, make_run("child"))
    claim = claimed(store, "child")
    run = store.get_run("child")
    assert run is not None
    done = run.model_copy(update={"status": S.COMPLETED, "state_version": run.state_version + 1})
    grandchild = make_run("child.g", status=S.CREATED, parent_run_id="child")
    store.commit(
        Commit(
            run=done,
            expected_version=run.state_version,
            worker_id="w1",
            fencing_token=claim.fencing_token,
            now=T0,
            outbox=(make_message("parent", "child-done"),),
            children=((grandchild, make_state("child.g")),),
        )
    )
    assert [m.message_id for m in store.load("parent").pending_inbox] == ["child-done"]
    assert "parent" in store.runnable(T0)
    assert [e.action for e in store.audit("child.g")] == ["created"]


def test_an_outbox_message_is_not_delivered_when_its_commit_is_refused(store: Store) -> None:
    create(store, make_run("parent", S.WAITING_FOR_EVENT))
    create(store, make_run("child"))
    claim = claimed(store, "child")
    run = store.get_run("child")
    assert run is not None
    with pytest.raises(StaleWriteError):
        store.commit(
            Commit(
                run=run.model_copy(update={"state_version": run.state_version + 6}),
                expected_version=run.state_version + 5,
                worker_id="w1",
                fencing_token=claim.fencing_token,
                now=T0,
                outbox=(make_message("parent", "child-done"),),
            )
        )
    assert store.load("parent").pending_inbox == ()


def test_prune_compacts_only_finished_runs_older_than_the_policy(store: Store) -> None:
    policy = RetentionPolicy(keep_finished_seconds=100)
    now = T0 + 1000
    create(store, make_run("old_done", S.COMPLETED))
    create(store, make_run("new_done", S.FAILED, at=now - 50))
    create(store, make_run("old_running", S.RUNNING))
    for run_id in ("old_done", "new_done", "old_running"):
        store.deliver(make_message(run_id, f"m-{run_id}"))
    assert store.prune(now, policy) == 1
    old = store.load("old_done")
    assert old.state.payload == {}
    assert old.pending_inbox == ()
    assert old.run == make_run("old_done", S.COMPLETED)
    assert store.audit("old_done")[0].action == "created"
    for run_id in ("new_done", "old_running"):
        snap = store.load(run_id)
        assert snap.state == make_state(run_id)
        assert len(snap.pending_inbox) == 1
    assert store.prune(now, policy) == 0


# -- processes -----------------------------------------------------------
def test_setup_from_several_processes_at_once_succeeds(store: Store, tmp_path: Path) -> None:
    fresh = spec_of(store, barrier=str(tmp_path), parties=3)
    if fresh["schema"] is None:
        fresh["url"] = f"sqlite://{tmp_path / 'fresh.db'}"
    else:
        fresh["schema"] = f"test_{uuid.uuid4().hex[:16]}"
    body = """
    barrier("start")
    store.setup()
    print(json.dumps(store.applied_migrations()))
    """
    children = [run_child(body, fresh) for _ in range(3)]
    try:
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            assert json.loads(out) == [1, 2, 3]
    finally:
        if fresh["schema"] is not None:
            cleanup = open_store(fresh["url"], schema=fresh["schema"])
            cleanup.drop_schema()  # type: ignore[attr-defined]
            cleanup.close()


def test_a_forked_child_uses_its_own_connection_and_spares_the_parents(store: Store) -> None:
    create(store, make_run("before"))  # the parent's connection is open now
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            create(store, make_run("from-child"))
            store.close()
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert store.get_run("from-child") is not None  # parent's connection still works
    create(store, make_run("after"))


# -- open_store ----------------------------------------------------------
def test_open_store_understands_sqlite_and_postgres_urls(tmp_path: Path) -> None:
    pytest.importorskip("psycopg", reason="the Postgres extra is not installed")
    from reference_runtime.store.postgres import PostgresStore
    from reference_runtime.store.sqlite import SqliteStore

    absolute = open_store(f"sqlite://{tmp_path}/a.db")
    assert isinstance(absolute, SqliteStore) and absolute.path == tmp_path / "a.db"
    four_slashes = open_store(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(four_slashes, SqliteStore) and four_slashes.path == tmp_path / "a.db"
    relative = open_store("sqlite:data/b.db")
    assert isinstance(relative, SqliteStore) and str(relative.path) == "data/b.db"
    pg = open_store("postgresql://u@h:5432/db", schema="s1")
    assert isinstance(pg, PostgresStore) and pg.schema == "s1"  # no connection made yet


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("mysql://localhost/db", "unsupported"),
        ("runs.db", "unsupported"),
        ("sqlite://host/x.db", "absolute path"),
        ("sqlite:", "names no file"),
        ("sqlite::memory:", "in-memory"),
        ("postgresql://u:hunter2@h/db?x", "schema name"),
    ],
)
def test_open_store_rejects_a_bad_url_and_shows_a_good_one(url: str, why: str) -> None:
    schema = "bad-name" if url.startswith("postgresql") else None
    with pytest.raises(ConfigError, match=why) as err:
        open_store(url, schema=schema)
    assert "hunter2" not in str(err.value)
    if why != "schema name":
        assert "for example" in str(err.value) and "sqlite:///" in str(err.value)
