"""A LangGraph worker process: resume every unfinished thread once, then exit 0.

Forked from the adapter's fork server. It opens its own checkpointer
connection (and long-term store, if the app uses one) and world client
(never inherited), builds the graph of its code
version, and for each submitted run, inside the application's single-writer
guard, does what a supervisor of a LangGraph service does:

* no checkpoint yet: ``graph.invoke(input, config)``;
* waiting at an ``interrupt()`` with a decision delivered:
  ``graph.invoke(Command(resume=decision), config)``;
* a next node to run, or a task of the last checkpoint with writes whose
  next checkpoint was never written: ``graph.invoke(None, config)``;
* finished (the application's completion marker), failed (a task error),
  waiting without a decision, or no task at all without a marker: nothing.

``get_state().next`` lists only the tasks *without* writes: when a worker
died after a task's writes were saved but before the checkpoint that applies
them (``async`` durability writes it in the background), ``next`` is empty
while ``tasks`` is not, and ``invoke(None)`` applies the writes and goes on.
On a finished thread ``tasks`` is empty (and ``invoke(None)`` would do
nothing anyway).

On ``PostgresSaver`` the checkpointer passes the crash points of
``_points`` in its writes (armed by the harness's ``RunWorker(crash=...)``,
traced for its site profile).

An exception from ``invoke`` is the run's failure (LangGraph keeps the task
error in the checkpoint), logged, and the worker goes on to the next run.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import traceback
from pathlib import Path
from typing import Any

from ...world import WorldClient
from ._app import CONTEXT_KEY, GuardSite, LangGraphApp, WorkerContext
from ._points import CrashPoints
from ._store import Registry, RunRow, SaverSpec, open_saver, open_store

#: The (constant) time of a runtime without a clock: keeps histories reproducible.
EPOCH = 1_700_000_000.0
TARGET = "harness.adapters.langgraph._worker:worker_main"


def load_app(spec: str) -> LangGraphApp:
    """The :class:`LangGraphApp` named by ``"package.module:attr"``."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"app={spec!r} is not 'package.module:attr' (e.g. myapp.graph:APP)")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"app={spec!r}: cannot import {module_name!r} ({exc}); install its package or put "
            "its folder on PYTHONPATH (PYTHONPATH=. from the repository root)"
        ) from exc
    app = getattr(module, attr, None)
    if not isinstance(app, LangGraphApp):
        raise ValueError(
            f"app={spec!r} is {type(app).__name__}, not a harness.adapters.langgraph.LangGraphApp"
        )
    return app


#: each app's compiled graph of each code version (by app spec and version),
#: for an app that declares ``compile_once``: compiled once per process on an
#: in-memory checkpointer, in the fork server by :func:`prebuild` before it
#: forks, so that a worker binds its own checkpointer to it (``graph.copy``)
#: instead of building the graph; None where the app's build kept neither
#: the checkpointer nor the store it was given (it wrapped them)
_GRAPHS: dict[tuple[str, int], Any] = {}


def prebuild(args: dict[str, Any]) -> None:
    """The fork server's warm call (``WorkerSet(warm=...)``): compile every
    code version of ``args["app"]`` once, before any fork, if it declares
    ``compile_once``."""
    app = load_app(str(args["app"]))
    for version in app.versions if app.compile_once else ():
        _GRAPHS[(str(args["app"]), version)] = _unbound_graph(app, version)


def bound_graph(spec: str, app: LangGraphApp, version: int, saver: Any, store: Any) -> Any:
    """``app.make_graph(saver, version, store)``; for an app that declares
    ``compile_once``, the same graph compiled once on an in-memory
    checkpointer (and store) with ``saver`` and ``store`` bound in their
    place by ``graph.copy(update=...)``."""
    if not app.compile_once:
        return app.make_graph(saver, version, store)
    if (spec, version) not in _GRAPHS:
        _GRAPHS[(spec, version)] = _unbound_graph(app, version)
    built = _GRAPHS[(spec, version)]
    if built is None:
        return app.make_graph(saver, version, store)
    return built.copy(update={"checkpointer": saver, **({"store": store} if app.store else {})})


