"""The LangGraph support agent behind the adapter contract, without changing it.

Each environment serves its world over HTTP, with a scripted model behind
its OpenAI-compatible endpoint, and gives the app the variables it already
reads (``PAYMENTS_API_URL`` for its ``requests`` tool, ``OPENAI_BASE_URL``
and ``OPENAI_API_KEY`` for ``ChatOpenAI``): ``harness.adapters.HttpWorld``.
A worker process takes every open ticket, says to the world which run it
works for (``HttpWorldWorker.attribute``: the adapter's part, not the
app's), and lets the app carry the ticket's thread on. The world finds the
process behind each HTTP request from its socket, counts the refunds, fires
its faults (a kill stops the worker right before or after a refund is
applied; model faults at its model endpoint) and records which run made
each. Runs are observed from the app's checkpointer: a thread whose last
checkpoint ends with the model's answer (no tool call) is a completed run.
Written on the kit: workers, the transitions log, the transition table.

    PYTHONPATH=. harness run \\
        --adapter examples.langgraph_http_refund.adapter:LangGraphHttpRefundAdapter \\
        --adapter-opt app=naive --profile ci        # exactly_once_effects fails
    PYTHONPATH=. harness run \\
        --adapter examples.langgraph_http_refund.adapter:LangGraphHttpRefundAdapter \\
        --adapter-opt app=careful --profile ci      # passes
"""

from __future__ import annotations

import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

from harness.adapters import (
    BaseEnvironment,
    Capability,
    Declarations,
    ForkServerWorker,
    HttpWorld,
    HttpWorldWorker,
    Observation,
    RunView,
    WorkflowSpec,
)
from harness.adapters.kit import EPOCH, WorkerSet, transitions_from_sequence
from harness.model import CrashSpec, RunSpec, RunState

from . import support_agent

TABLE = transitions_from_sequence(["pending", "completed"])
#: what the world's model answers the agent: refund what the customer asks
#: (the ticket's message is the tool's arguments), then say it is done
SCRIPT = {
    "steps": [{"tool": "refund", "arguments": "$user"}, {"content": "Refunded: $tool_output"}]
}
#: the app's configuration, nothing more: its payments API (its ``requests``
#: tool) and its model (``ChatOpenAI``), both the world's
APP_ENV = {"PAYMENTS_API_URL": "{url}", "OPENAI_BASE_URL": "{url}/v1"}
APPS = {
    "naive": "examples.langgraph_http_refund.naive",
    "careful": "examples.langgraph_http_refund.careful",
}
REFUND = WorkflowSpec(
    name="refund",
    inputs=(
        {"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
        {"customer_id": "c-2", "amount_cents": 9900, "currency": "USD"},
    ),
    effects=("payments.refund",),
)


def worker_main(args: dict[str, Any]) -> int:
    """A worker: carry every open ticket on with the app's graph, then exit 0.

    A ticket whose node raises (the payments API refused, a reply was lost,
    the model failed past the client's retries) stays at its last
    checkpoint for the next worker, as the app's own queue would leave it."""
    # APP_ENV is set first, before the app builds its model client or calls its tool.
    world = HttpWorldWorker(args)
    tools = importlib.import_module(args["app"]).TOOLS
    db = support_agent.connect(args["db"])
    graph = support_agent.build_graph(tools, support_agent.checkpointer(args["db"]))
    for ticket_id in support_agent.open_tickets(db, graph):
        world.attribute(ticket_id)
        try:
            support_agent.answer_ticket(db, graph, ticket_id)
        except Exception:  # the app's failure: the thread stays where it was
            traceback.print_exc(file=sys.stderr)
    return 0


def answer(saver: Any, run_id: str) -> str | None:
    """The model's answer in the thread's last checkpoint, or None while the
    thread has none (no checkpoint, or its last message is not an answer)."""
    from langchain_core.messages import AIMessage

    saved = saver.get_tuple(support_agent.thread(run_id))
    if saved is None:
        return None
    messages = saved.checkpoint["channel_values"].get("messages") or []
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls:
        return None
    return str(last.text)


class LangGraphHttpRefundEnvironment(BaseEnvironment):
    """One deployment: the agent's SQLite file (tickets and checkpoints), a
    world served over HTTP, workers."""

    def __init__(self, workdir: Path, app: str) -> None:
        self.http = HttpWorld(workdir, model=SCRIPT, env=APP_ENV)
        self.world, self.registry = self.http.world, self.http.registry
        self.db_path = workdir / "support.db"
        self.db = support_agent.connect(self.db_path)
        self.saver = support_agent.checkpointer(self.db_path)
        self.saver.setup()  # its tables exist before any worker writes
        self.workers = WorkerSet(workdir, [__name__, app])
        self.args = {**self.http.args, "app": app, "db": str(self.db_path)}

    def declarations(self) -> Declarations:
        return Declarations(delivery={"payments.refund": "exactly_once"}, transitions=TABLE)

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        args = {**self.args, "worker_id": worker_id}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        self.registry.add(run.run_id, run.tenant, "pending")
        support_agent.open_ticket(self.db, run.run_id, run.input)

    def observe(self) -> Observation:
        views = []
        for record in self.registry.runs():
            text = answer(self.saver, record.run_id)
            views.append(
                RunView(
                    run_id=record.run_id,
                    tenant=record.tenant,
                    state=RunState.PENDING if text is None else RunState.COMPLETED,
                    raw_status="pending" if text is None else "completed",
                    output=None if text is None else {"answer": text},
                )
            )
        return self.registry.observation(views)

    def now(self) -> float:
        return EPOCH

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.http.close()  # its callers are dead: the server stops in the background
        self.saver.conn.close()
        self.db.close()


class LangGraphHttpRefundAdapter:
    """The LangGraph support agent. Option ``app``: ``naive`` (no
    idempotency key) or ``careful`` (one from the ticket's thread id)."""

    name = "langgraph-http-refund"
    # The app reaches its model only through the world's endpoint: model
    # faults fire there (rate limits, lost and cut replies, malformed tool
    # calls, empty replies, refusals).
    capabilities: frozenset[Capability] = frozenset({Capability.MODEL_ENDPOINT})

    def __init__(self, app: str = "careful") -> None:
        if app not in APPS:
            raise ValueError(f"app={app!r}: choose one of {', '.join(APPS)}")
        self.app = APPS[app]

    def workflows(self) -> list[WorkflowSpec]:
        return [REFUND]

    def open(self, workdir: Path, *, seed: int) -> LangGraphHttpRefundEnvironment:
        return LangGraphHttpRefundEnvironment(workdir, self.app)

    def describe(self) -> dict[str, Any]:
        return {"app": self.app}
