"""The support agent: a model picks a tool, the tool runs, the model answers.

The app as its team wrote it, with nothing of the harness: a ticket's
conversation is kept in SQLite (one item per model step or tool output, as an
agent framework's session keeps it), and :func:`answer_ticket` carries a
ticket on from where its conversation stopped. A tool call saved without its
output is run again: that is how the agent resumes after a crash. The model
is reached with the ``openai`` client (:func:`model`), configured as usual
by ``OPENAI_BASE_URL`` and ``OPENAI_API_KEY``; the tools are the app's
(``naive.py`` or ``careful.py``).
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import openai

Tool = Callable[..., str]

#: the model the agent asks (``SUPPORT_MODEL``), and the tools it offers it
MODEL = os.environ.get("SUPPORT_MODEL", "gpt-4o-mini")
TOOL_SPECS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "refund",
            "description": "Refund a customer's payment.",
            "parameters": {
                "type": "object",
                "properties": {
                    "customer_id": {"type": "string"},
                    "amount_cents": {"type": "integer"},
                    "currency": {"type": "string"},
                },
                "required": ["customer_id", "amount_cents", "currency"],
            },
        },
    }
]
_CLIENT: openai.OpenAI | None = None


def _client() -> openai.OpenAI:
    """One client per process, made on first use (after the process's
    configuration is read, never inherited from a parent)."""
    global _CLIENT
    if _CLIENT is None:
        _CLIENT = openai.OpenAI(max_retries=0)
    return _CLIENT


SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tickets (ticket_id TEXT PRIMARY KEY, message TEXT NOT NULL, "
    "answer TEXT)",
    "CREATE TABLE IF NOT EXISTS items (ticket_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "item TEXT NOT NULL, PRIMARY KEY (ticket_id, seq))",
)


def connect(path: str | Path) -> sqlite3.Connection:
    """The agent's database (created if new); each statement commits."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    for statement in SCHEMA:
        db.execute(statement)
    return db


def open_ticket(db: sqlite3.Connection, ticket_id: str, request: Mapping[str, Any]) -> None:
    """A customer's ticket: the request the agent acts on."""
    db.execute("INSERT INTO tickets VALUES (?, ?, NULL)", (ticket_id, json.dumps(dict(request))))


def open_tickets(db: sqlite3.Connection) -> list[str]:
    """The tickets not answered yet, oldest first."""
    rows = db.execute("SELECT ticket_id FROM tickets WHERE answer IS NULL ORDER BY rowid")
    return [r[0] for r in rows]


def ticket(db: sqlite3.Connection, ticket_id: str) -> dict[str, Any]:
    """A ticket's request, answer (None while open) and conversation items."""
    message, answer = db.execute(
        "SELECT message, answer FROM tickets WHERE ticket_id = ?", (ticket_id,)
    ).fetchone()
    items = db.execute("SELECT item FROM items WHERE ticket_id = ? ORDER BY seq", (ticket_id,))
    return {
        "request": json.loads(message),
        "answer": answer,
        "items": [json.loads(i[0]) for i in items],
    }


def model(request: Mapping[str, Any], items: list[dict[str, Any]]) -> dict[str, Any]:
    """Ask the model what to do next, given the ticket's conversation: a
    tool call (with its id, to send back with the output) or the answer."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": json.dumps(dict(request))}]
    for item in items:
        if item["type"] == "tool_call":
            call = {"name": item["name"], "arguments": json.dumps(item["arguments"])}
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": item["call_id"], "type": "function", "function": call}],
                }
            )
        else:
            messages.append(
                {"role": "tool", "tool_call_id": item["call_id"], "content": item["output"]}
            )
    reply = _client().chat.completions.create(model=MODEL, messages=messages, tools=TOOL_SPECS)
    message = reply.choices[0].message
    if message.tool_calls:
        call = message.tool_calls[0]
        return {
            "type": "tool_call",
            "call_id": call.id,
            "name": call.function.name,
            "arguments": _arguments(call.function.name, call.function.arguments),
        }
    return {"type": "answer", "text": message.content or ""}


def _arguments(tool: str, text: str) -> dict[str, Any]:
    """A tool call's arguments, checked against the tool's parameters: a
    call the model got wrong is never saved (asking again may do better)."""
    arguments = json.loads(text)  # ValueError: not JSON
    spec = next(t["function"] for t in TOOL_SPECS if t["function"]["name"] == tool)
    missing = [p for p in spec["parameters"]["required"] if p not in arguments]
    if missing:
        raise ValueError(f"the model called {tool} without {', '.join(missing)}")
    return dict(arguments)


def _retry_after(exc: openai.RateLimitError) -> float:
    """How long a rate-limited call is told to wait, in seconds."""
    headers = exc.response.headers
    if "retry-after-ms" in headers:
        return float(headers["retry-after-ms"]) / 1000
    return float(headers.get("retry-after", "1"))


def answer_ticket(db: sqlite3.Connection, ticket_id: str, tools: Mapping[str, Tool]) -> str:
    """Carry ``ticket_id`` on to its answer; returns it. A tool that raises
    leaves the ticket open (the call saved, its output not) for a retry."""
    state = ticket(db, ticket_id)
    items = state["items"]
    while True:
        if items and items[-1]["type"] == "tool_call":
            step = items[-1]  # saved before a crash or a failed call: run it again
        else:
            try:
                step = model(state["request"], items)
            except openai.RateLimitError as exc:
                # Rate limited: wait as told and ask again; the ticket has
                # waited long enough, so a tool call is acted on at once.
                time.sleep(_retry_after(exc))
                step = model(state["request"], items)
                if step["type"] == "tool_call":
                    output = _call(tools, ticket_id, step)
                    items = _save(db, ticket_id, items, step)
                    items = _save(db, ticket_id, items, _output(step, output))
                    continue
            if step["type"] == "answer":
                db.execute(
                    "UPDATE tickets SET answer = ? WHERE ticket_id = ?", (step["text"], ticket_id)
                )
                return str(step["text"])
            items = _save(db, ticket_id, items, step)
        items = _save(db, ticket_id, items, _output(step, _call(tools, ticket_id, step)))


def _call(tools: Mapping[str, Tool], ticket_id: str, step: Mapping[str, Any]) -> str:
    """Run the tool a tool call names (the call's id goes with it)."""
    tool = tools[step["name"]]
    return tool(ticket_id=ticket_id, call_id=step["call_id"], **step["arguments"])


def _output(step: Mapping[str, Any], output: str) -> dict[str, Any]:
    return {"type": "tool_output", "call_id": step["call_id"], "output": output}


def _save(
    db: sqlite3.Connection, ticket_id: str, items: list[dict[str, Any]], item: dict[str, Any]
) -> list[dict[str, Any]]:
    db.execute("INSERT INTO items VALUES (?, ?, ?)", (ticket_id, len(items), json.dumps(item)))
    return [*items, item]
