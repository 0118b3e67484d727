"""The world's durable store: one SQLite file per world.

Why SQLite, and why these settings:

* The world must outlive every worker process (a worker is SIGKILLed at any
  moment) and be shared by several of them. A file database with real locking
  does both without a server.
* WAL journal mode lets readers (the controller) run while a worker writes.
* ``synchronous=NORMAL`` is enough: in WAL mode a committed transaction is in
  the WAL file (the OS page cache) when ``COMMIT`` returns; killing the process
  cannot lose it. Only a power loss or OS crash can drop the last transactions,
  and the harness kills processes, not machines. It is ~17x faster than FULL.
* ``BEGIN IMMEDIATE`` takes the write lock at the start of a transaction, so
  two workers never both read "no charge with this key yet" and both apply:
  read-then-write is serialised. ``timeout`` makes a waiting writer block
  (busy timeout) instead of failing.
* Connections are opened lazily, one per process and thread: a connection
  inherited through ``fork`` is never used (SQLite forbids it), and two
  threads never share one, because a connection holds one transaction at a
  time (runtimes such as LangGraph run nodes on a thread pool). See
  :meth:`Store.conn`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

from .._janitor import copy_template
from ._errors import WorldUsageError
from ._model import SCHEMA_VERSION

#: How long a writer waits for another process's transaction, in seconds.
BUSY_TIMEOUT = 30.0

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL);
CREATE TABLE requests (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL,
    action TEXT NOT NULL,
    tenant TEXT NOT NULL,
    run_id TEXT,
    op_id TEXT,
    worker_id TEXT,
    fencing_token INTEGER,
    idempotency_key TEXT,
    business_key TEXT,
    request TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    outcome TEXT NOT NULL,
    applied INTEGER NOT NULL,
    deduplicated INTEGER NOT NULL,
    external_ref TEXT,
    response TEXT,
    error TEXT,
    rule_id INTEGER,
    pid INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE INDEX requests_by_key ON requests (service, tenant, idempotency_key, applied);
CREATE INDEX requests_by_business_key ON requests (service, tenant, business_key, applied);
CREATE TABLE rules (
    rule_id INTEGER PRIMARY KEY AUTOINCREMENT,
    service TEXT NOT NULL,
    action TEXT,
    nth INTEGER NOT NULL,
    mode TEXT NOT NULL,
    delay REAL NOT NULL,
    fired INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE callers (
    pid INTEGER PRIMARY KEY,
    tenant TEXT NOT NULL,
    run_id TEXT,
    op_id TEXT,
    worker_id TEXT,
    fencing_token INTEGER
);
CREATE TABLE model_calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant TEXT NOT NULL,
    run_id TEXT,
    worker_id TEXT,
    pid INTEGER NOT NULL,
    model TEXT NOT NULL,
    step INTEGER NOT NULL,
    request TEXT NOT NULL,
    reply TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    at REAL NOT NULL,
    fault TEXT,
    rule_id INTEGER,
    conversation_hash TEXT NOT NULL
);
CREATE INDEX model_calls_by_conversation ON model_calls (conversation_hash);
CREATE TABLE fired (
    rule_id INTEGER PRIMARY KEY,
    service TEXT NOT NULL,
    action TEXT NOT NULL,
    nth INTEGER NOT NULL,
    mode TEXT NOT NULL,
    delay REAL NOT NULL,
    request_seq INTEGER,
    tenant TEXT NOT NULL,
    run_id TEXT,
    worker_id TEXT,
    pid INTEGER NOT NULL,
    at REAL NOT NULL
);
"""

# Connections inherited through fork. Closing one in the child could disturb
# the parent's locks, and SQLite forbids using it, so the child keeps a
# reference (never closed, never used) and opens its own.
_INHERITED: list[sqlite3.Connection] = []


def _build_world(path: Path) -> None:
    Store(path)._build()


class _PerThread(threading.local):
    """This thread's connection and the pid that opened it."""

    pid: int = 0
    generation: int = 0
    conn: sqlite3.Connection | None = None


