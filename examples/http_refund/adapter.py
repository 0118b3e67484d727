"""The support agent behind the adapter contract, without changing the agent.

Each environment serves its world over HTTP, with a scripted model behind
its OpenAI-compatible endpoint, and gives the app the base URLs the app
already reads (``PAYMENTS_API_URL``, ``OPENAI_BASE_URL``):
``harness.adapters.HttpWorld``. A worker process takes every open ticket,
says to the world which run it works for (``HttpWorldWorker.attribute``: the
adapter's part, not the app's), and lets the app answer it. The world finds
the process behind each HTTP request from its socket, counts the refunds,
fires its faults (a kill stops the worker right before or after a refund is
applied) and records which run made each. Written on the kit: workers, the
transitions log, the transition table.

    PYTHONPATH=. harness run --adapter examples.http_refund.adapter:HttpRefundAdapter \\
        --adapter-opt app=naive --profile ci        # exactly_once_effects fails
    PYTHONPATH=. harness run --adapter examples.http_refund.adapter:HttpRefundAdapter \\
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
#: the app's configuration, nothing more: its payments API and its model,
#: both the world's (``{url}``: where the world is served)
APP_ENV = {"PAYMENTS_API_URL": "{url}", "OPENAI_BASE_URL": "{url}/v1"}
APPS = {
    "naive": "examples.http_refund.naive",
    "careful": "examples.http_refund.careful",
    "call_keyed": "examples.http_refund.call_keyed",
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
    """A worker: answer every open ticket with the app's tools, then exit 0.

    A ticket whose tool fails (the payments API refused, or its reply was
    lost) stays open for the next worker, as the app's own queue would."""
    world = HttpWorldWorker(args)  # sets APP_ENV, before the app reads it
    tools = importlib.import_module(args["app"]).TOOLS
    db = support_agent.connect(args["db"])
    for ticket_id in support_agent.open_tickets(db):
        world.attribute(ticket_id)
        try:
            support_agent.answer_ticket(db, ticket_id, tools)
        except Exception:  # the app's failure: the ticket stays open
            traceback.print_exc(file=sys.stderr)
    return 0


class HttpRefundEnvironment(BaseEnvironment):
    """One deployment: the agent's database, a world served over HTTP, workers."""

    def __init__(self, workdir: Path, app: str) -> None:
        self.http = HttpWorld(workdir, model=SCRIPT, env=APP_ENV)
        self.world, self.registry = self.http.world, self.http.registry
        self.db_path = workdir / "support.db"
        self.db = support_agent.connect(self.db_path)
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
            answer = support_agent.ticket(self.db, record.run_id)["answer"]
            status = "pending" if answer is None else "completed"
            views.append(
                RunView(
                    run_id=record.run_id,
                    tenant=record.tenant,
                    state=RunState.PENDING if answer is None else RunState.COMPLETED,
                    raw_status=status,
                    output=None if answer is None else {"answer": answer},
                )
            )
        return self.registry.observation(views)

    def now(self) -> float:
        return EPOCH

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.http.close()  # its callers are dead: the server stops in the background
        self.db.close()


class HttpRefundAdapter:
    """The support agent. Option ``app``: ``naive`` (no idempotency key),
    ``careful`` (one from the ticket's id) or ``call_keyed`` (the model's
    tool-call id as the key: safe while every call is saved before it runs,
    which the agent's rate-limit path does not do)."""

    name = "http-refund"
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

    def open(self, workdir: Path, *, seed: int) -> HttpRefundEnvironment:
        return HttpRefundEnvironment(workdir, self.app)

    def describe(self) -> dict[str, Any]:
        return {"app": self.app}
