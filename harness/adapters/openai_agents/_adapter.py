"""An OpenAI Agents SDK application behind the adapter contract, on the kit.

The SDK has no run statuses and no workers: it has agents, a ``Runner`` and
a ``Session`` that keeps a conversation's items. Here a *run* is one user
message to the app's agent, kept in its own ``SQLiteSession`` (session id =
run id, one SQLite file per environment). A worker process takes every run
not yet answered and runs its turn (``Runner.run_sync``), then exits.

Statuses come from what the session holds durably (docs/adapters.md, "A
runtime without run statuses"); the SDK saves the user's message when a
turn starts and a model response with its tools' outputs when that response
is done:

* ``pending``: no item yet, or the last item is a user message;
* ``running``: the last item is a tool call or a tool output (the answer is
  not saved);
* ``completed``: the last item is an assistant message, its text the run's
  output (``{"answer": text}``).

Transitions are derived from those statuses (``RunRegistry.observation``),
each handed out once. Declared: ``durable_state`` (each run's session items;
the app's ``volatile`` keys, item and call ids by default, are ignored) and
``context`` (the items sent to the model at each step, taken by the
``call_model_input_filter`` hook; step = the number of tool outputs in
them). Not declared: crash points, a clock, approvals, memory injection,
code versions, storage faults, cancel, and concurrent workers (the SDK takes
no lock on a session: two workers on one run both run its turn).
"""

from __future__ import annotations

import contextlib
import json
import pkgutil
import sqlite3
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from ...model import RunSpec, RunState
from ...world import Caller, World, WorldClient
from .. import ForkServerWorker, Observation, RunView, WorkflowSpec, kit
from .._contract import BaseEnvironment, Capability, Declarations, DurableState
from ..kit import EPOCH, ConstantClock, RunRegistry, WorkerSet, transitions_from_sequence

TABLE = transitions_from_sequence(["pending", "running", "completed"])


@dataclass(frozen=True)
class AgentsApp:
    """An Agents SDK application, as the adapter runs it.

    ``agent()`` builds the ``Agent`` (with its model) in each worker;
    ``message(run_input)`` is the user's message that starts a run.
    ``resend_message``: how a worker resumes a run whose session already
    holds that message -- True runs the turn again with the same message (so
    the session holds it twice), False runs it with no new input (the
    session's history is the input). ``volatile``: item keys (at any depth)
    that differ between two correct runs, left out of durable state and
    contexts.

    ``agent()`` is called once, in the fork server before it forks, and
    every worker runs its turns on that agent (as a service reuses one
    agent for every run): it must start no thread and open no connection
    there (a client that connects on first use is fine).

    A turn that raises is left for the next worker, so a tool whose world
    call must be retried should raise (``function_tool(...,
    failure_error_function=None)``): with the SDK's default, the model reads
    the error as the tool's output and may answer anyway.
    """

    name: str
    agent: Callable[[], Any]
    workflows: tuple[WorkflowSpec, ...]
    delivery: Mapping[str, str]
    message: Callable[[Mapping[str, Any]], str]
    resend_message: bool = False
    volatile: tuple[str, ...] = ("id", "call_id")


@dataclass(frozen=True)
class AgentsContext:
    """The run context of every turn (``RunContextWrapper.context`` in a tool)."""

    world: WorldClient
    tenant: str
    run_id: str
    worker_id: str

    def caller(self, op_id: str) -> Caller:
        """Who calls the world (tenant, run, operation, worker), for its records."""
        return Caller(tenant=self.tenant, run_id=self.run_id, op_id=op_id, worker_id=self.worker_id)


def load_app(spec: str) -> AgentsApp:
    """The :class:`AgentsApp` named by ``"package.module:attr"``."""
    if isinstance(app := pkgutil.resolve_name(spec), AgentsApp):
        return app
    raise ValueError(f"app={spec!r} is a {type(app).__name__}, not an AgentsApp")


def items_of(path: Path, run_id: str) -> list[dict[str, Any]]:
    """The session items of ``run_id``, oldest first, as the SDK saved them."""
    q = "SELECT message_data FROM agent_messages WHERE session_id = ? ORDER BY id"
    with contextlib.closing(sqlite3.connect(path, timeout=30.0)) as db:
        return [json.loads(data) for (data,) in db.execute(q, (run_id,))]


def status_of(items: list[dict[str, Any]]) -> str:
    """The run's status, derived from its session items (module docstring)."""
    last = items[-1] if items else {"role": "user"}
    done = last.get("role") == "assistant" and last.get("type", "message") == "message"
    return "completed" if done else "pending" if last.get("role") == "user" else "running"


def unanswered(registry: RunRegistry, sessions: Path) -> list[tuple[Any, list[dict[str, Any]]]]:
    """The runs a worker takes (their turn not answered), each with its session items."""
    runs = ((run, items_of(sessions, run.run_id)) for run in registry.runs())
    return [(run, items) for run, items in runs if status_of(items) != "completed"]


