"""Opening a SQLite store that is already this runtime's and current takes
one read (``SqliteStore._open_current``); anything else gets the full
inspection, which creates, migrates or refuses as before."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from reference_runtime._errors import ForeignStoreError
from reference_runtime.store.sqlite import MIGRATIONS, SqliteStore


def _store(path: Path) -> SqliteStore:
    store = SqliteStore(path, synchronous="NORMAL")
    store.setup()
    return store


def test_a_current_store_opens_in_one_read_in_wal_mode(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _store(path).close()
    store = SqliteStore(path, synchronous="NORMAL")
    try:
        assert store._open_current()
        db = store._connection()
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert db.execute("PRAGMA busy_timeout").fetchone()[0] == 30_000
        assert store.applied_migrations() == [v for v, _, _ in MIGRATIONS]
    finally:
        store.close()


def test_a_store_missing_a_migration_is_migrated_by_the_full_path(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _store(path).close()
    latest = MIGRATIONS[-1][0]
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM schema_migrations WHERE version = ?", (latest,))
    db.close()
    assert not SqliteStore(path)._open_current()
    store = _store(path)  # would fail re-running step 3 if it was not recorded
    store.close()
    assert latest in SqliteStore(path).applied_migrations()


def test_another_programs_database_is_still_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE runs (id INTEGER)")
    db.close()
    store = SqliteStore(path)
    assert not store._open_current()
    with pytest.raises(ForeignStoreError):
        store.setup()
    with sqlite3.connect(path) as db:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    assert tables == {"runs"}


def test_a_pipe_is_never_opened(tmp_path: Path) -> None:
    path = tmp_path / "fifo.db"
    os.mkfifo(path)
    store = SqliteStore(path)
    assert not store._open_current()  # opening it would block on the read
    with pytest.raises(ForeignStoreError):
        store.setup()


def test_a_read_only_store_opened_in_one_read_refuses_writes(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    _store(path).close()
    store = SqliteStore(path, read_only=True)
    try:
        assert store._open_current()
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            store._connection().execute("DELETE FROM runs")
    finally:
        store.close()


def test_a_closed_store_still_refuses_setup(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    store = _store(path)
    store.close()
    assert not store._open_current()
    with pytest.raises(RuntimeError, match="was closed"):
        store.setup()
