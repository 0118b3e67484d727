"""The support agent: a model picks a tool, the tool runs, the model answers.

The app as its team wrote it, with nothing of the harness: a ticket's
conversation is kept in SQLite (one item per model step or tool output, as an
agent framework's session keeps it), and :func:`answer_ticket` carries a
ticket on from where its conversation stopped. A tool call saved without its
output is run again: that is how the agent resumes after a crash. The model
is scripted (:func:`model`: no network, the same answer to the same input);
the tools are the app's (``naive.py`` or ``careful.py``).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Tool = Callable[..., str]

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
    """The scripted model: no tool output yet -> call ``refund`` with the
    request; a tool output -> answer with it."""
    outputs = [i for i in items if i["type"] == "tool_output"]
    if not outputs:
        return {"type": "tool_call", "name": "refund", "arguments": dict(request)}
    return {"type": "answer", "text": f"Refunded: {outputs[-1]['output']}"}


def answer_ticket(db: sqlite3.Connection, ticket_id: str, tools: Mapping[str, Tool]) -> str:
    """Carry ``ticket_id`` on to its answer; returns it. A tool that raises
    leaves the ticket open (the call saved, its output not) for a retry."""
    state = ticket(db, ticket_id)
    items = state["items"]
    while True:
        if items and items[-1]["type"] == "tool_call":
            step = items[-1]  # saved before a crash or a failed call: run it again
        else:
            step = model(state["request"], items)
            if step["type"] == "answer":
                db.execute(
                    "UPDATE tickets SET answer = ? WHERE ticket_id = ?", (step["text"], ticket_id)
                )
                return str(step["text"])
            items = _save(db, ticket_id, items, step)
        output = tools[step["name"]](ticket_id=ticket_id, **step["arguments"])
        items = _save(db, ticket_id, items, {"type": "tool_output", "output": output})


def _save(
    db: sqlite3.Connection, ticket_id: str, items: list[dict[str, Any]], item: dict[str, Any]
) -> list[dict[str, Any]]:
    db.execute("INSERT INTO items VALUES (?, ?, ?)", (ticket_id, len(items), json.dumps(item)))
    return [*items, item]
