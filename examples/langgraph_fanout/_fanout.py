"""The map-reduce refund, shared by both versions: plan -> refund_line x N -> total.

``plan`` fans out one ``Send("refund_line", ...)`` per order line; LangGraph
runs the branches of that superstep in parallel threads and ``total`` runs
once, after all of them. Each branch records its refund under its line's
sku (a dict merged by key, so the order the branches finish in does not
matter), and ``total`` sums them, notifies the customer and sets the
completion marker.

``build_graph`` assembles it from one switch, ``stable_keys``, so that
``naive.py`` and ``correct.py`` differ only in the key and in what their
``LangGraphApp`` declares (durability, guard).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from harness.adapters import WorkflowSpec
from harness.adapters.langgraph import worker_context
from harness.world import Rejected, Unknown

REFUND_ORDER = WorkflowSpec(
    name="refund_order",
    inputs=(
        {
            "order_id": "o-1",
            "customer_id": "c-1",
            "currency": "EUR",
            "lines": [
                {"sku": "mug", "amount_cents": 1250},
                {"sku": "tea", "amount_cents": 480},
                {"sku": "pot", "amount_cents": 3900},
            ],
        },
        {
            "order_id": "o-2",
            "customer_id": "c-2",
            "currency": "USD",
            "lines": [
                {"sku": "pen", "amount_cents": 300},
                {"sku": "ink", "amount_cents": 950},
            ],
        },
    ),
    effects=("payments.refund", "email.notify"),
)
DELIVERY = {"payments.refund": "exactly_once", "email.notify": "at_least_once"}
#: Attempts per call: a timeout or a rejection is retried (with the same key
#: in the correct version, with a new one in the naive version).
ATTEMPTS = 3


def merge(left: dict[str, str] | None, right: dict[str, str] | None) -> dict[str, str]:
    """The reducer of ``refunds``: each branch adds its sku's refund ref."""
    return {**(left or {}), **(right or {})}


class State(TypedDict, total=False):
    order_id: str
    customer_id: str
    currency: str
    lines: list[dict[str, Any]]
    #: sku -> refund ref, one entry per branch
    refunds: Annotated[dict[str, str], merge]
    outcome: dict[str, Any]


class Line(TypedDict):
    """What ``plan`` sends to one branch."""

    order_id: str
    customer_id: str
    currency: str
    sku: str
    amount_cents: int


def build_graph(checkpointer: Any, code_version: int, *, stable_keys: bool) -> Any:
    """The compiled map-reduce refund graph on ``checkpointer``.

    ``stable_keys``: a line's refund carries the key ``{thread_id}:refund:{sku}``,
    the same in every process that ever runs the branch; otherwise each call
    draws a fresh ``uuid4`` (what a key made "unique per request" is).
    """

    def call(
        config: RunnableConfig, kind: str, req: dict[str, Any], key: str | None, fresh: bool
    ) -> str:
        """Call the world, retrying; ``fresh``: a new uuid key on every attempt."""
        ctx = worker_context(config)
        service, _, action = kind.partition(".")
        for attempt in range(1, ATTEMPTS + 1):
            attempt_key = uuid.uuid4().hex if fresh else key
            try:
                return ctx.world.call(
                    service, action, req, idempotency_key=attempt_key, caller=ctx.caller(action)
                ).external_ref
            except (Unknown, Rejected):
                if attempt == ATTEMPTS:
                    raise
        raise AssertionError("unreachable")

    def plan(state: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def fan_out(state: Mapping[str, Any]) -> list[Send]:
        common = {k: state[k] for k in ("order_id", "customer_id", "currency")}
        return [
            Send("refund_line", {**common, "sku": ln["sku"], "amount_cents": ln["amount_cents"]})
            for ln in state["lines"]
        ]

    def refund_line(line: Line, config: RunnableConfig) -> dict[str, Any]:
        ctx = worker_context(config)
        req = dict(line)
        key = f"{ctx.thread_id}:refund:{line['sku']}"
        ref = call(config, "payments.refund", req, key, fresh=not stable_keys)
        return {"refunds": {line["sku"]: ref}}

    def total(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        cents = sum(int(ln["amount_cents"]) for ln in state["lines"])
        text = f"order {state['order_id']}: refunded {cents} {state['currency']}"
        call(config, "email.notify", {"to": state["customer_id"], "text": text}, None, False)
        output = {"refunded_cents": cents, "refunds": dict(sorted(state["refunds"].items()))}
        return {"outcome": {"status": "completed", "output": output, "error": None}}

    graph = StateGraph(State)
    graph.add_node("plan", plan)
    graph.add_node("refund_line", refund_line)
    graph.add_node("total", total)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges("plan", fan_out, ["refund_line"])
    graph.add_edge("refund_line", "total")
    graph.add_edge("total", END)
    return graph.compile(checkpointer=checkpointer)
