"""Cassettes: a real model's replies, recorded once, replayed by request.

A script (``harness.world._chat``) is written by hand; a cassette is what a
real model answered in one run of the app, kept in a file and served in its
place ever after: no network, no key, the same reply to the same request,
so the fault-free runs agree and a failure replays.

Recording: serve the world with ``model=CassetteRecorder(path, upstream)``
(``upstream``: the real model's base URL, ``https://api.openai.com/v1``,
and its key) and run the app once. Each request the app makes, through
either API, is read as its conversation (``harness.world._openai_api``),
sent to the upstream's Chat Completions API, and the reply kept in the file
under the request's *match key*. Replaying: ``model=load_cassette(path)``.
A request is matched by its conversation (roles, texts, tool calls' names
and arguments) and the names of the tools offered; the ids a model gives
its tool calls are left out of the match (a framework may send them back
under other names). A request the cassette does not hold is answered 400,
naming the request: record again.

The file is JSON, ``{"type": "harness.cassette", "schema_version": 1,
"entries": [{"key", "conversation", "tools", "reply"}]}``, in the order
recorded; an entry's step (as :meth:`World.model_calls` records it) is its
place in the file.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._errors import WorldUsageError
from ._model import canonical_json

#: version of the cassette file this code writes and reads
CASSETTE_VERSION = 1
_TYPE = "harness.cassette"


def tool_names(body: Mapping[str, Any]) -> list[str]:
    """The names of the tools a request offers (either API's shape)."""
    out = []
    for tool in body.get("tools") or []:
        if isinstance(tool, Mapping):
            function = tool.get("function")
            name = function.get("name") if isinstance(function, Mapping) else tool.get("name")
            if isinstance(name, str):
                out.append(name)
    return sorted(out)


def match_key(conversation: Sequence[Mapping[str, Any]], tools: Sequence[str]) -> str:
    """What a request is matched by: its conversation without the ids of
    tool calls, and the names of its tools (see the module docstring)."""
    plain = []
    for m in conversation:
        kept: dict[str, Any] = {"role": m.get("role"), "content": _text(m.get("content"))}
        calls = m.get("tool_calls")
        if isinstance(calls, list):
            kept["tool_calls"] = [
                [c.get("function", {}).get("name"), _arguments(c.get("function", {}))]
                for c in calls
                if isinstance(c, Mapping)
            ]
        plain.append(kept)
    return hashlib.sha256(canonical_json([plain, list(tools)]).encode()).hexdigest()


def _text(content: Any) -> str:
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return "" if content is None else str(content)


def _arguments(function: Any) -> Any:
    """A tool call's arguments, parsed when they are JSON (a model's
    spacing is not part of the request)."""
    raw = function.get("arguments") if isinstance(function, Mapping) else None
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


@dataclass(frozen=True)
class Cassette:
    """Recorded replies by match key (see the module docstring)."""

    path: str
    entries: tuple[Mapping[str, Any], ...]

    def reply(
        self, conversation: Sequence[Mapping[str, Any]], body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """(the entry's place, the recorded assistant message) for this request."""
        key = match_key(conversation, tool_names(body))
        for n, entry in enumerate(self.entries):
            if entry["key"] == key:
                return n, dict(entry["reply"])
        last = _text(conversation[-1].get("content")) if conversation else ""
        raise WorldUsageError(
            f"the cassette {self.path!r} holds no reply to this request ({len(conversation)} "
            f"messages, the last {last[:80]!r}; match key {key[:12]}): the app asked what "
            "the recorded run did not; record the cassette again (CassetteRecorder)"
        )


def load_cassette(path: str | os.PathLike[str]) -> Cassette:
    """A cassette from its file, checked."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise WorldUsageError(f"cannot read the cassette {str(p)!r} ({exc})") from exc
    except ValueError as exc:
        raise WorldUsageError(f"the cassette {str(p)!r} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("type") != _TYPE:
        raise WorldUsageError(
            f"{str(p)!r} is not a cassette (a JSON object of type {_TYPE!r}, as "
            "CassetteRecorder writes)"
        )
    version = data.get("schema_version")
    if not isinstance(version, int) or version > CASSETTE_VERSION:
        raise WorldUsageError(
            f"the cassette {str(p)!r} has schema_version {version!r}; this code reads up to "
            f"{CASSETTE_VERSION}: upgrade the harness to read it"
        )
    entries = data.get("entries")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("key"), str) and isinstance(e.get("reply"), dict)
        for e in entries
    ):
        raise WorldUsageError(
            f"the cassette {str(p)!r} is damaged: entries must be objects with a key and a reply"
        )
    return Cassette(str(p), tuple(entries))


class CassetteRecorder:
    """Answers from a real model (``upstream``: its Chat Completions base
    URL; ``api_key``) and keeps each request's reply in the cassette at
    ``path`` (created, or added to: a request already recorded is answered
    from the file, not asked again). The file is rewritten whole after each
    new reply (a new file, then a rename): a recording cut short keeps every
    reply before the cut."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        upstream: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
    ) -> None:
        self.path = Path(path)
        self.upstream = upstream.rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.timeout = timeout
        self._lock = threading.Lock()
        self._entries: list[Mapping[str, Any]] = (
            list(load_cassette(self.path).entries) if self.path.exists() else []
        )

    def reply(
        self, conversation: Sequence[Mapping[str, Any]], body: Mapping[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        """Ask the upstream (or the cassette, for a request recorded
        already); returns (the entry's place, the assistant message)."""
        import httpx

        tools = tool_names(body)
        key = match_key(conversation, tools)
        with self._lock:
            for n, entry in enumerate(self._entries):
                if entry["key"] == key:
                    return n, dict(entry["reply"])
        request = {"model": body.get("model") or "gpt-4o-mini", "messages": list(conversation)}
        offered = [_chat_tool(t) for t in body.get("tools") or [] if isinstance(t, Mapping)]
        if offered:
            request["tools"] = offered
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            answer = httpx.post(
                f"{self.upstream}/chat/completions",
                json=request,
                headers=headers,
                timeout=self.timeout,
            )
            answer.raise_for_status()
            message = dict(answer.json()["choices"][0]["message"])
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError) as exc:
            raise WorldUsageError(
                f"recording the cassette {str(self.path)!r}: the model at {self.upstream} did "
                f"not answer ({type(exc).__name__}: {exc}); check its URL and key"
            ) from exc
        reply = {k: v for k, v in message.items() if k in ("role", "content", "tool_calls")}
        entry = {"key": key, "conversation": list(conversation), "tools": tools, "reply": reply}
        with self._lock:
            self._entries.append(entry)
            n = len(self._entries) - 1
            self._save()
        return n, dict(reply)

    def _save(self) -> None:
        data = {"type": _TYPE, "schema_version": CASSETTE_VERSION, "entries": self._entries}
        pending = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        pending.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        os.replace(pending, self.path)


def _chat_tool(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    """A tool offered to the Responses API as Chat Completions takes it."""
    if "function" in tool or tool.get("type") != "function":
        return tool
    function = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
    return {"type": "function", "function": function}
