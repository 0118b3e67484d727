"""The store contract, part 3: memory, the audit trail, operators, retention and processes."""

from __future__ import annotations

import gc
import json
import os
import uuid
from pathlib import Path

import pytest

from reference_runtime._errors import (
    StaleWriteError,
)
from reference_runtime._records import (
    Provenance,
)
from reference_runtime.store import Commit, RetentionPolicy, Store, open_store

from .factories import (
    T0,
    S,
    claimed,
    create,
    everything,
    keys,
    make_audit,
    make_memory,
    make_message,
    make_run,
    make_state,
    next_commit,
    run_child,
    spec_of,
)


class MemoryContract:
    """Memory reads see only the newest live, trusted version of each key."""

    def test_read_memory_returns_only_the_tenants_own_records(self, store: Store) -> None:
        store.put_memory(make_memory("mine", "a"))
        store.put_memory(make_memory("theirs", "a", tenant="t2", version=2))
        store.put_memory(make_memory("other-ns", "a", namespace="secrets"))
        assert keys(store.read_memory("t1", "prefs", T0)) == [("a", "mine")]
        assert keys(store.read_memory("t2", "prefs", T0)) == [("a", "theirs")]

    def test_read_memory_excludes_deleted_and_expired_records(self, store: Store) -> None:
        store.put_memory(make_memory("live", "a", expires_at=T0 + 1))
        store.put_memory(make_memory("gone", "b", deleted=True))
        store.put_memory(make_memory("expired", "c", expires_at=T0))
        assert keys(store.read_memory("t1", "prefs", T0)) == [("a", "live")]
        assert store.read_memory("t1", "prefs", T0 + 1) == []

    def test_read_memory_returns_only_the_newest_version_of_each_key(self, store: Store) -> None:
        store.put_memory(make_memory("b1", "b", version=1))
        store.put_memory(make_memory("a2", "a", version=2))
        store.put_memory(make_memory("a1", "a", version=1))  # written last, still older
        store.put_memory(make_memory("b3", "b", version=3))
        assert keys(store.read_memory("t1", "prefs", T0)) == [("a", "a2"), ("b", "b3")]

    def test_read_memory_never_falls_back_to_a_superseded_version(self, store: Store) -> None:
        store.put_memory(make_memory("a1", "a", version=1))
        store.put_memory(make_memory("a2", "a", version=2, expires_at=T0 + 5))
        store.put_memory(make_memory("b1", "b", version=1))
        store.put_memory(make_memory("b2", "b", version=2, trust=0.2))
        assert keys(store.read_memory("t1", "prefs", T0 + 6)) == [("b", "b2")]
        assert store.read_memory("t1", "prefs", T0, min_trust=0.5) == [
            make_memory("a2", "a", version=2, expires_at=T0 + 5)
        ]

    def test_read_memory_applies_min_trust(self, store: Store) -> None:
        store.put_memory(make_memory("user", "a", trust=0.2, provenance=Provenance.USER_SUPPLIED))
        store.put_memory(make_memory("tool", "b", trust=0.5, provenance=Provenance.TOOL_OUTPUT))
        store.put_memory(make_memory("sys", "c", trust=1.0))
        assert [r.memory_id for r in store.read_memory("t1", "prefs", T0)] == [
            "user",
            "tool",
            "sys",
        ]
        assert [r.memory_id for r in store.read_memory("t1", "prefs", T0, min_trust=0.5)] == [
            "tool",
            "sys",
        ]
        assert [r.memory_id for r in store.read_memory("t1", "prefs", T0, min_trust=0.9)] == ["sys"]

    def test_read_memory_unfiltered_returns_every_version_of_every_tenant(
        self, store: Store
    ) -> None:
        records = [
            make_memory("a1", "a"),
            make_memory("a2", "a", version=2),
            make_memory("x", "a", tenant="t2", deleted=True),
        ]
        for record in records:
            store.put_memory(record)
        store.put_memory(make_memory("elsewhere", namespace="other"))
        assert store.read_memory_unfiltered("prefs") == records

    def test_read_memory_unfiltered_narrows_to_one_tenant_and_key(self, store: Store) -> None:
        records = [
            make_memory("a1", "a"),
            make_memory("b1", "b"),
            make_memory("a2", "a", version=2, deleted=True),
            make_memory("x", "a", tenant="t2"),
        ]
        for record in records:
            store.put_memory(record)
        assert store.read_memory_unfiltered("prefs", tenant="t1", key="a") == [
            records[0],
            records[2],
        ]
        assert store.read_memory_unfiltered("prefs", key="a") == [records[0], *records[2:]]
        assert store.read_memory_unfiltered("prefs", tenant="t2") == [records[3]]
        assert store.read_memory_unfiltered("other", tenant="t1", key="a") == []

    def test_delete_subject_deletes_the_subjects_records_and_everything_derived(
        self, store: Store
    ) -> None:
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


class OperatorContract:
    """Audit order, parking, cancelling, outbox messages and retention."""

    def test_audit_events_come_back_in_append_order(self, store: Store) -> None:
        create(store, make_run("r1"))
        create(store, make_run("r2"))
        claim = claimed(store, "r1")
        # Same timestamp throughout: only the append order can order them.
        events = tuple(
            make_audit(run_id, f"e{n}") for n, run_id in enumerate(["r1", "r2", "r1", "r2"])
        )
        store.commit(next_commit(claim, T0, audit=events))
        assert [e.action for e in store.audit()] == ["created", "created", "e0", "e1", "e2", "e3"]
        assert [e.action for e in store.audit("r2")] == ["created", "e1", "e3"]

    def test_park_sets_the_error_and_audits_it_without_touching_status_or_payload(
        self,
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

    def test_a_parked_run_is_not_claimable_until_it_is_unparked(self, store: Store) -> None:
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
        self,
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
        assert (last.action, last.from_status, last.to_status) == (
            "cancelled",
            S.RUNNING,
            S.CANCELLED,
        )
        before = everything(store, "r1")
        with pytest.raises(StaleWriteError):
            store.commit(next_commit(claim, T0 + 2, audit=(make_audit("r1", "late"),)))
        assert everything(store, "r1") == before
        assert store.cancel("r1", T0 + 3, "operator", "again") is False  # already ended
        assert store.claim("w2", T0 + 100, 10.0) is None

    def test_outbox_messages_and_child_runs_commit_with_the_parent_checkpoint(
        self, store: Store
    ) -> None:
        create(store, make_run("parent", S.WAITING_FOR_EVENT))
        create(store, make_run("child"))
        claim = claimed(store, "child")
        run = store.get_run("child")
        assert run is not None
        done = run.model_copy(
            update={"status": S.COMPLETED, "state_version": run.state_version + 1}
        )
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

    def test_an_outbox_message_is_not_delivered_when_its_commit_is_refused(
        self, store: Store
    ) -> None:
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

    def test_prune_compacts_only_finished_runs_older_than_the_policy(self, store: Store) -> None:
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


class ProcessContract:
    """Several processes set up and use one store; a fork gets its own connection."""

    def test_setup_from_several_processes_at_once_succeeds(
        self, store: Store, tmp_path: Path
    ) -> None:
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

    def test_a_forked_child_uses_its_own_connection_and_spares_the_parents(
        self, store: Store
    ) -> None:
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
