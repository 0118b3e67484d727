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
import stat
import threading
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

from .._errors import ConfigError, ForeignStoreError, NoStoreError
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

#: The versions a current store has recorded.
_CURRENT = frozenset(version for version, _, _ in MIGRATIONS)

#: Everything :meth:`SqliteStore.setup` needs to know about a store that is
#: this runtime's and up to date, in one read (one snapshot): whether it has
#: the runs table, the bookkeeping table's columns, the applied versions and
#: the journal mode. On a file that is not such a store it fails (no such
#: table, not a database) or answers otherwise, and the full inspection runs.
_VERIFY = (
    "SELECT (SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'runs'),"
    " (SELECT count(*) FROM pragma_table_info('schema_migrations')"
    " WHERE name IN ('version', 'name', 'applied_at')),"
    " (SELECT group_concat(version) FROM schema_migrations),"
    " (SELECT journal_mode FROM pragma_journal_mode)"
)

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
        self,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "FULL",
        busy_timeout: float = 30.0,
        read_only: bool = False,
    ) -> None:
        if synchronous.upper() not in _SYNCHRONOUS:
            raise ConfigError(
                f"bad SQLite synchronous mode {synchronous!r}: use one of {', '.join(_SYNCHRONOUS)}"
            )
        #: The database file (shared by every process that opens the same path).
        self.path = Path(path)
        self.synchronous = synchronous.upper()
        self.busy_timeout = busy_timeout
        #: Refuse every write (``PRAGMA query_only``); never create the file.
        self.read_only = read_only
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
        try:
            db = self._connect()
        except sqlite3.Error as exc:
            raise ConfigError(
                f"cannot open the SQLite store {str(self.path)!r} ({exc}); check that the "
                "path and its folder are readable and writable"
            ) from exc
        return self._adopt(db)

    def _connect(self, *, create: bool | None = None) -> sqlite3.Connection:
        """A new connection to the file (``create``: as :meth:`_uri`).
        ``isolation_level=None``: the sqlite3 module must not open
        transactions behind our back; every transaction here is an explicit
        BEGIN."""
        return sqlite3.connect(
            self._uri(create=create),
            uri=True,
            timeout=self.busy_timeout,
            isolation_level=None,
            check_same_thread=False,
        )

    def _adopt(self, db: sqlite3.Connection, *, wal: bool = False) -> sqlite3.Connection:
        """Make ``db`` this process's connection, configured for use. ``db``
        comes from ``sqlite3.connect(timeout=self.busy_timeout)``, which has
        set the busy timeout; ``wal``: the file is known to be in WAL mode
        already (a persistent property of the database file)."""
        if self.read_only:
            # A plain read-write connection told to refuse writes, rather than
            # mode=ro: a read-only one leaves empty -wal/-shm files behind,
            # while this one removes them when it closes.
            db.execute("PRAGMA query_only = ON")
        else:
            if not wal:
                self._enter_wal(db)
            db.execute(f"PRAGMA synchronous = {self.synchronous}")
        self._db, self._pid = db, os.getpid()
        return db

    def _uri(self, *, create: bool | None = None) -> str:
        """The file as an SQLite URI: ``mode=rwc`` creates a missing file,
        ``mode=rw`` refuses to (every connection after :meth:`setup`)."""
        create = not self.read_only if create is None else create
        # Bytes, not str: a path that is not UTF-8 (surrogate-escaped by
        # Python) must still name the same file.
        path = urllib.parse.quote(os.fsencode(self.path.absolute()))
        return f"file:{path}?mode={'rwc' if create else 'rw'}"

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
    def setup(self, *, create: bool = True) -> None:
        """Create or migrate the schema. Idempotent, and safe when several
        processes call it at once: ``BEGIN IMMEDIATE`` makes them take turns,
        and each applies only the steps not yet recorded.

        First checks, without writing, that the file is this store's (see
        :meth:`Store.setup`); ``create=False`` or a read-only store never
        creates the file or its folder."""
        create = create and not self.read_only
        if self._open_current():
            return  # the common case for a starting worker: one read
        state = self._inspect(create)
        if state != "ours":
            if not create:
                raise NoStoreError(
                    f"there is no store at {str(self.path)!r} ({state}); check --store / "
                    "RR_STORE, or create the store by submitting a run"
                )
            self.path.parent.mkdir(parents=True, exist_ok=True)
        if self._up_to_date(MIGRATIONS):
            return  # the common case for a starting worker: no write lock
        if self.read_only:
            raise ConfigError(
                f"the store {str(self.path)!r} was written by older code and needs a schema "
                "migration, which a read-only command does not make; start a worker first"
            )
        with self._write() as tx:
            self._migrate(tx, MIGRATIONS, real="REAL")

    def _inspect(self, create: bool) -> str:
        """``"ours"``, or why there is no store yet (``"no such file"``, ...).

        Raises :class:`ForeignStoreError` for a path that holds something
        else. Reads the header and the table list only: a directory, a
        text file or another program's database is never opened for writing
        (SQLite would otherwise turn an empty file into a database and add
        its tables to anyone's).
        """
        where = str(self.path)
        if not self.path.exists():
            if not self.path.parent.is_dir() and not create:
                return "neither the file nor its folder exists"
            if self.path.parent.exists() and not self.path.parent.is_dir():
                raise ForeignStoreError(
                    f"cannot use {where!r} as a SQLite store: {str(self.path.parent)!r} is "
                    "not a folder; point --store at a new or existing database file"
                )
            return "no such file"
        if self.path.is_dir():
            raise ForeignStoreError(
                f"cannot use {where!r} as a SQLite store: it is a directory; name a "
                f"database file in it instead, e.g. sqlite:{where.rstrip('/')}/runs.db"
            )
        if not self.path.is_file():
            raise ForeignStoreError(
                f"cannot use {where!r} as a SQLite store: it is not a regular file "
                "(a device, pipe or socket)"
            )
        # Never open() the file ourselves: closing any descriptor of a file
        # drops every POSIX lock this process holds on it, including those of
        # a live SQLite connection (another store or runtime on the same
        # file in this process), and the next write corrupts the database.
        # SQLite's own VFS shares its locks between connections; it reads the
        # header for us and refuses a file that is not a database.
        if self.path.stat().st_size == 0:
            # Empty, or (a few microseconds long) being created by another
            # process opening the same new store.
            return "the file is empty"
        try:
            # Opened as the store's own connection would be (it becomes that
            # connection when the file is ours: a worker opens one, not two),
            # but refusing writes until the file is known to be ours.
            db = self._connect(create=False)
            try:
                db.execute("PRAGMA query_only = ON")
                tables = {
                    r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                }
                columns = (
                    {r[1] for r in db.execute("PRAGMA table_info(schema_migrations)")}
                    if "schema_migrations" in tables
                    else set()
                )
            except BaseException:
                db.close()
                raise
        except sqlite3.DatabaseError as exc:
            if "not a database" in str(exc):
                raise ForeignStoreError(
                    f"refusing to use {where!r} as a SQLite store: it is not a SQLite database "
                    "(its first bytes are not the SQLite header), and it was left untouched; "
                    "point --store at the runtime's database file or at a new path"
                ) from exc
            raise ForeignStoreError(
                f"refusing to use {where!r} as a SQLite store: SQLite cannot read it ({exc}); "
                "it was left untouched"
            ) from exc
        except sqlite3.Error as exc:
            raise ForeignStoreError(
                f"refusing to use {where!r} as a SQLite store: SQLite cannot read it ({exc}); "
                "it was left untouched"
            ) from exc
        ours = "runs" in tables and {"version", "name", "applied_at"} <= columns
        if ours:
            self._keep(db)
        else:
            db.close()
        tables -= {"sqlite_sequence", "sqlite_stat1", "sqlite_stat4"}
        if not tables:
            return "the database has no tables"
        if ours:
            return "ours"
        raise ForeignStoreError(
            f"refusing to use {where!r} as a SQLite store: it is another program's database "
            f"(tables {', '.join(sorted(tables)[:5])}{', ...' if len(tables) > 5 else ''}; "
            "no runtime schema), and it was left untouched; point --store at the runtime's "
            "database file or at a new path"
        )

    def _open_current(self) -> bool:
        """Open this process's connection in one read if the file is this
        store's, with every migration applied (and, unless read-only, in WAL
        mode); else False, having written nothing, and :meth:`setup` inspects
        the file in full (and explains, creates or migrates).

        Checks no less than the full path does: a regular, non-empty file
        (never a pipe, device or directory: SQLite is not asked to open
        those), opened without creating it, holding the runs table and the
        bookkeeping table with its columns and every version recorded. The
        read is a single ``SELECT``, which cannot write to another program's
        database; a file SQLite refuses fails it.
        """
        if self._closed:
            return False  # the full path says so
        try:
            st = os.stat(self.path)
        except (OSError, ValueError):
            return False
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            return False
        try:
            db = self._connect(create=False)
        except sqlite3.Error:
            return False
        try:
            runs, columns, versions, journal = db.execute(_VERIFY).fetchone()
            current = (
                runs == 1
                and columns == 3
                and {int(v) for v in str(versions or "").split(",") if v} >= _CURRENT
            )
        except (sqlite3.Error, ValueError):
            current = False
        if not current:
            db.close()
            return False
        self._keep(db, query_only=False, wal=journal == "wal")
        return True

    def _keep(self, db: sqlite3.Connection, *, query_only: bool = True, wal: bool = False) -> None:
        """Adopt the inspecting connection ``db`` as this process's, unless
        it has one already (or the store is closed): then close ``db``.
        ``query_only``: ``db`` refuses writes until told otherwise; ``wal``:
        the file is in WAL mode already."""
        with self._fork_safe_lock():
            if self._closed or (self._db is not None and self._pid == os.getpid()):
                db.close()
                return
            if self._db is not None:
                _INHERITED.append(self._db)
                self._db = None
            try:
                if query_only and not self.read_only:
                    db.execute("PRAGMA query_only = OFF")
                self._adopt(db, wal=wal)
            except BaseException:
                db.close()
                raise

    def applied_migrations(self) -> list[int]:
        """Versions recorded in ``schema_migrations``, ascending."""
        with self._read() as tx:
            return [r[0] for r in tx.all("SELECT version FROM schema_migrations ORDER BY version")]

    def skip_sync(self) -> None:
        """``synchronous=OFF`` on this process's connection, if open: closing
        the last connection then checkpoints the WAL without an fsync."""
        with self._fork_safe_lock():
            if self._db is not None and self._pid == os.getpid() and not self.read_only:
                self._db.execute("PRAGMA synchronous = OFF")

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