def _unbound_graph(app: LangGraphApp, version: int) -> Any:
    """The graph of ``version`` on an in-memory checkpointer (and store), or
    None if it does not hold them as given, or cannot be copied."""
    from langgraph.checkpoint.memory import InMemorySaver

    saver, store = InMemorySaver(), None
    if app.store:
        from langgraph.store.memory import InMemoryStore

        store = InMemoryStore()
    graph = app.make_graph(saver, version, store)
    held = getattr(graph, "checkpointer", None) is saver and getattr(graph, "store", None) is store
    return graph if held and callable(getattr(graph, "copy", None)) else None


def maybe_store(app: LangGraphApp, spec: SaverSpec) -> contextlib.AbstractContextManager[Any]:
    """The long-term store beside ``spec``'s checkpoints if ``app`` uses one, else None."""
    return open_store(spec, ready=True) if app.store else contextlib.nullcontext(None)


def thread_config(thread_id: str, **extra: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **extra}}


def worker_main(args: dict[str, Any]) -> int:
    worker_id = str(args["worker_id"])
    app = load_app(str(args["app"]))
    version = int(args["code_version"] or app.current_version)
    durability = args["durability"] or app.durability
    registry = Registry(args["registry"])
    spec = SaverSpec.from_dict(args["saver"])
    world = WorldClient(args["world"], clock=lambda: EPOCH)
    points = None
    if spec.backend == "postgres":
        points = CrashPoints(str(args["crash_log"]), args.get("crash"), bool(args.get("trace")))
    with open_saver(spec, points, ready=True) as saver, maybe_store(app, spec) as store:
        graph = bound_graph(str(args["app"]), app, version, saver, store)
        for run in registry.runs():
            thread_id = f"{args['thread_prefix']}{run.run_id}"
            site = GuardSite(
                thread_id=thread_id,
                backend=spec.backend,
                lock_dir=Path(args["lock_dir"]),
                postgres_url=spec.postgres_url,
                schema=spec.schema,
            )
            ctx = WorkerContext(world, run.tenant, run.run_id, thread_id, worker_id, version)
            with app.guard(site) as held:
                if not held:
                    print(f"{worker_id}: {thread_id} has another writer; skipped", flush=True)
                    continue
                try:
                    _resume(graph, app, registry, run, ctx, durability)
                except Exception:
                    print(f"{worker_id}: run {run.run_id} raised:", file=sys.stderr)
                    traceback.print_exc()
    world.close()
    return 0


def resumption(
    snap: Any, app: LangGraphApp, registry: Registry, run_id: str
) -> tuple[str, Any] | None:
    """What a worker does with a thread whose state is ``snap`` (the module's
    docstring): ``("start", None)``, ``("resume", decision)``,
    ``("continue", None)``, or None: nothing (finished, failed, waiting
    without a decision, no task). The environment asks it too: when it is
    None for every run, nothing is runnable (``runnable()`` in the contract)."""
    if snap.created_at is None:
        return ("start", None)
    if snap.values.get(app.outcome_key) is not None or any(t.error for t in snap.tasks):
        return None
    if snap.interrupts:
        decision = registry.decision(run_id, snap.interrupts[0].id)
        return None if decision is None else ("resume", decision)
    return ("continue", None) if snap.next or snap.tasks else None


def _resume(
    graph: Any,
    app: LangGraphApp,
    registry: Registry,
    run: RunRow,
    ctx: WorkerContext,
    durability: str,
) -> None:
    from langgraph.types import Command

    config = thread_config(
        ctx.thread_id,
        worker_id=ctx.worker_id,
        code_version=ctx.code_version,
        **{CONTEXT_KEY: ctx},
    )
    step = resumption(graph.get_state(config), app, registry, run.run_id)
    if step is None:
        return
    kind, decision = step
    if kind == "start":
        graph.invoke(app.start_input(run.input, ctx.code_version), config, durability=durability)
    elif kind == "resume":
        graph.invoke(Command(resume=decision), config, durability=durability)
    else:
        graph.invoke(None, config, durability=durability)
