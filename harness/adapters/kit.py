"""The adapter kit: the parts every adapter writes, written once.

An adapter is mostly a mapping from a runtime to the contract. What is left
is the same in every adapter, and easy to get subtly wrong; this module holds
it, so that an adapter keeps only the mapping:

- :class:`WorkerSet`: spawn workers from a shared fork server, keep them,
  kill and reap what is left on close; with ``services``, each worker
  reaches its stores through proxies of its own on the network faults'
  Toxiproxy backend (the contract's ``route_worker``);
- :class:`ConstantClock`, :class:`FileClock`: a virtual time workers read,
  constant (no ``clock`` capability) or in a file the harness advances
  (``advance_clock``);
- :class:`RunRegistry`: the runs, their status and a transitions log with a
  cursor, so that ``Observation.transitions`` gets each transition once,
  chained and versioned;
- :func:`transitions_from_sequence`: a legal-transition table for a runtime
  without a state machine of its own;
- :class:`IdlePolicy`, :func:`work_until_idle`: when a worker of a runtime
  that recovers in the background may exit (quiet for N polls in a row,
  and no run with a task pending, by an adapter's ``busy`` predicate);
- :func:`signed_decision`: the approval message ``approval_message()``
  returns, signed by the world's approver, with each refused variant made
  as the harness asks (forged, wrong role on either side of the expected
  one: :func:`wrong_roles`, wrong parameters);
- :class:`UnsyncedSQLite`: a ``sqlite3`` connection for a runtime's own
  SQLite files that commits without a disk flush (safe against the process
  kills the harness makes);
- :class:`DedupInbox`: inbound messages by id, durable across worker
  processes, so ``deliver()`` can say False for a duplicate the runtime
  would drop silently;
- :func:`owned_folder`, :func:`spawn_owned`: a folder and processes (a
  runtime's server) owned like the harness's own, so that a SIGKILL of the
  harness leaves nothing the next run does not sweep;
- :class:`AsyncBridge`, :func:`run_async`: an asyncio runtime's client
  called from the synchronous contract, on one background event loop per
  process (a forked worker gets a fresh one);
- :class:`CrashPoints`, :func:`crash_point_trace`, :func:`read_crash_log`
  (from :mod:`harness.adapters._crashpoints`, light enough for workers):
  a worker's crash points -- hits counted per site, a kill or a stop at the
  ``CrashSpec``'s nth, every hit traced for ``crash_point_trace()``.

Everything durable is a file in the environment's workdir (SQLite for the
registry and the inbox, a text file for the clock), so a worker process
opens the same object by path, and a SIGKILL leaves either the old state or
the new one. SQLite connections are opened per process (never inherited
across a fork). See ``docs/adapters.md`` ("The kit").
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import math
import os
import re
import signal
import sqlite3
import subprocess
import threading
import time
import weakref
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from .._janitor import kill_recorded, record_process, remove_scratch, scratch_dir
from ..procs import Exit, SpawnerLost
from ..procs._wire import die_with_parent, prctl
from ..world import ApprovalAuthority
from ._contract import Observation, RunView, release_routes, route_worker
from ._crashpoints import CrashPoints, crash_point_trace, read_crash_log
from ._workers import ForkServerWorker, shared_fork_server

__all__ = [
    "EPOCH",
    "GAVE_UP",
    "WRONG_PARAMS",
    "AsyncBridge",
    "ConstantClock",
    "CrashPoints",
    "DedupInbox",
    "FileClock",
    "IdlePolicy",
    "OwnedFolder",
    "RunRecord",
    "RunRegistry",
    "UnsyncedSQLite",
    "WorkerSet",
    "crash_point_trace",
    "other_tenant",
    "owned_folder",
    "read_crash_log",
    "run_async",
    "signed_decision",
    "spawn_owned",
    "transitions_from_sequence",
    "work_until_idle",
    "wrong_roles",
]

#: The constant time of a runtime without a clock (keeps histories reproducible).
EPOCH = 1_700_000_000.0

#: The exit code of :func:`work_until_idle` when the runtime never went quiet.
GAVE_UP = 3

T = TypeVar("T")


# -- workers -----------------------------------------------------------------


class WorkerSet:
    """An environment's worker processes.

    :meth:`spawn` forks each worker from :func:`shared_fork_server` with
    ``preload`` (modules the fork server imports once, so a heavy framework
    is not imported per worker), with stdout and stderr appended to
    :attr:`log` (``workers.log`` in the workdir). Every handle is kept;
    :meth:`close` kills (SIGKILL) and reaps each one still running or
    stopped, so no worker outlives its environment.

    A worker's ``env`` is applied after the fork, long after the server
    imported the framework: one that reads its settings at import (Prefect
    does) never sees it. ``configure`` names the hooks
    (``"module:function"``, no arguments) each worker calls after its env
    is set and before its target -- the framework's own "read the settings
    again" -- so the app's code needs no such call.

    **Routing** (the ``network_faults`` capability): given ``environment``
    (the environment whose workers these are), :meth:`spawn` with
    ``services`` (the stores the worker connects to, name -> URL, as the
    adapter's ``network_services()`` names them) asks the harness for the
    worker's own URLs (the contract's ``route_worker``) and starts it with
    them: on the Toxiproxy backend each store is reached through a proxy of
    that worker's own -- every connection it opens, its pool's new ones
    too -- so a network fault reaches it and no other worker; else nothing
    changes. :meth:`close` hands the proxies back (``release_routes``)
    once the workers are gone. The adapter says it routes with
    ``routes_workers = True``.
    """

    def __init__(
        self,
        workdir: str | os.PathLike[str],
        preload: Sequence[str],
        *,
        spares: int = 2,
        configure: Sequence[str] = (),
        environment: object | None = None,
    ) -> None:
        self.preload = tuple(preload)
        self.spares = spares
        #: the hooks each worker calls once its env is set (see above)
        self.configure = tuple(configure)
        #: whose workers these are: the scope their routes are asked for in
        #: (the harness finds a worker's proxies by its environment and id)
        self.environment = environment
        #: where every worker's stdout and stderr go (appended)
        self.log = Path(workdir) / "workers.log"
        #: every worker spawned, in order
        self.workers: list[ForkServerWorker] = []

    def spawn(
        self,
        worker_id: str,
        target: str,
        args: Mapping[str, Any],
        *,
        env: Mapping[str, str] | None = None,
        services: Mapping[str, str] | None = None,
    ) -> ForkServerWorker:
        """Start ``target(args)`` (``"package.module:function"``, JSON-able
        ``args``) in a forked worker and return its handle. Raises what
        :meth:`harness.procs.ForkServer.spawn` raises (``TargetError`` for a
        target that cannot be imported).

        ``services`` (name -> URL): route the worker (see the class): each
        string in ``args`` (at any depth) and each value of ``env`` equal to
        one of these URLs is replaced by the worker's own (:meth:`route`); a
        URL embedded in a longer string is not. Needs ``environment``."""
        if services:
            routed = self.route(worker_id, services)
            swap = {url: routed[name] for name, url in services.items() if routed[name] != url}
            if swap:
                args = _swapped(args, swap)
                env = None if env is None else {k: swap.get(v, v) for k, v in env.items()}
        server = shared_fork_server(self.preload, spares=self.spares)
        proc = server.spawn(target, args=args, env=env, log=self.log, configure=self.configure)
        worker = ForkServerWorker(worker_id, proc)
        self.workers.append(worker)
        return worker

    def route(self, worker_id: str, services: Mapping[str, str]) -> dict[str, str]:
        """The URLs worker ``worker_id`` is to use for ``services`` (name ->
        URL): through proxies of its own on the Toxiproxy backend, else the
        same (:func:`harness.adapters.route_worker` for :attr:`environment`);
        handed back at :meth:`close`. For an adapter that passes them to its
        worker its own way; :meth:`spawn` with ``services`` calls it."""
        if self.environment is None:
            raise ValueError(
                "WorkerSet(environment=...) is needed to route workers: pass the environment "
                "whose workers these are (the harness finds a worker's proxies by it)"
            )
        return route_worker(self.environment, worker_id, services)

    def alive(self) -> list[ForkServerWorker]:
        """The workers that have not ended (running or stopped), as of now."""
        return [w for w in self.workers if _alive(w)]

    def close(self, timeout: float = 10.0) -> None:
        """SIGKILL every worker still running or stopped, then wait for each
        to end (``timeout`` seconds each; ``WorkerTimeout`` past it);
        idempotent."""
        doomed = self.alive()
        for worker in doomed:
            worker.proc.kill()  # a stopped process dies of SIGKILL too
        for worker in doomed:
            with contextlib.suppress(SpawnerLost):  # its server died: so did it
                worker.proc.wait(timeout)
        if self.environment is not None:
            release_routes(self.environment)  # no worker is left to use them


def _swapped(value: Any, swap: Mapping[str, str]) -> Any:
    """``value`` (JSON-able) with each string equal to a key of ``swap`` replaced."""
    if isinstance(value, str):
        return swap.get(value, value)
    if isinstance(value, Mapping):
        return {k: _swapped(v, swap) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_swapped(v, swap) for v in value]
    return value


def _alive(worker: ForkServerWorker) -> bool:
    try:
        return not isinstance(worker.proc.poll(), Exit)
    except SpawnerLost:
        return False  # the fork server died, and its workers with it


# -- clocks ------------------------------------------------------------------


class ConstantClock:
    """A time that never moves: for runtimes without the ``clock`` capability
    (the harness never advances it)."""

    def __init__(self, at: float = EPOCH) -> None:
        self.at = float(at)

    def now(self) -> float:
        """The constant time."""
        return self.at


class FileClock:
    """A virtual time in a small file, shared by the harness and workers.

    The environment creates it with ``start`` and forwards
    ``advance_clock(seconds)`` to :meth:`advance`; a worker opens it by
    :attr:`path` (without ``start``) and calls :meth:`now`, which reads the
    file each time. Writes replace the file atomically: a reader never sees
    a torn time.
    """

    def __init__(self, path: str | os.PathLike[str], start: float | None = None) -> None:
        self.path = Path(path)
        if start is not None:
            self.set(start)

    def now(self) -> float:
        """The time in the file (``OSError``/``ValueError`` if none was set)."""
        return float(self.path.read_text(encoding="utf-8"))

    def set(self, value: float) -> None:
        """Set the time to ``value`` (a finite number)."""
        if not math.isfinite(value):
            raise ValueError(f"a clock time must be finite, got {value!r}")
        tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
        tmp.write_text(repr(float(value)), encoding="utf-8")
        os.replace(tmp, self.path)

    def advance(self, seconds: float) -> None:
        """Move the time forward by ``seconds`` (>= 0: virtual time never goes back)."""
        if not seconds >= 0:
            raise ValueError(f"the clock only moves forward, got {seconds!r} seconds")
        self.set(self.now() + seconds)


# -- SQLite files shared by processes ----------------------------------------


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


# -- runs and transitions ----------------------------------------------------


@dataclass(frozen=True)
class RunRecord:
    """A run as the registry holds it: its last recorded status and version."""

    run_id: str
    tenant: str
    status: str
    version: int
    data: dict[str, Any]


class RunRegistry(_Shared):
    """The runs of one environment and every transition between their
    statuses, in a SQLite file (any process may open it by path).

    Transitions come in two ways: recorded as they happen (:meth:`record`,
    from a worker or the adapter), or derived from statuses the adapter
    observes (:meth:`observed`: a transition when the status changed since
    the last one). Either way the registry numbers them: each run's first
    transition comes from ``None`` at version 1, and each next one comes from
    the previous ``to`` with the next version, so ``legal_transitions`` judges
    the edges against your declared table. A runtime that keeps versions of
    its own passes them (``state_version=``, ``from_=``) and lets the checker
    see its stale writes and forks.

    :meth:`new_transitions` is the cursor: the transitions recorded since it
    was last called in this object, as ``Observation.transitions`` wants them.
    Derived transitions can only see what was observed: a status a run passed
    through between two observations is skipped, so declare a table that
    allows skipping forward (:func:`transitions_from_sequence` does).
    """

    _SCHEMA = """
        CREATE TABLE IF NOT EXISTS runs (
            run_id TEXT PRIMARY KEY, tenant TEXT NOT NULL, status TEXT NOT NULL,
            version INTEGER NOT NULL, data TEXT NOT NULL);
        CREATE TABLE IF NOT EXISTS transitions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL);
    """

    def __init__(
        self, path: str | os.PathLike[str], *, clock: Callable[[], float] | None = None
    ) -> None:
        super().__init__(path)
        #: the time each transition is stamped with (``at``)
        self.clock = clock or ConstantClock().now
        self._cursor = 0

    def add(
        self,
        run_id: str,
        tenant: str,
        status: str,
        *,
        data: Mapping[str, Any] | None = None,
        actor: str = "harness",
        action: str = "submit",
    ) -> dict[str, Any]:
        """Register a run in ``status`` (its creation transition, from None);
        ``data`` is whatever the adapter keeps with it (JSON-able). Raises
        ``ValueError`` if ``run_id`` is registered already."""
        with self._write() as db:
            if db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise ValueError(f"run {run_id!r} is registered already")
            db.execute(
                "INSERT INTO runs VALUES (?, ?, ?, 0, ?)",
                (run_id, tenant, status, json.dumps(dict(data or {}))),
            )
            return self._append(db, run_id, tenant, None, status, 1, actor, action, None)

    def record(
        self,
        run_id: str,
        to: str,
        *,
        actor: str,
        action: str,
        detail: str | None = None,
        from_: str | None = None,
        state_version: int | None = None,
        data: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record that ``run_id`` went to status ``to`` and return the
        transition. ``from_`` and ``state_version`` default to the last
        recorded status and the next version; ``data`` (if given) replaces the
        run's data in the same transaction. Raises ``KeyError`` for a run
        never added."""
        with self._write() as db:
            row = db.execute(
                "SELECT tenant, status, version FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                raise KeyError(f"run {run_id!r} was never added to the registry")
            tenant, status, version = row
            src = status if from_ is None else from_
            version = version + 1 if state_version is None else state_version
            if data is not None:
                db.execute(
                    "UPDATE runs SET data = ? WHERE run_id = ?", (json.dumps(dict(data)), run_id)
                )
            return self._append(db, run_id, tenant, src, to, version, actor, action, detail)

    def observed(
        self,
        run_id: str,
        tenant: str,
        status: str,
        *,
        actor: str = "observer",
        action: str = "observed",
    ) -> dict[str, Any] | None:
        """The adapter saw ``run_id`` in ``status``: add the run if it is new,
        record a transition if the status changed; the transition, or None."""
        with self._write() as db:
            row = db.execute(
                "SELECT status, version FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            if row is None:
                db.execute("INSERT INTO runs VALUES (?, ?, ?, 0, '{}')", (run_id, tenant, status))
                return self._append(db, run_id, tenant, None, status, 1, actor, action, None)
            if row[0] == status:
                return None
            return self._append(db, run_id, tenant, row[0], status, row[1] + 1, actor, action, None)

    def observation(self, runs: Iterable[RunView], **more: Any) -> Observation:
        """An :class:`Observation` of ``runs`` whose transitions are derived
        from their ``raw_status`` (:meth:`observed`, actor ``observer``) and
        handed out once (:meth:`new_transitions`); ``more`` fills its other
        fields (``approvals``, ``contexts``, ``operations``)."""
        views = tuple(runs)
        for view in views:
            self.observed(view.run_id, view.tenant, view.raw_status)
        return Observation(runs=views, transitions=self.new_transitions(), **more)

    def get(self, run_id: str) -> RunRecord | None:
        """The run as registered, or None."""
        rows = self._select("WHERE run_id = ?", (run_id,))
        return rows[0] if rows else None

    def runs(self) -> list[RunRecord]:
        """Every run, in the order they were added."""
        return self._select("ORDER BY rowid", ())

    def new_transitions(self) -> tuple[dict[str, Any], ...]:
        """The transitions recorded since the last call (on this object),
        oldest first: each is handed out once."""
        rows = (
            self._db()
            .execute(
                "SELECT seq, body FROM transitions WHERE seq > ? ORDER BY seq", (self._cursor,)
            )
            .fetchall()
        )
        if rows:
            self._cursor = rows[-1][0]
        return tuple(json.loads(body) for _, body in rows)

    def _select(self, where: str, params: tuple[Any, ...]) -> list[RunRecord]:
        rows = self._db().execute(
            f"SELECT run_id, tenant, status, version, data FROM runs {where}", params
        )
        return [RunRecord(r, t, s, v, json.loads(d)) for r, t, s, v, d in rows]

    def _write(self) -> _Transaction:
        return _Transaction(self._db())

    def _append(
        self,
        db: sqlite3.Connection,
        run_id: str,
        tenant: str,
        src: str | None,
        dst: str,
        version: int,
        actor: str,
        action: str,
        detail: str | None,
    ) -> dict[str, Any]:
        t = {
            "run_id": run_id,
            "tenant": tenant,
            "from": src,
            "to": dst,
            "state_version": version,
            "actor": actor,
            "action": action,
            "detail": detail,
            "at": self.clock(),
        }
        db.execute(
            "UPDATE runs SET status = ?, version = ? WHERE run_id = ?", (dst, version, run_id)
        )
        db.execute("INSERT INTO transitions (body) VALUES (?)", (json.dumps(t),))
        return t


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on an exception): a
    read-then-write no other process can interleave."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, et: object, ev: object, tb: object) -> None:
        self.db.execute("COMMIT" if et is None else "ROLLBACK")


def transitions_from_sequence(
    sequence: Sequence[str],
    *,
    terminal: Iterable[str] = (),
    skip: bool = True,
    extra: Mapping[str, Iterable[str]] | None = None,
) -> dict[str, list[str]]:
    """A legal-transition table (``Declarations.transitions``) for a runtime
    whose runs only move forward through ``sequence``.

    Each status may go to the next one, or with ``skip`` (the default) to any
    later one: a table for transitions derived from observation, which can
    miss a status passed through between two looks. Each status of
    ``terminal`` (``failed``, ``cancelled``) is reachable from every
    non-final status of ``sequence`` and has no successor; the last status of
    ``sequence`` has none either. ``extra`` adds edges (a loop such as
    ``{"waiting": ["running"]}``). Going back is never legal: a run seen
    ``completed`` and then ``running`` lost a write.
    """
    order = list(sequence)
    ends = [s for s in terminal if s not in order]
    if len(set(order)) != len(order) or not order:
        raise ValueError(f"sequence must name distinct statuses, got {order!r}")
    table: dict[str, list[str]] = {}
    for i, status in enumerate(order):
        later = order[i + 1 :] if skip else order[i + 1 : i + 2]
        table[status] = [*later, *ends] if later else []
    for status in ends:
        table[status] = []
    for status, successors in (extra or {}).items():
        table.setdefault(status, [])
        table[status] += [s for s in successors if s not in table[status]]
    return table


# -- idling --------------------------------------------------------------------


@dataclass(frozen=True)
class IdlePolicy:
    """When a worker whose runtime works in the background may exit.

    The contract: the worker polls a *probe* (any comparable snapshot of the
    runtime's progress: statuses, versions, a row count) every ``interval``
    seconds. A poll is *quiet* when its snapshot equals the one before it
    and, if the adapter gives a ``busy`` predicate, ``busy(snapshot)`` is
    False: no run of this worker's deployment has a task pending that the
    runtime will hand out by itself (an activity in flight or due for a
    retry, a task queued, a timer due within seconds) -- what the snapshot
    alone cannot show, since nothing changes while a retry timer runs. The
    runtime is idle after ``quiet`` quiet polls in a row. A run the runtime
    fails again and again (``RunState.RETRYING``) is no pending task: its
    worker may exit, and the harness reports the run.

    If it is not idle within ``give_up`` seconds, the worker stops waiting
    (:data:`GAVE_UP`, a failed worker). Keep ``give_up``, plus the time a
    worker takes to start, under the run's worker timeout (``--worker-timeout``
    or the adapter's ``worker_timeout``, default 120 s), or the harness
    kills the worker as stuck first. Real time, on purpose: it measures the
    runtime's own background threads and timers, not the virtual clock.
    """

    quiet: int = 3
    interval: float = 0.05
    give_up: float = 60.0

    def __post_init__(self) -> None:
        if self.quiet < 1 or not self.interval > 0 or not self.give_up > 0:
            raise ValueError(f"IdlePolicy needs quiet >= 1, interval > 0, give_up > 0: {self}")

    def wait(self, probe: Callable[[], T], busy: Callable[[T], bool] | None = None) -> bool:
        """Poll ``probe`` until the runtime is idle (True) or ``give_up``
        seconds have passed (False); ``busy`` (optional) is asked about each
        poll's snapshot. An exception from either propagates."""
        deadline = time.monotonic() + self.give_up
        last, calm = probe(), 0
        while calm < self.quiet:
            if time.monotonic() >= deadline:
                return False
            time.sleep(self.interval)
            now = probe()
            quiet = now == last and not (busy is not None and busy(now))
            calm = calm + 1 if quiet else 0
            last = now
        return True


def work_until_idle(
    probe: Callable[[], T],
    policy: IdlePolicy | None = None,
    *,
    busy: Callable[[T], bool] | None = None,
) -> int:
    """A worker's last line: wait until the runtime is idle -- ``probe``'s
    snapshot unchanged for ``policy.quiet`` polls in a row, ``busy(snapshot)``
    False at each (see :class:`IdlePolicy`) -- then return the worker's exit
    code: 0 when idle, :data:`GAVE_UP` when it never went quiet (the harness
    records a worker that failed, and the run's state says what it was
    doing). For example, a worker of a runtime that retries activities on a
    server timer::

        views = lambda: bridge.run(describe_runs(client))
        return work_until_idle(views, IdlePolicy(quiet=3, interval=0.1, give_up=60),
                               busy=lambda vs: any(v.activity_pending for v in vs))
    """
    return 0 if (policy or IdlePolicy()).wait(probe, busy) else GAVE_UP


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


# -- approval messages ------------------------------------------------------------

#: appended to the expected role to name one that sorts above it (a deputy,
#: who does not hold the role)
_ABOVE = "-deputy"


def wrong_roles(role: str) -> tuple[str, str]:
    """Two roles no approver of ``role`` holds, one sorting below it and one
    above: what ``wrong_role`` and ``wrong_role_above`` decisions claim.

    Derived from ``role``, so they work whatever a runtime names its roles:
    below is ``role`` without its last character (a proper prefix; for a
    one-character role, the character before it), above is ``role`` with
    ``-deputy`` appended (a proper extension). A runtime that compares
    roles by order, or by prefix or containment, instead of equality takes
    one of the two; a single wrong role would show only one side.
    """
    if role <= "\x00":
        raise ValueError(f"no role sorts below the expected role {role!r}")
    # not the empty prefix of a one-character role: a message without a
    # role reads as malformed, not as signed by the wrong role
    below = role[:-1] if len(role) > 1 else chr(ord(role) - 1)
    return below, role + _ABOVE


#: the parameters hash a ``wrong_params`` decision carries (no request hashes to it)
WRONG_PARAMS = "0" * 64


def signed_decision(
    authority: ApprovalAuthority,
    variant: str,
    *,
    tenant: str,
    run_id: str,
    approval_id: str,
    decision: str,
    role: str,
    params_hash: str,
    message_id: str,
    approver: str = "alice",
) -> dict[str, Any]:
    """The decision message for ``approval_message()`` to return: ``{message_id,
    tenant, run_id, kind: "approval_decision", payload, signature}``, signed
    by ``authority`` (an :class:`~harness.world.ApprovalAuthority` holding
    the tenants' keys, the same your runtime verifies with) for the approval
    a run waits on.

    ``variant`` is what the harness asks for: ``valid`` and ``duplicate`` (a
    genuine decision; the harness sends the copy), ``forged`` (signed with a
    wrong key: it must not verify), ``wrong_role`` and ``wrong_role_above``
    (signed, by a role no approver holds, sorting below and above ``role``:
    :func:`wrong_roles`; the harness sends both for a ``wrong_role`` step),
    ``wrong_params`` (signed, for other parameters: :data:`WRONG_PARAMS`),
    ``cross_tenant`` (genuinely signed, with the right role and parameters,
    by another tenant's approver with that tenant's own key:
    :func:`other_tenant`). Your runtime must act only on a valid one;
    ``approval_integrity`` holds what it records against the genuine
    decisions."""
    if variant not in (
        "valid",
        "duplicate",
        "forged",
        "wrong_role",
        "wrong_role_above",
        "wrong_params",
        "cross_tenant",
    ):
        raise ValueError(f"unknown decision variant {variant!r}")
    fields: dict[str, Any] = {
        "tenant": other_tenant(authority, tenant) if variant == "cross_tenant" else tenant,
        "approval_id": approval_id,
        "run_id": run_id,
        "decision": decision,
        "approver": approver,
        "role": _claimed_role(variant, role),
        "params_hash": WRONG_PARAMS if variant == "wrong_params" else params_hash,
        "message_id": message_id,
    }
    if variant == "forged":
        return authority.forge(**fields)
    return authority.decision(**fields)


def _claimed_role(variant: str, role: str) -> str:
    if variant == "wrong_role":
        return wrong_roles(role)[0]
    if variant == "wrong_role_above":
        return wrong_roles(role)[1]
    return role


def other_tenant(authority: ApprovalAuthority, tenant: str) -> str:
    """A tenant other than ``tenant`` that ``authority`` signs for: who sends
    a ``cross_tenant`` message. Raises ValueError if it knows no other."""
    others = [t for t in authority.tenants if t != tenant]
    if not others:
        raise ValueError(
            f"the approvals authority knows no tenant but {tenant!r}: give it a second "
            "tenant's key to send cross-tenant messages"
        )
    return others[0]


# -- owned folders and processes ----------------------------------------------------

_KIND = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: prctl's PR_GET_DUMPABLE: a harmless call that loads libc before a fork
_PR_GET_DUMPABLE = 3


class OwnedFolder:
    """A scratch folder this process owns, swept like the harness's own.

    Made by :func:`owned_folder`: ``harness-<kind>-*`` in the temp folder,
    holding a lock file for as long as this process lives. Processes started
    into it with :func:`spawn_owned` are recorded there. :meth:`close` stops
    them and removes the folder; if this process dies first (SIGKILL, the
    OOM killer), the next harness run's janitor finds the lock free, kills
    the recorded processes still alive (by pid and start time, so a reused
    pid is never hit) with their process groups, and removes the folder.
    """

    def __init__(self, path: Path) -> None:
        #: the folder: put the runtime's files here (a server's database)
        self.path = path
        #: every process started into it, in order
        self.processes: list[subprocess.Popen[bytes]] = []

    def close(self, grace: float = 5.0) -> None:
        """SIGTERM each process still running (its whole process group),
        SIGKILL what is left after ``grace`` seconds, reap, and remove the
        folder; idempotent."""
        live = [p for p in self.processes if p.poll() is None]
        for proc in live:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in live:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.0, deadline - time.monotonic()))
        for proc in self.processes:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)  # its group's stragglers too
            proc.wait()
        kill_recorded(self.path)
        remove_scratch(self.path)

    def __enter__(self) -> OwnedFolder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def owned_folder(kind: str = "adapter") -> OwnedFolder:
    """A fresh folder ``harness-<kind>-*`` in the temp folder, owned by this
    process until :meth:`OwnedFolder.close` or its death, then swept by the
    next harness run (``kind``: lowercase letters, digits, ``-``, ``_``)."""
    if not _KIND.match(kind):
        raise ValueError(f"a folder kind is 1-32 of [a-z0-9_-], got {kind!r}")
    return OwnedFolder(scratch_dir(kind))


