"""The world's model endpoint, through the real ``openai`` client.

Both APIs an app may use (``/v1/chat/completions`` and ``/v1/responses``),
streamed and not, answer from the same script: the tool call first (with
the user's message as its arguments), then, given the tool's output, the
answer. Streamed, the same reply arrives in pieces; the client's own stream
helpers put it together and check the events' order. Every call is recorded
in the world with its caller's run and its token counts; none is an effect.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import pytest

from harness.world import Caller, World
from harness.world._chat import parse_chat_script

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.slow  # the openai client's import is most of it

CALLER = Caller(tenant="t1", run_id="r1", worker_id="w1")
SCRIPT = {
    "steps": [{"tool": "refund", "arguments": "$user"}, {"content": "Refunded: $tool_output"}]
}
ASK = {"customer_id": "c-1", "amount_cents": 5}
USER = {"role": "user", "content": json.dumps(ASK)}
PARAMETERS = {"type": "object", "properties": {"customer_id": {"type": "string"}}}
CHAT_TOOLS = [{"type": "function", "function": {"name": "refund", "parameters": PARAMETERS}}]
RESPONSES_TOOLS = [{"type": "function", "name": "refund", "parameters": PARAMETERS}]


@pytest.fixture
def model(world: World) -> Iterator[Any]:
    world.client().attribute(CALLER)
    # The client closed with the face: a pooled connection left to the
    # garbage collector is an "unclosed socket" in whichever test runs then.
    with (
        world.serve_http(model=parse_chat_script(SCRIPT)) as face,
        openai.OpenAI(base_url=face.url + "/v1", api_key="none", max_retries=0) as client,
    ):
        yield client


def test_chat_completions_stream_the_reply_they_give_whole(model: Any, world: World) -> None:
    whole = model.chat.completions.create(model="m", messages=[USER], tools=CHAT_TOOLS)
    (call,) = whole.choices[0].message.tool_calls
    with model.chat.completions.stream(
        model="m", messages=[USER], tools=CHAT_TOOLS, stream_options={"include_usage": True}
    ) as stream:
        streamed = stream.get_final_completion()
    (scall,) = streamed.choices[0].message.tool_calls
    assert (scall.function.name, scall.function.arguments) == ("refund", call.function.arguments)
    # Asked the same again, a real model names its call anew: an app that
    # asks again after a crash must not find the first call's id.
    assert scall.id != call.id and scall.id.startswith("call_")
    assert json.loads(call.function.arguments) == ASK
    assert streamed.choices[0].finish_reason == "tool_calls"

    conversation = [
        USER,
        whole.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": "pay-1"},
    ]
    chunks = list(
        model.chat.completions.create(
            model="m", messages=conversation, tools=CHAT_TOOLS, stream=True
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Refunded: pay-1"
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 1  # in pieces
    assert chunks[-1].choices[0].finish_reason == "stop"

    calls = world.model_calls()
    assert [(c["step"], c["run_id"], c["pid"]) for c in calls] == [
        (0, "r1", os.getpid()),
        (0, "r1", os.getpid()),
        (1, "r1", os.getpid()),
    ]
    assert streamed.usage is not None and streamed.usage.total_tokens == (
        calls[1]["prompt_tokens"] + calls[1]["completion_tokens"]
    )
    assert world.requests() == []  # a model call is never an effect


def test_responses_answer_with_a_function_call_then_the_text_streamed_or_not(
    model: Any, world: World
) -> None:
    first = model.responses.create(
        model="m", instructions="You refund.", input=json.dumps(ASK), tools=RESPONSES_TOOLS
    )
    (call,) = first.output
    assert (call.type, call.name, json.loads(call.arguments)) == ("function_call", "refund", ASK)
    with model.responses.stream(
        model="m", instructions="You refund.", input=json.dumps(ASK), tools=RESPONSES_TOOLS
    ) as stream:
        streamed = stream.get_final_response()
    assert [(o.type, o.arguments) for o in streamed.output] == [("function_call", call.arguments)]
    assert streamed.output[0].call_id != call.call_id  # asked again: a new call

    # The tool's output goes back as an input item, as the Agents SDK sends it.
    items = [
        {"role": "user", "content": json.dumps(ASK)},
        {
            "type": "function_call",
            "call_id": call.call_id,
            "name": "refund",
            "arguments": call.arguments,
        },
        {"type": "function_call_output", "call_id": call.call_id, "output": "pay-1"},
    ]
    answer = model.responses.create(model="m", input=items, tools=RESPONSES_TOOLS)
    assert answer.output_text == "Refunded: pay-1"
    events = list(model.responses.create(model="m", input=items, stream=True))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == "Refunded: pay-1" and len(deltas) > 1
    assert events[0].type == "response.created" and events[-1].type == "response.completed"
    assert events[-1].response.output_text == "Refunded: pay-1"

    calls = world.model_calls()
    assert [c["step"] for c in calls] == [0, 0, 1, 1]
    assert all(c["run_id"] == "r1" and c["prompt_tokens"] > 1 for c in calls)
    assert answer.usage.input_tokens == calls[2]["prompt_tokens"]
    assert answer.usage.output_tokens == calls[2]["completion_tokens"]


def test_an_openai_agents_sdk_agent_runs_on_either_api_streamed_or_not(world: World) -> None:
    """The OpenAI Agents SDK's two models (Responses, Chat Completions),
    with ``Runner.run`` and ``Runner.run_streamed``: the tool is called with
    the user's message and the agent answers with its output."""
    agents = pytest.importorskip("agents")
    import asyncio

    agents.set_tracing_disabled(True)

    @agents.function_tool
    def refund(customer_id: str, amount_cents: int) -> str:
        return f"pay-{customer_id}-{amount_cents}"

    async def main(url: str) -> list[str]:
        said = []
        async with openai.AsyncOpenAI(base_url=url, api_key="none", max_retries=0) as client:
            for model in (agents.OpenAIResponsesModel, agents.OpenAIChatCompletionsModel):
                agent = agents.Agent(
                    name="desk",
                    instructions="Refund what the customer asks.",
                    tools=[refund],
                    model=model(model="m", openai_client=client),
                )
                done = await agents.Runner.run(agent, json.dumps(ASK))
                streamed = agents.Runner.run_streamed(agent, json.dumps(ASK))
                async for _ in streamed.stream_events():
                    pass
                said += [done.final_output, streamed.final_output]
        return said

    world.client().attribute(CALLER)
    with world.serve_http(model=parse_chat_script(SCRIPT)) as face:
        said = asyncio.run(main(face.url + "/v1"))
    assert said == ["Refunded: pay-c-1-5"] * 4
    assert [c["step"] for c in world.model_calls()] == [0, 1] * 4
