"""The hiring workflow, shared by both versions: screen -> offer, the screening a subgraph.

The parent graph prepares the candidate, runs the ``screening`` subgraph and
then sends the offer (``email.notify``) or ends the run cancelled. Screening
is a subgraph because several workflows use it. In it, one node buys a
background check from a paid provider -- a side-effecting ``@task``
(``payments.charge``) -- and then waits, with ``interrupt()``, for the hiring
manager's decision on the report. The ``interrupt()`` is inside the
subgraph, and the ``@task`` is called before it in the same node: the shape
of upstream issue #6792.

``build_graph`` assembles it from one switch, so that ``naive.py`` and
``correct.py`` differ exactly in what they decide: ``idempotent`` gives the
check a key from the thread id and retries it with that key after a timeout.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.func import task
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from harness.adapters import WorkflowSpec
from harness.adapters.langgraph import worker_context
from harness.world import Rejected, Unknown

HIRING = WorkflowSpec(
    name="hiring",
    inputs=(
        {"candidate_id": "cand-1", "role": "engineer", "check_cents": 2900, "currency": "EUR"},
        {"candidate_id": "cand-2", "role": "analyst", "check_cents": 4500, "currency": "USD"},
    ),
    needs_approval=True,
    effects=("payments.charge", "email.notify"),
)
# The manager's decision gates no effect in the harness's sense: the check is
# bought before it, and the offer may be sent twice (email has no keys).
DELIVERY = {"payments.charge": "exactly_once", "email.notify": "at_least_once"}
#: Attempts per effect in the idempotent version (a timeout is retried with the same key).
ATTEMPTS = 3


class State(TypedDict, total=False):
    candidate_id: str
    role: str
    check_cents: int
    currency: str
    #: the background check's payment ref
    check_ref: str
    decision: str
    approvals: Annotated[list[dict[str, Any]], operator.add]
    outcome: dict[str, Any]


def build_graph(checkpointer: Any, code_version: int, *, idempotent: bool) -> Any:
    """The compiled hiring graph on ``checkpointer`` (one code version)."""

    def call(kind: str, req: dict[str, Any], key: str | None, config: Mapping[str, Any]) -> str:
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

    @task
    def buy_background_check(req: dict[str, Any]) -> str:
        """Pay the screening provider; the task's result is checkpointed."""
        config = get_config()  # the task's config carries the worker context
        key = f"{worker_context(config).thread_id}:background-check" if idempotent else None
        return call("payments.charge", req, key, config)

    def check_and_ask(state: Mapping[str, Any]) -> dict[str, Any]:
        req = {
            "account": "hr",
            "amount_cents": state["check_cents"],
            "currency": state["currency"],
            "memo": f"background check of {state['candidate_id']}",
        }
        ref = buy_background_check(req).result()
        params = {"candidate_id": state["candidate_id"], "role": state["role"], "check": ref}
        answer = interrupt({"action": "hiring.decide", "params": params, "role": "manager"})
        record = {
            "approval_id": answer.get("approval_id"),
            "action": "hiring.decide",
            "params": params,
            "decision": answer["decision"],
            "approver": answer.get("approver"),
            "role": answer.get("role"),
        }
        return {"check_ref": ref, "decision": answer["decision"], "approvals": [record]}

    screening = StateGraph(State)
    screening.add_node("check_and_ask", check_and_ask)
    screening.add_edge(START, "check_and_ask")
    screening.add_edge("check_and_ask", END)

    def prepare(state: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def route(state: Mapping[str, Any]) -> Literal["offer", "decline"]:
        return "offer" if state.get("decision") == "approved" else "decline"

    def offer(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        text = f"we offer you the {state['role']} position"
        call("email.notify", {"to": state["candidate_id"], "text": text}, None, config)
        output = {"hired": True, "check_ref": state["check_ref"]}
        return {"outcome": {"status": "completed", "output": output, "error": None}}

    def decline(state: Mapping[str, Any]) -> dict[str, Any]:
        output = {"hired": False, "check_ref": state.get("check_ref")}
        return {"outcome": {"status": "cancelled", "output": output, "error": None}}

    graph = StateGraph(State)
    graph.add_node("prepare", prepare)
    graph.add_node("screening", screening.compile())
    graph.add_node("offer", offer)
    graph.add_node("decline", decline)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "screening")
    graph.add_conditional_edges("screening", route)
    graph.add_edge("offer", END)
    graph.add_edge("decline", END)
    return graph.compile(checkpointer=checkpointer)