def worker_main(args: dict[str, Any]) -> int:
    """A worker: run the turn of every run whose session is not answered, then exit 0.

    A turn that raises (a tool's world call refused, say) is logged and left
    for the next worker; the session keeps what the SDK saved before."""
    from agents import RunConfig, Runner, SQLiteSession, set_trace_provider
    from agents.tracing.provider import DefaultTraceProvider

    # Tracing is off (RunConfig below): a provider without processors spares
    # every worker the default one's exporter (an HTTP client: 119 modules
    # imported, an SSL context) and its batch thread.
    set_trace_provider(DefaultTraceProvider())

    app, worker_id, work = load_app(args["app"]), str(args["worker_id"]), Path(args["workdir"])
    agent = kit.prebuilt(f"{args['app']}.agent")  # app.agent() of the fork server
    world = WorldClient(work / "world.db", clock=lambda: EPOCH)

    def record_context(d: Any) -> Any:
        """``RunConfig.call_model_input_filter``: append the model input ``d``
        of this step (its items without the app's ``volatile`` keys) to
        ``contexts.jsonl``, in one ``write``, and pass it on unchanged."""
        items = [{k: v for k, v in i.items() if k not in app.volatile} for i in d.model_data.input]
        step = sum(i.get("type") == "function_call_output" for i in items)
        body = {"instructions": d.model_data.instructions, "items": items}
        entry = {"run_id": d.context.run_id, "step": step, "worker_id": worker_id}
        with open(work / "contexts.jsonl", "ab", buffering=0) as log:
            log.write(json.dumps({**entry, "context": body}, default=str).encode() + b"\n")
        return d.model_data

    config = RunConfig(tracing_disabled=True, call_model_input_filter=record_context)
    for run, items in unanswered(RunRegistry(work / "registry.db"), work / "sessions.db"):
        new: Any = app.message(run.data["input"]) if app.resend_message or not items else []
        ctx = AgentsContext(world, run.tenant, run.run_id, worker_id)
        with contextlib.closing(SQLiteSession(run.run_id, work / "sessions.db")) as session:
            try:
                Runner.run_sync(agent, new, session=session, context=ctx, run_config=config)
            except Exception as exc:  # logged; the run is left for the next worker
                print(f"{worker_id}: run {run.run_id} raised {exc!r}", flush=True)
    return 0


class AgentsEnvironment(BaseEnvironment):
    """One deployment in ``workdir``: the sessions, a run registry, a world, workers."""

    def __init__(self, adapter: OpenAIAgentsAdapter, workdir: Path) -> None:
        from agents import SQLiteSession

        workdir.mkdir(parents=True, exist_ok=True)
        self.app, self.work, self.sessions = adapter.app, workdir, workdir / "sessions.db"
        self.world = World(workdir / "world.db", clock=lambda: EPOCH).create()
        self.registry = RunRegistry(workdir / "registry.db", clock=lambda: EPOCH)
        SQLiteSession("-", self.sessions).close()  # the SDK creates its tables
        # the app's module (and this one) come with its agent(), called once in the fork server
        preload = ("agents", "agents.memory.sqlite_session", "concurrent.futures.thread")
        self.workers = WorkerSet(workdir, preload, prebuild=[f"{adapter.app_spec}.agent"])
        self.args, self._contexts_seen = {"app": adapter.app_spec, "workdir": str(workdir)}, 0

    def declarations(self) -> Declarations:
        return Declarations(delivery=dict(self.app.delivery), transitions=TABLE)

    def start_worker(self, worker_id: str, **_: Any) -> ForkServerWorker:
        # crash= and code_version= are never given: neither capability is declared
        args = {**self.args, "worker_id": worker_id}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        self.registry.add(run.run_id, run.tenant, "pending", data={"input": run.input})

    def _view(self, run_id: str, tenant: str) -> RunView:
        status = status_of(items := items_of(self.sessions, run_id))
        parts = items[-1]["content"] if status == "completed" else None  # the answer's parts
        answer = None if parts is None else {"answer": "".join(p.get("text", "") for p in parts)}
        view = {"run_id": run_id, "tenant": tenant, "raw_status": status, "output": answer}
        return RunView(**view, state=RunState(status))

    def observe(self) -> Observation:
        views = [self._view(r.run_id, r.tenant) for r in self.registry.runs()]
        log = self.work / "contexts.jsonl"
        # whole lines only: a worker may be appending one right now
        lines = log.read_text().split("\n")[:-1] if log.exists() else []
        new, self._contexts_seen = lines[self._contexts_seen :], len(lines)
        return self.registry.observation(views, contexts=tuple(json.loads(c) for c in new))

    def runnable(self) -> bool:
        """Whether a worker started now would run a turn (optional in the contract)."""
        return bool(unanswered(self.registry, self.sessions))

    def durable_state(self) -> DurableState:
        """Each run's session items, as saved; volatile: the app's ``volatile``."""
        runs = {r.run_id: items_of(self.sessions, r.run_id) for r in self.registry.runs()}
        return DurableState(runs=runs, volatile=self.app.volatile)

    now = ConstantClock(EPOCH).now  # no clock capability: the time never moves

    def close(self) -> None:
        for part in (self.workers, self.registry, self.world):
            part.close()


class OpenAIAgentsAdapter:
    """An Agents SDK application: option ``app="package.module:attr"``, an :class:`AgentsApp`."""

    name = "openai-agents"
    capabilities: frozenset[Capability] = frozenset({Capability.DURABLE_STATE, Capability.CONTEXT})

    def __init__(self, app: str) -> None:
        self.app_spec, self.app = app, load_app(app)

    def workflows(self) -> list[WorkflowSpec]:
        return list(self.app.workflows)

    def open(self, workdir: Path, *, seed: int) -> AgentsEnvironment:
        return AgentsEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        return {"app": self.app_spec, "openai-agents": metadata.version("openai-agents")}
