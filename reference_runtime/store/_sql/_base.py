"""The base of the SQL store: transactions, locks and schema migrations."""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Sequence
from typing import ClassVar

from ..._errors import InputError, StorageUnavailable
from ..._records import Run
from .._base import Store
from .._sqlkit import Migration, Tx


class SqlBase(Store):
    """What every record family of :class:`SqlStore` builds on: transactions,
    row locks, the locked read of a run row, and schema migrations.

    Subclasses provide :meth:`_write` and :meth:`_read` (transactions with
    rollback on *any* BaseException, including a simulated crash),
    ``placeholder`` and the two lock suffixes.
    """

    #: The driver's placeholder, which :class:`Tx` puts in place of ``?``.
    placeholder: ClassVar[str] = "?"
    #: Appended to the claim query: lock the chosen row, skip rows others hold.
    claim_lock: ClassVar[str] = ""

    def _row_lock(self, of: str = "") -> str:
        """Suffix that locks the rows a write transaction read before changing
        them (``of``: the table aliases to lock). Empty where the transaction
        already holds the database's write lock."""
        return ""

    def _snapshot(self) -> contextlib.AbstractContextManager[Tx]:
        """A read transaction in which several queries see one snapshot."""
        return self._read()

    @abc.abstractmethod
    def _write(self) -> contextlib.AbstractContextManager[Tx]:
        """A read-write transaction that serializes with other writers."""

    @abc.abstractmethod
    def _read(self) -> contextlib.AbstractContextManager[Tx]:
        """A read-only transaction over one consistent snapshot."""

    def _locked_run(self, tx: Tx, run_id: str) -> Run | None:
        row = tx.one(f"SELECT doc FROM runs WHERE run_id = ?{self._row_lock()}", run_id)
        return None if row is None else Run.model_validate_json(row[0])

    def _up_to_date(self, migrations: Sequence[Migration]) -> bool:
        """Whether every migration step is recorded (a plain read; False when
        the bookkeeping table does not exist yet)."""
        try:
            with self._read() as tx:
                done = {r[0] for r in tx.all("SELECT version FROM schema_migrations")}
        except (StorageUnavailable, InputError):
            raise  # the store cannot be reached or opened: no table is not the news
        except Exception:  # no table yet (each driver names this error its own way)
            return False
        return {version for version, _, _ in migrations} <= done

    @staticmethod
    def _migrate(tx: Tx, migrations: Sequence[Migration], *, real: str) -> None:
        """Apply the migration steps not yet recorded, in order, inside ``tx``
        (the caller holds whatever lock serializes concurrent set-ups)."""
        tx.run(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY,"
            f" name TEXT NOT NULL, applied_at {real} NOT NULL)"
        )
        done = {r[0] for r in tx.all("SELECT version FROM schema_migrations")}
        for version, step_name, statements in migrations:
            if version in done:
                continue
            for ddl in statements:
                tx.run(ddl)
            # Wall time on purpose: this is operator metadata, not run state.
            tx.run(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)",
                version,
                step_name,
                time.time(),
            )
