"""A read of the Postgres store is one statement in autocommit (one round
trip, not BEGIN, the statement and COMMIT), and the connection goes back to
its pool in transactions: the next write is still atomic."""

from __future__ import annotations

from typing import Any

import pytest

from reference_runtime.store.postgres import PostgresStore

pytestmark = pytest.mark.postgres


def _autocommit(tx: Any) -> bool:
    return bool(tx._cur.connection.autocommit)


def test_a_read_runs_in_autocommit_and_a_write_in_a_transaction(
    postgres_store: PostgresStore,
) -> None:
    with postgres_store._read() as tx:
        assert _autocommit(tx)
        assert tx.one("SELECT 1") == (1,)
    with postgres_store._write() as tx:
        assert not _autocommit(tx)
    with postgres_store._snapshot() as tx:
        assert not _autocommit(tx)


def test_a_write_after_a_read_on_the_same_connection_is_still_atomic(
    postgres_store: PostgresStore,
) -> None:
    # pool_size 1: the write gets the very connection the read used
    store = PostgresStore(postgres_store.url, schema=postgres_store.schema, pool_size=1)
    try:
        with store._read() as tx:
            tx.all("SELECT version FROM schema_migrations")
        with store._write() as tx:
            tx.run("CREATE TABLE atomic_probe (n INTEGER)")
        with pytest.raises(RuntimeError), store._write() as tx:
            tx.run("INSERT INTO atomic_probe VALUES (1)")
            raise RuntimeError("the transaction fails after its first statement")
        with store._read() as tx:
            assert tx.all("SELECT n FROM atomic_probe") == []
    finally:
        store.close()


def test_a_read_refuses_a_second_statement(postgres_store: PostgresStore) -> None:
    # a second statement would see another snapshot: several reads take _snapshot
    with pytest.raises(RuntimeError, match="one statement"), postgres_store._read() as tx:
        tx.one("SELECT 1")
        tx.one("SELECT 2")
    with postgres_store._snapshot() as tx:
        assert tx.one("SELECT 1") == (1,) and tx.one("SELECT 2") == (2,)


def _statements(store: PostgresStore, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every statement ``store`` sends from now on (the transaction's
    BEGIN and COMMIT are the driver's own and not counted)."""
    import psycopg

    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def counted(cur: Any, query: Any, *a: Any, **k: Any) -> Any:
        sent.append(str(query))
        return execute(cur, query, *a, **k)

    monkeypatch.setattr(psycopg.Cursor, "execute", counted)
    return sent


def test_a_snapshot_is_one_statement_that_reads_what_six_reads_did(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # load() on Postgres: one autocommit statement (one round trip), the
    # same snapshot the SQL backends' repeatable-read transaction of six reads
    # gives, element for element and in the same order.
    from reference_runtime._records import ArtifactRef
    from reference_runtime._states import RunStatus
    from reference_runtime.store._sql._runs import SqlRuns

    from .factories import (
        T0,
        claimed,
        create,
        make_approval,
        make_message,
        make_op,
        make_run,
        next_commit,
    )

    store = postgres_store
    create(store, make_run("r1", RunStatus.WAITING_FOR_EVENT))
    create(store, make_run("r2"))
    for message_id, at in (("m2", T0 + 2), ("m1", T0 + 1), ("m3", T0 + 1)):
        store.deliver(make_message("r1", message_id, received_at=at))
    store.deliver(make_message("r1", "done", processed_at=T0))
    claim = claimed(store, "r1")
    arts = tuple(
        ArtifactRef(
            tenant="t1", created_at=T0, updated_at=T0, uri=f"s3://b/{n}", sha256="ab", owner="r1"
        )
        for n in (2, 1)
    )
    store.commit(
        next_commit(
            claim,
            T0,
            operations=(make_op("r1", "op2"), make_op("r1", "op1")),
            approvals=(make_approval("r1", "ap2"), make_approval("r1", "ap1")),
            artifacts=arts,
        )
    )
    sent = _statements(store, monkeypatch)
    snap = store.load("r1")
    assert len(sent) == 1, sent
    assert snap == SqlRuns.load(store, "r1")
    assert [m.message_id for m in snap.pending_inbox] == ["m1", "m3", "m2"]
    assert len(snap.operations) == 2 and snap.artifacts == arts
    assert store.load("r2") == SqlRuns.load(store, "r2")
    with pytest.raises(KeyError, match="nope"):
        store.load("nope")


def test_a_new_session_starts_in_the_schema_without_a_statement_of_its_own(
    postgres_store: PostgresStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # search_path (and read-only) come with the startup packet: a new
    # connection's first round trip is the caller's statement, not a SET.
    sent = _statements(postgres_store, monkeypatch)
    for read_only in (False, True):
        store = PostgresStore(postgres_store.url, schema=postgres_store.schema, read_only=read_only)
        try:
            assert store.applied_migrations() == [1, 2, 3]
            assert sent == ["SELECT version FROM schema_migrations ORDER BY version"]
            with store._read() as tx:
                assert tx.one("SHOW search_path") == (f'"{postgres_store.schema}"',)
            with store._read() as tx:
                assert tx.one("SHOW default_transaction_read_only") == (
                    "on" if read_only else "off",
                )
        finally:
            store.close()
        sent.clear()


def test_a_store_starts_one_background_thread_for_its_pool(
    postgres_store: PostgresStore,
) -> None:
    # A worker uses one connection at a time: its pool's reconnecting runs
    # on one thread (and the pool's scheduler), not three.
    import threading

    before = set(threading.enumerate())
    store = PostgresStore(postgres_store.url, schema=postgres_store.schema)
    try:
        assert store.applied_migrations() == [1, 2, 3]
        started = set(threading.enumerate()) - before
        assert len(started) <= 2, sorted(t.name for t in started)
    finally:
        store.close()
