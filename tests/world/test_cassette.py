"""Cassettes: a model's replies recorded once, replayed by request.

The "real model" here is another world's scripted endpoint: the recorder
asks it through its Chat Completions API while the app talks to the
recording world through either API; replayed from the file, with the real
model gone, the same requests get the same replies, and a request the
recorded run never made is refused with the reason.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.world import (
    Caller,
    CassetteRecorder,
    World,
    WorldUsageError,
    load_cassette,
    parse_chat_script,
)

openai = pytest.importorskip("openai")

pytestmark = pytest.mark.slow  # the openai client's import is most of it

SCRIPT = {
    "steps": [{"tool": "refund", "arguments": "$user"}, {"content": "Refunded: $tool_output"}]
}
ASK = json.dumps({"customer_id": "c-1", "amount_cents": 5})
TOOLS = [{"type": "function", "name": "refund", "parameters": {"type": "object"}}]


def _conversation(model: Any) -> list[str]:
    """The app's run: a tool call through the Responses API, then the
    answer through Chat Completions, streamed (what each reply said)."""
    first = model.responses.create(model="m", input=ASK, tools=TOOLS)
    (call,) = first.output
    chat_tools = [{"type": "function", "function": {"name": "refund", "parameters": {}}}]
    messages = [
        {"role": "user", "content": ASK},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.call_id, "type": "function",
             "function": {"name": call.name, "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "pay-1"},
    ]  # fmt: skip
    chunks = model.chat.completions.create(
        model="m", messages=messages, tools=chat_tools, stream=True
    )
    answer = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return [f"{call.name}({call.arguments})", answer]


def _serve(world: World, source: Any) -> tuple[Any, Any]:
    face = world.serve_http(model=source)
    return face, openai.OpenAI(base_url=face.url + "/v1", api_key="none", max_retries=0)


def test_a_recorded_conversation_replays_without_the_model(tmp_path: Path) -> None:
    path = tmp_path / "refund.cassette.json"
    real = World(tmp_path / "real.db").create()
    recording, replaying = (World(tmp_path / f"{n}.db").create() for n in ("rec", "play"))
    for w in (recording, replaying):
        w.client().attribute(Caller(tenant="t1", run_id="r1"))

    with real.serve_http(model=parse_chat_script(SCRIPT)) as upstream:
        face, model = _serve(recording, CassetteRecorder(path, upstream.url + "/v1"))
        with face, model:
            recorded = _conversation(model)
    assert recorded == ['refund({"amount_cents":5,"customer_id":"c-1"})', "Refunded: pay-1"]
    assert len(real.model_calls()) == 2  # the real model was asked once per request
    data = json.loads(path.read_text())
    assert data["type"] == "harness.cassette" and len(data["entries"]) == 2

    # Replayed twice, the real model gone: the same replies, every time.
    face, model = _serve(replaying, load_cassette(path))
    with face, model:
        assert _conversation(model) == recorded
        assert _conversation(model) == recorded
        with pytest.raises(openai.BadRequestError, match="holds no reply to this request"):
            model.responses.create(model="m", input="something else", tools=TOOLS)
    assert [c["step"] for c in replaying.model_calls()] == [0, 1, 0, 1]
    assert len(real.model_calls()) == 2


def test_a_file_that_is_not_a_cassette_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"steps": []}))
    with pytest.raises(WorldUsageError, match="is not a cassette"):
        load_cassette(bad)
    bad.write_text(json.dumps({"type": "harness.cassette", "schema_version": 99, "entries": []}))
    with pytest.raises(WorldUsageError, match="upgrade the harness"):
        load_cassette(bad)
