"""The store contract, part 1: runs, the checkpoint commit, and crashes in it."""

from __future__ import annotations

from typing import Any

import pytest

from reference_runtime import crashpoints
from reference_runtime._errors import (
    DuplicateRunError,
    InputError,
    LeaseLostError,
    MemoryConflictError,
    StaleWriteError,
)
from reference_runtime._records import (
    ArtifactRef,
    OperationStatus,
)
from reference_runtime.store import Claim, Commit, Store

from .factories import (
    T0,
    S,
    claimed,
    create,
    everything,
    make_approval,
    make_audit,
    make_memory,
    make_message,
    make_op,
    make_run,
    make_state,
    next_commit,
    run_child,
    spec_of,
)


class RunContract:
    """Creating, listing and loading runs; setting up the schema."""

    def test_a_created_run_reads_back_equal_to_what_was_written(self, store: Store) -> None:
        run = create(store, make_run("r1", wake_at=T0 + 5, waiting_on="event:x"))
        state = make_state("r1", {"ünïcode": "✓", "nested": {"list": [1, 2.5, None, True]}})
        other = make_run("r2")
        store.create_run(other, state.model_copy(update={"run_id": "r2"}), make_audit("r2"))
        assert store.get_run("r1") == run
        assert store.get_run("r1").model_dump_json() == run.model_dump_json()  # type: ignore[union-attr]
        assert store.load("r2").state.payload == state.payload
        assert store.get_run("missing") is None

    def test_creating_a_run_twice_raises_duplicate_run_error_and_keeps_the_first(
        self, store: Store
    ) -> None:
        create(store, make_run("r1"))
        with pytest.raises(DuplicateRunError, match="r1"):
            store.create_run(
                make_run("r1", workflow="other"), make_state("r1", {"x": 2}), make_audit("r1")
            )
        assert store.get_run("r1").workflow == "refund"  # type: ignore[union-attr]
        assert store.load("r1").state.payload == make_state("r1").payload
        assert len(store.audit("r1")) == 1

    def test_list_runs_filters_by_tenant_and_orders_by_creation_time(self, store: Store) -> None:
        create(store, make_run("b", at=T0 + 2))
        create(store, make_run("a", at=T0 + 2))
        create(store, make_run("c", at=T0 + 1))
        create(store, make_run("x", tenant="t2"))
        assert [r.run_id for r in store.list_runs("t1")] == ["c", "a", "b"]
        assert [r.run_id for r in store.list_runs()] == ["x", "c", "a", "b"]

    def test_load_returns_the_run_state_operations_approvals_and_pending_inbox(
        self, store: Store
    ) -> None:
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

    def test_load_of_an_unknown_run_raises_key_error(self, store: Store) -> None:
        with pytest.raises(KeyError, match="nope"):
            store.load("nope")

    def test_setup_is_idempotent_and_records_each_migration_once(self, store: Store) -> None:
        create(store, make_run("r1"))
        store.setup()
        store.setup()
        assert store.applied_migrations() == [1, 2, 3]  # type: ignore[attr-defined]
        assert store.get_run("r1") is not None


class CheckpointContract:
    """One commit writes every part or nothing, fenced by lease and version."""

    def test_commit_bumps_state_version_and_writes_every_part(self, store: Store) -> None:
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
        self,
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
        self,
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

    def test_commit_keeps_the_stored_lease_fields_whatever_the_new_row_says(
        self, store: Store
    ) -> None:
        create(store, make_run("r1"))
        claim = claimed(store, "r1")
        forged = claim.run.model_copy(update={"lease_owner": "evil", "fencing_token": 99})
        store.commit(next_commit(claim, T0, run=forged))
        run = store.get_run("r1")
        assert run is not None
        assert (run.lease_owner, run.fencing_token, run.lease_expiry) == ("w1", 1, T0 + 10)

    def test_operations_and_approvals_are_upserted_by_id(self, store: Store) -> None:
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
        self,
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

    def test_commit_after_the_lease_expired_raises_lease_lost_and_writes_nothing(
        self, store: Store
    ) -> None:
        create(store, make_run("r1"))
        claim = claimed(store, "r1")  # lease until T0 + 10
        store.commit(next_commit(claim, T0 + 10))  # the last instant of the lease still counts
        claim = Claim(store.get_run("r1"), "w1", claim.fencing_token, claim.lease_expiry)  # type: ignore[arg-type]
        before = everything(store, "r1")
        with pytest.raises(LeaseLostError, match="expired"):
            store.commit(next_commit(claim, T0 + 10.5, audit=(make_audit("r1", "zombie"),)))
        assert everything(store, "r1") == before

    def test_commit_with_an_older_fencing_token_raises_lease_lost_and_writes_nothing(
        self,
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

    def test_commit_whose_new_row_skips_a_version_is_refused_before_writing(
        self, store: Store
    ) -> None:
        create(store, make_run("r1"))
        claim = claimed(store, "r1")
        bad = next_commit(claim, T0)
        bad = Commit(**{**bad.__dict__, "run": bad.run.model_copy(update={"state_version": 5})})
        before = everything(store, "r1")
        with pytest.raises(InputError, match="version 1"):
            store.commit(bad)
        assert everything(store, "r1") == before

    def test_commit_that_creates_an_existing_child_run_writes_nothing(self, store: Store) -> None:
        create(store, make_run("r1"))
        create(store, make_run("kid"))
        claim = claimed(store, "r1")
        before = everything(store, "r1")
        with pytest.raises(DuplicateRunError):
            store.commit(next_commit(claim, T0, children=((make_run("kid"), make_state("kid")),)))
        assert everything(store, "r1") == before


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


class CrashContract:
    """A crash inside a commit, simulated or a real SIGKILL, leaves no partial write."""

    def test_a_crash_at_checkpoint_stmt_2_leaves_no_partial_write(self, store: Store) -> None:
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

    def test_a_sigkill_in_the_middle_of_a_commit_leaves_no_partial_write(
        self, store: Store
    ) -> None:
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
