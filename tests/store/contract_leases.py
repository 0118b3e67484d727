"""The store contract, part 2: claims, leases and the inbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reference_runtime._errors import (
    LeaseLostError,
)
from reference_runtime.store import Claim, Store

from .factories import (
    T0,
    S,
    claimed,
    create,
    make_message,
    make_run,
    next_commit,
    run_child,
    spec_of,
)


class LeaseContract:
    """Claims take only runnable, unleased runs; fencing tokens only grow."""

    def test_claim_picks_only_runnable_runs(self, store: Store) -> None:
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

    def test_claim_skips_leased_runs_and_sets_the_lease(self, store: Store) -> None:
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

    def test_claim_takes_an_expired_lease_and_increments_the_fencing_token(
        self, store: Store
    ) -> None:
        create(store, make_run("r1"))
        first = claimed(store, "r1", "w1", T0)
        assert store.claim("w2", T0 + 10, 10.0) is None  # expiry instant: still w1's
        second = store.claim("w2", T0 + 10.5, 10.0)
        assert second is not None
        assert (second.worker_id, second.fencing_token) == ("w2", first.fencing_token + 1)

    def test_claiming_a_named_run_fails_when_it_is_leased_or_not_runnable(
        self, store: Store
    ) -> None:
        create(store, make_run("busy"))
        create(store, make_run("later", wake_at=T0 + 50))
        claimed(store, "busy")
        assert store.claim("w2", T0, 10.0, "busy") is None
        assert store.claim("w2", T0, 10.0, "later") is None
        assert store.claim("w2", T0, 10.0, "missing") is None
        assert store.claim("w2", T0 + 50, 10.0, "later") is not None

    def test_racing_worker_processes_claim_each_run_exactly_once(
        self, store: Store, tmp_path: Path
    ) -> None:
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

    def test_renew_lease_extends_a_held_lease(self, store: Store) -> None:
        create(store, make_run("r1"))
        claim = claimed(store, "r1")
        renewed = store.renew_lease(claim, T0 + 8, 10.0)
        assert (renewed.lease_expiry, renewed.fencing_token) == (T0 + 18, claim.fencing_token)
        assert store.claim("w2", T0 + 15, 10.0) is None
        store.commit(next_commit(renewed, T0 + 17))

    def test_renew_lease_after_expiry_or_takeover_raises_lease_lost(self, store: Store) -> None:
        create(store, make_run("r1"))
        claim = claimed(store, "r1")
        with pytest.raises(LeaseLostError, match="expired"):
            store.renew_lease(claim, T0 + 11, 10.0)
        claimed(store, "r1", "w2", T0 + 11)
        with pytest.raises(LeaseLostError, match="fencing token"):
            store.renew_lease(claim, T0 + 5, 10.0)

    def test_release_frees_the_run_and_the_next_claim_gets_a_larger_token(
        self, store: Store
    ) -> None:
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

    def test_release_of_a_lost_lease_leaves_the_new_holder_alone(self, store: Store) -> None:
        create(store, make_run("r1"))
        old = claimed(store, "r1", "w1", T0)
        other = claimed(store, "r1", "w2", T0 + 11)
        store.release(old)
        assert store.get_run("r1") == other.run
        # The same worker id again (a restarted worker): only the token tells them apart.
        again = claimed(store, "r1", "w1", T0 + 22)
        store.release(old)
        assert store.get_run("r1") == again.run

    def test_record_lease_adopts_only_a_larger_token(self, store: Store) -> None:
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


class InboxContract:
    """A message is stored once per id and acknowledged only by its own run."""

    def test_deliver_inserts_a_message_once_per_message_id(self, store: Store) -> None:
        create(store, make_run("r1", S.WAITING_FOR_EVENT))
        assert store.deliver(make_message("r1", "m1", payload={"first": True}))
        assert not store.deliver(make_message("r1", "m1", payload={"second": True}))
        pending = store.load("r1").pending_inbox
        assert [m.payload for m in pending] == [{"first": True}]

    def test_an_acked_message_no_longer_makes_its_waiting_run_runnable(self, store: Store) -> None:
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
