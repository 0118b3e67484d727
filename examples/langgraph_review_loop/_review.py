"""The review loop, shared by both versions: each reviewer in turn, then publish.

A document goes to every reviewer its input names, one after the other. A
round bills the customer the reviewer's fee (``payments.charge``: the review
service is paid per review) and then waits for the reviewer's verdict through
``interrupt()``. A rejection ends the run cancelled; after the last approval
the customer is told the document is published (``email.notify``).

``build_graph`` assembles it from two switches, so that ``naive.py`` and
``correct.py`` differ exactly in what they decide:

* ``split`` false: the loop is a Python ``for`` inside one node, the fee billed
  right before each ``interrupt()`` -- how the loop is usually first written.
  LangGraph re-runs a node from its start on every resume (an earlier
  ``interrupt()`` returns its recorded answer), so the fee of round 1 is billed
  again at every later resume. Split: the fee is billed in a node of its own
  (``bill``), whose result is checkpointed, and the verdict waited for in the
  next (``ask``); the graph loops ``bill -> ask -> bill ...``.
* ``idempotent``: each fee carries a key from the thread id and the round, and
  is retried with it after a timeout; the payment service applies it once
  however often it is asked.
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

REVIEW = WorkflowSpec(
    name="review",
    inputs=(
        {
            "doc_id": "d-1",
            "customer_id": "c-1",
            "reviewers": ["legal", "finance"],
            "fee_cents": 500,
            "currency": "EUR",
        },
        {
            "doc_id": "d-2",
            "customer_id": "c-2",
            "reviewers": ["legal", "brand", "ceo"],
            "fee_cents": 800,
            "currency": "USD",
        },
    ),
    needs_approval=True,
    effects=("payments.charge", "email.notify"),
)
# Nothing is gated by the verdicts in the harness's sense: the fees are owed
# before the review, and the notice may be sent twice (email has no keys).
DELIVERY = {"payments.charge": "exactly_once", "email.notify": "at_least_once"}
#: Attempts per effect in the idempotent version (a timeout is retried with the same key).
ATTEMPTS = 3


class State(TypedDict, total=False):
    doc_id: str
    customer_id: str
    reviewers: list[str]
    fee_cents: int
    currency: str
    #: the reviewer whose round is next (split version)
    round: int
    #: payment refs of the fees billed, in round order
    fees: Annotated[list[str], operator.add]
    decision: str
    approvals: Annotated[list[dict[str, Any]], operator.add]
    outcome: dict[str, Any]


def build_graph(checkpointer: Any, code_version: int, *, split: bool, idempotent: bool) -> Any:
    """The compiled review graph on ``checkpointer`` (one code version)."""

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

    def bill_round(state: Mapping[str, Any], config: RunnableConfig, k: int) -> str:
        reviewer = state["reviewers"][k]
        req = {
            "customer_id": state["customer_id"],
            "amount_cents": state["fee_cents"],
            "currency": state["currency"],
            "memo": f"review of {state['doc_id']} by {reviewer} (round {k + 1})",
        }
        key = f"{worker_context(config).thread_id}:review-fee:{k}" if idempotent else None
        return call(config, "payments.charge", req, key)

    def ask_round(state: Mapping[str, Any], k: int) -> tuple[str, dict[str, Any]]:
        """Wait for reviewer ``k``'s verdict: (decision, the record of it)."""
        reviewer = state["reviewers"][k]
        params = {"doc_id": state["doc_id"], "reviewer": reviewer, "round": k + 1}
        answer = interrupt({"action": "documents.review", "params": params, "role": reviewer})
        record = {
            "approval_id": answer.get("approval_id"),
            "action": "documents.review",
            "params": params,
            "decision": answer["decision"],
            "approver": answer.get("approver"),
            "role": answer.get("role"),
        }
        return answer["decision"], record

    # -- naive: the whole loop in one node ---------------------------------------

    def review_all(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        fees: list[str] = []
        records: list[dict[str, Any]] = []
        decision = "approved"
        for k in range(len(state["reviewers"])):
            fees.append(bill_round(state, config, k))  # re-run at every resume
            decision, record = ask_round(state, k)
            records.append(record)
            if decision != "approved":
                break
        return {"fees": fees, "approvals": records, "decision": decision}

    # -- split: one node bills, the next one asks ---------------------------------

    def bill(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        return {"fees": [bill_round(state, config, state.get("round", 0))]}

    def ask(state: Mapping[str, Any]) -> dict[str, Any]:
        k = state.get("round", 0)
        decision, record = ask_round(state, k)
        return {"round": k + 1, "decision": decision, "approvals": [record]}

    def next_round(state: Mapping[str, Any]) -> Literal["bill", "publish", "reject"]:
        if state.get("decision") != "approved":
            return "reject"
        return "bill" if state.get("round", 0) < len(state["reviewers"]) else "publish"

    def route(state: Mapping[str, Any]) -> Literal["publish", "reject"]:
        return "publish" if state.get("decision") == "approved" else "reject"

    # -- both ---------------------------------------------------------------------

    def reject(state: Mapping[str, Any]) -> dict[str, Any]:
        output = {"published": False, "fees": list(state.get("fees", []))}
        return {"outcome": {"status": "cancelled", "output": output, "error": None}}

    def publish(state: Mapping[str, Any], config: RunnableConfig) -> dict[str, Any]:
        who = ", ".join(state["reviewers"])
        text = f"{state['doc_id']} is published (approved by {who})"
        call(config, "email.notify", {"to": state["customer_id"], "text": text}, None)
        output = {"published": True, "fees": list(state.get("fees", []))}
        return {"outcome": {"status": "completed", "output": output, "error": None}}

    graph = StateGraph(State)
    graph.add_node("reject", reject)
    graph.add_node("publish", publish)
    if split:
        graph.add_node("bill", bill)
        graph.add_node("ask", ask)
        graph.add_edge(START, "bill")
        graph.add_edge("bill", "ask")
        graph.add_conditional_edges("ask", next_round)
    else:
        graph.add_node("review", review_all)
        graph.add_edge(START, "review")
        graph.add_conditional_edges("review", route)
    graph.add_edge("reject", END)
    graph.add_edge("publish", END)
    return graph.compile(checkpointer=checkpointer)
