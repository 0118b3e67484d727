"""The store contract every backend implements.

One abstract class, one conformance suite (``tests/test_store_conformance.py``) run
against every backend. Required of every backend:

* **Atomic commit.** :meth:`Store.commit` applies a :class:`Commit` -- run row,
  working state, operations, approvals, audit events, inbox acks, memory --
  in one transaction, or not at all. It succeeds only if

  - the run's ``state_version`` still equals ``commit.expected_version``
    (else :class:`StaleWriteError`), and
  - the committing worker still holds the lease: ``lease_owner == worker_id``,
    ``fencing_token == commit.fencing_token`` and ``lease_expiry >= commit.now``
    (else :class:`LeaseLostError`).

  The new run row must carry ``state_version == expected_version + 1``; the
  store writes it with the lease fields unchanged (leases are not state).
* **Claim under a lease.** :meth:`Store.claim` atomically picks one runnable
  run whose lease is free or expired, sets ``lease_owner``, ``lease_expiry``
  and increments ``fencing_token``. Runnable means: not parked, and status in ``ACTIVE`` with
  ``wake_at`` unset or ``<= now``; or status in ``WAITING`` with an unprocessed
  inbox message, or with ``wake_at <= now`` (a wait that timed out).
  Postgres uses ``FOR UPDATE SKIP LOCKED``; SQLite ``BEGIN IMMEDIATE``.
* **Inbox deduplication.** :meth:`Store.deliver` inserts a message once per
  ``message_id``; a repeat returns False and changes nothing.
* **Memory filtered in the query.** :meth:`Store.read_memory` returns only the
  tenant's own, live (not deleted, not expired at ``now``), newest version of
  each key -- the filter is in SQL, never applied afterwards in Python.
* **Crash points** inside a commit: a backend calls
  ``crashpoints.hit("checkpoint_stmt_<n>")`` before each statement it runs in
  :meth:`commit`, so a harness can kill a worker in the middle of a checkpoint
  write and prove the write is all-or-nothing.

Optional: nothing. Backends that cannot meet a requirement must not pretend to.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import Any

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


@dataclass(frozen=True)
class Claim:
    """A run leased to one worker."""

    run: Run
    worker_id: str
    fencing_token: int
    lease_expiry: float


@dataclass(frozen=True)
class Snapshot:
    """Everything durable about one run, as one consistent read."""

    run: Run
    state: WorkingState
    operations: tuple[Operation, ...]
    approvals: tuple[Approval, ...]
    pending_inbox: tuple[InboxMessage, ...]  # unprocessed, oldest first
    artifacts: tuple[ArtifactRef, ...] = ()


@dataclass(frozen=True)
class Commit:
    """One atomic checkpoint of a run.

    ``run`` is the new row (``state_version == expected_version + 1``).
    Operations and approvals are upserted by id; audit events appended; inbox
    message ids in ``inbox_acked`` marked processed at ``now``; memory records
    inserted; child runs (delegated work) created with their working state and
    a "created" audit event; ``outbox`` messages delivered to other runs.
    """

    run: Run
    expected_version: int
    worker_id: str
    fencing_token: int
    now: float
    state: WorkingState | None = None
    operations: tuple[Operation, ...] = ()
    approvals: tuple[Approval, ...] = ()
    audit: tuple[AuditEvent, ...] = ()
    inbox_acked: tuple[str, ...] = ()
    memory: tuple[MemoryRecord, ...] = ()
    artifacts: tuple[ArtifactRef, ...] = ()
    children: tuple[tuple[Run, WorkingState], ...] = ()
    #: Inbound messages for *other* runs (a child telling its parent it is
    #: done), inserted in the same transaction, deduplicated by message_id.
    outbox: tuple[InboxMessage, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RetentionPolicy:
    """Finished runs older than ``keep_finished_seconds`` lose their working
    state and inbox rows; the run row and audit trail stay."""

    keep_finished_seconds: float = 7 * 24 * 3600


class Store(abc.ABC):
    """Durable storage for runs, state, operations, approvals, memory and audit."""

    #: Short name used in configuration: "sqlite", "postgres".
    name: str
    #: Seeded store bugs to switch on (see :mod:`reference_runtime._bugs`);
    #: set by the runtime after opening, empty otherwise.
    bugs: frozenset[str] = frozenset()

    @abc.abstractmethod
    def setup(self, *, create: bool = True) -> None:
        """Create or migrate the schema. Idempotent; safe to call from every worker.

        Refuses (:class:`~reference_runtime.ConfigError`) a location that holds
        something else: a file that is not a database, or a database whose
        tables are not this store's. With ``create=False`` it creates nothing:
        a missing or empty store raises :class:`NoStoreError`. A store opened
        read-only is never migrated; one that would need it is refused.
        """

    @abc.abstractmethod
    def close(self) -> None:
        """Release connections. The store must not be used afterwards."""

    def skip_sync(self) -> None:
        """Stop waiting for the disk in this process: what it writes from now
        on, and what :meth:`close` flushes, survives a killed process but not
        an OS crash. For a scratch store about to be thrown away (a test's,
        a harness scenario's). A no-op where there is no disk to wait for."""
        return None

    # -- runs ------------------------------------------------------------
    @abc.abstractmethod
    def create_run(self, run: Run, state: WorkingState, audit: AuditEvent) -> None:
        """Insert a new run; raises DuplicateRunError if ``run.run_id`` exists."""

    @abc.abstractmethod
    def get_run(self, run_id: str) -> Run | None: ...

    @abc.abstractmethod
    def list_runs(self, tenant: str | None = None) -> list[Run]:
        """All runs (of one tenant), ordered by ``created_at`` then ``run_id``."""

    @abc.abstractmethod
    def load(self, run_id: str) -> Snapshot:
        """A consistent snapshot of one run; KeyError if it does not exist."""

    @abc.abstractmethod
    def runnable(self, now: float, limit: int = 16) -> list[str]:
        """Ids of runnable runs (see module docstring), oldest first, lease ignored."""

    # -- leases ----------------------------------------------------------
    @abc.abstractmethod
    def claim(
        self, worker_id: str, now: float, lease_seconds: float, run_id: str | None = None
    ) -> Claim | None:
        """Lease one runnable run (or the given one, if runnable and free)."""

    @abc.abstractmethod
    def renew_lease(self, claim: Claim, now: float, lease_seconds: float) -> Claim:
        """Extend a held lease; LeaseLostError if it expired or was taken."""

    @abc.abstractmethod
    def release(self, claim: Claim) -> None:
        """Give the lease up (no-op if it was already lost)."""

    @abc.abstractmethod
    def record_lease(self, run_id: str, worker_id: str, token: int, lease_expiry: float) -> bool:
        """Adopt a lease granted by an external coordinator (Redis): write the
        lease fields only if ``token`` is greater than the stored fencing token."""

    # -- checkpoint ------------------------------------------------------
    @abc.abstractmethod
    def commit(self, commit: Commit) -> None:
        """Apply ``commit`` atomically (see module docstring)."""

    @abc.abstractmethod
    def park(self, run_id: str, reason: str, now: float) -> None:
        """Mark a run unreadable by this code (future schema) without touching
        its payload: sets ``error`` and audits it, leaving status and data as-is."""

    @abc.abstractmethod
    def unpark(self, run_id: str, now: float, actor: str) -> bool:
        """Clear a parked run's ``error`` (an operator deployed code that can
        read it) so workers may claim it again; False if it was not parked."""

    @abc.abstractmethod
    def cancel(self, run_id: str, now: float, actor: str, reason: str) -> bool:
        """Cancel a run out of band (an operator, not a worker): one versioned
        write, without the lease, so a worker that holds the run finds its
        next commit stale. False if the run had already ended."""

    # -- inbox -----------------------------------------------------------
    @abc.abstractmethod
    def deliver(self, message: InboxMessage) -> bool:
        """Insert an inbound message; False (and no change) if its id was seen."""

    # -- memory ----------------------------------------------------------
    @abc.abstractmethod
    def put_memory(self, record: MemoryRecord) -> None:
        """Insert a memory record (a new version of ``namespace/key`` supersedes older)."""

    @abc.abstractmethod
    def read_memory(
        self, tenant: str, namespace: str, now: float, *, min_trust: float = 0.0
    ) -> list[MemoryRecord]:
        """Live, newest-version records of ``tenant`` in ``namespace``, by key."""

    @abc.abstractmethod
    def read_memory_unfiltered(
        self, namespace: str, *, tenant: str | None = None, key: str | None = None
    ) -> list[MemoryRecord]:
        """Every stored record of a namespace, all tenants and versions, live or
        not, in write order (for operators, tests and numbering a new version;
        never used to build a model context). ``tenant``, ``key``: only that
        tenant's records, only that key's."""

    @abc.abstractmethod
    def delete_subject(self, tenant: str, subject: str, now: float) -> int:
        """Delete a user's memory and every record derived from it (transitively);
        returns how many records were marked deleted."""

    # -- audit, operations, artifacts -----------------------------------
    @abc.abstractmethod
    def audit(self, run_id: str | None = None) -> list[AuditEvent]:
        """Audit events in append order."""

    @abc.abstractmethod
    def operations(self, run_id: str | None = None) -> list[Operation]: ...

    @abc.abstractmethod
    def artifacts(self, owner: str | None = None) -> list[ArtifactRef]: ...

    # -- retention -------------------------------------------------------
    @abc.abstractmethod
    def prune(self, now: float, policy: RetentionPolicy) -> int:
        """Apply the retention policy; returns the number of runs compacted."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
