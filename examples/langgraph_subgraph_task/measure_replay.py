"""Whether resuming a subgraph runs its pre-``interrupt()`` ``@task`` again (upstream #6792).

    PYTHONPATH=. python -m examples.langgraph_subgraph_task.measure_replay [--postgres]

No harness, no fault. Each variant calls a counted ``@task`` and then
``interrupt()`` inside a subgraph; one process starts the run (it stops at
the interrupt), and a *new* process resumes it with ``Command(resume=...)``,
as a worker of a LangGraph service would. Every task execution appends a
line to a log file; one line per task means the task's result was reused.

Variants: the subgraph added as a node of the parent graph; the subgraph
invoked from a parent node; a child ``@entrypoint`` called from a parent
``@entrypoint`` (the issue's own shape, with a task before the child and one
after the interrupt); and, as a control, the side effect called in the
subgraph's node without a task (LangGraph re-runs a node from its start on
resume, so that one runs twice). Each on a ``SqliteSaver`` file (and with
``--postgres`` on a ``PostgresSaver`` schema on ``$HARNESS_POSTGRES_URL``),
with ``async`` and ``sync`` durability, resumed with the thread id alone and
with the latest checkpoint id pinned in the config (what LangGraph's API
server sends).
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

VARIANTS = ("subgraph_node", "subgraph_invoked", "nested_entrypoints", "no_task_control")


class _State(TypedDict, total=False):
    ref: str
    answer: str
    outcome: str


def _graph(variant: str, saver: Any, log: Path) -> Any:
    from langgraph.func import entrypoint, task
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    def count(name: str) -> None:
        with log.open("a") as fh:
            fh.write(name + "\n")

    @task
    def charge(x: str) -> str:
        count("charge")
        return x + " charged"

    @task
    def before(x: str) -> str:
        count("before")
        return x + " prepared"

    @task
    def after(x: str) -> str:
        count("after")
        return x + " done"

    if variant == "nested_entrypoints":

        @entrypoint()
        def child(x: str) -> str:
            ref = charge(x).result()
            answer = interrupt({"ref": ref})
            return str(after(f"{ref} {answer}").result())

        @entrypoint(checkpointer=saver)
        def nested(x: str) -> str:
            return str(child.invoke(before(x).result()))

        return nested

    def work(state: _State) -> _State:
        if variant == "no_task_control":
            count("charge")
            ref = "x charged"
        else:
            ref = charge("x").result()
        return {"ref": ref, "answer": interrupt({"ref": ref})}

    sub = StateGraph(_State)
    sub.add_node("work", work)
    sub.add_edge(START, "work")
    sub.add_edge("work", END)
    compiled = sub.compile()
    graph = StateGraph(_State)
    if variant == "subgraph_invoked":
        graph.add_node("screening", lambda state: compiled.invoke(state))
    else:
        graph.add_node("screening", compiled)
    graph.add_node("finish", lambda state: {"outcome": "done"})
    graph.add_edge(START, "screening")
    graph.add_edge("screening", "finish")
    graph.add_edge("finish", END)
    return graph.compile(checkpointer=saver)


@contextmanager
def _saver(where: str) -> Iterator[Any]:
    if where.startswith("postgresql"):
        import psycopg
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg.rows import dict_row

        url, _, schema = where.partition("#")
        with psycopg.connect(
            url,
            options=f"-c search_path={schema}",
            autocommit=True,
            prepare_threshold=0,
            row_factory=dict_row,
        ) as pg:
            saver = PostgresSaver(pg)
            saver.setup()
            yield saver
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(where, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


@contextmanager
def _storage(backend: str, url: str | None, tmp: str) -> Iterator[str]:
    """Fresh checkpoint storage: a SQLite file in ``tmp``, or a Postgres
    schema of its own (``url#schema``, dropped afterwards)."""
    if backend == "sqlite":
        yield str(Path(tmp) / "checkpoints.db")
        return
    import psycopg

    assert url is not None
    schema = f"measure_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield f"{url}#{schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _phase(args: argparse.Namespace) -> None:
    """One process: start the run, or resume it."""
    from langgraph.types import Command

    with _saver(args.where) as saver:
        graph = _graph(args.variant, saver, Path(args.log))
        config: dict[str, Any] = {"configurable": {"thread_id": "t1"}}
        if args.phase == "start":
            first: Any = "x" if args.variant == "nested_entrypoints" else {}
            graph.invoke(first, config, durability=args.durability)
            return
        if args.pin:
            head = graph.get_state(config).config["configurable"]["checkpoint_id"]
            config["configurable"]["checkpoint_id"] = head
        graph.invoke(Command(resume="approved"), config, durability=args.durability)
        left = graph.get_state({"configurable": {"thread_id": "t1"}})
        if left.interrupts or left.next:
            with Path(args.log).open("a") as fh:
                fh.write("still_waiting\n")


def measure(variant: str, where: str, durability: str, pin: bool, workdir: Path) -> Counter[str]:
    """Start in one process, resume in another; the task executions counted."""
    log = workdir / "calls.log"
    for phase in ("start", "resume"):
        cmd = [sys.executable, "-m", __spec__.name if __spec__ else "measure_replay"]
        cmd += ["--phase", phase, "--variant", variant, "--where", where, "--log", str(log)]
        cmd += ["--durability", durability] + (["--pin"] if pin else [])
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode:
            raise RuntimeError(f"{variant} {phase} failed:\n{done.stderr[-2000:]}")
    return Counter(log.read_text().split()) if log.exists() else Counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--postgres", action="store_true", help="on $HARNESS_POSTGRES_URL too")
    parser.add_argument("--phase", choices=("start", "resume"), help=argparse.SUPPRESS)
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--where", help=argparse.SUPPRESS)
    parser.add_argument("--log", help=argparse.SUPPRESS)
    parser.add_argument("--durability", default="async", help=argparse.SUPPRESS)
    parser.add_argument("--pin", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        _phase(args)
        return
    print(
        f"langgraph {metadata.version('langgraph')}, "
        f"langgraph-checkpoint {metadata.version('langgraph-checkpoint')}, "
        f"langgraph-checkpoint-sqlite {metadata.version('langgraph-checkpoint-sqlite')}"
    )
    url = os.environ.get("HARNESS_POSTGRES_URL")
    if args.postgres and not url:
        parser.error("--postgres needs HARNESS_POSTGRES_URL")
    backends = ["sqlite"] + (["postgres"] if args.postgres else [])
    for backend in backends:
        for variant in VARIANTS:
            for durability in ("async", "sync"):
                for pin in (False, True):
                    with tempfile.TemporaryDirectory() as tmp, _storage(backend, url, tmp) as where:
                        calls = measure(variant, where, durability, pin, Path(tmp))
                    shown = ", ".join(f"{k} {n}" for k, n in sorted(calls.items()))
                    print(
                        f"{backend:8} {variant:18} {durability:5} "
                        f"{'pinned' if pin else 'thread':6}: {shown}",
                        flush=True,
                    )


if __name__ == "__main__":
    main()
