"""A small SQLite job queue with leases: the runtime under test.

A job is a row: ``pending``, then ``running`` under a worker's lease (30 s
on the queue's clock), then ``done``. A worker claims the first job that is
pending or whose lease has expired, runs its handler and marks it done. A
worker that dies mid-job keeps its lease until it expires; then another
worker claims the job again. So the queue runs every job *at least once*,
and what a repeat does is the handler's business:

- ``send_welcome`` (naive) sends an email. The email service takes no
  idempotency key and offers no lookup: a job claimed again after its
  worker died right after the send sends a second email. Nothing can make
  that exactly once; the honest promise is ``at_least_once``.
- ``charge`` (correct) charges with the job's id as the idempotency key:
  the payment service deduplicates the repeat.
- ``open_account`` (correct) looks the account up by the job's id (its
  business key) before creating it: the repeat finds the first one.

Nothing here knows about the harness but the world it calls, as a real
queue would call its email provider.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from harness.world import Caller, Response, ServiceFault, WorldClient

LEASE_SECONDS = 30.0
Handler = Callable[[WorldClient, dict[str, Any], Caller], Response]


def send_welcome(world: WorldClient, job: dict[str, Any], caller: Caller) -> Response:
    return world.call("email", "send", job["payload"], caller=caller)


def charge(world: WorldClient, job: dict[str, Any], caller: Caller) -> Response:
    return world.call(
        "payments", "charge", job["payload"], idempotency_key=job["id"], caller=caller
    )


def open_account(world: WorldClient, job: dict[str, Any], caller: Caller) -> Response:
    found = world.lookup("provisioning", business_key=job["id"], tenant=job["tenant"])
    if found is not None:
        return found
    return world.call(
        "provisioning", "create_account", job["payload"], business_key=job["id"], caller=caller
    )


HANDLERS: dict[str, Handler] = {
    "send_welcome": send_welcome,
    "charge": charge,
    "open_account": open_account,
}


class JobQueue:
    """The queue's table, in one SQLite file any process opens by path."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS jobs (id TEXT PRIMARY KEY, tenant TEXT, kind TEXT, "
            "payload TEXT, status TEXT, owner TEXT, lease_until REAL, result TEXT)"
        )

    def put(self, job_id: str, tenant: str, kind: str, payload: dict[str, Any]) -> None:
        self.db.execute(
            "INSERT INTO jobs VALUES (?, ?, ?, ?, 'pending', NULL, NULL, NULL)",
            (job_id, tenant, kind, json.dumps(payload)),
        )

    def claim(self, worker: str, now: float) -> dict[str, Any] | None:
        """The first pending job, or one whose lease expired, leased to ``worker``."""
        self.db.execute("BEGIN IMMEDIATE")
        row = self.db.execute(
            "SELECT id FROM jobs WHERE status = 'pending' OR (status = 'running' "
            "AND lease_until <= ?) ORDER BY id LIMIT 1",
            (now,),
        ).fetchone()
        if row is not None:
            self.db.execute(
                "UPDATE jobs SET status = 'running', owner = ?, lease_until = ? WHERE id = ?",
                (worker, now + LEASE_SECONDS, row[0]),
            )
        self.db.execute("COMMIT")
        return None if row is None else self.jobs(row[0])[0]

    def finish(self, job_id: str, worker: str, result: dict[str, Any] | None) -> None:
        """Done, or back to pending (``result`` None), if ``worker`` still holds it."""
        status = "pending" if result is None else "done"
        self.db.execute(
            "UPDATE jobs SET status = ?, result = ?, lease_until = NULL WHERE id = ? AND owner = ?",
            (status, None if result is None else json.dumps(result), job_id, worker),
        )

    def jobs(self, job_id: str | None = None) -> list[dict[str, Any]]:
        """Every job (or the one with ``job_id``), in id order."""
        cols = ("id", "tenant", "kind", "payload", "status", "owner", "lease_until", "result")
        rows = self.db.execute(
            f"SELECT {', '.join(cols)} FROM jobs WHERE ? IS NULL OR id = ? ORDER BY id",
            (job_id, job_id),
        ).fetchall()
        out = [dict(zip(cols, row, strict=True)) for row in rows]
        for job in out:
            job["payload"] = json.loads(job["payload"])
            job["result"] = None if job["result"] is None else json.loads(job["result"])
        return out


def work(queue: JobQueue, world: WorldClient, now: Callable[[], float], worker: str) -> None:
    """A worker's loop: run every job it can claim; stop when none is left,
    or when a service refuses or leaves a call in doubt (the job goes back
    to pending, and the next worker tries again)."""
    while (job := queue.claim(worker, now())) is not None:
        caller = Caller(tenant=job["tenant"], run_id=job["id"], op_id=job["kind"], worker_id=worker)
        try:
            response = HANDLERS[job["kind"]](world, job, caller)
        except ServiceFault:
            queue.finish(job["id"], worker, None)
            return
        queue.finish(job["id"], worker, {"ref": response.external_ref})
