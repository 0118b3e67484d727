"""The subscription workflow, shared by both versions: subscribe -> welcome.

``subscribe`` puts a memory item ("subscribed to plan X") into the store
namespace ``("memories", tenant, customer_id)`` and then charges the first
month at the payment service; ``welcome`` notifies the customer and sets the
completion marker. A store write is not part of the checkpoint: when the
worker dies after the charge, the resumed node runs from its start and puts
the item again -- a second item if its key is fresh, the same one if the key
is stable.

``build_graph`` assembles it from one switch, ``stable_memory_key``, so that
``naive.py`` and ``correct.py`` differ only in the key and in what their
``LangGraphApp`` declares (durability, guard).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from harness.adapters import WorkflowSpec
from harness.adapters.langgraph import worker_context
from harness.world import Rejected, Unknown

SUBSCRIBE = WorkflowSpec(
    name="subscribe",
    inputs=(
        {"customer_id": "c-1", "plan": "pro", "amount_cents": 1900, "currency": "EUR"},
        {"customer_id": "c-2", "plan": "team", "amount_cents": 4900, "currency": "USD"},
    ),
    effects=("payments.charge", "email.notify"),
)
DELIVERY = {"payments.charge": "exactly_once", "email.notify": "at_least_once"}
#: Attempts per call: a timeout or a rejection is retried with the same key.
ATTEMPTS = 3


def namespace(tenant: str, run_input: Mapping[str, Any]) -> tuple[str, ...]:
    """Where a run's memories live: the customer's, within the tenant."""
    return ("memories", tenant, str(run_input["customer_id"]))


class State(TypedDict, total=False):
    customer_id: str
    plan: str
    amount_cents: int
    currency: str
    charge_ref: str
    outcome: dict[str, Any]


def build_graph(
    checkpointer: Any, code_version: int, *, store: BaseStore, stable_memory_key: bool
) -> Any:
    """The compiled subscription graph on ``checkpointer`` and ``store``.

    ``stable_memory_key``: the memory item's key is ``{thread_id}:subscribe``
    (thread and step), else a fresh ``uuid4`` on every run of the node.
    """

    def call(config: RunnableConfig, kind: str, req: dict[str, Any], key: str | None) -> str:
        ctx = worker_context(config)
        service, _, action = kind.partition(".")
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return ctx.world.call(
                    service, action, req, idempotency_key=key, caller=ctx.caller(action)
                ).external_ref
            except (Unknown, Rejected):
                if attempt == ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def subscribe(
        state: Mapping[str, Any], config: RunnableConfig, *, store: BaseStore
    ) -> dict[str, Any]:
        ctx = worker_context(config)
        key = f"{ctx.thread_id}:subscribe" if stable_memory_key else uuid.uuid4().hex
        memory = {
            "fact": f"subscribed to plan {state['plan']}",
            "plan": state["plan"],
            "monthly_cents": state["amount_cents"],
        }
        store.put(namespace(ctx.tenant, state), key, memory)
        req = {k: state[k] for k in ("customer_id", "plan", "amount_cents", "currency")}
        return {"charge_ref": call(config, "payments.charge", req, f"{ctx.thread_id}:charge")}

    def welcome(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        text = f"welcome to plan {state['plan']} ({state['charge_ref']})"
        call(config, "email.notify", {"to": state["customer_id"], "text": text}, None)
        output = {"plan": state["plan"], "charge_ref": state["charge_ref"]}
        return {"outcome": {"status": "completed", "output": output, "error": None}}

    graph = StateGraph(State)
    graph.add_node("subscribe", subscribe)
    graph.add_node("welcome", welcome)
    graph.add_edge(START, "subscribe")
    graph.add_edge("subscribe", "welcome")
    graph.add_edge("welcome", END)
    return graph.compile(checkpointer=checkpointer, store=store)
