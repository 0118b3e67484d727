"""The step context: what every step of a leased run shares, and its checkpoint.

One :class:`StepContext` per executor holds the worker's resources (store,
leases, services, workflows, clock) and the claim it works under. Its
:meth:`StepContext.commit` is the only way a step writes: the run row moves
one ``state_version`` up, an audit event says who did what, and the whole
checkpoint goes to :meth:`Store.commit` guarded by the version it read and the
lease's fencing token. :meth:`StepContext.crossing` passes the crash points on
either side of a commit (a :class:`~._sites.Boundary`). The step modules
(local steps, effects, approvals, inbox) are functions of a step context and
a snapshot.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol

from .. import crashpoints as cp
from .._artifacts import ArtifactStore
from .._clock import Clock
from .._config import LEASE_MARGIN
from .._errors import ConcurrencyConflict, StorageUnavailable
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
from .._services import ExternalServices
from .._states import RunStatus, check_transition
from .._workflows import Registry
from ..store import Claim, Commit, Snapshot, Store
from ._sites import Boundary

S = RunStatus


class Yield(Exception):
    """Stop working on this run for now (it waits, finished, or was parked)."""


@dataclass
class ExecutorSettings:
    lease_seconds: float = 30.0
    #: an external call is made only if at least this much lease time remains
    lease_margin: float = LEASE_MARGIN
    max_attempts: int = 5
    retry_backoff: float = 1.0
    max_steps_per_claim: int = 64
    tenant_keys: Mapping[str, bytes] = field(default_factory=dict)
    #: seeded protocol bugs to switch on (see :mod:`reference_runtime._bugs`)
    bugs: frozenset[str] = frozenset()


class LeaseKeeper(Protocol):
    """Who extends and gives up leases: the store itself, or Redis."""

    def renew(self, claim: Claim, now: float, ttl: float) -> Claim: ...

    def release(self, claim: Claim) -> None: ...


class StoreLeases:
    """Leases kept by the store itself (``queue=store``)."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def renew(self, claim: Claim, now: float, ttl: float) -> Claim:
        return self.store.renew_lease(claim, now, ttl)

    def release(self, claim: Claim) -> None:
        self.store.release(claim)


