"""What resuming an interrupted run does to the effects before ``interrupt()``, counted.

    PYTHONPATH=. python -m examples.langgraph_review_loop.measure_replay

No harness, no fault: each version's graph runs in this process on a
``SqliteSaver`` file, is invoked with a run's input, then resumed with
``Command(resume=...)`` (every verdict "approved") until it waits no more,
as a LangGraph service would drive it; the nodes call a world of their own.
Prints, per version, durability and input, how many effects the world
applied per kind, and how many times the same request was applied again (a
duplicate) or absorbed by its idempotency key. ``--app`` measures another
``LangGraphApp`` (``package.module:attr``), such as the subgraph example.
"""

from __future__ import annotations

import argparse
import importlib
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

from harness.adapters.langgraph import CONTEXT_KEY, LangGraphApp, WorkerContext
from harness.world import World, WorldClient

APPS = ("examples.langgraph_review_loop.naive:APP", "examples.langgraph_review_loop.correct:APP")
#: resumes after which a run still waiting is reported as such
MAX_RESUMES = 10


def load_app(spec: str) -> LangGraphApp:
    """The :class:`LangGraphApp` named by ``package.module:attr``."""
    module, _, attr = spec.partition(":")
    app = getattr(importlib.import_module(module), attr)
    if not isinstance(app, LangGraphApp):
        raise SystemExit(f"{spec} is not a LangGraphApp")
    return app


def replay_counts(
    app: LangGraphApp, payload: Mapping[str, Any], durability: str, workdir: Path
) -> dict[str, Any]:
    """Run one input to its end, resuming after every ``interrupt()``: the
    world's counts (``applied`` per kind, ``duplicates``: applications of a
    request already applied, ``absorbed``: repeats its key deduplicated) and
    the number of resumes."""
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.types import Command

    world = World(workdir / "world.db").create()
    client = WorldClient(world.path)
    conn = sqlite3.connect(workdir / "checkpoints.db", check_same_thread=False)
    try:
        graph = app.build(SqliteSaver(conn), app.current_version)
        ctx = WorkerContext(client, "acme", "r1", "thread-r1", "m0", app.current_version)
        config = {"configurable": {"thread_id": ctx.thread_id, CONTEXT_KEY: ctx}}
        graph.invoke(app.start_input(payload, app.current_version), config, durability=durability)
        resumes = 0
        while (snap := graph.get_state(config)).interrupts and resumes < MAX_RESUMES:
            first = snap.interrupts[0]
            value = first.value if isinstance(first.value, dict) else {}
            answer = {
                "approval_id": first.id,
                "decision": "approved",
                "approver": "alice",
                "role": value.get("role"),
            }
            graph.invoke(Command(resume=answer), config, durability=durability)
            resumes += 1
        outcome = (graph.get_state(config).values.get(app.outcome_key) or {}).get("status")
        applied: Counter[str] = Counter()
        seen: Counter[tuple[str, str]] = Counter()
        for r in world.effects():
            kind = f"{r.service}.{r.action}"
            applied[kind] += 1
            seen[(kind, r.request_hash)] += 1
        absorbed = sum(1 for r in world.requests() if r.outcome == "deduplicated")
        return {
            "applied": dict(sorted(applied.items())),
            "duplicates": sum(n - 1 for n in seen.values()),
            "absorbed": absorbed,
            "resumes": resumes,
            "outcome": outcome,
        }
    finally:
        conn.close()
        client.close()
        world.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--app", action="append", help="package.module:attr (repeatable)")
    parser.add_argument("--durability", action="append", choices=("async", "sync"))
    args = parser.parse_args()
    print(
        f"langgraph {metadata.version('langgraph')}, "
        f"langgraph-checkpoint {metadata.version('langgraph-checkpoint')}, "
        f"langgraph-checkpoint-sqlite {metadata.version('langgraph-checkpoint-sqlite')}"
    )
    for spec in args.app or APPS:
        app = load_app(spec)
        for durability in args.durability or ["async", "sync"]:
            for wf in app.workflows:
                for payload in wf.inputs:
                    with tempfile.TemporaryDirectory() as tmp:
                        c = replay_counts(app, payload, durability, Path(tmp))
                    applied = ", ".join(f"{k} {n}" for k, n in c["applied"].items())
                    print(
                        f"{app.name:22} {durability:5} {wf.name} input {wf.inputs.index(payload)}:"
                        f" {c['resumes']} resumes, applied: {applied}; duplicates {c['duplicates']}"
                        f", absorbed by key {c['absorbed']}; outcome {c['outcome']}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
