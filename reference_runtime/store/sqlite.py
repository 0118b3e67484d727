"""The SQLite backend: one database file shared by every worker process.

WAL mode lets readers proceed while one writer commits; every write
transaction starts with ``BEGIN IMMEDIATE``, which takes the database's single
write lock up front, so a claim's "find a free run, then lease it" cannot
interleave with another process's claim (and never fails late with
``SQLITE_BUSY`` on upgrade from a read lock). ``busy_timeout`` makes a waiting
writer queue instead of failing.

A connection is opened lazily in the process that uses it and never crosses a
``fork``: a child that inherits a store opens its own connection on first use.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from .._errors import ConfigError
from ._sql import SqlStore
from ._sqlkit import Migration, Tx

#: Versioned DDL for SQLite. Append new steps; never edit an applied one.
MIGRATIONS: tuple[Migration, ...] = (
    (
        1,
        "initial schema",
        (
            """CREATE TABLE runs (
                run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, status TEXT NOT NULL,
                state_version INTEGER NOT NULL, wake_at REAL, parent_run_id TEXT,
                lease_owner TEXT, lease_expiry REAL, fencing_token INTEGER NOT NULL,
                created_at REAL NOT NULL, updated_at REAL NOT NULL, doc TEXT NOT NULL)""",
            "CREATE INDEX runs_status_wake ON runs (status, wake_at)",
            "CREATE INDEX runs_created ON runs (created_at, run_id)",
            "CREATE INDEX runs_tenant ON runs (tenant, created_at)",
            "CREATE INDEX runs_lease ON runs (lease_owner, lease_expiry)",
            "CREATE INDEX runs_finished ON runs (status, updated_at)",
            """CREATE TABLE working_state (
                run_id TEXT PRIMARY KEY, updated_at REAL NOT NULL, compacted_at REAL,
                doc TEXT NOT NULL)""",
            """CREATE TABLE operations (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, op_id TEXT NOT NULL UNIQUE,
                run_id TEXT NOT NULL, status TEXT NOT NULL, idempotency_key TEXT NOT NULL,
                doc TEXT NOT NULL)""",
            "CREATE INDEX operations_run ON operations (run_id, seq)",
            "CREATE INDEX operations_key ON operations (idempotency_key)",
            """CREATE TABLE approvals (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, approval_id TEXT NOT NULL UNIQUE,
                run_id TEXT NOT NULL, decision TEXT NOT NULL, expires_at REAL NOT NULL,
                doc TEXT NOT NULL)""",
            "CREATE INDEX approvals_run ON approvals (run_id, seq)",
            "CREATE INDEX approvals_expiry ON approvals (expires_at)",
            """CREATE TABLE memory (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, memory_id TEXT NOT NULL UNIQUE,
                tenant TEXT NOT NULL, namespace TEXT NOT NULL, key TEXT NOT NULL,
                version INTEGER NOT NULL, trust REAL NOT NULL, subject TEXT,
                expires_at REAL, deleted INTEGER NOT NULL, doc TEXT NOT NULL)""",
            "CREATE INDEX memory_lookup ON memory (tenant, namespace, key, version)",
            "CREATE INDEX memory_subject ON memory (tenant, subject)",
            "CREATE INDEX memory_namespace ON memory (namespace, seq)",
            "CREATE INDEX memory_expiry ON memory (expires_at)",
            """CREATE TABLE memory_sources (
                memory_id TEXT NOT NULL, source_id TEXT NOT NULL,
                PRIMARY KEY (memory_id, source_id))""",
            "CREATE INDEX memory_sources_source ON memory_sources (source_id)",
            """CREATE TABLE audit (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, at REAL NOT NULL,
                doc TEXT NOT NULL)""",
            "CREATE INDEX audit_run ON audit (run_id, seq)",
            """CREATE TABLE artifacts (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, uri TEXT NOT NULL UNIQUE,
                owner TEXT NOT NULL, subject TEXT, expires_at REAL, doc TEXT NOT NULL)""",
            "CREATE INDEX artifacts_owner ON artifacts (owner, seq)",
            "CREATE INDEX artifacts_expiry ON artifacts (expires_at)",
            """CREATE TABLE inbox (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL UNIQUE,
                run_id TEXT NOT NULL, received_at REAL NOT NULL, processed_at REAL,
                doc TEXT NOT NULL)""",
            "CREATE INDEX inbox_pending ON inbox (run_id, processed_at, received_at)",
        ),
    ),
    (
        2,
        "parked runs are not runnable",
        ("ALTER TABLE runs ADD COLUMN parked INTEGER NOT NULL DEFAULT 0",),
    ),
    (
        3,
        "one artifact reference per (uri, owner run)",
        # Content addressing gives two runs with equal bytes the same uri;
        # keyed by uri alone, the second run's reference replaced the first's
        # (owner, tenant and subject), so the first run lost its artifact and
        # erasure followed the wrong user. SQLite cannot drop a UNIQUE
        # constraint in place: rebuild the table.
        (
            """CREATE TABLE artifacts_v3 (
                seq INTEGER PRIMARY KEY AUTOINCREMENT, uri TEXT NOT NULL,
                owner TEXT NOT NULL, subject TEXT, expires_at REAL, doc TEXT NOT NULL,
                UNIQUE (uri, owner))""",
            "INSERT INTO artifacts_v3 (seq, uri, owner, subject, expires_at, doc)"
            " SELECT seq, uri, owner, subject, expires_at, doc FROM artifacts",
            "DROP TABLE artifacts",
            "ALTER TABLE artifacts_v3 RENAME TO artifacts",
            "CREATE INDEX artifacts_owner ON artifacts (owner, seq)",
            "CREATE INDEX artifacts_expiry ON artifacts (expires_at)",
            "CREATE INDEX artifacts_uri ON artifacts (uri)",
        ),
    ),
)

_SYNCHRONOUS = ("OFF", "NORMAL", "FULL", "EXTRA")

# Connections inherited across fork() are parked here, never closed or
# garbage-collected in the child: closing one would run SQLite's shutdown code
# (locks, WAL checkpoint) on state that belongs to the parent.
_INHERITED: list[sqlite3.Connection] = []


class SqliteStore(SqlStore):
    """The store contract over one SQLite file (see :mod:`._base`).

    ``synchronous="FULL"`` survives power loss; ``"NORMAL"`` is much faster
    and still loses nothing when a *process* is killed (only on OS crash).
    A store object may be shared by threads (calls are serialized) and by
    forked children (each opens its own connection).
    """

    name = "sqlite"
    placeholder = "?"

    def __init__(
        self, path: str | os.PathLike[str], *, synchronous: str = "FULL", busy_timeout: float = 30.0
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ConfigError(
                f"bad SQLite synchronous mode {synchronous!r}: use one of {', '.join(_SYNCHRONOUS)}"
            )
        #: The database file (shared by every process that opens the same path).
        self.path = Path(path)
        self.synchronous = synchronous.upper()
        self.busy_timeout = busy_timeout
        self._db: sqlite3.Connection | None = None
        self._pid = 0
        self._lock = threading.RLock()
        self._lock_pid = os.getpid()
        self._closed = False

    # -- connection ------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        """This process's connection, opened on first use (and after a fork)."""
        if self._closed:
            raise RuntimeError(f"SqliteStore({str(self.path)!r}) was closed; open a new store")
        if self._db is not None and self._pid == os.getpid():
            return self._db
        if self._db is not None:
            _INHERITED.append(self._db)
        # isolation_level=None: the sqlite3 module must not open transactions
        # behind our back; every transaction here is an explicit BEGIN.
        db = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        db.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
        self._enter_wal(db)
        db.execute(f"PRAGMA synchronous = {self.synchronous}")
        self._db, self._pid = db, os.getpid()
        return db

    def _enter_wal(self, db: sqlite3.Connection) -> None:
        """Switch to WAL, waiting for other processes as long as for any lock.

        The switch needs an exclusive lock, and where waiting could deadlock
        SQLite answers "database is locked" at once instead of calling its
        busy handler: several processes opening a fresh file together (the
        store's setup from many workers) meet exactly that. So wait here.
        """
        deadline = time.monotonic() + self.busy_timeout
        while True:
            try:
                db.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.005)

    def _fork_safe_lock(self) -> threading.RLock:
        # A lock held by another thread at fork time would stay held forever in
        # the child: a new process gets a new lock along with its connection.
        if self._lock_pid != os.getpid():
            self._lock, self._lock_pid = threading.RLock(), os.getpid()
        return self._lock

    @contextlib.contextmanager
    def _transaction(self, begin: str) -> Iterator[Tx]:
        with self._fork_safe_lock():
            db = self._connection()
            db.execute(begin)
            try:
                yield Tx(db.cursor(), self.placeholder)
                db.execute("COMMIT")
            except BaseException:
                # BaseException: a simulated crash (CrashPointHit) or Ctrl-C
                # must not leave a half-written transaction open on a
                # connection the process goes on using.
                if db.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        db.execute("ROLLBACK")
                raise

    def _write(self) -> contextlib.AbstractContextManager[Tx]:
        return self._transaction("BEGIN IMMEDIATE")

    def _read(self) -> contextlib.AbstractContextManager[Tx]:
        # A deferred transaction in WAL mode reads one snapshot throughout.
        return self._transaction("BEGIN")

    # -- lifecycle -------------------------------------------------------
    def setup(self) -> None:
        """Create or migrate the schema. Idempotent, and safe when several
        processes call it at once: ``BEGIN IMMEDIATE`` makes them take turns,
        and each applies only the steps not yet recorded."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._up_to_date(MIGRATIONS):
            return  # the common case for a starting worker: no write lock
        with self._write() as tx:
            self._migrate(tx, MIGRATIONS, real="REAL")

    def applied_migrations(self) -> list[int]:
        """Versions recorded in ``schema_migrations``, ascending."""
        with self._read() as tx:
            return [r[0] for r in tx.all("SELECT version FROM schema_migrations ORDER BY version")]

    def close(self) -> None:
        """Close this process's connection; an inherited one is left alone."""
        with self._fork_safe_lock():
            if self._db is not None and self._pid == os.getpid():
                self._db.close()
            elif self._db is not None:
                _INHERITED.append(self._db)
            self._db = None
            self._closed = True

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r}, synchronous={self.synchronous!r})"
