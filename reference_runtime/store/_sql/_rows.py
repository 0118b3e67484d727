"""Row writers: how each record family is written, one function a statement.

Every writer takes the open transaction and writes the record's JSON ``doc``
beside the columns queries filter on, in the same statement. The store's
record-family mixins and the checkpoint compose them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..._errors import DuplicateRunError, MemoryConflictError
from ..._records import (
    Approval,
    ArtifactRef,
    AuditEvent,
    InboxMessage,
    MemoryRecord,
    Operation,
    Run,
    WorkingState,
)
from .._sqlkit import RUN_COLS, Tx, load_docs, marks, run_row


def insert_run(tx: Tx, run: Run, state: WorkingState) -> None:
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
    upsert_state(tx, state)


def upsert_state(tx: Tx, state: WorkingState) -> None:
    tx.run(
        "INSERT INTO working_state (run_id, updated_at, doc) VALUES (?, ?, ?)"
        " ON CONFLICT (run_id) DO UPDATE SET updated_at = excluded.updated_at,"
        " doc = excluded.doc, compacted_at = NULL",
        state.run_id,
        state.updated_at,
        state.model_dump_json(),
    )


def upsert_operations(tx: Tx, ops: Sequence[Operation]) -> None:
    tx.many(
        "INSERT INTO operations (op_id, run_id, status, idempotency_key, doc)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (op_id) DO UPDATE SET"
        " status = excluded.status, doc = excluded.doc",
        [(o.op_id, o.run_id, o.status.value, o.idempotency_key, o.model_dump_json()) for o in ops],
    )


def upsert_approvals(tx: Tx, approvals: Sequence[Approval]) -> None:
    tx.many(
        "INSERT INTO approvals (approval_id, run_id, decision, expires_at, doc)"
        " VALUES (?, ?, ?, ?, ?) ON CONFLICT (approval_id) DO UPDATE SET"
        " decision = excluded.decision, expires_at = excluded.expires_at, doc = excluded.doc",
        [
            (a.approval_id, a.run_id, a.decision.value, a.expires_at, a.model_dump_json())
            for a in approvals
        ],
    )


def append_audit(tx: Tx, events: Sequence[AuditEvent]) -> None:
    # executemany inserts in sequence order, so seq preserves append order.
    tx.many(
        "INSERT INTO audit (run_id, at, doc) VALUES (?, ?, ?)",
        [(e.run_id, e.at, e.model_dump_json()) for e in events],
    )


def ack_inbox(
    tx: Tx, run_id: str, message_ids: Sequence[str], now: float, *, row_lock: str
) -> None:
    """Mark this run's pending messages ``message_ids`` processed at ``now``
    (``row_lock``: the backend's suffix locking the rows read)."""
    if not message_ids:
        return
    # Only this run's own, still-pending messages: an ack never reaches
    # across runs and never moves an earlier processed_at.
    rows = tx.all(
        f"SELECT doc FROM inbox WHERE run_id = ? AND processed_at IS NULL"
        f" AND message_id IN ({marks(len(message_ids))}){row_lock}",
        run_id,
        *message_ids,
    )
    acked = [m.model_copy(update={"processed_at": now}) for m in load_docs(InboxMessage, rows)]
    tx.many(
        "UPDATE inbox SET processed_at = ?, doc = ? WHERE message_id = ?",
        [(now, m.model_dump_json(), m.message_id) for m in acked],
    )


def upsert_artifacts(tx: Tx, refs: Sequence[ArtifactRef]) -> None:
    tx.many(
        "INSERT INTO artifacts (uri, owner, subject, expires_at, doc) VALUES (?, ?, ?, ?, ?)"
        " ON CONFLICT (uri, owner) DO UPDATE SET subject = excluded.subject,"
        " expires_at = excluded.expires_at, doc = excluded.doc",
        [(a.uri, a.owner, a.subject, a.expires_at, a.model_dump_json()) for a in refs],
    )


def insert_inbox(tx: Tx, m: InboxMessage) -> bool:
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


def insert_memory(tx: Tx, records: Sequence[MemoryRecord]) -> None:
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
            *memory_row(r),
        )
    ]
    if taken:
        raise MemoryConflictError(taken)
    # Every id is new (a row is never deleted, only marked so): no edges to replace.
    link_sources(tx, records, replace=False)


def upsert_memory(tx: Tx, records: Sequence[MemoryRecord]) -> None:
    tx.many(
        "INSERT INTO memory (memory_id, tenant, namespace, key, version, trust, subject,"
        " expires_at, deleted, doc) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        " ON CONFLICT (memory_id) DO UPDATE SET tenant = excluded.tenant,"
        " namespace = excluded.namespace, key = excluded.key, version = excluded.version,"
        " trust = excluded.trust, subject = excluded.subject,"
        " expires_at = excluded.expires_at, deleted = excluded.deleted, doc = excluded.doc",
        [memory_row(r) for r in records],
    )
    link_sources(tx, records)


def link_sources(tx: Tx, records: Sequence[MemoryRecord], *, replace: bool = True) -> None:
    """Derivation edges, so delete_subject can follow them in SQL. ``replace``:
    drop the records' old edges first (a record written again)."""
    ids = [r.memory_id for r in records]
    if ids and replace:
        tx.run(f"DELETE FROM memory_sources WHERE memory_id IN ({marks(len(ids))})", *ids)
    tx.many(
        "INSERT INTO memory_sources (memory_id, source_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        [(r.memory_id, src) for r in records for src in r.derived_from],
    )


def created_event(run: Run, actor: str) -> AuditEvent:
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


def memory_row(r: MemoryRecord) -> tuple[Any, ...]:
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
