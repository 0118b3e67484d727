"""A small builder for crafted histories: ``H().declaration().submit("r1")...``.

Each method appends one or two events (in the shape of ``docs/history.md``)
and returns the builder; ``mark(name)`` remembers the last event's index so a
test can assert the witness; ``build()`` returns a :class:`History`.
"""

from __future__ import annotations

from typing import Any

from harness.history import History
from harness.model import Event, EventF

CHARGE = "payments.charge"
REFUND = "payments.refund"
NOTIFY = "email.notify"
SEND = "email.send"

TABLE = {
    "Created": ["Running", "Cancelled", "Failed"],
    "Running": ["Running", "WaitingForApproval", "Completed", "Failed", "Cancelled"],
    "WaitingForApproval": ["Running", "Cancelled", "Failed", "WaitingForApproval"],
    "Completed": [],
    "Failed": [],
    "Cancelled": [],
}


class H:
    def __init__(self) -> None:
        self.events: list[Event] = []
        self.marks: dict[str, int] = {}
        self.time = 0.0

    # -- plumbing -------------------------------------------------------------
    def add(self, type_: str, f: EventF, value: dict[str, Any], process: str = "runner") -> H:
        self.time += 1.0
        self.events.append(
            Event(
                index=len(self.events),
                time=self.time,
                process=process,
                type=type_,
                f=f,
                value=value,
            )
        )
        return self

    def mark(self, name: str) -> H:
        self.marks[name] = self.events[-1].index
        return self

    @property
    def last(self) -> int:
        return self.events[-1].index

    def build(self) -> History:
        return History(self.events)

    # -- events ---------------------------------------------------------------
    def declaration(
        self,
        delivery: dict[str, str] | None = None,
        transitions: dict[str, list[str]] | None = None,
        needs_approval: dict[str, str] | None = None,
        capabilities: tuple[str, ...] = ("context", "approvals", "memory_injection"),
        memory_floors: dict[str, Any] | None = None,
    ) -> H:
        floors = {} if memory_floors is None else {"memory_floors": memory_floors}
        return self.add(
            "info",
            EventF.DECLARATION,
            {
                "delivery": delivery or {},
                "transitions": transitions,
                "needs_approval": needs_approval or {},
                "capabilities": list(capabilities),
                "adapter": "crafted",
                **floors,
            },
        )

    def submit(
        self,
        run_id: str,
        tenant: str = "t1",
        outcome: str = "ok",
        workflow: str = "refund",
        run_input: dict[str, Any] | None = None,
    ) -> H:
        run = {"workflow": workflow, "input": run_input or {}}
        value = {"run_id": run_id, "tenant": tenant, **run}
        self.add("invoke", EventF.SUBMIT, value)
        if outcome == "invoke":
            return self
        done = {"run_id": run_id, "tenant": tenant, **run}
        if outcome == "fail":
            done["error"] = "refused"
        return self.add(outcome, EventF.SUBMIT, done)

    def effect(
        self,
        run_id: str | None,
        kind: str = CHARGE,
        request_hash: str = "h1",
        *,
        applied: bool = True,
        deduplicated: bool = False,
        side_effect: bool = True,
        outcome: str | None = None,
        tenant: str = "t1",
        at: float | None = None,
        worker_id: str | None = None,
        external_ref: str | None = None,
        request: dict[str, Any] | None = None,
    ) -> H:
        service, action = kind.split(".")
        if outcome is None:
            outcome = "deduplicated" if deduplicated else ("applied" if applied else "rejected")
        caller = {} if worker_id is None else {"worker_id": worker_id}
        if external_ref is not None:
            caller["external_ref"] = external_ref
        if request is not None:
            caller["request"] = request
        return self.add(
            "info",
            EventF.EFFECT,
            {
                **caller,
                "seq": len(self.events),
                "service": service,
                "action": action,
                "kind": kind,
                "tenant": tenant,
                "run_id": run_id,
                "request_hash": request_hash,
                "outcome": outcome,
                "applied": applied,
                "deduplicated": deduplicated,
                "side_effect": side_effect,
                "at": self.time if at is None else at,
            },
            process="world",
        )

    def transition(
        self,
        run_id: str,
        src: str | None,
        dst: str,
        version: int,
        action: str | None = None,
        tenant: str = "t1",
    ) -> H:
        return self.add(
            "info",
            EventF.TRANSITION,
            {
                "run_id": run_id,
                "tenant": tenant,
                "from": src,
                "to": dst,
                "state_version": version,
                "action": action,
                "actor": "w1",
            },
        )

    def approval(
        self,
        run_id: str,
        action: str = REFUND,
        params_hash: str = "h1",
        decision: str | None = "approved",
        expires_at: float | None = 1000.0,
        approval_id: str | None = None,
        decided_at: float | None = None,
    ) -> H:
        value = {
            "run_id": run_id,
            "approval_id": approval_id or f"{run_id}:approval",
            "action": action,
            "params_hash": params_hash,
            "decision": decision,
            "expires_at": expires_at,
        }
        if decided_at is not None:
            value["decided_at"] = decided_at
        return self.add("info", EventF.APPROVAL, value)

    def deliver(
        self,
        run_id: str,
        variant: str = "valid",
        decision: str = "approved",
        *,
        approval_id: str | None = None,
        message_id: str | None = None,
        accepted: bool = True,
        kind: str = "approval_decision",
        tenants: tuple[str, str] | None = None,
    ) -> H:
        """A decision the runner delivered: its invoke (marked), then its ok.
        ``tenants``: (the tenant the message speaks for, the run's tenant)."""
        mid = message_id or f"m{len(self.events)}"
        signed = {"tenant": tenants[0], "run_tenant": tenants[1]} if tenants else {}
        self.add(
            "invoke",
            EventF.DELIVER,
            {
                "message_id": mid,
                "run_id": run_id,
                "kind": kind,
                "variant": variant,
                "decision": decision,
                "approval_id": approval_id or f"{run_id}:approval",
                **signed,
            },
        )
        invoke = self.last
        self.add("ok", EventF.DELIVER, {"message_id": mid, "run_id": run_id, "accepted": accepted})
        self.marks.setdefault(f"deliver:{mid}", invoke)
        return self

    def memory(
        self,
        memory_id: str,
        kind: str,
        tenant: str = "t1",
        owner_tenant: str | None = None,
        version: int = 1,
        namespace: str = "policy",
        trust: float | None = None,
    ) -> H:
        """A planted record; ``trust`` when the harness gave it one."""
        given = {} if trust is None else {"trust": trust}
        return self.add(
            "info",
            EventF.MEMORY,
            {
                "tenant": tenant,
                "namespace": namespace,
                "key": memory_id.split(":")[0],
                "memory_id": memory_id,
                "version": version,
                "kind": kind,
                "provenance": "user_supplied",
                "value": 1,
                "owner_tenant": owner_tenant or tenant,
                **given,
            },
            process="nemesis",
        )

    def context(
        self,
        run_id: str,
        step: str,
        context: dict[str, Any],
        memory_ids: tuple[str, ...] = (),
    ) -> H:
        return self.add(
            "info",
            EventF.CONTEXT,
            {
                "run_id": run_id,
                "step": step,
                "worker_id": "w1",
                "fingerprint": "fp",
                "context": context,
                "memory_ids": list(memory_ids),
            },
        )

    def fault(self, kind: str, runs: list[str] | None = None, fired: bool = True) -> H:
        value: dict[str, Any] = {"kind": kind, "fired": fired}
        if runs is not None:
            value["runs"] = runs
        return self.add("info", EventF.FAULT, value, process="nemesis")

    def final(
        self,
        run_id: str,
        state: str,
        output: dict[str, Any] | None = None,
        error: str | None = None,
        tenant: str = "t1",
        wake_at: float | None = None,
    ) -> H:
        timer = {} if wake_at is None else {"wake_at": wake_at}
        return self.add(
            "info",
            EventF.FINAL,
            {
                "run_id": run_id,
                "tenant": tenant,
                "state": state,
                "raw_status": state.title(),
                "output": output,
                "error": error,
                "waiting_on": None,
                **timer,
            },
        )

    def state(self, run_id: str, snapshot: Any, volatile: tuple[str, ...] = ()) -> H:
        """The run's durable state after the scenario (``durable_state``)."""
        value = {"run_id": run_id, "state": snapshot, "volatile": list(volatile)}
        return self.add("info", EventF.STATE, value)

    def run(
        self,
        run_id: str,
        *effects: tuple[str, str],
        state: str = "completed",
        output: dict[str, Any] | None = None,
        tenant: str = "t1",
    ) -> H:
        """A whole run: submitted, its effects applied once each, then final."""
        self.submit(run_id, tenant)
        for kind, digest in effects:
            self.effect(run_id, kind, digest, tenant=tenant)
        return self.final(run_id, state, output, tenant=tenant)
