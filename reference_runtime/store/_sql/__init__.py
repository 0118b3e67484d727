"""The SQL half of every relational backend, written once.

:class:`SqlStore` implements the whole :class:`~reference_runtime.store.Store`
contract in portable SQL (the subset SQLite >= 3.35 and PostgreSQL >= 12 share:
``ON CONFLICT``, window functions, recursive CTEs). A backend supplies only
what genuinely differs: how a connection is opened and kept per process, how a
transaction begins (``BEGIN IMMEDIATE`` versus row locks), the placeholder
style, the row-locking suffixes and the DDL.

Each row keeps the full record as JSON in ``doc`` (the source of truth for
round trips) beside the few columns that queries filter on; both are always
written together, in the same statement.

One module per record family, each a mixin over :class:`SqlBase` (``_base``:
transactions, locks, migrations): ``_runs`` (runs, out-of-band writes, inbox,
retention), ``_leases``, ``_checkpoint`` (``commit``) and ``_memory``; the row
writers they share are functions in ``_rows``.
"""

from __future__ import annotations

from ._base import SqlBase
from ._checkpoint import SqlCheckpoint
from ._leases import SqlLeases
from ._memory import SqlMemory
from ._runs import SqlRuns

__all__ = ["SqlBase", "SqlStore"]


class SqlStore(SqlRuns, SqlLeases, SqlCheckpoint, SqlMemory):
    """The store contract over a relational database (see module docstring).

    A backend subclasses it and provides what :class:`SqlBase` leaves open:
    the two transactions, the placeholder and the lock suffixes.
    """
