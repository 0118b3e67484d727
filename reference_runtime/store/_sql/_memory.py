"""Memory: versioned records per tenant, namespace and key, and erasure by subject."""

from __future__ import annotations

from ..._records import MemoryRecord
from .._sqlkit import load_docs
from . import _rows
from ._base import SqlBase


class SqlMemory(SqlBase):
    """Memory reads filter in SQL (newest version first, then liveness and trust)."""

    def put_memory(self, record: MemoryRecord) -> None:
        """Insert ``record`` (a record with an existing ``memory_id`` is replaced)."""
        with self._write() as tx:
            _rows.upsert_memory(tx, (record,))

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
        # The newest version of its key: no other version ranks above it
        # (a higher version, or the same one written later). Not a window
        # function: in a fresh worker process this costs a third less
        # (no sort or partition buffer), and the key order is the index's.
        newest = (
            "NOT EXISTS (SELECT 1 FROM memory AS newer"
            " WHERE newer.tenant = m.tenant AND newer.namespace = m.namespace"
            " AND newer.key = m.key"
            " AND (newer.version > m.version OR (newer.version = m.version AND newer.seq > m.seq)))"
        )
        live = ["NOT m.deleted", "(m.expires_at IS NULL OR m.expires_at > ?)", "m.trust >= ?"]
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
            "SELECT m.doc FROM memory AS m WHERE m.tenant = ? AND m.namespace = ?"
            f" AND {' AND '.join([newest, *live])} ORDER BY m.key"
        )
        with self._read() as tx:
            rows = tx.all(sql, tenant, namespace, now, min_trust)
        return load_docs(MemoryRecord, rows)

    def read_memory_unfiltered(
        self, namespace: str, *, tenant: str | None = None, key: str | None = None
    ) -> list[MemoryRecord]:
        where, params = "namespace = ?", [namespace]
        for column, value in (("tenant", tenant), ("key", key)):
            if value is not None:
                where, params = f"{where} AND {column} = ?", [*params, value]
        with self._read() as tx:
            rows = tx.all(f"SELECT doc FROM memory WHERE {where} ORDER BY seq", *params)
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
