"""The OpenAI wire formats the world's model endpoint speaks.

Pure functions from what the scripted model answered (an assistant message
in the Chat Completions shape: ``content``, or one ``tool_calls`` entry; see
``harness.world._chat``) to what each API sends back, so that the ``openai``
client, and the frameworks built on it, take the world's model for theirs:

======================================  =========================================
``POST /v1/chat/completions``           a ``chat.completion``; streamed
                                        (``"stream": true``): ``chat.completion.chunk``
                                        events, then ``data: [DONE]``
``POST /v1/responses``                  a ``response``; streamed: the
                                        ``response.*`` events, from
                                        ``response.created`` to ``response.completed``
======================================  =========================================

A Responses request's ``input`` (a text, or a list of items: messages,
``function_call`` and ``function_call_output``) and ``instructions`` are
read as the Chat Completions conversation they stand for
(:func:`responses_conversation`), so one script answers both APIs alike.
Streams are cut at fixed places (words of a text, a few characters of a
tool call's arguments): the same reply streams the same events every time.
Ids are derived from the conversation, never random.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from ._errors import WorldUsageError

#: characters of a tool call's arguments per streamed delta
ARGUMENT_PIECE = 8


def chat_conversation(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``messages`` of a Chat Completions request, checked."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise WorldUsageError("messages must be a list of message objects")
    return messages


def responses_conversation(body: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A Responses request's ``instructions`` and ``input`` as the Chat
    Completions messages they stand for: a text input is one user message;
    a message item keeps its role and content, a ``function_call`` is an
    assistant's tool call, a ``function_call_output`` a tool message; other
    items (reasoning, ...) say nothing to a script and are left out."""
    out: list[dict[str, Any]] = []
    instructions = body.get("instructions")
    if isinstance(instructions, str) and instructions:
        out.append({"role": "system", "content": instructions})
    given = body.get("input")
    if isinstance(given, str):
        return [*out, {"role": "user", "content": given}]
    if not isinstance(given, list) or not all(isinstance(i, dict) for i in given):
        raise WorldUsageError("input must be a text or a list of input items (objects)")
    for item in given:
        kind = item.get("type", "message")
        if kind == "message" and "role" in item:
            out.append({"role": item["role"], "content": item.get("content")})
        elif kind == "function_call":
            call = {"name": item.get("name"), "arguments": item.get("arguments", "")}
            tool_call = {"id": item.get("call_id"), "type": "function", "function": call}
            out.append({"role": "assistant", "content": None, "tool_calls": [tool_call]})
        elif kind == "function_call_output":
            output = item.get("output")
            text = output if isinstance(output, str) else json.dumps(output)
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": text})
    return out


def _pieces(text: str) -> list[str]:
    """``text`` cut after each word (with its spaces); at least one piece."""
    return re.findall(r"\S+\s*|\s+", text) or [""]


def _call(message: Mapping[str, Any]) -> Mapping[str, Any] | None:
    calls = message.get("tool_calls")
    return calls[0] if isinstance(calls, list) and calls else None


# -- Chat Completions ---------------------------------------------------------------


def chat_usage(prompt: int, completion: int) -> dict[str, int]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def chat_completion(
    ident: str, created: int, model: str, message: Mapping[str, Any], usage: Mapping[str, int]
) -> dict[str, Any]:
    """A ``chat.completion`` with ``message`` as its one choice."""
    return {
        "id": ident,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": dict(message),
                "finish_reason": "tool_calls" if _call(message) else "stop",
                "logprobs": None,
            }
        ],
        "usage": dict(usage),
    }