@dataclass
class StepContext:
    """A worker's resources and the claim it currently works under."""

    store: Store
    leases: LeaseKeeper
    services: ExternalServices | None
    registry: Registry
    clock: Clock
    worker_id: str
    artifacts: ArtifactStore | None
    settings: ExecutorSettings
    #: the lease held on the run being advanced (None between claims)
    claim: Claim | None = None

    def now(self) -> float:
        return self.clock.now()

    def commit(
        self,
        run: Run,
        *,
        status: RunStatus | None = None,
        action: str = "transition",
        detail: dict[str, Any] | None = None,
        state: WorkingState | None = None,
        operations: tuple[Operation, ...] = (),
        approvals: tuple[Approval, ...] = (),
        inbox_acked: tuple[str, ...] = (),
        memory: tuple[MemoryRecord, ...] = (),
        artifacts: tuple[ArtifactRef, ...] = (),
        children: tuple[tuple[Run, WorkingState], ...] = (),
        outbox: tuple[InboxMessage, ...] = (),
        extra_audit: tuple[AuditEvent, ...] = (),
        **fields: Any,
    ) -> Run:
        """Checkpoint ``run`` moved to ``status`` (default: unchanged), with
        ``fields`` changed on its row, everything else given written with it,
        and one audit event for ``action``. Returns the new row.
        """
        assert self.claim is not None
        now = self.now()
        dst = status or run.status
        check_transition(run.run_id, run.status, dst)
        new = run.model_copy(
            update={
                **fields,
                "status": dst,
                "state_version": run.state_version + 1,
                "updated_at": now,
            }
        )
        audit = AuditEvent(
            tenant=run.tenant,
            created_at=now,
            updated_at=now,
            run_id=run.run_id,
            at=now,
            actor=self.worker_id,
            action=action,
            from_status=run.status,
            to_status=dst,
            state_version=new.state_version,
            detail={"step": run.current_step, "next_step": new.current_step, **(detail or {})},
        )
        checkpoint = Commit(
            run=new,
            expected_version=run.state_version,
            worker_id=self.worker_id,
            fencing_token=self.claim.fencing_token,
            now=now,
            state=state,
            operations=operations,
            approvals=approvals,
            audit=(audit, *extra_audit),
            inbox_acked=inbox_acked,
            memory=memory,
            artifacts=artifacts,
            children=children,
            outbox=outbox,
        )
        try:
            self.store.commit(checkpoint)
        except StorageUnavailable as lost:
            if "retry-unknown-commit" in self.settings.bugs:
                return self._retry_as_failed(checkpoint)
            # The connection died during the commit: it may have committed
            # (a lost acknowledgement) or not. Never retry or redo anything
            # before knowing which.
            if not self.committed(new, lost):
                raise
        return new

    def _retry_as_failed(self, checkpoint: Commit) -> Run:
        """SEEDED BUG retry-unknown-commit: "the commit failed, so write it
        again" -- on a fresh connection, over the version the run is at now
        (so the version check cannot refuse it). When the lost commit had
        in fact committed, its transition is written a second time."""
        current = self.store.load(checkpoint.run.run_id).run
        version = current.state_version + 1
        audit = tuple(
            a.model_copy(update={"state_version": version}) if a.state_version else a
            for a in checkpoint.audit
        )
        again = dataclasses.replace(
            checkpoint,
            run=checkpoint.run.model_copy(update={"state_version": version}),
            expected_version=current.state_version,
            audit=audit,
        )
        self.store.commit(again)
        return again.run

    def committed(self, new: Run, lost: StorageUnavailable) -> bool:
        """Whether the checkpoint that would have moved the run to ``new``
        committed, after its connection died: read the run row back on a
        fresh connection. A commit is one transaction, so its row at
        ``new.state_version``, equal to ``new`` (the lease fields aside,
        which the store keeps) and still under this worker's fencing token,
        proves every record of it was written; the row still at the version
        before proves none was. Anything else -- another writer's version,
        or no answer from the store (``lost`` is raised again) -- is not
        ours to resolve: the caller stops working on the run, and the next
        claim re-reads it."""
        row: Run | None = None
        for _ in range(2):  # a second fresh connection, if the first dies too
            try:
                row = self.store.load(new.run_id).run
                break
            except StorageUnavailable:
                continue
        if row is None:
            raise lost
        lease = {"lease_owner", "lease_expiry", "fencing_token"}
        ours = self.claim is not None and row.fencing_token == self.claim.fencing_token
        if ours and row.model_dump(exclude=lease) == new.model_dump(exclude=lease):
            # Under our own lease (no one else could have written it): ours.
            return True
        if row.state_version == new.state_version - 1:
            return False
        raise ConcurrencyConflict(
            f"run {new.run_id!r}: a commit's outcome was unknown and the run is now at "
            f"version {row.state_version}, written by another worker"
        )

    @contextlib.contextmanager
    def crossing(self, *boundaries: Boundary) -> Iterator[None]:
        """Pass the ``before`` crash points of ``boundaries`` (outermost first),
        run the block (the commit), then their ``after`` points innermost first;
        none of the ``after`` points if the block raised."""
        for b in boundaries:
            cp.hit(b.before)
        yield
        for b in reversed(boundaries):
            cp.hit(b.after)

    def commit_and_yield(self, run: Run, **commit: Any) -> NoReturn:
        """:meth:`commit`, then stop working on the run (it waits or ended)."""
        self.commit(run, **commit)
        raise Yield

    def state(self, snap: Snapshot, payload: dict[str, Any]) -> WorkingState:
        """The run's working state with ``payload``, in this code's payload version."""
        return snap.state.model_copy(
            update={
                "payload": payload,
                "payload_version": self.registry.payload_version(snap.run.workflow),
                "updated_at": self.now(),
            }
        )

    def renew_lease(self) -> Claim:
        """Extend the lease held (before an external call) and keep the new claim."""
        assert self.claim is not None
        cp.hit("before_lease_renew")
        self.claim = self.leases.renew(self.claim, self.now(), self.settings.lease_seconds)
        cp.hit("after_lease_renew")
        return self.claim

    def retry_later(
        self,
        run: Run,
        *,
        what: str,
        reason: str,
        action: str,
        operations: tuple[Operation, ...] = (),
        detail: dict[str, Any] | None = None,
    ) -> NoReturn:
        """Back off exponentially; after ``max_attempts`` the run fails."""
        attempt = run.attempt + 1
        if attempt >= self.settings.max_attempts:
            self.commit_and_yield(
                run,
                status=S.FAILED,
                action=action.replace("rejected", "failed").replace("error", "failed"),
                operations=operations,
                attempt=attempt,
                error=f"{what} {attempt} times; last: {reason}",
                detail={**(detail or {}), "reason": reason},
            )
        delay = self.settings.retry_backoff * (2 ** (attempt - 1))
        self.commit_and_yield(
            run,
            status=S.RETRY_SCHEDULED,
            action=action,
            operations=operations,
            attempt=attempt,
            wake_at=self.now() + delay,
            detail={**(detail or {}), "reason": reason, "retry_in": delay},
        )
