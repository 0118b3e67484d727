"""The refund workflow, shared by both versions: prepare -> approve -> refund -> notify.

``build_graph`` assembles it from a few switches, so that ``naive.py`` and
``correct.py`` differ exactly in what they decide, and nowhere else.

Code version 1 kept the amount in the state field ``amount``; version 2
renamed it ``amount_cents``. The request to the payments service has the
same shape in both versions (the service's API did not change).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from harness.adapters import WorkflowSpec
from harness.adapters.langgraph import worker_context
from harness.world import Rejected, Unknown

REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 99_00, "currency": "USD"},
    ),
    needs_approval=True,
    effects=("payments.refund", "email.notify"),
)
DELIVERY = {"payments.refund": "exactly_once", "email.notify": "at_least_once"}
NEEDS_APPROVAL = {"payments.refund": "payments.refund"}
#: Attempts per effect in the correct version (a timeout is retried with the same key).
ATTEMPTS = 3


class _Common(TypedDict, total=False):
    customer_id: str
    currency: str
    decision: str
    approvals: Annotated[list[dict[str, Any]], operator.add]
    refund_ref: str
    outcome: dict[str, Any]


class StateV1(_Common, total=False):
    amount: int


class StateV2(_Common, total=False):
    amount_cents: int


class StateV2Migrating(_Common, total=False):
    """Version 2 that still declares the old field, so a version-1 checkpoint
    keeps it, plus the state's schema version."""

    amount_cents: int
    amount: int
    state_version: int


def start_input(payload: Mapping[str, Any], code_version: int) -> dict[str, Any]:
    """A run's input (current schema) as code ``code_version`` took it."""
    if code_version == 1:
        return {
            "customer_id": payload["customer_id"],
            "amount": payload["amount_cents"],
            "currency": payload["currency"],
        }
    return dict(payload)


def build_graph(
    checkpointer: Any,
    code_version: int,
    *,
    idempotent: bool,
    migrate: bool,
) -> Any:
    """The compiled refund graph of ``code_version`` on ``checkpointer``.

    ``idempotent``: the refund carries a key derived from the thread id and is
    retried with it after a timeout; ``migrate``: version 2 upgrades a
    version-1 state on every node it resumes in.
    """

    def state_of(state: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        """(amount in cents, the fields this node writes back to upgrade the state)."""
        if code_version == 1:
            return int(state["amount"]), {}
        if migrate and "amount_cents" not in state and "amount" in state:
            cents = int(state["amount"])
            return cents, {"amount_cents": cents, "state_version": 2}
        # naive: a version-1 checkpoint lost 'amount' silently when loaded
        # into the version-2 schema, so this raises KeyError.
        return int(state["amount_cents"]), {}

    def request(state: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        cents, upgrade = state_of(state)
        req = {
            "customer_id": state["customer_id"],
            "amount_cents": cents,
            "currency": state["currency"],
        }
        return req, upgrade

    def call(config: RunnableConfig, kind: str, req: dict[str, Any], key: str | None) -> str:
        ctx = worker_context(config)
        service, _, action = kind.partition(".")
        attempts = ATTEMPTS if idempotent else 1
        for attempt in range(1, attempts + 1):
            try:
                return ctx.world.call(
                    service, action, req, idempotency_key=key, caller=ctx.caller(action)
                ).external_ref
            except (Unknown, Rejected):
                if attempt == attempts:
                    raise
        raise AssertionError("unreachable")

    def prepare(state: Mapping[str, Any]) -> dict[str, Any]:
        _, upgrade = state_of(state)
        return {**upgrade, "state_version": code_version} if migrate else upgrade

    def approve(state: Mapping[str, Any]) -> dict[str, Any]:
        req, upgrade = request(state)
        answer = interrupt({"action": "payments.refund", "params": req, "role": "manager"})
        record = {
            "approval_id": answer.get("approval_id"),
            "action": "payments.refund",
            "params": req,
            "decision": answer["decision"],
            "approver": answer.get("approver"),
            "role": answer.get("role"),
        }
        return {**upgrade, "decision": answer["decision"], "approvals": [record]}

    def route(state: Mapping[str, Any]) -> Literal["refund", "reject"]:
        return "refund" if state.get("decision") == "approved" else "reject"

    def reject(state: Mapping[str, Any]) -> dict[str, Any]:
        return {"outcome": {"status": "cancelled", "output": {"refunded": False}, "error": None}}

    def refund(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        req, upgrade = request(state)
        ctx = worker_context(config)
        key = f"{ctx.thread_id}:refund" if idempotent else None
        return {**upgrade, "refund_ref": call(config, "payments.refund", req, key)}

    def notify(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        req, upgrade = request(state)
        text = f"refunded {req['amount_cents']} {req['currency']} ({state['refund_ref']})"
        call(config, "email.notify", {"to": req["customer_id"], "text": text}, None)
        output = {"refund_ref": state["refund_ref"], "amount_cents": req["amount_cents"]}
        return {**upgrade, "outcome": {"status": "completed", "output": output, "error": None}}

    schema: type[Any] = StateV1 if code_version == 1 else StateV2Migrating if migrate else StateV2
    graph = StateGraph(schema)
    graph.add_node("prepare", prepare)
    graph.add_node("approve", approve)
    graph.add_node("reject", reject)
    graph.add_node("refund", refund)
    graph.add_node("notify", notify)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "approve")
    graph.add_conditional_edges("approve", route)
    graph.add_edge("reject", END)
    graph.add_edge("refund", "notify")
    graph.add_edge("notify", END)
    return graph.compile(checkpointer=checkpointer)
