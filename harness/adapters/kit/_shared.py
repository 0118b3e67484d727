"""SQLite files shared by processes: the kit's base, an unsynced connection,
and the inbox of inbound messages."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class _Shared:
    """A SQLite file opened once per process and thread (a connection is
    never used across a fork, nor from another thread: a runtime may run
    steps in executor threads), in WAL mode, waiting out other processes'
    locks. Commits are not flushed to the disk (``synchronous=OFF``): a
    committed transaction is in the OS's page cache when ``COMMIT``
    returns, so a killed process loses nothing; only an OS crash could, and
    the harness kills processes, not machines (as the world's file, see
    :class:`UnsyncedSQLite`)."""

    _SCHEMA = ""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._conns: dict[tuple[int, int], sqlite3.Connection] = {}
        self._lock = threading.Lock()
        self._db().executescript(self._SCHEMA)

    def _db(self) -> sqlite3.Connection:
        key = (os.getpid(), threading.get_ident())
        conn = self._conns.get(key)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=OFF")
            with self._lock:
                if key[0] != next(iter(self._conns), key)[0]:
                    self._conns = {}  # a forked child: the parent's are not ours
                self._conns[key] = conn
        return conn

    def close(self) -> None:
        """Close this process's connections (the file stays)."""
        pid = os.getpid()
        with self._lock:
            for (owner, _), conn in list(self._conns.items()):
                if owner == pid:
                    with contextlib.suppress(sqlite3.Error):
                        conn.close()
            self._conns = {}


class UnsyncedSQLite(sqlite3.Connection):
    """A ``sqlite3`` connection that commits without a disk flush
    (``PRAGMA synchronous=OFF``): for a runtime's own SQLite files in a
    harness run, e.g. a system database.

    A commit returns once SQLite has handed its pages to the operating
    system: a process killed after that (SIGKILL, at any point) loses
    nothing, and one killed in the middle of a transaction leaves a journal
    the next connection rolls back, as with a flush. Only an operating
    system crash or a power loss could lose commits, and the harness kills
    processes, not machines. A flushed commit costs a few disk syncs (about
    11 ms each on a loaded shared VM, against 0.3 ms without). Pass it as
    ``sqlite3.connect(path, factory=UnsyncedSQLite)``, or to SQLAlchemy as
    ``create_engine(url, connect_args={"factory": UnsyncedSQLite})``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.execute("PRAGMA synchronous=OFF")


# -- inbound messages ----------------------------------------------------------


class DedupInbox(_Shared):
    """Inbound messages by id, in a SQLite file any process may open.

    For a runtime that silently drops a message it has seen, so that
    ``Environment.deliver()`` can say so: :meth:`deliver` returns False for
    a ``message_id`` delivered before (by this process or any other, before
    or after a kill), True and keeps the message otherwise.
    """

    _SCHEMA = """
        CREATE TABLE IF NOT EXISTS inbox (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, message_id TEXT NOT NULL UNIQUE,
            run_id TEXT, body TEXT NOT NULL);
    """

    def deliver(self, message: Mapping[str, Any]) -> bool:
        """Keep ``message`` (a dict with a ``message_id``, JSON-able); False if
        its id was delivered before."""
        message_id = message.get("message_id")
        if not isinstance(message_id, str) or not message_id:
            raise ValueError(f"a message needs a string message_id, got {message_id!r}")
        run_id = message.get("run_id")
        cur = self._db().execute(
            "INSERT OR IGNORE INTO inbox (message_id, run_id, body) VALUES (?, ?, ?)",
            (message_id, None if run_id is None else str(run_id), json.dumps(dict(message))),
        )
        return cur.rowcount == 1

    def seen(self, message_id: str) -> bool:
        """Whether ``message_id`` was delivered."""
        q = "SELECT 1 FROM inbox WHERE message_id = ?"
        return self._db().execute(q, (message_id,)).fetchone() is not None

    def messages(self, run_id: str | None = None) -> list[dict[str, Any]]:
        """The messages kept (first delivery of each id), in arrival order;
        only ``run_id``'s if given."""
        if run_id is None:
            rows = self._db().execute("SELECT body FROM inbox ORDER BY seq")
        else:
            q = "SELECT body FROM inbox WHERE run_id = ? ORDER BY seq"
            rows = self._db().execute(q, (run_id,))
        return [json.loads(body) for (body,) in rows]
