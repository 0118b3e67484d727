"""A runtime that may let one tenant's data change another's result.

The broken runtime's ``pay`` workflow (``broken_runtime``), its charge keyed
by the run (exactly once), with a receipts table that saves charges: before
charging, a worker looks for a receipt of the same content (customer and
amount) and, if one exists, takes its external ref instead of charging
again. With ``shared=true`` that lookup forgets the tenant: a tenant whose
customer id and amount happen to equal another tenant's is never charged and
reports the other tenant's charge as its own. A cache keyed without the
tenant: faults play no part, so an oracle that runs every tenant in one
deployment makes the same mistake and agrees with the faulted run. With
``shared=false`` the lookup is scoped to the tenant.

Importable as ``tenant_runtime`` (tests/engine is on ``sys.path``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broken_runtime import PAY, BrokenAdapter, BrokenEnvironment, _call, _move, _store

from harness.adapters import Capability
from harness.world import Caller, WorldClient

EPOCH = 1_700_000_000.0

_RECEIPTS = """
CREATE TABLE IF NOT EXISTS receipts (
    tenant TEXT NOT NULL, customer_id TEXT NOT NULL, amount INTEGER NOT NULL, ref TEXT NOT NULL
);
"""


def _receipt(conn: Any, tenant: str, payload: dict[str, Any], shared: bool) -> str | None:
    query = "SELECT ref FROM receipts WHERE customer_id = ? AND amount = ?"
    params: tuple[Any, ...] = (payload["customer_id"], payload["amount_cents"])
    if not shared:
        query += " AND tenant = ?"
        params += (tenant,)
    row = conn.execute(query + " LIMIT 1", params).fetchone()
    return None if row is None else str(row[0])


def worker_main(args: dict[str, Any]) -> int:
    """Take each unfinished run, charge it (or reuse a receipt), notify, end."""
    worker_id, shared = str(args["worker_id"]), bool(args["shared"])
    world = WorldClient(args["world"], clock=lambda: EPOCH)
    with _store(args["store"]) as conn:
        pending = conn.execute(
            "SELECT run_id, tenant, input, status FROM runs "
            "WHERE status IN ('Created', 'Charged') ORDER BY run_id"
        ).fetchall()
        for run_id, tenant, raw_input, status in pending:
            payload = json.loads(raw_input)
            if status == "Created":
                # THE MISTAKE (shared=true): a receipt of another tenant counts.
                ref = _receipt(conn, tenant, payload, shared)
                if ref is None:
                    caller = Caller(
                        tenant=tenant, run_id=run_id, op_id="charge", worker_id=worker_id
                    )
                    request = {
                        "customer_id": payload["customer_id"],
                        "amount": payload["amount_cents"],
                    }
                    ref = _call(world, "payments.charge", request, f"{run_id}:charge", caller)
                    if ref is None:
                        _move(conn, run_id, "Failed", worker_id, error="payments.charge failed")
                        continue
                    conn.execute(
                        "INSERT INTO receipts VALUES (?, ?, ?, ?)",
                        (tenant, payload["customer_id"], payload["amount_cents"], ref),
                    )
                _move(conn, run_id, "Charged", worker_id, charge_ref=ref)
            (charge_ref,) = conn.execute(
                "SELECT charge_ref FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            caller = Caller(tenant=tenant, run_id=run_id, op_id="notify", worker_id=worker_id)
            request = {"to": payload["customer_id"], "text": f"charged: {charge_ref}"}
            if _call(world, "email.notify", request, None, caller) is None:
                _move(conn, run_id, "Failed", worker_id, error="email.notify kept failing")
                continue
            output = {"charge_ref": charge_ref, "amount_cents": payload["amount_cents"]}
            _move(conn, run_id, "Completed", worker_id, output=json.dumps(output))
    world.close()
    return 0


class TenantEnvironment(BrokenEnvironment):
    def __init__(self, adapter: TenantAdapter, workdir: Path) -> None:
        super().__init__(adapter, workdir)
        self.shared = adapter.shared
        with _store(self.store_path) as conn:
            conn.executescript(_RECEIPTS)

    worker_module = "tenant_runtime"

    def worker_args(self) -> dict[str, Any]:
        return {"shared": self.shared}


class TenantAdapter(BrokenAdapter):
    """``shared=true``: a receipt of any tenant saves a charge."""

    name = "tenant"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, shared: str | bool = False) -> None:
        super().__init__(fixed=True)
        self.shared = str(shared).lower() in ("true", "1", "yes")

    def workflows(self) -> list[Any]:
        return [PAY]

    def open(self, workdir: Path, *, seed: int) -> TenantEnvironment:
        return TenantEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {"shared": self.shared}
