"""Runs and transitions: the registry, and a legal-transition table."""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._contract import Observation, RunView
from ._clocks import ConstantClock
from ._shared import _Shared


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
