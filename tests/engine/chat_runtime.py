"""A runtime that keeps a conversation, and may re-append its input on resume.

The broken runtime's ``pay`` workflow (``broken_runtime``), its charge keyed
by the run (exactly once), with a conversation kept durably beside each run:
the user's message when a worker takes the run up, the tool's result, the
assistant's answer -- what an agent SDK's session table holds. With
``reappend=true`` every worker that takes a run up appends the user's message
again, as an SDK does that re-runs the turn on resume: a worker killed after
the charge leaves, once resumed, the user's message twice in the session. No
effect is repeated, no output differs, every transition is legal: only
``state_equivalence`` can see it. ``reappend=false`` appends it once.

Importable as ``chat_runtime`` (tests/engine is on ``sys.path``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from broken_runtime import PAY, BrokenAdapter, BrokenEnvironment, _call, _move, _store

from harness.adapters import Capability, DurableState
from harness.world import Caller, WorldClient

EPOCH = 1_700_000_000.0

_MESSAGES = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL,
    role TEXT NOT NULL, content TEXT NOT NULL
);
"""


def _say(conn: Any, run_id: str, role: str, content: str) -> None:
    conn.execute("BEGIN IMMEDIATE")
    conn.execute(
        "INSERT INTO messages (run_id, role, content) VALUES (?, ?, ?)", (run_id, role, content)
    )
    conn.execute("COMMIT")


def worker_main(args: dict[str, Any]) -> int:
    """Take each unfinished run, keep its conversation, work it to its end."""
    worker_id, reappend = str(args["worker_id"]), bool(args["reappend"])
    world = WorldClient(args["world"], clock=lambda: EPOCH)
    with _store(args["store"]) as conn:
        pending = conn.execute(
            "SELECT run_id, tenant, input, status FROM runs "
            "WHERE status IN ('Created', 'Charged') ORDER BY run_id"
        ).fetchall()
        for run_id, tenant, raw_input, status in pending:
            payload = json.loads(raw_input)
            (said,) = conn.execute(
                "SELECT COUNT(*) FROM messages WHERE run_id = ?", (run_id,)
            ).fetchone()
            if reappend or not said:
                _say(conn, run_id, "user", f"please charge {payload['amount_cents']} cents")
            if status == "Created":
                caller = Caller(tenant=tenant, run_id=run_id, op_id="charge", worker_id=worker_id)
                request = {"customer_id": payload["customer_id"], "amount": payload["amount_cents"]}
                ref = _call(world, "payments.charge", request, f"{run_id}:charge", caller)
                if ref is None:
                    _move(conn, run_id, "Failed", worker_id, error="payments.charge kept failing")
                    continue
                _move(conn, run_id, "Charged", worker_id, charge_ref=ref)
                _say(conn, run_id, "tool", f"charged: {ref}")
            (charge_ref,) = conn.execute(
                "SELECT charge_ref FROM runs WHERE run_id = ?", (run_id,)
            ).fetchone()
            caller = Caller(tenant=tenant, run_id=run_id, op_id="notify", worker_id=worker_id)
            text = f"charged {payload['amount_cents']} cents"
            request = {"to": payload["customer_id"], "text": text}
            if _call(world, "email.notify", request, None, caller) is None:
                _move(conn, run_id, "Failed", worker_id, error="email.notify kept failing")
                continue
            output = {"charge_ref": charge_ref, "amount_cents": payload["amount_cents"]}
            _say(conn, run_id, "assistant", "done: you were charged")
            _move(conn, run_id, "Completed", worker_id, output=json.dumps(output))
    world.close()
    return 0


class ChatEnvironment(BrokenEnvironment):
    def __init__(self, adapter: ChatAdapter, workdir: Path) -> None:
        super().__init__(adapter, workdir)
        self.reappend = adapter.reappend
        with _store(self.store_path) as conn:
            conn.executescript(_MESSAGES)

    worker_module = "chat_runtime"

    def worker_args(self) -> dict[str, Any]:
        return {"reappend": self.reappend}

    def durable_state(self) -> DurableState:
        with _store(self.store_path) as conn:
            rows = conn.execute("SELECT run_id, status, charge_ref FROM runs").fetchall()
            messages = conn.execute(
                "SELECT run_id, role, content FROM messages ORDER BY seq"
            ).fetchall()
        runs: dict[str, Any] = {
            run_id: {"status": status, "charge_ref": ref, "session": []}
            for run_id, status, ref in rows
        }
        for run_id, role, content in messages:
            runs[run_id]["session"].append({"role": role, "content": content})
        return DurableState(runs=runs)


class ChatAdapter(BrokenAdapter):
    """``reappend=true``: the user's message is appended again on every resume."""

    name = "chat"
    capabilities: frozenset[Capability] = frozenset({Capability.DURABLE_STATE})

    def __init__(self, reappend: str | bool = False) -> None:
        super().__init__(fixed=True)
        self.reappend = str(reappend).lower() in ("true", "1", "yes")

    def workflows(self) -> list[Any]:
        return [PAY]

    def open(self, workdir: Path, *, seed: int) -> ChatEnvironment:
        return ChatEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {"reappend": self.reappend}
