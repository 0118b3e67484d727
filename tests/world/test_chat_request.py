"""``$request``: a scripted model that acts on the request it was given.

An agent framework may add a user turn of its own after the request (ADK
asks "Continue processing previous requests as instructed" when a resumed
conversation ends in the model's own answer). ``$user`` reads the last user
message and refuses that one (not JSON); ``$request`` reads the last user
message that is a JSON object, as a model that acts on the request would.
"""

from __future__ import annotations

import json

import pytest

from harness.world import WorldUsageError
from harness.world._chat import ChatScript, parse_chat_script

ASK = {"customer_id": "c-1", "amount_cents": 5}
CONTINUE = "Continue processing previous requests as instructed."


def script(source: str) -> ChatScript:
    return parse_chat_script(
        {"steps": [{"tool": "refund", "arguments": source}, {"content": "Refunded: $tool_output"}]}
    )


def conversation() -> list[dict[str, object]]:
    """A refund answered, then the framework's own user turn."""
    call = {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": "{}"}}
    return [
        {"role": "user", "content": json.dumps(ASK)},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "pay-1"},
        {"role": "assistant", "content": "Refunded: pay-1"},
        {"role": "user", "content": CONTINUE},
    ]


def test_request_takes_the_last_json_user_message_past_a_framework_turn() -> None:
    step, reply = script("$request").reply(conversation())
    assert step == 0
    (call,) = reply["tool_calls"]
    assert json.loads(call["function"]["arguments"]) == ASK


def test_user_still_refuses_a_last_user_message_that_is_not_json() -> None:
    with pytest.raises(WorldUsageError, match=r"\$user"):
        script("$user").reply(conversation())


def test_request_with_no_json_user_message_is_refused_with_the_reason() -> None:
    with pytest.raises(WorldUsageError, match=r"no user message is a JSON object"):
        script("$request").reply([{"role": "user", "content": CONTINUE}])


def test_a_script_step_names_the_argument_sources_it_takes() -> None:
    with pytest.raises(WorldUsageError, match=r'"\$request"'):
        script("$everything")
