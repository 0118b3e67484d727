"""The refund agent, shared by both versions: one tool call, then an answer.

``build_agent`` assembles it from one switch, so that ``naive.py`` and
``careful.py`` differ exactly in what they decide, and nowhere else.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

from agents import Agent, FunctionTool, RunContextWrapper, function_tool
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.testing import assistant_message, function_call
from agents.usage import Usage

from harness.adapters import WorkflowSpec
from harness.adapters.openai_agents import AgentsContext

REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 99_00, "currency": "USD"},
    ),
    effects=("payments.refund",),
)
DELIVERY = {"payments.refund": "exactly_once"}


def message(run_input: Mapping[str, Any]) -> str:
    """The user's message: the request as JSON, which the scripted model reads."""
    return json.dumps(dict(run_input), sort_keys=True)


class ScriptedRefundModel(Model):
    """A model without a network: it answers from its input alone.

    After the last user message: no tool output yet -> call ``refund`` with
    the request that message holds; a tool output -> answer with it. Like a
    real model, it acts on the latest request it sees.
    """

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items: list[Any] = [{"role": "user", "content": input}] if isinstance(input, str) else input
        last = max(i for i, item in enumerate(items) if item.get("role") == "user")
        outputs = [i for i in items[last:] if i.get("type") == "function_call_output"]
        if outputs:
            answer = assistant_message(f"Refunded: {outputs[-1]['output']}", item_id=f"msg-{last}")
            return ModelResponse(output=[answer], usage=Usage(), response_id=None)
        request = json.loads(items[last]["content"])
        call = function_call("refund", request, call_id=f"call-{last}")
        return ModelResponse(output=[call], usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the scripted model does not stream")


def refund_tool(*, keyed: bool) -> FunctionTool:
    """The ``refund`` tool; ``keyed``: an idempotency key from the run's id."""

    def refund(
        ctx: RunContextWrapper[AgentsContext], customer_id: str, amount_cents: int, currency: str
    ) -> str:
        """Refund ``amount_cents`` in ``currency`` to the customer; returns the payment's ref."""
        run = ctx.context
        request = {"customer_id": customer_id, "amount_cents": amount_cents, "currency": currency}
        key = f"{run.run_id}:refund" if keyed else None
        answer = run.world.call(
            "payments", "refund", request, idempotency_key=key, caller=run.caller("refund")
        )
        return answer.external_ref

    # A failing call fails the turn (not a tool output the model reads), so
    # the next worker runs it again.
    return function_tool(refund, failure_error_function=None)


def build_agent(*, keyed: bool) -> Agent[AgentsContext]:
    return Agent(
        name="refunds",
        instructions="Refund what the customer asks for, then say so.",
        model=ScriptedRefundModel(),
        tools=[refund_tool(keyed=keyed)],
    )