class Store:
    """One world file, opened lazily in each process that uses it."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._local = _PerThread()
        # Every connection opened through this store, to close them all. No lock:
        # list.append is atomic, and a lock held by another thread at fork time
        # would stay locked forever in the child.
        self._opened: list[tuple[int, sqlite3.Connection]] = []
        # Bumped by close(), so that other threads drop their closed connection.
        self._generation = 0

    def create(self) -> None:
        """Create a new, empty world file. Refuses to overwrite an existing one,
        because the records of an earlier scenario would leak into this one."""
        if self.path.exists():
            raise WorldUsageError(
                f"a file already exists at {str(self.path)!r}; a world starts empty. "
                "Delete it, or use World(path).open() to continue that world."
            )
        # Built once per process and copied: a fresh file with the same bytes
        # as building it here, without its fsyncs (the WAL switch, the schema).
        try:
            copy_template(f"world-schema-v{SCHEMA_VERSION}", _build_world, self.path)
        except OSError as exc:
            raise WorldUsageError(
                f"cannot create world {str(self.path)!r} ({exc}); check that its folder "
                "exists and is writable"
            ) from exc
        self.conn()

    def _build(self) -> None:
        """Make the empty world file at ``path`` (what :meth:`create` copies)."""
        conn = self._connect(create=True)
        # journal_mode=WAL is persistent: set once, every later connection sees it.
        conn.execute("PRAGMA journal_mode=WAL")
        with self._transaction(conn):
            # One statement at a time: executescript() would COMMIT our transaction.
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    conn.execute(statement)
            conn.execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
        conn.close()

    def conn(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use and again after a fork."""
        pid = os.getpid()
        local = self._local
        if local.conn is not None and local.pid == pid and local.generation == self._generation:
            return local.conn
        conn = self._connect(create=False)
        row = None
        with contextlib.suppress(sqlite3.DatabaseError):
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        if row is None:
            conn.close()
            raise WorldUsageError(
                f"{str(self.path)!r} is not a world file; create one with World(path).create()"
            )
        if int(row[0]) > SCHEMA_VERSION:
            conn.close()
            raise WorldUsageError(
                f"world {str(self.path)!r} has schema version {row[0]}; this code knows up to "
                f"{SCHEMA_VERSION}. Use the harness version that created it."
            )
        return self._adopt(conn)

    def _adopt(self, conn: sqlite3.Connection) -> sqlite3.Connection:
        pid = os.getpid()
        inherited = [c for p, c in self._opened if p != pid]
        if inherited:
            _INHERITED.extend(inherited)
            self._opened = [(p, c) for p, c in self._opened if p == pid]
        self._opened.append((pid, conn))
        self._local.pid, self._local.conn = pid, conn
        self._local.generation = self._generation
        return conn

    def _connect(self, *, create: bool) -> sqlite3.Connection:
        mode = "rwc" if create else "rw"
        # A URI, so that mode=rw refuses to conjure an empty file for a wrong path.
        uri = f"file:{urllib.parse.quote(str(self.path))}?mode={mode}"
        try:
            conn = sqlite3.connect(
                uri,
                uri=True,
                timeout=BUSY_TIMEOUT,
                # Autocommit at the driver level: we issue BEGIN IMMEDIATE ourselves.
                isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.OperationalError as exc:
            hint = (
                "check that its folder exists and is writable"
                if create
                else "create it first with World(path).create()"
            )
            raise WorldUsageError(f"cannot open world {str(self.path)!r} ({exc}); {hint}") from exc
        try:
            # synchronous is per connection, not persistent. See the module docstring.
            conn.execute("PRAGMA synchronous=NORMAL")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise WorldUsageError(
                f"{str(self.path)!r} is not a world file ({exc}); "
                "create one with World(path).create()"
            ) from exc
        return conn

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction holding the database's write lock throughout."""
        with self._transaction(self.conn()) as conn:
            yield conn

    @staticmethod
    @contextlib.contextmanager
    def _transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self, *, durable: bool = True) -> None:
        """Close every connection this process opened here (those inherited
        through fork stay untouched). Call it when no call is in flight; the
        store reopens on next use. ``durable=False``: the file is a scratch
        one; the checkpoint that closing the last connection makes skips its
        fsyncs (a killed process loses nothing, an OS crash could)."""
        pid = os.getpid()
        self._generation += 1
        mine, self._opened = self._opened, []
        for owner, conn in mine:
            if owner == pid:
                if not durable:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("PRAGMA synchronous=OFF")
                conn.close()
            else:
                _INHERITED.append(conn)
        self._local.conn = None


class OnWorldFile:
    """What :class:`~harness.world.World` and
    :class:`~harness.world.WorldClient` share: one world file, opened lazily
    per process, closed by :meth:`close` or a ``with`` block."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._store = Store(path)

    @property
    def path(self) -> str:
        """The world's SQLite file."""
        return str(self._store.path)

    def close(self, *, durable: bool = True) -> None:
        """Close this process's connection; it is reopened on next use.
        ``durable=False`` for a world thrown away next (see :meth:`Store.close`)."""
        self._store.close(durable=durable)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"


def next_counter(conn: sqlite3.Connection, name: str) -> int:
    """Increment a durable counter inside the caller's transaction; returns the new value."""
    conn.execute(
        "INSERT INTO counters (name, value) VALUES (?, 1) "
        "ON CONFLICT (name) DO UPDATE SET value = value + 1",
        (name,),
    )
    row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
    return int(row[0])


def read_counter(conn: sqlite3.Connection, name: str) -> int:
    """A counter's current value (0 if never incremented)."""
    row = conn.execute("SELECT value FROM counters WHERE name = ?", (name,)).fetchone()
    return 0 if row is None else int(row[0])
