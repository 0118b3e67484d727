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
