"""Per-environment storage: the checkpointer, and the adapter's own run registry.

The checkpointer is LangGraph's: a ``SqliteSaver`` on a file of the
environment, or a ``PostgresSaver`` on a schema of its own on the running
Postgres (dropped at close). Both are opened *in the process that uses them*
(a worker, or the harness when it observes): never inherited across a fork.

The SQLite connection keeps Python's default isolation level, as LangGraph's
own ``SqliteSaver.from_conn_string`` opens it: the saver writes a task's
outputs as one ``executemany`` and commits once, so the batch is all or
nothing only inside the transaction the connection opens. In autocommit
(``isolation_level=None``) every row committed alone, and a SIGKILL between
two rows left a task with part of its writes -- ``decision`` without
``branch:to:refund`` -- which ``invoke(None)`` ends with no next node and no
outcome (issue 17). ``PostgresSaver`` runs in autocommit as LangGraph opens it
too: its ``executemany`` goes in one pipeline, one implicit transaction.

An application that asks for LangGraph's long-term ``Store`` gets one beside
the checkpointer, opened the same way (in the process that uses it): a
``SqliteStore`` on a file of its own next to the checkpoint file, in
autocommit as ``SqliteStore.from_conn_string`` opens it (the store issues its
own ``BEGIN``/``COMMIT`` around each batch), or a ``PostgresStore`` in the
checkpointer's schema (its tables -- ``store``, ``store_migrations`` -- do not
clash with the saver's, and go with the schema at close).

The registry is the adapter's, not LangGraph's: which runs were submitted
(LangGraph has no notion of a run besides a thread id) and which approval
decisions were delivered, in one small SQLite file. It plays the part of
the application's API and inbox.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ._points import CrashPoints, pointed_saver

Backend = Literal["sqlite", "postgres"]
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")

#: Open SQLite checkpointer connections in autocommit, as this adapter did
#: before issue 17. Never for real use: only the test that shows what it
#: breaks sets it (read when a :class:`SaverSpec` is made, so it travels to
#: the workers with the spec).
SQLITE_AUTOCOMMIT = False


def _sqlite_autocommit() -> bool:
    return SQLITE_AUTOCOMMIT


@dataclass(frozen=True)
class SaverSpec:
    """Where one environment's checkpoints live; plain data, sent to workers."""

    backend: Backend
    sqlite_path: str | None = None
    postgres_url: str | None = None
    schema: str | None = None
    sqlite_autocommit: bool = field(default_factory=_sqlite_autocommit)
    #: seconds after which a Postgres connection whose server stopped
    #: answering fails (``tcp_user_timeout`` and keepalives); 0: never, as
    #: ``PostgresSaver.from_conn_string`` opens it
    network_timeout: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "sqlite_path": self.sqlite_path,
            "postgres_url": self.postgres_url,
            "schema": self.schema,
            "sqlite_autocommit": self.sqlite_autocommit,
            "network_timeout": self.network_timeout,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SaverSpec:
        return cls(**data)

    @property
    def store_path(self) -> str:
        """The SQLite file of the long-term store, beside the checkpoints."""
        assert self.sqlite_path is not None
        return str(Path(self.sqlite_path).with_name("store.db"))


def _pg_connect(url: str, schema: str | None, **kwargs: Any) -> Any:
    import psycopg

    options = f"-c search_path={schema}" if schema else None
    return psycopg.connect(url, options=options, **kwargs)


def _unsynced(conn: sqlite3.Connection) -> None:
    """Commit without a disk flush (``PRAGMA synchronous=OFF``), as
    ``kit.UnsyncedSQLite`` does for a runtime's own files, and for its reason:
    a commit SQLite has handed to the operating system survives any process
    kill (a transaction cut short is rolled back as with a flush), and the
    harness kills processes, never the machine. What the saver promises
    against a kill is unchanged; what goes is a disk sync per commit: 20
    ci scenarios made 1,424 ``fdatasync`` calls, 135 without (issue 33)."""
    conn.execute("PRAGMA synchronous=OFF")


