"""A new user's runtime (issue 29's trial): a SQLite outbox whose one job
kind, ``checkout``, takes two effects -- it charges the customer, then
emails the receipt -- under a 30 s lease.

``tests/engine/test_init.py`` copies it into a project as the
user's own module and fills ``harness init``'s queue adapter with it. The
charge takes the job's id as its idempotency key only when the worker is
told ``keyed`` (the adapter's ``safe`` option): without it, a job claimed
again after its worker died right after the charge charges twice. The
receipt cannot be deduplicated (the email service takes no key): the
honest promise for it is ``at_least_once``.

Nothing here knows about the harness but the world it calls.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from typing import Any

from harness.world import Caller, ServiceFault, WorldClient

LEASE_SECONDS = 30.0


class Outbox:
    """The outbox table, in one SQLite file any process opens by path."""

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

    def reserve(self, worker: str, now: float) -> dict[str, Any] | None:
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


def work(
    outbox: Outbox, world: WorldClient, now: Callable[[], float], worker: str, *, keyed: bool
) -> None:
    """A worker: reserve, charge, email the receipt, for every job it can
    reserve; a refused or doubtful call puts the job back to pending."""
    while (job := outbox.reserve(worker, now())) is not None:

        def caller(step: str, job: dict[str, Any] = job) -> Caller:
            return Caller(tenant=job["tenant"], run_id=job["id"], op_id=step, worker_id=worker)

        try:
            charge = world.call(
                "payments",
                "charge",
                job["payload"],
                idempotency_key=job["id"] if keyed else None,
                caller=caller("charge"),
            )
            receipt = world.call(
                "email",
                "send",
                {"to": job["payload"]["customer_id"], "template": "receipt"},
                caller=caller("receipt"),
            )
        except ServiceFault:
            outbox.finish(job["id"], worker, None)
            return
        result = {"charge": charge.external_ref, "receipt": receipt.external_ref}
        outbox.finish(job["id"], worker, result)