def chat_chunks(
    ident: str,
    created: int,
    model: str,
    message: Mapping[str, Any],
    usage: Mapping[str, int] | None,
) -> list[dict[str, Any]]:
    """The ``chat.completion.chunk`` events that stream ``message``: the
    role, then the text word by word (or the tool call's id and name, then
    its arguments a few characters at a time), then the finish reason, then
    (``usage`` given: the request asked ``stream_options.include_usage``) a
    chunk with no choice and the usage."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
        return {
            "id": ident,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [choice],
        }

    call = _call(message)
    out: list[dict[str, Any]] = []
    refusal = message.get("refusal")
    if isinstance(refusal, str):
        out.append(chunk({"role": "assistant", "content": None, "refusal": ""}))
        out += [chunk({"refusal": p}) for p in _pieces(refusal)]
        out.append(chunk({}, "stop"))
    elif call is None:
        out.append(chunk({"role": "assistant", "content": ""}))
        out += [chunk({"content": p}) for p in _pieces(str(message.get("content") or ""))]
        out.append(chunk({}, "stop"))
    else:
        function = call["function"]
        head = {
            "index": 0,
            "id": call["id"],
            "type": "function",
            "function": {"name": function["name"], "arguments": ""},
        }
        out.append(chunk({"role": "assistant", "content": None, "tool_calls": [head]}))
        arguments = str(function["arguments"])
        for i in range(0, len(arguments), ARGUMENT_PIECE):
            piece = {"index": 0, "function": {"arguments": arguments[i : i + ARGUMENT_PIECE]}}
            out.append(chunk({"tool_calls": [piece]}))
        out.append(chunk({}, "tool_calls"))
    if usage is not None:
        last = chunk({})
        last["choices"] = []
        last["usage"] = dict(usage)
        out.append(last)
    return out


# -- Responses ----------------------------------------------------------------------


def responses_usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def response_item(ident: str, message: Mapping[str, Any]) -> dict[str, Any]:
    """The output item that stands for ``message``: a ``function_call``, or
    an assistant ``message`` with one ``output_text``."""
    call = _call(message)
    if call is not None:
        function = call["function"]
        return {
            "type": "function_call",
            "id": f"fc_{ident}",
            "call_id": call["id"],
            "name": function["name"],
            "arguments": function["arguments"],
            "status": "completed",
        }
    refusal = message.get("refusal")
    if isinstance(refusal, str):
        text: dict[str, Any] = {"type": "refusal", "refusal": refusal}
    else:
        text = {"type": "output_text", "text": str(message.get("content") or ""), "annotations": []}
    return {
        "type": "message",
        "id": f"msg_{ident}",
        "status": "completed",
        "role": "assistant",
        "content": [text],
    }


def response_object(
    ident: str,
    created: int,
    model: str,
    body: Mapping[str, Any],
    output: Sequence[Mapping[str, Any]],
    usage: Mapping[str, Any] | None,
    status: str = "completed",
) -> dict[str, Any]:
    """A ``response`` (``status`` ``in_progress`` while a stream starts)."""
    return {
        "id": f"resp_{ident}",
        "object": "response",
        "created_at": created,
        "status": status,
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "model": model,
        "output": [dict(item) for item in output],
        "parallel_tool_calls": bool(body.get("parallel_tool_calls", True)),
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": list(body.get("tools") or []),
        "temperature": body.get("temperature"),
        "top_p": body.get("top_p"),
        "max_output_tokens": body.get("max_output_tokens"),
        "previous_response_id": body.get("previous_response_id"),
        "reasoning": None,
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
        "metadata": dict(body.get("metadata") or {}),
        "store": False,
        "usage": None if usage is None else dict(usage),
    }


def response_events(
    ident: str,
    created: int,
    model: str,
    body: Mapping[str, Any],
    message: Mapping[str, Any],
    usage: Mapping[str, Any],
) -> list[dict[str, Any]]:
    """The ``response.*`` events that stream ``message``, numbered
    (``sequence_number``) from 0: created, in progress, the output item
    added, its text or arguments in deltas, done, then completed."""
    item = response_item(ident, message)
    events: list[dict[str, Any]] = []

    def event(kind: str, **data: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **data})

    started = response_object(ident, created, model, body, [], None, status="in_progress")
    event("response.created", response=started)
    event("response.in_progress", response=started)
    at = {"output_index": 0, "item_id": item["id"]}
    if item["type"] == "function_call":
        opened = {**item, "arguments": "", "status": "in_progress"}
        event("response.output_item.added", output_index=0, item=opened)
        arguments = str(item["arguments"])
        for i in range(0, len(arguments), ARGUMENT_PIECE):
            event("response.function_call_arguments.delta", **at,
                  delta=arguments[i : i + ARGUMENT_PIECE])  # fmt: skip
        event("response.function_call_arguments.done", **at, arguments=arguments)
    elif item["content"][0]["type"] == "refusal":
        refusal = item["content"][0]["refusal"]
        event("response.output_item.added", output_index=0,
              item={**item, "content": [], "status": "in_progress"})  # fmt: skip
        event("response.content_part.added", **at, content_index=0,
              part={"type": "refusal", "refusal": ""})  # fmt: skip
        for piece in _pieces(refusal):
            event("response.refusal.delta", **at, content_index=0, delta=piece)
        event("response.refusal.done", **at, content_index=0, refusal=refusal)
        event("response.content_part.done", **at, content_index=0, part=item["content"][0])
    else:
        text = item["content"][0]["text"]
        empty = {"type": "output_text", "text": "", "annotations": []}
        event("response.output_item.added", output_index=0,
              item={**item, "content": [], "status": "in_progress"})  # fmt: skip
        event("response.content_part.added", **at, content_index=0, part=empty)
        for piece in _pieces(text):
            event("response.output_text.delta", **at, content_index=0, delta=piece, logprobs=[])
        event("response.output_text.done", **at, content_index=0, text=text, logprobs=[])
        event("response.content_part.done", **at, content_index=0, part=item["content"][0])
    event("response.output_item.done", output_index=0, item=item)
    event(
        "response.completed", response=response_object(ident, created, model, body, [item], usage)
    )
    return events


# -- server-sent events ----------------------------------------------------------------


def sse(events: Iterable[Mapping[str, Any]], *, named: bool, done: bool) -> Iterator[bytes]:
    """``events`` as server-sent events: ``data: JSON`` each (``named``:
    after an ``event:`` line of its ``type``, as the Responses API sends
    them), then ``data: [DONE]`` when ``done`` (as Chat Completions ends)."""
    for e in events:
        head = f"event: {e['type']}\n" if named else ""
        yield f"{head}data: {json.dumps(e, separators=(',', ':'))}\n\n".encode()
    if done:
        yield b"data: [DONE]\n\n"