def spawn_owned(
    argv: Sequence[str],
    *,
    folder: OwnedFolder,
    log: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start ``argv`` as a process ``folder`` owns (a runtime's server).

    It runs in a session and process group of its own, with stdin from
    ``/dev/null`` and stdout and stderr appended to ``log`` (default:
    ``<folder>/<program>.log``). It is recorded in the folder (pid and start
    time): :meth:`OwnedFolder.close`, or the next run's janitor if this
    process was killed, kills it with its group. Called from the main
    thread, it also gets a parent-death signal (SIGKILL when this process
    dies, however it dies); Linux ties that signal to the calling *thread*,
    so from another thread it is left out (the thread's end would kill the
    server) and the janitor's sweep is the only backstop. ``env`` replaces
    the environment (default: this process's).
    """
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("spawn_owned needs a program to run")
    log_path = Path(log) if log is not None else folder.path / f"{Path(argv[0]).name}.log"
    parent = os.getpid()
    main = threading.current_thread() is threading.main_thread()
    if main:
        prctl(_PR_GET_DUMPABLE, 0)  # loads libc now: the child must not dlopen after fork

    def in_child() -> None:  # between fork and exec: a prctl and a getppid
        die_with_parent(parent)

    with open(log_path, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=True,
            preexec_fn=in_child if main else None,
        )
    folder.processes.append(proc)
    with contextlib.suppress(ProcessLookupError):  # it already ended: nothing to sweep
        record_process(folder.path, proc.pid, argv)
    return proc


# -- asyncio runtimes --------------------------------------------------------------

#: every bridge of this process, so a forked child can forget their loops
_bridges: weakref.WeakSet[AsyncBridge] = weakref.WeakSet()


class AsyncBridge:
    """An asyncio event loop in a background thread, for an adapter whose
    runtime has an asyncio client (Temporal's, say) behind the contract's
    synchronous methods: ``bridge.run(client.start_workflow(...))``.

    The loop and its thread start at the first :meth:`run` and live until
    :meth:`close` (the loop's tasks are cancelled, the thread joined); a
    later :meth:`run` starts a new one. Fork-safe: a child forked while the
    loop runs (a worker from the fork server, which forks a process holding
    this object) does not inherit a thread, so it forgets the parent's loop
    and starts its own at its first :meth:`run`. What was made on the
    parent's loop -- a connected client, a connection -- belongs to that
    loop: make it again in the child (keep it per ``os.getpid()``).
    """

    def __init__(self, name: str = "harness-async") -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        _bridges.add(self)

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The running loop (started if need be), to schedule callbacks on."""
        with self._lock:
            if self._loop is None:
                self._start()
            assert self._loop is not None
            return self._loop

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.call_soon(ready.set)
            loop.run_forever()

        thread = threading.Thread(target=serve, name=self.name, daemon=True)
        thread.start()
        ready.wait()
        self._loop, self._thread = loop, thread

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and return its result (or raise what it
        raises). Past ``timeout`` seconds the coroutine is cancelled and
        ``TimeoutError`` raised. Never call it from a coroutine on this
        loop (it would wait on itself): that is a ``RuntimeError``."""
        loop = self.loop
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("AsyncBridge.run() called from its own loop: await instead")
        future = asyncio.run_coroutine_threadsafe(coro, loop)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"the coroutine did not finish within {timeout:g} s") from None
        finally:
            future.cancel()  # done: a no-op; else (timeout, interruption) it stops it

    def close(self) -> None:
        """Cancel the loop's tasks, stop the loop, join its thread; idempotent."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def drain() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await loop.shutdown_asyncgens()

        if thread is threading.current_thread():
            raise RuntimeError("AsyncBridge.close() called from its own loop")
        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(drain(), loop).result(10.0)
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()

    def _forget(self) -> None:
        """In a forked child: the parent's loop has no thread here."""
        self._lock = threading.Lock()
        self._loop = self._thread = None


def _after_fork_in_child() -> None:
    for bridge in list(_bridges):
        bridge._forget()


os.register_at_fork(after_in_child=_after_fork_in_child)

_default: AsyncBridge | None = None
_default_lock = threading.Lock()


def run_async(coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
    """:meth:`AsyncBridge.run` on this process's default bridge (one per
    process, started at first use, a daemon thread: nothing to close)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = AsyncBridge("harness-run-async")
        bridge = _default
    return bridge.run(coro, timeout)
