"""Crash points inside LangGraph's ``PostgresSaver`` writes (workers only).

LangGraph declares no crash points, but its Postgres checkpointer writes
through one narrow door: ``put`` (a checkpoint: its blobs, then its row) and
``put_writes`` (a task's writes) each run their statements in one psycopg
pipeline on an autocommit connection -- one implicit transaction, committed
by the pipeline's closing Sync. A worker of this adapter runs a subclass of
``PostgresSaver`` that passes a named site

* before each statement of a write after its first (``checkpoint_put_stmt_2``:
  the blobs were sent and executed, the checkpoint row not yet), and
* after the last statement, before the Sync (``checkpoint_put_commit``,
  ``checkpoint_writes_commit``): the transaction's commit is the next thing
  the connection sends.

Statements in a pipeline are sent as they are issued (psycopg flushes after
each), so a worker paused at a site holds a connection whose server has the
transaction open. Nothing else of LangGraph changes: the subclass calls
``PostgresSaver``'s own ``put`` and ``put_writes``.

At an armed site a worker appends one JSON line to the environment's crash
log -- its pid, the site, the hit number, the action and the two ends of the
TCP connection it writes on (the socket itself says so: no guess from
``/proc``) -- then stops (SIGSTOP) or kills itself (SIGKILL). With tracing on,
every hit is appended with the action ``trace`` (the harness's site profile).
The counting, the log and the signal are the kit's
(:class:`harness.adapters.CrashPoints`); this module adds the sites.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Iterator
from typing import Any

from .._crashpoints import CrashPoints as KitCrashPoints
from .._crashpoints import read_crash_log

#: The crash log's lines, in order (the environment reads them).
read_log = read_crash_log

#: Every crash point a worker on ``PostgresSaver`` passes, with where it is.
SITES: dict[str, str] = {
    "checkpoint_put_stmt_2": (
        "PostgresSaver.put, between its two statements: the checkpoint's blobs are "
        "written (uncommitted), its row not yet sent"
    ),
    "checkpoint_put_commit": (
        "PostgresSaver.put, after its last statement, before the pipeline's Sync "
        "that commits the checkpoint"
    ),
    "checkpoint_writes_commit": (
        "PostgresSaver.put_writes, after a task's writes were sent, before the "
        "pipeline's Sync that commits them"
    ),
}


def tcp_ends(conn: Any) -> list[Any] | None:
    """``[local_host, local_port, remote_host, remote_port]`` of the psycopg
    connection ``conn``'s socket, or None (a Unix socket, a closed one)."""
    try:
        fd = os.dup(conn.pgconn.socket)
    except Exception:
        return None
    sock = socket.socket(fileno=fd)  # family and type read from the fd
    try:
        if sock.family not in (socket.AF_INET, socket.AF_INET6):
            return None
        local, remote = sock.getsockname(), sock.getpeername()
    except OSError:
        return None
    finally:
        sock.close()  # the duplicate only
    return [local[0], int(local[1]), remote[0], int(remote[1])]


class CrashPoints:
    """One worker's crash points: the kit's (:class:`harness.adapters.CrashPoints`:
    hit counts, the armed site, the log), each hit naming the TCP connection
    the write is on."""

    def __init__(self, log: str, crash: dict[str, Any] | None, trace: bool) -> None:
        self._points = KitCrashPoints(log, crash, trace=trace, sites=SITES)

    def hit(self, site: str, conn: Any) -> None:
        self._points.hit(site, details=lambda: {"tcp": tcp_ends(conn)})


class _Statements:
    """A cursor that passes ``<site>_stmt_<k>`` before each statement after its first."""

    def __init__(self, cur: Any, site: str, points: CrashPoints) -> None:
        self._cur, self._site, self._points, self._n = cur, site, points, 0

    def _before(self) -> None:
        self._n += 1
        name = f"{self._site}_stmt_{self._n}"
        if self._n >= 2 and name in SITES:
            self._points.hit(name, self._cur.connection)

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._before()
        return self._cur.execute(*args, **kwargs)

    def executemany(self, *args: Any, **kwargs: Any) -> Any:
        self._before()
        return self._cur.executemany(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cur, name)


def pointed_saver(conn: Any, points: CrashPoints) -> Any:
    """A ``PostgresSaver`` on ``conn`` that passes :data:`SITES` in its writes."""
    from langgraph.checkpoint.postgres import PostgresSaver

    writing = threading.local()  # put_writes may run on LangGraph's background threads

    class PointedPostgresSaver(PostgresSaver):
        def put(self, *args: Any, **kwargs: Any) -> Any:
            writing.site = "checkpoint_put"
            try:
                return super().put(*args, **kwargs)
            finally:
                writing.site = None

        def put_writes(self, *args: Any, **kwargs: Any) -> None:
            writing.site = "checkpoint_writes"
            try:
                super().put_writes(*args, **kwargs)
            finally:
                writing.site = None

        @contextlib.contextmanager
        def _cursor(self, *, pipeline: bool = False) -> Iterator[Any]:
            site = getattr(writing, "site", None) if pipeline else None
            with super()._cursor(pipeline=pipeline) as cur:
                if site is None:
                    yield cur
                    return
                yield _Statements(cur, site, points)
                # Still inside the pipeline: its Sync (the commit) is not sent.
                points.hit(f"{site}_commit", cur.connection)

    return PointedPostgresSaver(conn)
