"""Runs: creating and reading them, out-of-band writes, the inbox and retention."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..._records import (
    Approval,
    ArtifactRef,
    AuditEvent,
    InboxMessage,
    Operation,
    Run,
    WorkingState,
)
from ..._states import RunStatus, check_transition
from .._base import RetentionPolicy, Snapshot
from .._sqlkit import (
    RUN_UPDATE,
    RUNNABLE_SQL,
    TERMINAL_VALUES,
    load_docs,
    marks,
    run_update_params,
    runnable_params,
)
from . import _rows
from ._base import SqlBase


class SqlRuns(SqlBase):
    """Run rows, their working state, and what is read or written by run id."""

    def create_run(self, run: Run, state: WorkingState, audit: AuditEvent) -> None:
        with self._write() as tx:
            _rows.insert_run(tx, run, state)
            _rows.append_audit(tx, (audit,))

    def get_run(self, run_id: str) -> Run | None:
        with self._read() as tx:
            row = tx.one("SELECT doc FROM runs WHERE run_id = ?", run_id)
        return None if row is None else Run.model_validate_json(row[0])

    def list_runs(self, tenant: str | None = None) -> list[Run]:
        where, params = ("", ()) if tenant is None else (" WHERE tenant = ?", (tenant,))
        with self._read() as tx:
            rows = tx.all(f"SELECT doc FROM runs{where} ORDER BY created_at, run_id", *params)
        return load_docs(Run, rows)

    def load(self, run_id: str) -> Snapshot:
        with self._snapshot() as tx:
            row = tx.one("SELECT doc FROM runs WHERE run_id = ?", run_id)
            if row is None:
                raise KeyError(f"no run with id {run_id!r} in this store")
            state = tx.one("SELECT doc FROM working_state WHERE run_id = ?", run_id)
            if state is None:
                raise KeyError(f"run {run_id!r} has no working state (a corrupt store?)")
            ops = tx.all("SELECT doc FROM operations WHERE run_id = ? ORDER BY seq", run_id)
            apps = tx.all("SELECT doc FROM approvals WHERE run_id = ? ORDER BY seq", run_id)
            inbox = tx.all(
                "SELECT doc FROM inbox WHERE run_id = ? AND processed_at IS NULL"
                " ORDER BY received_at, seq",
                run_id,
            )
            arts = tx.all("SELECT doc FROM artifacts WHERE owner = ? ORDER BY seq", run_id)
        return Snapshot(
            run=Run.model_validate_json(row[0]),
            state=WorkingState.model_validate_json(state[0]),
            operations=tuple(load_docs(Operation, ops)),
            approvals=tuple(load_docs(Approval, apps)),
            pending_inbox=tuple(load_docs(InboxMessage, inbox)),
            artifacts=tuple(load_docs(ArtifactRef, arts)),
        )

    def runnable(self, now: float, limit: int = 16) -> list[str]:
        with self._read() as tx:
            rows = tx.all(
                f"SELECT run_id FROM runs WHERE {RUNNABLE_SQL} ORDER BY created_at, run_id LIMIT ?",
                *runnable_params(now),
                limit,
            )
        return [r[0] for r in rows]

    def _write_out_of_band(
        self,
        run_id: str,
        now: float,
        *,
        actor: str,
        action: str,
        detail: Callable[[Run], dict[str, Any]],
        applies: Callable[[Run], bool],
        changes: dict[str, Any],
    ) -> bool:
        """One audited write to a run that no lease guards (the store parking
        it, an operator): ``state_version`` is bumped, so a worker that read
        the run before is refused (StaleWriteError) rather than writing over
        it. False, writing nothing, if ``applies`` says the run is not in a
        state the write is for; ``detail`` reads the audit detail off the
        stored run."""
        with self._write() as tx:
            stored = self._locked_run(tx, run_id)
            if stored is None:
                raise KeyError(f"no run with id {run_id!r} in this store")
            if not applies(stored):
                return False
            run = stored.model_copy(
                update={**changes, "updated_at": now, "state_version": stored.state_version + 1}
            )
            tx.run(RUN_UPDATE, *run_update_params(run))
            event = AuditEvent(
                tenant=run.tenant,
                created_at=now,
                updated_at=now,
                run_id=run_id,
                at=now,
                actor=actor,
                action=action,
                from_status=stored.status,
                to_status=run.status,
                state_version=run.state_version,
                detail=detail(stored),
            )
            _rows.append_audit(tx, (event,))
        return True

    def park(self, run_id: str, reason: str, now: float) -> None:
        """Set ``error`` and audit it; status, payload and lease stay as they are.

        ``state_version`` is bumped: the row changed, and a worker that read
        it before must not silently overwrite the parking with a stale commit.
        """
        self._write_out_of_band(
            run_id,
            now,
            actor="store",
            action="parked",
            detail=lambda _stored: {"reason": reason},
            applies=lambda _run: True,
            changes={"error": reason},
        )

    def unpark(self, run_id: str, now: float, actor: str) -> bool:
        def parked(run: Run) -> bool:
            return run.error is not None and run.status.value not in TERMINAL_VALUES

        return self._write_out_of_band(
            run_id,
            now,
            actor=actor,
            action="unparked",
            detail=lambda stored: {"was": stored.error},
            applies=parked,
            changes={"error": None},
        )

    def cancel(self, run_id: str, now: float, actor: str, reason: str) -> bool:
        def active(run: Run) -> bool:
            if run.status.value in TERMINAL_VALUES:
                return False
            check_transition(run_id, run.status, RunStatus.CANCELLED)
            return True

        # The lease fields stay: a worker may still hold the run. Its next
        # commit carries the version it read, which is now stale.
        return self._write_out_of_band(
            run_id,
            now,
            actor=actor,
            action="cancelled",
            detail=lambda _stored: {"reason": reason},
            applies=active,
            changes={
                "status": RunStatus.CANCELLED,
                "error": f"cancelled by {actor}: {reason}",
                "wake_at": None,
            },
        )

    def deliver(self, message: InboxMessage) -> bool:
        with self._write() as tx:
            if "no-inbox-dedup" in self.bugs:
                # SEEDED BUG no-inbox-dedup: an upsert instead of "insert if
                # new": a redelivered message is stored again as unprocessed.
                tx.run(
                    "INSERT INTO inbox (message_id, run_id, received_at, processed_at, doc)"
                    " VALUES (?, ?, ?, NULL, ?) ON CONFLICT (message_id) DO UPDATE SET"
                    " processed_at = NULL, doc = excluded.doc",
                    message.message_id,
                    message.run_id,
                    message.received_at,
                    message.model_dump_json(),
                )
                return True
            return _rows.insert_inbox(tx, message)

    def audit(self, run_id: str | None = None) -> list[AuditEvent]:
        return load_docs(AuditEvent, self._select_by("audit", "run_id", run_id))

    def operations(self, run_id: str | None = None) -> list[Operation]:
        return load_docs(Operation, self._select_by("operations", "run_id", run_id))

    def artifacts(self, owner: str | None = None) -> list[ArtifactRef]:
        return load_docs(ArtifactRef, self._select_by("artifacts", "owner", owner))

    def _select_by(self, table: str, column: str, value: str | None) -> list[Any]:
        where, params = ("", ()) if value is None else (f" WHERE {column} = ?", (value,))
        with self._read() as tx:
            return tx.all(f"SELECT doc FROM {table}{where} ORDER BY seq", *params)

    def prune(self, now: float, policy: RetentionPolicy) -> int:
        """Compact finished runs whose last update is older than the policy:
        their working state keeps its identity but loses its payload, their
        inbox rows go, and a ``compacted`` audit event records it. Runs
        already compacted are not counted again."""
        cutoff = now - policy.keep_finished_seconds
        with self._write() as tx:
            rows = tx.all(
                "SELECT r.doc, w.doc FROM runs r JOIN working_state w ON w.run_id = r.run_id"
                f" WHERE r.status IN ({marks(len(TERMINAL_VALUES))}) AND r.updated_at < ?"
                " AND w.compacted_at IS NULL ORDER BY r.created_at, r.run_id"
                + self._row_lock("r, w"),
                *TERMINAL_VALUES,
                cutoff,
            )
            for run_doc, state_doc in rows:
                run = Run.model_validate_json(run_doc)
                state = WorkingState.model_validate_json(state_doc)
                empty = state.model_copy(update={"payload": {}, "updated_at": now})
                tx.run(
                    "UPDATE working_state SET doc = ?, updated_at = ?, compacted_at = ?"
                    " WHERE run_id = ?",
                    empty.model_dump_json(),
                    now,
                    now,
                    run.run_id,
                )
                tx.run("DELETE FROM inbox WHERE run_id = ?", run.run_id)
                event = AuditEvent(
                    tenant=run.tenant,
                    created_at=now,
                    updated_at=now,
                    run_id=run.run_id,
                    at=now,
                    actor="retention",
                    action="compacted",
                    state_version=run.state_version,
                    detail={"keep_finished_seconds": policy.keep_finished_seconds},
                )
                _rows.append_audit(tx, (event,))
        return len(rows)
