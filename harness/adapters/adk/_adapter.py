"""A Google ADK application, tested as it is, behind the adapter contract, on the kit.

The app is an ADK ``App`` with ``ResumabilityConfig(is_resumable=True)``
(option ``app=package.module:APP``), which imports nothing from the harness:
its tools call their providers over HTTP at the URLs they read from the
environment, and its model is an OpenAI-compatible endpoint (ADK's
``ApigeeLlm("apigee/openai/...")``, or any ``BaseLlm`` the app chooses). What
the harness must know of it -- workflows, delivery, the user's message of a
run, the environment variables to point it at the world, the model's script
-- is an :class:`ADKWorkload` (option ``workload``, by default ``WORKLOAD`` in
the ``workload`` module beside the app's).

A *run* is one ADK session (session id = run id, user id = tenant) in a
``DatabaseSessionService`` on a SQLite file per environment; its statuses are
derived from the session's last invocation (docs/adapters.md, "A runtime
without run statuses"): ``pending`` (no event), ``running`` (events, no
``end_of_agent``), ``completed`` (ended on the model's answer, the run's
output ``{"answer": text}``), ``failed`` (ended on a function call nobody
answered: ADK seals an invocation whose tool raised).

**Recovery is the application's**: ADK does not resume a killed invocation by
itself; ``ResumabilityConfig`` makes it resumable and the application resumes
it with ``Runner.run_async(invocation_id=...)``. The worker plays that
resumer, as ADK's docs describe it: it starts every run with no event and
resumes every run whose last invocation ADK has not ended (no
``end_of_agent``), then exits; an invocation that raised is left for the next
worker.

Declared: ``crash_points`` (``event_commit`` inside each session write,
right before its COMMIT, not pausable; ``event_appended`` after it),
``durable_state`` (each session's conversation: events with content, ids and
times volatile; error events and ``end_of_agent`` markers, which a resume
writes again, left out) and ``model_endpoint`` when the workload scripts the
model. Not declared: ``concurrent_workers`` (``DatabaseSessionService``'s
stale-writer check is not atomic on SQLite), a clock (nothing waits), approvals,
memory, code versions, storage faults, cancel, operations, context.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pkgutil
import sqlite3
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

from ...model import CrashSpec, RunSpec, RunState
from ...world import Caller, World, WorldClient, parse_chat_script
from .. import ForkServerWorker, Observation, RunView, WorkflowSpec
from .._contract import BaseEnvironment, Capability, Declarations, DurableState
from ..kit import (
    EPOCH,
    ConstantClock,
    CrashPoints,
    RunRegistry,
    WorkerSet,
    crash_point_trace,
    transitions_from_sequence,
)

TABLE = transitions_from_sequence(["pending", "running", "completed", "failed"])
SITES = ("event_commit", "event_appended")
ADK_VERSION = partial(metadata.version, "google-adk")


def json_message(run_input: Mapping[str, Any]) -> str:
    """The user's message: the run's input as JSON."""
    return json.dumps(dict(run_input), sort_keys=True)


@dataclass(frozen=True)
class ADKWorkload:
    """What the harness knows of an app that knows nothing of it.

    ``env``: the app's configuration, each value formatted with ``url`` (the
    world's HTTP face: ``{"PAYMENTS_API_URL": "{url}"}``), set in each worker
    before the app is imported. ``script``: what the world's model endpoint
    answers (``{url}/v1/chat/completions``); None when the app's model is its
    own (no ``model_endpoint``). ``volatile``: event keys that differ between
    two correct runs, left out of durable state."""

    workflows: tuple[WorkflowSpec, ...]
    delivery: Mapping[str, str]
    env: Mapping[str, str] = field(default_factory=dict)
    script: Mapping[str, Any] | None = None
    message: Callable[[Mapping[str, Any]], str] = json_message
    volatile: tuple[str, ...] = ("id", "timestamp", "invocation_id", "custom_metadata")


def events_of(path: Path, run_id: str) -> list[dict[str, Any]]:
    """The session's events, oldest first, as ADK stored them."""
    q = "SELECT event_data FROM events WHERE session_id = ? ORDER BY timestamp, rowid"
    with (
        contextlib.closing(sqlite3.connect(path, timeout=30.0)) as db,
        contextlib.suppress(sqlite3.OperationalError),  # no table before the first worker
    ):
        return [json.loads(d) for (d,) in db.execute(q, (run_id,))]
    return []


