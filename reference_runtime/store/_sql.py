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
"""

from __future__ import annotations

import abc
import contextlib
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from .. import crashpoints
from .._errors import DuplicateRunError, MemoryConflictError, StaleWriteError
from .._records import (
    Approval,
    ArtifactRef,
    AuditEvent,
    InboxMessage,
    MemoryRecord,
    Operation,
    Run,
    WorkingState,
)
from .._states import RunStatus, check_transition
from ._base import Claim, Commit, RetentionPolicy, Snapshot, Store
from ._sqlkit import (
    RUN_COLS,
    RUN_UPDATE,
    RUNNABLE_SQL,
    TERMINAL_VALUES,
    Migration,
    Tx,
    check_lease,
    load_docs,
    marks,
    run_row,
    run_update_params,
    runnable_params,
    validate_commit,
)


class SqlStore(Store):
    """The store contract over a relational database (see module docstring).

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

    # -- runs ------------------------------------------------------------
    def create_run(self, run: Run, state: WorkingState, audit: AuditEvent) -> None:
        with self._write() as tx:
            self._insert_run(tx, run, state)
            self._append_audit(tx, (audit,))

    def _insert_run(self, tx: Tx, run: Run, state: WorkingState) -> None:
        inserted = tx.run(
            f"INSERT INTO runs ({RUN_COLS}) VALUES ({marks(13)}) ON CONFLICT (run_id) DO NOTHING",
            *run_row(run),
        )
        if not inserted:
            # Raising inside the transaction rolls back everything written so
            # far in it (a commit creating children is all-or-nothing).
            raise DuplicateRunError(
                f"run {run.run_id!r} already exists; run ids must be unique. "
                "Load the existing run, or create the new one under another id."
            )
        self._upsert_state(tx, state)

    def _upsert_state(self, tx: Tx, state: WorkingState) -> None:
        tx.run(
            "INSERT INTO working_state (run_id, updated_at, doc) VALUES (?, ?, ?)"
            " ON CONFLICT (run_id) DO UPDATE SET updated_at = excluded.updated_at,"
            " doc = excluded.doc, compacted_at = NULL",
            state.run_id,
            state.updated_at,
            state.model_dump_json(),
        )

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

    # -- leases ----------------------------------------------------------
    def claim(
        self, worker_id: str, now: float, lease_seconds: float, run_id: str | None = None
    ) -> Claim | None:
        only, only_params = ("", ()) if run_id is None else (" AND runs.run_id = ?", (run_id,))
        with self._write() as tx:
            # A lease is free when nobody holds it or it ended strictly before
            # now: commit() accepts lease_expiry == now, so claim must not.
            row = tx.one(
                f"SELECT doc FROM runs WHERE {RUNNABLE_SQL}"
                " AND (runs.lease_owner IS NULL OR runs.lease_expiry IS NULL"
                f" OR runs.lease_expiry < ?){only} ORDER BY runs.created_at, runs.run_id"
                f" LIMIT 1{self.claim_lock}",
                *runnable_params(now),
                now,
                *only_params,
            )
            if row is None:
                return None
            old = Run.model_validate_json(row[0])
            run = old.model_copy(
                update={
                    "lease_owner": worker_id,
                    "lease_expiry": now + lease_seconds,
                    # Tokens only grow, even across release(): a zombie holding
                    # an older token can never match again.
                    "fencing_token": old.fencing_token + 1,
                }
            )
            tx.run(RUN_UPDATE, *run_update_params(run))
        assert run.lease_expiry is not None  # set just above
        return Claim(run, worker_id, run.fencing_token, run.lease_expiry)

    def _up_to_date(self, migrations: Sequence[Migration]) -> bool:
        """Whether every migration step is recorded (a plain read; False when
        the bookkeeping table does not exist yet)."""
        try:
            with self._read() as tx:
                done = {r[0] for r in tx.all("SELECT version FROM schema_migrations")}
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

    def _locked_run(self, tx: Tx, run_id: str) -> Run | None:
        row = tx.one(f"SELECT doc FROM runs WHERE run_id = ?{self._row_lock()}", run_id)
        return None if row is None else Run.model_validate_json(row[0])

    def renew_lease(self, claim: Claim, now: float, lease_seconds: float) -> Claim:
        run_id = claim.run.run_id
        with self._write() as tx:
            stored = self._locked_run(tx, run_id)
            # SEEDED BUG no-fencing: the renewal trusts that whoever asks still
            # holds the lease, so a worker that slept past its expiry extends it.
            if "no-fencing" not in self.bugs or stored is None:
                check_lease(run_id, stored, claim.worker_id, claim.fencing_token, now)
            assert stored is not None  # _check_lease refuses a missing run
            run = stored.model_copy(update={"lease_expiry": now + lease_seconds})
            tx.run(RUN_UPDATE, *run_update_params(run))
        return Claim(run, claim.worker_id, claim.fencing_token, now + lease_seconds)

    def release(self, claim: Claim) -> None:
        with self._write() as tx:
            stored = self._locked_run(tx, claim.run.run_id)
            if (
                stored is None
                or stored.lease_owner != claim.worker_id
                or stored.fencing_token != claim.fencing_token
            ):
                return  # already lost: the current holder's lease is not ours to end
            run = stored.model_copy(update={"lease_owner": None, "lease_expiry": None})
            tx.run(RUN_UPDATE, *run_update_params(run))

    def record_lease(self, run_id: str, worker_id: str, token: int, lease_expiry: float) -> bool:
        with self._write() as tx:
            stored = self._locked_run(tx, run_id)
            if stored is None or token <= stored.fencing_token:
                return False
            run = stored.model_copy(
                update={
                    "lease_owner": worker_id,
                    "lease_expiry": lease_expiry,
                    "fencing_token": token,
                }
            )
            tx.run(RUN_UPDATE, *run_update_params(run))
        return True

    # -- checkpoint ------------------------------------------------------
    def commit(self, commit: Commit) -> None:
        """Apply ``commit`` in one transaction (see :class:`Store`).

        The lease is checked before the version: a fenced worker must stop
        working on the run (LeaseLostError), while a stale one may reload and
        retry. Crash point ``checkpoint_stmt_<n>`` is passed before write
        group *n*, whether or not the group has rows, so that one spec hits
        the same place in every commit: 1 run row, 2 working state,
        3 operations, 4 approvals, 5 audit, 6 inbox acks, 7 memory,
        8 artifacts, child runs and outbox messages.
        """
        validate_commit(commit)
        run_id = commit.run.run_id
        if "ack-before-commit" in self.bugs and commit.inbox_acked:
            # SEEDED BUG ack-before-commit: the messages are marked processed
            # at once, in their own transaction, "so that nobody handles them
            # twice"; a crash before the state change below loses them.
            with self._write() as tx:
                self._ack_inbox(tx, run_id, commit.inbox_acked, commit.now)
        # SEEDED BUG non-atomic-checkpoint: the run row and working state
        # (groups 1-2) commit in one transaction, the records in another.
        split = 2 if "non-atomic-checkpoint" in self.bugs else 8
        with self._write() as tx:
            stored = self._locked_run(tx, run_id)
            # SEEDED BUG no-fencing: the lease is not checked, so any worker
            # that once held it may still write.
            if "no-fencing" not in self.bugs or stored is None:
                check_lease(run_id, stored, commit.worker_id, commit.fencing_token, commit.now)
            assert stored is not None
            # SEEDED BUG no-version-check: the version read is not compared;
            # the last writer wins.
            if (
                stored.state_version != commit.expected_version
                and "no-version-check" not in self.bugs
            ):
                raise StaleWriteError(run_id, commit.expected_version, stored.state_version)
            steps = self._commit_steps(commit, stored)
            for n, step in enumerate(steps[:split], start=1):
                crashpoints.hit(f"checkpoint_stmt_{n}")
                step(tx)
        if split < len(steps):
            with self._write() as tx:
                for n, step in enumerate(steps[split:], start=split + 1):
                    crashpoints.hit(f"checkpoint_stmt_{n}")
                    step(tx)

    def _commit_steps(self, c: Commit, stored: Run) -> list[Callable[[Tx], None]]:
        # Leases are not state: the stored lease fields win over the new row's.
        run = c.run.model_copy(
            update={
                "lease_owner": stored.lease_owner,
                "lease_expiry": stored.lease_expiry,
                "fencing_token": stored.fencing_token,
            }
        )

        def run_row(tx: Tx) -> None:
            tx.run(RUN_UPDATE, *run_update_params(run))

        def state(tx: Tx) -> None:
            if c.state is not None:
                self._upsert_state(tx, c.state)

        def artifacts_and_children(tx: Tx) -> None:
            self._upsert_artifacts(tx, c.artifacts)
            for child, child_state in c.children:
                self._insert_run(tx, child, child_state)
                self._append_audit(tx, (_created_event(child, c.worker_id),))
            # Messages to other runs (a child reporting to its parent) commit
            # with the state change that produced them, or not at all.
            for message in c.outbox:
                self._insert_inbox(tx, message)

        return [
            run_row,
            state,
            lambda tx: self._upsert_operations(tx, c.operations),
            lambda tx: self._upsert_approvals(tx, c.approvals),
            lambda tx: self._append_audit(tx, c.audit),
            lambda tx: self._ack_inbox(tx, run.run_id, c.inbox_acked, c.now),
            lambda tx: self._insert_memory(tx, c.memory),
            artifacts_and_children,
        ]

    def _upsert_operations(self, tx: Tx, ops: Sequence[Operation]) -> None:
        tx.many(
            "INSERT INTO operations (op_id, run_id, status, idempotency_key, doc)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (op_id) DO UPDATE SET"
            " status = excluded.status, doc = excluded.doc",
            [
                (o.op_id, o.run_id, o.status.value, o.idempotency_key, o.model_dump_json())
                for o in ops
            ],
        )

    def _upsert_approvals(self, tx: Tx, approvals: Sequence[Approval]) -> None:
        tx.many(
            "INSERT INTO approvals (approval_id, run_id, decision, expires_at, doc)"
            " VALUES (?, ?, ?, ?, ?) ON CONFLICT (approval_id) DO UPDATE SET"
            " decision = excluded.decision, expires_at = excluded.expires_at, doc = excluded.doc",
            [
                (a.approval_id, a.run_id, a.decision.value, a.expires_at, a.model_dump_json())
                for a in approvals
            ],
        )

    def _append_audit(self, tx: Tx, events: Sequence[AuditEvent]) -> None:
        # executemany inserts in sequence order, so seq preserves append order.
        tx.many(
            "INSERT INTO audit (run_id, at, doc) VALUES (?, ?, ?)",
            [(e.run_id, e.at, e.model_dump_json()) for e in events],
        )

    def _ack_inbox(self, tx: Tx, run_id: str, message_ids: Sequence[str], now: float) -> None:
        if not message_ids:
            return
        # Only this run's own, still-pending messages: an ack never reaches
        # across runs and never moves an earlier processed_at.
        rows = tx.all(
            f"SELECT doc FROM inbox WHERE run_id = ? AND processed_at IS NULL"
            f" AND message_id IN ({marks(len(message_ids))}){self._row_lock()}",
            run_id,
            *message_ids,
        )
        acked = [m.model_copy(update={"processed_at": now}) for m in load_docs(InboxMessage, rows)]
        tx.many(
            "UPDATE inbox SET processed_at = ?, doc = ? WHERE message_id = ?",
            [(now, m.model_dump_json(), m.message_id) for m in acked],
        )

    def _upsert_artifacts(self, tx: Tx, refs: Sequence[ArtifactRef]) -> None:
        tx.many(
            "INSERT INTO artifacts (uri, owner, subject, expires_at, doc) VALUES (?, ?, ?, ?, ?)"
            " ON CONFLICT (uri, owner) DO UPDATE SET subject = excluded.subject,"
            " expires_at = excluded.expires_at, doc = excluded.doc",
            [(a.uri, a.owner, a.subject, a.expires_at, a.model_dump_json()) for a in refs],
        )

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
            self._append_audit(tx, (event,))
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

    # -- inbox -----------------------------------------------------------
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
            return self._insert_inbox(tx, message)

    def _insert_inbox(self, tx: Tx, m: InboxMessage) -> bool:
        # The unique message_id makes a redelivery a no-op, even when two
        # deliveries race in separate transactions.
        return (
            tx.run(
                "INSERT INTO inbox (message_id, run_id, received_at, processed_at, doc)"
                " VALUES (?, ?, ?, ?, ?) ON CONFLICT (message_id) DO NOTHING",
                m.message_id,
                m.run_id,
                m.received_at,
                m.processed_at,
                m.model_dump_json(),
            )
            == 1
        )

    # -- memory ----------------------------------------------------------
    def put_memory(self, record: MemoryRecord) -> None:
        """Insert ``record`` (a record with an existing ``memory_id`` is replaced)."""
        with self._write() as tx:
            self._upsert_memory(tx, (record,))

    def _insert_memory(self, tx: Tx, records: Sequence[MemoryRecord]) -> None:
        """A worker's new memory versions: a version numbered past the same
        newest one by two runs at once is written by the first to commit; the
        second is refused whole, to number its write again, instead of
        overwriting the first's record."""
        taken = [
            r.memory_id
            for r in records
            if not tx.all(
                "INSERT INTO memory (memory_id, tenant, namespace, key, version, trust, subject,"
                " expires_at, deleted, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (memory_id) DO NOTHING RETURNING memory_id",
                *_memory_row(r),
            )
        ]
        if taken:
            raise MemoryConflictError(taken)
        self._link_sources(tx, records)

    def _upsert_memory(self, tx: Tx, records: Sequence[MemoryRecord]) -> None:
        tx.many(
            "INSERT INTO memory (memory_id, tenant, namespace, key, version, trust, subject,"
            " expires_at, deleted, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (memory_id) DO UPDATE SET tenant = excluded.tenant,"
            " namespace = excluded.namespace, key = excluded.key, version = excluded.version,"
            " trust = excluded.trust, subject = excluded.subject,"
            " expires_at = excluded.expires_at, deleted = excluded.deleted, doc = excluded.doc",
            [_memory_row(r) for r in records],
        )
        self._link_sources(tx, records)

    def _link_sources(self, tx: Tx, records: Sequence[MemoryRecord]) -> None:
        # Derivation edges, so delete_subject can follow them in SQL.
        ids = [r.memory_id for r in records]
        if ids:
            tx.run(f"DELETE FROM memory_sources WHERE memory_id IN ({marks(len(ids))})", *ids)
        tx.many(
            "INSERT INTO memory_sources (memory_id, source_id) VALUES (?, ?)"
            " ON CONFLICT DO NOTHING",
            [(r.memory_id, src) for r in records for src in r.derived_from],
        )

    def read_memory(
        self, tenant: str, namespace: str, now: float, *, min_trust: float = 0.0
    ) -> list[MemoryRecord]:
        """The newest version of each key of ``tenant`` in ``namespace``, by key,
        if that version is live (not deleted, not expired at ``now``) and trusted
        at least ``min_trust``.

        The newest version is chosen *before* the liveness filters: when it is
        deleted, expired or untrusted the key is absent, never answered by an
        older (superseded) version. Every filter is in the query.
        """
        newest = "rn = 1"
        live = ["NOT deleted", "(expires_at IS NULL OR expires_at > ?)", "trust >= ?"]
        if "trust-stale-memory" in self.bugs:
            # SEEDED BUG trust-stale-memory: "the namespace is tenant-scoped
            # anyway" -- every version of every key, of any tenant, live or not.
            with self._read() as tx:
                rows = tx.all(
                    "SELECT doc FROM memory WHERE namespace = ? AND trust >= ?"
                    " ORDER BY key, version, seq",
                    namespace,
                    min_trust,
                )
            return load_docs(MemoryRecord, rows)
        sql = (
            "SELECT doc FROM (SELECT doc, key, deleted, expires_at, trust, ROW_NUMBER() OVER"
            " (PARTITION BY key ORDER BY version DESC, seq DESC) AS rn FROM memory"
            " WHERE tenant = ? AND namespace = ?) AS v"
            f" WHERE {' AND '.join([newest, *live])} ORDER BY key"
        )
        with self._read() as tx:
            rows = tx.all(sql, tenant, namespace, now, min_trust)
        return load_docs(MemoryRecord, rows)

    def read_memory_unfiltered(self, namespace: str) -> list[MemoryRecord]:
        with self._read() as tx:
            rows = tx.all("SELECT doc FROM memory WHERE namespace = ? ORDER BY seq", namespace)
        return load_docs(MemoryRecord, rows)

    def delete_subject(self, tenant: str, subject: str, now: float) -> int:
        """Mark deleted every record of ``subject`` in ``tenant`` and, transitively,
        every record derived from one (whatever its tenant: a derived record
        still carries the subject's data). Returns how many records changed."""
        with self._write() as tx:
            # UNION (not UNION ALL) makes the recursion stop on derivation cycles.
            rows = tx.all(
                "WITH RECURSIVE doomed (memory_id) AS ("
                " SELECT memory_id FROM memory WHERE tenant = ? AND subject = ?"
                " UNION SELECT s.memory_id FROM memory_sources s"
                " JOIN doomed d ON s.source_id = d.memory_id)"
                " SELECT m.doc FROM memory m JOIN doomed d ON m.memory_id = d.memory_id"
                f" WHERE NOT m.deleted{self._row_lock('m')}",
                tenant,
                subject,
            )
            gone = [
                r.model_copy(update={"deleted": True, "updated_at": now})
                for r in load_docs(MemoryRecord, rows)
            ]
            tx.many(
                "UPDATE memory SET deleted = ?, doc = ? WHERE memory_id = ?",
                [(True, r.model_dump_json(), r.memory_id) for r in gone],
            )
        return len(gone)

    # -- audit, operations, artifacts -----------------------------------
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

    # -- retention -------------------------------------------------------
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
                self._append_audit(tx, (event,))
        return len(rows)


def _created_event(run: Run, actor: str) -> AuditEvent:
    return AuditEvent(
        tenant=run.tenant,
        created_at=run.created_at,
        updated_at=run.created_at,
        run_id=run.run_id,
        at=run.created_at,
        actor=actor,
        action="created",
        to_status=run.status,
        state_version=run.state_version,
        detail={"workflow": run.workflow, "parent_run_id": run.parent_run_id},
    )


def _memory_row(r: MemoryRecord) -> tuple[Any, ...]:
    return (
        r.memory_id,
        r.tenant,
        r.namespace,
        r.key,
        r.version,
        r.trust,
        r.subject,
        r.expires_at,
        r.deleted,
        r.model_dump_json(),
    )
