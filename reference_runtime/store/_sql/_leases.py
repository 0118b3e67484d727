"""Leases: claiming a runnable run, renewing, releasing, recording a Redis lease."""

from __future__ import annotations

from ..._records import Run
from .._base import Claim
from .._sqlkit import (
    LEASE_UPDATE,
    RUN_UPDATE,
    RUNNABLE_SQL,
    check_lease,
    lease_update_params,
    run_update_params,
    runnable_params,
)
from ._base import SqlBase


class SqlLeases(SqlBase):
    """Leases held in the run row: owner, expiry and a fencing token that only grows."""

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
            tx.run(LEASE_UPDATE, *lease_update_params(run))
        assert run.lease_expiry is not None  # set just above
        return Claim(run, worker_id, run.fencing_token, run.lease_expiry)

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