def status_of(events: list[dict[str, Any]]) -> tuple[str, dict[str, Any] | None]:
    """The run's status and, once it ended, its last content (module docstring)."""
    if not events:
        return "pending", None
    last = events[-1]["invocation_id"]
    mine = [e for e in events if e["invocation_id"] == last]
    if not any(e.get("actions", {}).get("end_of_agent") for e in mine):
        return "running", None
    last_said = ([e["content"] for e in mine if e.get("content")] or [None])[-1]
    answered = last_said and last_said.get("role") == "model"
    answered = answered and not _calls(last_said.get("parts") or [])
    return ("completed" if answered else "failed"), last_said


def prepare(path: Path) -> None:
    """Create ADK's tables as a deployment does once, before it serves
    (``prepare_tables()``): two commits, the tables then the schema version.
    A process killed between them leaves a database ADK refuses for good
    ("Schema version not found"), so no worker is the first to touch it."""
    from google.adk.sessions import DatabaseSessionService

    async def tables() -> None:
        sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{path}")
        await sessions.prepare_tables()
        await sessions.close()

    asyncio.run(tables())


def said(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation: what each event with content said, and who."""
    return [
        {"author": e.get("author"), "content": e["content"]} for e in events if e.get("content")
    ]


def _calls(parts: list[dict[str, Any]]) -> list[str]:
    return [p["function_call"]["name"] for p in parts if p.get("function_call")]


async def _work(args: dict[str, Any], workload: ADKWorkload) -> None:
    from google.adk.runners import Runner
    from google.adk.sessions import DatabaseSessionService
    from google.genai import types
    from sqlalchemy import event

    app = pkgutil.resolve_name(args["app"])  # after env: the app reads it at import
    work, worker_id = Path(args["workdir"]), str(args["worker_id"])
    points = CrashPoints(work / "crashpoints.jsonl", args["crash"], trace=args["trace"])
    sessions = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{work / 'sessions.db'}")
    event.listen(sessions.db_engine.sync_engine, "commit", lambda _: points.hit("event_commit"))
    append = sessions.append_event

    async def appended(*a: Any, **kw: Any) -> Any:
        stored = await append(*a, **kw)
        points.hit("event_appended")
        return stored

    sessions.append_event = appended  # type: ignore[method-assign]
    runner = Runner(app=app, session_service=sessions)
    world = WorldClient(work / "world.db", clock=lambda: EPOCH)
    for run in RunRegistry(work / "registry.db").runs():
        status, _ = status_of(events := events_of(work / "sessions.db", run.run_id))
        if status not in ("pending", "running"):
            continue
        world.attribute(Caller(tenant=run.tenant, run_id=run.run_id, worker_id=worker_id))
        ids = {"app_name": app.name, "user_id": run.tenant, "session_id": run.run_id}
        if await sessions.get_session(**ids) is None:
            await sessions.create_session(**ids)
        text = types.Part(text=workload.message(run.data["input"]))
        go: dict[str, Any] = {"new_message": types.Content(role="user", parts=[text])}
        if events:  # resume the invocation ADK has not ended
            go = {"invocation_id": events[-1]["invocation_id"]}
        try:
            async for _ in runner.run_async(user_id=run.tenant, session_id=run.run_id, **go):
                pass
        except Exception as exc:  # logged; the run is left for the next worker
            print(f"{worker_id}: run {run.run_id} raised {exc!r}", file=sys.stderr, flush=True)
    await sessions.close()


def worker_main(args: dict[str, Any]) -> int:
    """A worker: start or resume every run ADK has not ended, then exit 0."""
    workload = pkgutil.resolve_name(args["workload"])
    for name, value in workload.env.items():
        os.environ[name] = value.format(url=args["url"])
    asyncio.run(_work(args, workload))
    return 0


class ADKEnvironment(BaseEnvironment):
    """One deployment in ``workdir``: the sessions, a run registry, a world served over HTTP."""

    def __init__(self, adapter: ADKAdapter, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.workload, self.work, self.sessions = adapter.workload, workdir, workdir / "sessions.db"
        self.world = World(workdir / "world.db", clock=lambda: EPOCH).create()
        prepare(self.sessions)
        script = self.workload.script and parse_chat_script(self.workload.script)
        self.face = self.world.serve_http(model=script or None)
        self.registry = RunRegistry(workdir / "registry.db", clock=lambda: EPOCH)
        self.workers = WorkerSet(workdir, adapter.preload)
        self.args = {"app": adapter.app, "workload": adapter.workload_spec, "workdir": str(workdir)}
        self.args["url"], self.trace_crash_points = self.face.url, False

    def declarations(self) -> Declarations:
        return Declarations(delivery=dict(self.workload.delivery), transitions=TABLE)

    def crash_points(self) -> list[str]:
        return list(SITES)

    def pause_points(self) -> list[str]:
        return ["event_appended"]  # event_commit is inside the write's transaction

    def crash_point_trace(self) -> list[tuple[int, str, int]]:
        return crash_point_trace(self.work / "crashpoints.jsonl")

    def start_worker(
        self, worker_id: str, *, crash: CrashSpec | None = None, code_version: int | None = None
    ) -> ForkServerWorker:
        crashed, trace = None if crash is None else crash.model_dump(), self.trace_crash_points
        args = {**self.args, "worker_id": worker_id, "crash": crashed, "trace": trace}
        return self.workers.spawn(worker_id, f"{__name__}:worker_main", args)

    def submit(self, run: RunSpec) -> None:
        self.registry.add(run.run_id, run.tenant, "pending", data={"input": run.input})

    def _view(self, run_id: str, tenant: str) -> RunView:
        status, said = status_of(events_of(self.sessions, run_id))
        parts = (said or {}).get("parts") or []
        text = "".join(p.get("text") or "" for p in parts)
        output = {"answer": text} if status == "completed" else None
        calls = ", ".join(_calls(parts)) or "no answer"
        error = f"ADK ended the invocation on {calls} (unanswered)" if status == "failed" else None
        view = {"run_id": run_id, "tenant": tenant, "raw_status": status, "error": error}
        return RunView(**view, state=RunState(status), output=output)

    def observe(self) -> Observation:
        runs = self.registry.runs()
        return self.registry.observation([self._view(r.run_id, r.tenant) for r in runs])

    def runnable(self) -> bool:
        """Whether a worker started now would start or resume a run."""
        statuses = (status_of(events_of(self.sessions, r.run_id))[0] for r in self.registry.runs())
        return bool({"pending", "running"} & set(statuses))

    def durable_state(self) -> DurableState:
        """Each session's conversation (module docstring)."""
        runs = {r.run_id: said(events_of(self.sessions, r.run_id)) for r in self.registry.runs()}
        return DurableState(runs=runs, volatile=self.workload.volatile)

    now = ConstantClock(EPOCH).now  # nothing waits: the time never moves

    def close(self) -> None:
        self.workers.close()  # no worker outlives its environment
        self.face.close(wait=False)
        self.registry.close()
        self.world.close()


class ADKAdapter:
    """An ADK app: ``app=package.module:APP`` (a resumable ``App``); ``workload``
    (an :class:`ADKWorkload`, default ``WORKLOAD`` in the app's package's
    ``workload`` module); ``preload=true|false`` (import ADK's lazily imported
    modules in the fork server, not in each worker)."""

    name = "adk"

    def __init__(self, app: str, workload: str | None = None, preload: str = "true") -> None:
        self.app, package = app, app.partition(":")[0].rpartition(".")[0]
        self.workload_spec = workload or f"{package}.workload:WORKLOAD"
        self.workload = found = pkgutil.resolve_name(self.workload_spec)
        if not isinstance(found, ADKWorkload) or preload not in ("true", "false"):
            raise ValueError(
                f"workload={self.workload_spec!r} must name an ADKWorkload (it is "
                f"a {type(found).__name__}); preload={preload!r}, true or false"
            )
        self.preload = (__name__, *(["harness.adapters.adk._preload"] * (preload == "true")))
        # model_endpoint: only when the app's model is the world's endpoint
        caps = [Capability.CRASH_POINTS, Capability.DURABLE_STATE, Capability.MODEL_ENDPOINT]
        self.capabilities = frozenset(caps[: 2 + (found.script is not None)])

    def workflows(self) -> list[WorkflowSpec]:
        return list(self.workload.workflows)

    def open(self, workdir: Path, *, seed: int) -> ADKEnvironment:
        return ADKEnvironment(self, workdir)

    def describe(self) -> dict[str, Any]:
        described = {"app": self.app, "workload": self.workload_spec}
        return {**described, "preload": len(self.preload) > 1, "google-adk": ADK_VERSION()}
