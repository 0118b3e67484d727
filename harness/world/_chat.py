"""A scripted model behind an OpenAI-compatible endpoint of the world.

An app that reaches its model through the ``openai`` client (or any client of
``POST /v1/chat/completions``) is pointed at the world's HTTP face by its base
URL (``OPENAI_BASE_URL=<face url>/v1``), and a :class:`ChatScript` answers:
no network, the same reply to the same conversation. A script is data, a
list of steps; which step answers is the number of tool results the
conversation holds after its last user message, so a worker that resumes a
conversation gets the reply a fault-free run got at the same point::

    {"steps": [
        {"tool": "refund", "arguments": "$user"},        # the user's message, as JSON
        {"content": "Refunded: $tool_output"}            # the last tool result
    ]}

``arguments`` is a JSON object, or ``"$user"`` (the last user message parsed
as a JSON object), or ``"$request"`` (the last user message that *is* a JSON
object: a model that acts on the request it was given, even when a framework
added a user turn of its own after it -- ADK asks "Continue processing
previous requests as instructed" when the conversation ends in the model's
own answer). ``content`` may hold ``$tool_output``. A conversation past
the last step is answered by the last step.

The same script answers the Responses API (``POST /v1/responses``: its
``input`` items read as the conversation they stand for), and both stream
(``"stream": true``: server-sent events) or not; the wire formats are
:mod:`._openai_api`'s.

Every call is recorded in the world's file (:meth:`World.model_calls`): the
caller's process and run (as for a service call), the step, and token counts
(about four characters a token) for a cost figure. A model call changes
nothing outside: it is never an effect.

Model faults are rules armed at :data:`~harness.world.MODEL` (``FaultRule(
MODEL, nth, mode)``), counted and fired like a service's, in the same
transaction as the call's record:

=========================  ====================================================
``rate_limited``           429 with ``Retry-After``: nothing was decided
``server_error``           500: nothing was decided
``timeout``                no reply: the connection is closed (the reply lost)
``cut_stream``             the reply cut off halfway, the connection closed
``malformed_arguments``    the tool call's arguments cut in half (not JSON)
``missing_argument``       the tool call's arguments without their last field
``empty_reply``            an answer with no text and no tool call
``refusal``                a refusal (``refusal``, no content, no tool call)
=========================  ====================================================

The first four lose the reply (a client retries them, as the OpenAI client
does by default); the last four (:data:`~harness.world.MODEL_CONTENT_MODES`)
change what the model decided, so a run they hit may legitimately end
otherwise than a fault-free one, but never with an effect done twice or one
it cannot prove. A call's record holds the reply as served and the fault.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ._errors import WorldUsageError
from ._model import CallerLike, canonical_json


class ModelSource(Protocol):
    """What answers the world's model endpoint: a :class:`ChatScript`, a
    cassette or its recorder (``harness.world._cassette``)."""

    def reply(
        self, messages: Sequence[Mapping[str, Any]], body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """(the step or entry that answered, the assistant message) for the
        conversation ``messages`` of the request ``body``; raises
        :class:`WorldUsageError` for one it cannot answer (a 400)."""
        ...


@dataclass(frozen=True)
class ChatStep:
    """One reply: a call of ``tool`` with ``arguments``, or ``content``."""

    tool: str | None = None
    arguments: Mapping[str, Any] | str | None = None
    content: str | None = None


@dataclass(frozen=True)
class ChatScript:
    """What the scripted model answers, step by step (module docstring)."""

    steps: tuple[ChatStep, ...]

    def step_for(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """The step that answers ``messages``: the tool results after the
        last user message, capped at the last step."""
        users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
        if not users:
            raise WorldUsageError("the conversation has no user message for the model to answer")
        tools = sum(1 for m in messages[users[-1] :] if m.get("role") == "tool")
        return min(tools, len(self.steps) - 1)

    def reply(
        self, messages: Sequence[Mapping[str, Any]], body: Mapping[str, Any] | None = None
    ) -> tuple[int, dict[str, Any]]:
        """(step, the assistant message) that answers ``messages`` (``body``,
        the request, says nothing more to a script)."""
        n = self.step_for(messages)
        step = self.steps[n]
        last_user = [m for m in messages if m.get("role") == "user"][-1]
        outputs = [m for m in messages if m.get("role") == "tool"]
        if step.tool is not None:
            if step.arguments == "$request":
                arguments = _last_request(messages, n)
            elif step.arguments == "$user":
                try:
                    arguments = json.loads(_text(last_user))
                except ValueError as exc:
                    raise WorldUsageError(
                        f"step {n} takes its arguments from the user's message ($user), which "
                        f"is not JSON: {_text(last_user)[:80]!r}"
                    ) from exc
                if not isinstance(arguments, dict):
                    raise WorldUsageError(
                        f"step {n} takes its arguments from the user's message ($user), which "
                        f"is JSON but not an object: {_text(last_user)[:80]!r}"
                    )
            elif isinstance(step.arguments, Mapping):
                arguments = dict(step.arguments)
            else:
                arguments = {}
            call_id = (
                "call_"
                + hashlib.sha256(canonical_json([n, list(messages)]).encode()).hexdigest()[:16]
            )
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": step.tool, "arguments": canonical_json(arguments)},
                    }
                ],
            }
            return n, message
        output = _text(outputs[-1]) if outputs else ""
        content = (step.content or "").replace("$tool_output", output)
        return n, {"role": "assistant", "content": content}


def _last_request(messages: Sequence[Mapping[str, Any]], n: int) -> dict[str, Any]:
    """The last user message that parses as a JSON object (``$request``)."""
    for m in reversed(messages):
        if m.get("role") != "user":
            continue
        try:
            found = json.loads(_text(m))
        except ValueError:
            continue
        if isinstance(found, dict):
            return found
    raise WorldUsageError(
        f"step {n} takes its arguments from the user's request ($request), and no user "
        "message is a JSON object"
    )


def _text(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):  # content parts
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def parse_chat_script(data: Any) -> ChatScript:
    """A script from data (``{"steps": [...]}``), checked: each step a tool
    call or content, never both, never neither."""
    steps = data.get("steps") if isinstance(data, Mapping) else None
    if not isinstance(steps, list) or not steps:
        raise WorldUsageError(
            'a model script is {"steps": [...]}, at least one step: {"tool": NAME, '
            '"arguments": {...} or "$user"} or {"content": TEXT}'
        )
    out = []
    for i, raw in enumerate(steps):
        if not isinstance(raw, Mapping) or not set(raw) <= {"tool", "arguments", "content"}:
            raise WorldUsageError(
                f"model script step {i}: a table with tool and arguments, or content; got {raw!r}"
            )
        tool, arguments, content = raw.get("tool"), raw.get("arguments"), raw.get("content")
        if (tool is None) == (content is None):
            raise WorldUsageError(
                f"model script step {i}: give a tool (with its arguments) or a content, "
                f"exactly one; got {dict(raw)!r}"
            )
        if tool is not None:
            if not isinstance(tool, str) or not tool:
                raise WorldUsageError(f"model script step {i}: tool is a name; got {tool!r}")
            if arguments not in ("$user", "$request") and not isinstance(arguments, Mapping):
                raise WorldUsageError(
                    f'model script step {i}: arguments is a JSON object, "$user" or '
                    f'"$request"; got {arguments!r}'
                )
        elif not isinstance(content, str) or arguments is not None:
            raise WorldUsageError(
                f"model script step {i}: content is a text, with no arguments; got {dict(raw)!r}"
            )
        out.append(ChatStep(tool=tool, arguments=arguments, content=content))
    return ChatScript(tuple(out))


def load_chat_script(path: str | Path) -> ChatScript:
    """A script from a JSON file."""
    p = Path(path)
    try:
        return parse_chat_script(json.loads(p.read_text(encoding="utf-8")))
    except OSError as exc:
        raise WorldUsageError(f"cannot read the model script {str(p)!r} ({exc})") from exc
    except ValueError as exc:
        if isinstance(exc, WorldUsageError):
            raise WorldUsageError(f"{str(p)!r}: {exc}") from exc
        raise WorldUsageError(f"{str(p)!r} is not valid JSON: {exc}") from exc


#: what a refusal says (``refusal`` faults)
REFUSAL = "I'm sorry, I can't help with that request."


def reply_kind(message: Mapping[str, Any]) -> str:
    """``tool_call`` for a reply that calls a tool, else ``answer`` (the
    counter a model rule's ``action`` names)."""
    calls = message.get("tool_calls")
    return "tool_call" if isinstance(calls, list) and calls else "answer"


def reissued(message: Mapping[str, Any], answered: int) -> dict[str, Any]:
    """``message`` as a model answers a conversation it has ``answered``
    before: a real model's tool-call ids are new in every reply, so an app
    that asks again after a crash gets another id (the first time keeps the
    source's id, so a fault-free run's ids are the source's)."""
    if answered == 0 or reply_kind(message) != "tool_call":
        return dict(message)
    call = message["tool_calls"][0]
    again = hashlib.sha256(f"{call['id']}:{answered}".encode()).hexdigest()[:16]
    return {**message, "tool_calls": [{**call, "id": f"call_{again}"}]}


def faulted_reply(mode: str, message: Mapping[str, Any]) -> dict[str, Any]:
    """``message`` as a content fault of ``mode`` changes it (module
    docstring); a transport fault, or a fault about a tool call's
    arguments on a reply that calls no tool, leaves it as it was."""
    if mode == "empty_reply":
        return {"role": "assistant", "content": ""}
    if mode == "refusal":
        return {"role": "assistant", "content": None, "refusal": REFUSAL}
    arguments_fault = mode in ("malformed_arguments", "missing_argument")
    if not arguments_fault or reply_kind(message) != "tool_call":
        return dict(message)
    call = message["tool_calls"][0]
    arguments = str(call["function"]["arguments"])
    if mode == "malformed_arguments":
        arguments = arguments[: max(1, len(arguments) // 2)]
    else:
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and parsed:
            parsed.pop(sorted(parsed)[-1])
            arguments = canonical_json(parsed)
    function = {**call["function"], "arguments": arguments}
    return {**message, "tool_calls": [{**call, "function": function}]}


def tokens(text: str) -> int:
    """About four characters a token (at least one for a non-empty text)."""
    return (len(text) + 3) // 4


#: the faults that refuse a call before the model answers it (no reply made)
REFUSED_CALLS = ("rate_limited", "server_error")


@dataclass(frozen=True)
class Prompt:
    """What a model call says, made once a call: its messages as canonical
    JSON (what its prompt tokens are counted from) and their sha256, the
    conversation hash the call is recorded under (:func:`answered_before`
    counts by it) and its response id is made from."""

    text: str
    digest: str

    @classmethod
    def of(
        cls, request: Mapping[str, Any], conversation: Sequence[Mapping[str, Any]] | None
    ) -> Prompt:
        """``conversation`` (the messages a Responses request's input stands
        for), else the request's ``messages``."""
        said = list(request.get("messages", []) if conversation is None else conversation)
        text = canonical_json(said)
        return cls(text, hashlib.sha256(text.encode()).hexdigest())


def answered_before(conn: sqlite3.Connection, prompt: Prompt) -> int:
    """How many replies the model made to ``prompt``'s conversation before
    (served, lost or cut: a reply refused before it was made does not count)."""
    row = conn.execute(
        "SELECT COUNT(*) FROM model_calls WHERE conversation_hash = ? "
        "AND (fault IS NULL OR fault NOT IN (?, ?))",
        (prompt.digest, *REFUSED_CALLS),
    ).fetchone()
    return int(row[0])


def record_call(
    conn: sqlite3.Connection,
    *,
    who: CallerLike,
    pid: int,
    model: str,
    step: int,
    request: Mapping[str, Any],
    reply: Mapping[str, Any],
    at: float,
    said: Prompt,
    fault: str | None = None,
    rule_id: int | None = None,
) -> tuple[int, int, int]:
    """Record one model call (inside the caller's transaction); returns its
    seq and (prompt, completion) token counts. ``said`` is its prompt
    (:meth:`Prompt.of`); ``reply`` is what was served, ``fault`` the model
    fault that fired at the call (its rule ``rule_id``)."""
    prompt = tokens(said.text)
    completion = tokens(canonical_json(reply))
    cursor = conn.execute(
        "INSERT INTO model_calls (tenant, run_id, worker_id, pid, model, step, request, reply, "
        "prompt_tokens, completion_tokens, at, fault, rule_id, conversation_hash) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            who.tenant,
            who.run_id,
            who.worker_id,
            pid,
            model,
            step,
            canonical_json(request),
            canonical_json(reply),
            prompt,
            completion,
            at,
            fault,
            rule_id,
            said.digest,
        ),
    )
    return int(cursor.lastrowid or 0), prompt, completion
