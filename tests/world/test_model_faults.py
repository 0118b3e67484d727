"""Model faults at the world's model endpoint, through the real ``openai`` client.

A rule armed at ``MODEL`` fires on the nth model call (or the nth reply that
calls a tool, or that answers in text), in the same transaction as the
call's record: the client gets a 429 with ``Retry-After``, a 500, no reply,
a reply cut off halfway, or a reply whose decision was changed (arguments
that are not JSON, a missing field, an empty answer, a refusal). The
world's records say which call each fault hit, for which run, and what was
served.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from harness.world import MODEL, Caller, FaultRule, World, WorldUsageError
from harness.world._chat import REFUSAL, parse_chat_script

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.slow  # the openai client's import is most of it

CALLER = Caller(tenant="t1", run_id="r1", worker_id="w1")
SCRIPT = {
    "steps": [{"tool": "refund", "arguments": "$user"}, {"content": "Refunded: $tool_output"}]
}
ASK = {"amount_cents": 5, "customer_id": "c-1"}
USER = {"role": "user", "content": json.dumps(ASK)}
TOOLS = [{"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}]


@pytest.fixture
def face(world: World) -> Iterator[Any]:
    world.client().attribute(CALLER)
    with world.serve_http(model=parse_chat_script(SCRIPT)) as served:
        yield served


@pytest.fixture
def model(face: Any) -> Iterator[Any]:
    with openai.OpenAI(base_url=face.url + "/v1", api_key="none", max_retries=0) as client:
        yield client


def ask(model: Any, **extra: Any) -> Any:
    return model.chat.completions.create(model="m", messages=[USER], tools=TOOLS, **extra)


def test_a_rate_limit_says_when_to_retry_and_the_clients_retry_gets_the_reply(
    face: Any, world: World
) -> None:
    world.arm(FaultRule(MODEL, nth=1, mode="rate_limited"))
    with (
        openai.OpenAI(base_url=face.url + "/v1", api_key="none", max_retries=0) as once,
        pytest.raises(openai.RateLimitError) as caught,
    ):
        ask(once)
    assert caught.value.response.headers["retry-after"] == "1"
    world.arm(FaultRule(MODEL, nth=2, mode="rate_limited"))
    # The OpenAI client retries a 429 by itself (its default), after the
    # wait the reply asks for: the retry is answered.
    with openai.OpenAI(base_url=face.url + "/v1", api_key="none", max_retries=2) as patient:
        reply = ask(patient)
    assert json.loads(reply.choices[0].message.tool_calls[0].function.arguments) == ASK
    calls = world.model_calls()
    assert [c["fault"] for c in calls] == ["rate_limited", "rate_limited", None]
    assert [(f.service, f.mode, f.run_id) for f in world.fired()] == [
        (MODEL, "rate_limited", "r1"),
        (MODEL, "rate_limited", "r1"),
    ]


def test_a_server_error_a_lost_reply_and_a_cut_one_each_raise_in_the_app(
    model: Any, world: World
) -> None:
    for nth, mode in enumerate(("server_error", "timeout", "cut_stream"), start=1):
        world.arm(FaultRule(MODEL, nth=nth, mode=mode))
    with pytest.raises(openai.InternalServerError):
        ask(model)
    with pytest.raises(openai.APIConnectionError):
        ask(model)  # no reply at all
    with pytest.raises(openai.APIConnectionError):
        ask(model)  # half a body: the client sees it end early
    assert ask(model).choices[0].message.tool_calls  # the fourth call is answered
    assert [c["fault"] for c in world.model_calls()] == [
        "server_error",
        "timeout",
        "cut_stream",
        None,
    ]


def test_a_cut_stream_stops_halfway_through_the_events(model: Any, world: World) -> None:
    world.arm(FaultRule(MODEL, nth=1, mode="cut_stream"))
    got: list[Any] = []
    with pytest.raises((httpx.RemoteProtocolError, openai.APIError)):
        for chunk in ask(model, stream=True):
            got.append(chunk)
    assert got, "the first half of the events arrives before the cut"
    assert not any(c.choices and c.choices[0].finish_reason for c in got)


def test_the_faults_that_change_the_decision_change_what_is_served_and_recorded(
    model: Any, world: World
) -> None:
    modes = ("malformed_arguments", "missing_argument", "empty_reply", "refusal")
    for nth, mode in enumerate(modes, start=1):
        world.arm(FaultRule(MODEL, nth=nth, mode=mode))
    malformed, missing, empty, refused = (ask(model).choices[0].message for _ in modes)
    with pytest.raises(json.JSONDecodeError):
        json.loads(malformed.tool_calls[0].function.arguments)
    assert json.loads(missing.tool_calls[0].function.arguments) == {"amount_cents": 5}
    assert (empty.content, empty.tool_calls) == ("", None)
    assert (refused.refusal, refused.content, refused.tool_calls) == (REFUSAL, None, None)
    calls = world.model_calls()
    assert [c["fault"] for c in calls] == list(modes)
    assert calls[2]["reply"] == {"role": "assistant", "content": ""}  # what was served


def test_a_refusal_reaches_a_responses_client_as_a_refusal_streamed_or_not(
    model: Any, world: World
) -> None:
    world.arm(FaultRule(MODEL, nth=1, mode="refusal"))
    world.arm(FaultRule(MODEL, nth=2, mode="refusal"))
    whole = model.responses.create(model="m", input=json.dumps(ASK))
    assert [(p.type, p.refusal) for p in whole.output[0].content] == [("refusal", REFUSAL)]
    with model.responses.stream(model="m", input=json.dumps(ASK)) as stream:
        streamed = stream.get_final_response()
    assert [(p.type, p.refusal) for p in streamed.output[0].content] == [("refusal", REFUSAL)]


def test_a_rule_on_tool_call_replies_waits_for_the_nth_reply_that_calls_a_tool(
    model: Any, world: World
) -> None:
    world.arm(FaultRule(MODEL, nth=2, mode="malformed_arguments", action="tool_call"))
    first = ask(model).choices[0].message.tool_calls[0]
    answered = [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [first.model_dump()]},
        {"role": "tool", "tool_call_id": first.id, "content": "pay-1"},
    ]
    text = model.chat.completions.create(model="m", messages=answered, tools=TOOLS)
    assert text.choices[0].message.content == "Refunded: pay-1"  # an answer: not counted
    second = ask(model).choices[0].message.tool_calls[0]
    with pytest.raises(json.JSONDecodeError):
        json.loads(second.function.arguments)
    assert world.calls(MODEL) == 3 and world.calls(MODEL, "tool_call") == 2


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        (dict(nth=1, mode="reject"), "unknown model fault mode"),
        (dict(nth=1, mode="refusal", action="lookup"), "a model rule's action"),
        (dict(nth=0, mode="refusal"), "nth counts calls from 1"),
        (dict(nth=1, mode="timeout", delay=1.0), "no delay"),
    ],
)
def test_a_model_rule_that_cannot_work_is_refused_when_built(
    rule: dict[str, Any], says: str
) -> None:
    with pytest.raises(WorldUsageError, match=says):
        FaultRule(MODEL, **rule)


def test_a_service_rule_keeps_its_own_modes(world: World) -> None:
    with pytest.raises(WorldUsageError, match="unknown fault mode 'rate_limited'"):
        FaultRule("payments", nth=1, mode="rate_limited")  # type: ignore[arg-type]