def _enter_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Switch the file to WAL, waiting for other processes as for any lock.

    ``SqliteSaver.setup()`` switches too, but once: where waiting could
    deadlock (processes opening a fresh file together), SQLite answers
    "database is locked" at once instead of calling its busy handler (as the
    reference store found, commit 7741a8c). The pragma cannot run inside a
    transaction; on a fresh connection there is none, at either isolation
    level (Python opens one only before an INSERT, UPDATE, DELETE or
    REPLACE). On a file already in WAL it changes nothing.
    """
    assert not conn.in_transaction
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


@contextlib.contextmanager
def open_saver(
    spec: SaverSpec, points: CrashPoints | None = None, *, ready: bool = False
) -> Iterator[Any]:
    """LangGraph's checkpointer for ``spec``, with its own connection; on
    Postgres with ``points``, one that passes them in its writes (``_points``).

    ``ready``: :func:`create_storage` made the tables, so a ``SqliteSaver``
    skips the set-up it otherwise runs at its first use (a script of
    ``CREATE TABLE IF NOT EXISTS`` and an ``ALTER TABLE`` that fails): once
    per environment, not once per worker and observer (issue 33)."""
    if spec.backend == "sqlite":
        from langgraph.checkpoint.sqlite import SqliteSaver

        assert spec.sqlite_path is not None
        # Python's default isolation level, as from_conn_string (a transaction
        # from the first write to the saver's commit), not autocommit: see the
        # module's docstring. SELECTs open no transaction at this level, so a
        # reader never keeps an old snapshot.
        if spec.sqlite_autocommit:
            conn = sqlite3.connect(
                spec.sqlite_path, check_same_thread=False, isolation_level=None, timeout=60.0
            )
        else:
            conn = sqlite3.connect(spec.sqlite_path, check_same_thread=False, timeout=60.0)
        _unsynced(conn)
        _enter_wal(conn, timeout=60.0)
        try:
            saver = SqliteSaver(conn)
            saver.is_setup = ready
            yield saver
        finally:
            conn.close()
        return
    from langgraph.checkpoint.postgres import PostgresSaver

    with _langgraph_pg(spec) as pg:
        yield PostgresSaver(pg) if points is None else pointed_saver(pg, points)


def network_timeouts(seconds: float) -> dict[str, int]:
    """libpq settings that make a connection whose server stopped answering
    fail within about ``seconds`` (none for 0): ``tcp_user_timeout`` for a
    request sent and never acknowledged -- a lost COMMIT reply -- and
    keepalives for an idle connection whose server went away."""
    if seconds <= 0:
        return {}
    probe = max(1, int(seconds // 3))
    return {
        "tcp_user_timeout": int(seconds * 1000),
        "keepalives": 1,
        "keepalives_idle": probe,
        "keepalives_interval": probe,
        "keepalives_count": 2,
    }


@contextlib.contextmanager
def _langgraph_pg(spec: SaverSpec) -> Iterator[Any]:
    """A connection to ``spec``'s schema as LangGraph's Postgres classes want
    it (autocommit, no prepared statements, rows as dicts)."""
    from psycopg.rows import dict_row

    assert spec.postgres_url is not None
    pg = _pg_connect(
        spec.postgres_url,
        spec.schema,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        **network_timeouts(spec.network_timeout),
    )
    try:
        yield pg
    finally:
        pg.close()


@contextlib.contextmanager
def open_store(spec: SaverSpec, *, ready: bool = False) -> Iterator[Any]:
    """LangGraph's long-term store beside ``spec``'s checkpoints, with its own
    connection; ``ready`` as in :func:`open_saver`."""
    if spec.backend == "sqlite":
        from langgraph.store.sqlite import SqliteStore

        conn = sqlite3.connect(
            spec.store_path, check_same_thread=False, isolation_level=None, timeout=60.0
        )
        _unsynced(conn)
        _enter_wal(conn, timeout=60.0)
        try:
            store = SqliteStore(conn)
            # (a store with a vector index loads an extension per connection in its set-up)
            store.is_setup = ready and not store.index_config
            yield store
        finally:
            conn.close()
        return
    from langgraph.store.postgres import PostgresStore

    with _langgraph_pg(spec) as pg:
        yield PostgresStore(pg)


def create_storage(spec: SaverSpec, *, store: bool = False) -> None:
    """Create the checkpointer's tables (and, for Postgres, its schema), and
    the long-term store's when ``store``."""
    if spec.backend == "postgres":
        assert spec.postgres_url is not None and spec.schema is not None
        if not _SCHEMA_NAME.match(spec.schema):
            raise ValueError(f"schema {spec.schema!r} is not a plain lower-case SQL name")
        with _pg_connect(spec.postgres_url, None, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {spec.schema}")
    with open_saver(spec) as saver:
        saver.setup()
    if store:
        with open_store(spec) as long_term:
            long_term.setup()


def drop_storage(spec: SaverSpec) -> None:
    """Remove what :func:`create_storage` made (a SQLite file goes with its folder)."""
    if spec.backend == "postgres":
        assert spec.postgres_url is not None and spec.schema is not None
        with _pg_connect(spec.postgres_url, None, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {spec.schema} CASCADE")


# -- the registry -----------------------------------------------------------------

_REGISTRY = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL UNIQUE, tenant TEXT NOT NULL,
    workflow TEXT NOT NULL, input TEXT NOT NULL, code_version INTEGER
);
CREATE TABLE IF NOT EXISTS inbox (
    message_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, approval_id TEXT NOT NULL,
    payload TEXT NOT NULL
);
"""


@dataclass(frozen=True)
class RunRow:
    run_id: str
    tenant: str
    workflow: str
    input: dict[str, Any]
    code_version: int | None


class Registry:
    """Submitted runs and delivered approval decisions (one SQLite file).

    One connection per process and thread, opened at its first use and kept
    (opening one per call was a fifth of the harness's time on LangGraph,
    issue 33). A process forked from one that had a connection opens its
    own: the parent's is never used in the child, nor closed there (closing
    it could checkpoint or remove the parent's WAL files); it stays
    referenced, untouched, until the child exits."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._conns: dict[tuple[int, int], sqlite3.Connection] = {}
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def _conn(self) -> Iterator[sqlite3.Connection]:
        key = (os.getpid(), threading.get_ident())
        conn = self._conns.get(key)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
            _unsynced(conn)
            with self._lock:
                self._conns[key] = conn
        yield conn

    def close(self) -> None:
        """Close this process's connections (the file stays; a later call
        opens a new one)."""
        pid = os.getpid()
        with self._lock:
            for key, conn in list(self._conns.items()):
                if key[0] == pid:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()
                    del self._conns[key]

    def create(self) -> Registry:
        with self._conn() as conn:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_REGISTRY)
        return self

    def add_run(self, run: RunRow) -> None:
        with self._conn() as conn:
            conn.execute(
                "INSERT INTO runs (run_id, tenant, workflow, input, code_version) "
                "VALUES (?, ?, ?, ?, ?)",
                (run.run_id, run.tenant, run.workflow, json.dumps(run.input), run.code_version),
            )

    def runs(self) -> list[RunRow]:
        with self._conn() as conn:
            rows = conn.execute(
                "SELECT run_id, tenant, workflow, input, code_version FROM runs ORDER BY seq"
            ).fetchall()
        return [RunRow(r[0], r[1], r[2], json.loads(r[3]), r[4]) for r in rows]

    def deliver(self, message_id: str, run_id: str, approval_id: str, payload: Any) -> bool:
        """Keep a decision; False when its message id was seen before."""
        with self._conn() as conn:
            cur = conn.execute(
                "INSERT OR IGNORE INTO inbox (message_id, run_id, approval_id, payload) "
                "VALUES (?, ?, ?, ?)",
                (message_id, run_id, approval_id, json.dumps(payload)),
            )
            return cur.rowcount == 1

    def decision(self, run_id: str, approval_id: str) -> dict[str, Any] | None:
        """The first decision delivered for that approval, if any."""
        with self._conn() as conn:
            row = conn.execute(
                "SELECT payload FROM inbox WHERE run_id = ? AND approval_id = ? "
                "ORDER BY rowid LIMIT 1",
                (run_id, approval_id),
            ).fetchone()
        return None if row is None else dict(json.loads(row[0]))
