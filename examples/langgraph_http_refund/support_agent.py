"""The support agent as a LangGraph graph: the model picks a tool, the tool
runs, the model answers.

The app as its team wrote it, with nothing of the harness. The model node
asks ``ChatOpenAI`` (configured as usual by ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``) with the tools bound; a ``ToolNode`` runs the tool calls
it makes (the tools are the app's: ``naive.py`` or ``careful.py``); the
graph loops until the model answers without a tool call. Each ticket is a
thread of a ``SqliteSaver``: a worker that dies mid-ticket leaves the
thread's last checkpoint, and the next worker carries the thread on from
there with ``graph.invoke(None, config)`` -- a tool call checkpointed
without its result is run again. Tickets wait in a table beside the
checkpoints, in the same SQLite file.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

#: the model the agent asks
MODEL = os.environ.get("SUPPORT_MODEL", "gpt-4o-mini")


def build_graph(tools: Sequence[BaseTool], checkpointer: SqliteSaver) -> Any:
    """The agent: ``agent`` (the model, tools bound) -> ``tools`` -> ``agent``
    ... until the model answers; compiled on ``checkpointer``."""
    llm = ChatOpenAI(model=MODEL).bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [llm.invoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode(tools))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", tools_condition)
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=checkpointer)


def connect(path: str | Path) -> sqlite3.Connection:
    """The agent's ticket table (created if new); each statement commits."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS tickets (ticket_id TEXT PRIMARY KEY, message TEXT NOT NULL)"
    )
    return db


def checkpointer(path: str | Path) -> SqliteSaver:
    """The threads' checkpoints, in the same file as the tickets."""
    return SqliteSaver(sqlite3.connect(path, check_same_thread=False, timeout=30))


def open_ticket(db: sqlite3.Connection, ticket_id: str, request: Mapping[str, Any]) -> None:
    """A customer's ticket: the request the agent acts on."""
    db.execute("INSERT INTO tickets VALUES (?, ?)", (ticket_id, json.dumps(dict(request))))


def thread(ticket_id: str) -> RunnableConfig:
    """A ticket's thread: its id is the ticket's."""
    return {"configurable": {"thread_id": ticket_id}}


def open_tickets(db: sqlite3.Connection, graph: Any) -> list[str]:
    """The tickets not answered yet, oldest first: no checkpoint yet, or a
    node still to run (``next``), or a task whose writes were saved
    without the checkpoint that applies them (``tasks``)."""
    out = []
    for (ticket_id,) in db.execute("SELECT ticket_id FROM tickets ORDER BY rowid"):
        state = graph.get_state(thread(ticket_id))
        if state.created_at is None or state.next or state.tasks:
            out.append(ticket_id)
    return out


def answer_ticket(db: sqlite3.Connection, graph: Any, ticket_id: str) -> str:
    """Carry ``ticket_id`` on to its answer; returns it. A node that raises
    leaves the thread at its last checkpoint for a retry."""
    config = thread(ticket_id)
    if graph.get_state(config).created_at is None:
        (message,) = db.execute(
            "SELECT message FROM tickets WHERE ticket_id = ?", (ticket_id,)
        ).fetchone()
        values = graph.invoke({"messages": [HumanMessage(message)]}, config)
    else:
        values = graph.invoke(None, config)  # on from the thread's last checkpoint
    return str(values["messages"][-1].content)
