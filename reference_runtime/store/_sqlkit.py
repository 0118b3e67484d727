"""Building blocks of the SQL backends: a transaction handle, shared SQL
fragments, and the pure checks a commit must pass (see :mod:`._sql`).

Every query is written with ``?`` placeholders; :class:`Tx` converts them for
the driver.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel

from .._errors import InputError, LeaseLostError
from .._records import Run
from .._states import ACTIVE, TERMINAL, WAITING
from ._base import Commit

M = TypeVar("M", bound=BaseModel)

#: Versioned DDL: ``(version, name, statements)``, applied in order by ``setup()``.
Migration = tuple[int, str, tuple[str, ...]]


class Cursor(Protocol):
    """The DB-API cursor surface both drivers share."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Tx:
    """One open transaction: run ``?``-style SQL on the backend's cursor."""

    def __init__(self, cursor: Any, placeholder: str) -> None:
        self._cur = cursor
        self._ph = placeholder

    def _sql(self, sql: str) -> str:
        return sql if self._ph == "?" else sql.replace("?", self._ph)

    def run(self, sql: str, *params: Any) -> int:
        """Execute a statement; returns the number of rows it changed."""
        cur: Cursor = self._cur.execute(self._sql(sql), params)
        return cur.rowcount

    def one(self, sql: str, *params: Any) -> Any:
        """The first row of a query, or None."""
        cur: Cursor = self._cur.execute(self._sql(sql), params)
        return cur.fetchone()

    def all(self, sql: str, *params: Any) -> list[Any]:
        """Every row of a query."""
        cur: Cursor = self._cur.execute(self._sql(sql), params)
        return cur.fetchall()

    def many(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        """Execute one statement per parameter row (no-op for no rows)."""
        if rows:
            self._cur.executemany(self._sql(sql), rows)


class OneStatement(Tx):
    """A read in autocommit: one statement, with its own snapshot. A second
    would see another snapshot: refused (take a transaction for that)."""

    def __init__(self, cursor: Any, placeholder: str) -> None:
        super().__init__(cursor, placeholder)
        self._ran = False

    def _sql(self, sql: str) -> str:
        if self._ran:
            raise RuntimeError("a read in autocommit runs one statement: use a snapshot for more")
        self._ran = True
        return super()._sql(sql)


def end_autocommit(conn: Any) -> None:
    """Switch a connection back to transactions before it returns to its
    pool: left in autocommit, every later transaction's statements would
    commit one by one. One that cannot be switched back is closed (its pool
    then discards it); a closed or broken one is left as it is."""
    if conn.closed or conn.broken:
        return
    try:
        conn.autocommit = False
    except Exception:  # the driver's error: the connection is not to be reused
        conn.close()


def marks(n: int) -> str:
    """``?, ?, ?`` for an ``IN`` list of ``n`` values (``n`` >= 1)."""
    return ", ".join("?" * n)


def load_docs(model: type[M], rows: list[Any]) -> list[M]:
    return [model.model_validate_json(r[0]) for r in rows]


_ACTIVE = tuple(sorted(s.value for s in ACTIVE))
_WAITING = tuple(sorted(s.value for s in WAITING))
TERMINAL_VALUES = tuple(sorted(s.value for s in TERMINAL))

# Runnable, as the contract defines it. Kept as one SQL fragment (with its
# parameters) so that runnable(), claim() and a seeded bug all agree on it.
RUNNABLE_SQL = (
    "runs.parked = 0 AND "
    f"((runs.status IN ({marks(len(_ACTIVE))}) AND (runs.wake_at IS NULL OR runs.wake_at <= ?))"
    f" OR (runs.status IN ({marks(len(_WAITING))}) AND (runs.wake_at <= ?"
    " OR EXISTS (SELECT 1 FROM inbox WHERE inbox.run_id = runs.run_id"
    " AND inbox.processed_at IS NULL))))"
)


def runnable_params(now: float) -> tuple[Any, ...]:
    return (*_ACTIVE, now, *_WAITING, now)


RUN_COLS = (
    "run_id, tenant, status, state_version, wake_at, parent_run_id, lease_owner,"
    " lease_expiry, fencing_token, created_at, updated_at, doc, parked"
)
RUN_UPDATE = (
    "UPDATE runs SET status = ?, state_version = ?, wake_at = ?, lease_owner = ?,"
    " lease_expiry = ?, fencing_token = ?, updated_at = ?, doc = ?, parked = ?"
    " WHERE run_id = ?"
)

#: A claim changes the lease fields only: the status, wake and finished
#: indexes are left alone (an UPDATE that sets a column rewrites its index
#: entries, changed or not).
LEASE_UPDATE = (
    "UPDATE runs SET lease_owner = ?, lease_expiry = ?, fencing_token = ?, doc = ? WHERE run_id = ?"
)


def lease_update_params(run: Run) -> tuple[Any, ...]:
    return (run.lease_owner, run.lease_expiry, run.fencing_token, run.model_dump_json(), run.run_id)


def run_row(run: Run) -> tuple[Any, ...]:
    return (
        run.run_id,
        run.tenant,
        run.status.value,
        run.state_version,
        run.wake_at,
        run.parent_run_id,
        run.lease_owner,
        run.lease_expiry,
        run.fencing_token,
        run.created_at,
        run.updated_at,
        run.model_dump_json(),
        _parked(run),
    )


def run_update_params(run: Run) -> tuple[Any, ...]:
    return (
        run.status.value,
        run.state_version,
        run.wake_at,
        run.lease_owner,
        run.lease_expiry,
        run.fencing_token,
        run.updated_at,
        run.model_dump_json(),
        _parked(run),
        run.run_id,
    )


def _parked(run: Run) -> int:
    """A run with an error that has not ended is parked: no worker may claim it
    until an operator clears the error (``Store.unpark``)."""
    return int(run.error is not None and run.status.value not in TERMINAL_VALUES)


def check_lease(run_id: str, stored: Run | None, worker: str, token: int, now: float) -> None:
    """Raise LeaseLostError unless ``worker`` holds the lease with ``token`` at ``now``."""
    if stored is None:
        reason = "the run does not exist in this store"
    elif stored.fencing_token != token:
        reason = (
            f"the run's fencing token is now {stored.fencing_token} "
            f"(held by {stored.lease_owner!r}); another worker claimed it"
        )
    elif stored.lease_owner != worker:
        reason = f"the lease is held by {stored.lease_owner!r}, not by this worker"
    elif stored.lease_expiry is None or stored.lease_expiry < now:
        reason = f"the lease expired at {stored.lease_expiry}, before now ({now})"
    else:
        return
    raise LeaseLostError(run_id, worker, token, reason)


def validate_commit(c: Commit) -> None:
    """Refuse a malformed commit before touching the database (the caller's bug)."""
    problem = None
    if c.run.state_version != c.expected_version + 1:
        problem = (
            f"the new run row has state_version {c.run.state_version}, but a commit read at "
            f"version {c.expected_version} must write version {c.expected_version + 1}"
        )
    elif c.state is not None and c.state.run_id != c.run.run_id:
        problem = f"the working state belongs to run {c.state.run_id!r}"
    if problem:
        raise InputError(f"refused commit to run {c.run.run_id!r}: {problem}; nothing was written")
