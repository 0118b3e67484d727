"""A runtime whose model picks one of two tools, and is not scripted.

The broken runtime's ``pay`` workflow, fixed (the charge keyed by the run:
exactly once), whose last step asks a "model" which of two tools tells the
customer: ``send_receipt`` or ``send_thanks`` (both ``email.notify``, with
other words). ``model=scripted`` always answers ``send_receipt``, as a
script would. ``model=unscripted`` answers as a sampled model does: not the
same from one deployment to the next. A truly random choice would make the
tests flaky (two runs agree by chance half the time), so the adapter keeps
a count of the deployments it opened and the model's "sample" is its
parity: two consecutive fault-free runs always disagree.

Importable as ``unscripted_runtime`` (tests/engine is on ``sys.path``).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from broken_runtime import PAY, BrokenAdapter, BrokenEnvironment, _call, _move, _store

from harness.world import Caller, WorldClient

EPOCH = 1_700_000_000.0
TOOLS = {
    "send_receipt": lambda cents: f"receipt: you were charged {cents} cents",
    "send_thanks": lambda cents: "thank you for your order",
}


def worker_main(args: dict[str, Any]) -> int:
    """Charge each unfinished run (keyed by the run), then tell the
    customer with the tool the model picked for this deployment."""
    worker_id, tool = str(args["worker_id"]), str(args["tool"])
    world = WorldClient(args["world"], clock=lambda: EPOCH)
    with _store(args["store"]) as conn:
        pending = conn.execute(
            "SELECT run_id, tenant, input, status FROM runs "
            "WHERE status IN ('Created', 'Charged') ORDER BY run_id"
        ).fetchall()
        for run_id, tenant, raw_input, status in pending:
            payload = json.loads(raw_input)
            if status == "Created":
                caller = Caller(tenant=tenant, run_id=run_id, op_id="charge", worker_id=worker_id)
                request = {"customer_id": payload["customer_id"], "amount": payload["amount_cents"]}
                ref = _call(world, "payments.charge", request, f"{run_id}:charge", caller)
                if ref is None:
                    _move(conn, run_id, "Failed", worker_id, error="payments.charge kept failing")
                    continue
                _move(conn, run_id, "Charged", worker_id, charge_ref=ref)
            (charge_ref,) = conn.execute(
                "SELECT charge_ref FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            caller = Caller(tenant=tenant, run_id=run_id, op_id="notify", worker_id=worker_id)
            request = {"to": payload["customer_id"], "text": TOOLS[tool](payload["amount_cents"])}
            if _call(world, "email.notify", request, None, caller) is None:
                _move(conn, run_id, "Failed", worker_id, error="email.notify kept failing")
                continue
            output = {"charge_ref": charge_ref, "told_by": tool}
            _move(conn, run_id, "Completed", worker_id, output=json.dumps(output))
    world.close()
    return 0


class UnscriptedEnvironment(BrokenEnvironment):
    def __init__(self, adapter: UnscriptedAdapter, workdir: Path, tool: str) -> None:
        super().__init__(adapter, workdir)
        self.tool = tool

    worker_module = "unscripted_runtime"

    def worker_args(self) -> dict[str, Any]:
        return {"tool": self.tool}


class UnscriptedAdapter(BrokenAdapter):
    """``model=scripted``: always ``send_receipt``; ``model=unscripted``:
    ``send_receipt`` or ``send_thanks``, by turns from one deployment to
    the next."""

    name = "unscripted"

    def __init__(self, model: str = "unscripted") -> None:
        super().__init__(fixed=True)
        if model not in ("scripted", "unscripted"):
            raise ValueError(f"model={model!r}: say scripted or unscripted")
        self.model = model
        self._opened = itertools.count()

    def workflows(self) -> list[Any]:
        return [PAY]

    def open(self, workdir: Path, *, seed: int) -> UnscriptedEnvironment:
        n = next(self._opened)
        tool = "send_receipt" if self.model == "scripted" or n % 2 == 0 else "send_thanks"
        return UnscriptedEnvironment(self, workdir, tool)

    def describe(self) -> dict[str, Any]:
        return {"model": self.model}
