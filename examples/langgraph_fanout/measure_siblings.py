"""Does LangGraph run a finished ``Send`` branch again after a kill? Plain LangGraph, no harness.

    python -m examples.langgraph_fanout.measure_siblings --runs 6

The graph is ``plan -> branch x3 (a, b, c) -> reduce`` on a file-backed
``SqliteSaver``; each branch appends ``refund:<item>`` to a ledger file (the
external effect) and ``reduce`` appends ``notify``. A first process is
SIGKILLed at the point named, a new process resumes with
``graph.invoke(None, config)``, and the ledger is counted:

* ``settled siblings``: branch ``c`` waits 0.5 s (``a`` and ``b`` return and
  their writes are saved meanwhile), pays, and is killed;
* ``at once``: branch ``a`` pays and is killed at once (``b`` and ``c`` may
  or may not have paid, or returned, by then);
* ``start of reduce``: every branch returned; ``reduce`` notifies and is
  killed at once.
"""

from __future__ import annotations

import argparse
import operator
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any, TypedDict

KILLS = ("settled siblings", "at once", "start of reduce")


class State(TypedDict, total=False):
    items: list[str]
    done: Annotated[list[str], operator.add]


def run_phase(ledger: str, db: str, kill: str, durability: str, phase: str) -> None:
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    first = phase == "first"

    def pay(tag: str) -> None:
        with open(ledger, "a") as f:
            f.write(tag + "\n")

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def branch(task: dict[str, Any]) -> dict[str, Any]:
        item = task["item"]
        if first and kill == "settled siblings" and item == "c":
            time.sleep(0.5)
        pay(f"refund:{item}")
        if first and kill == "settled siblings" and item == "c":
            die()
        if first and kill == "at once" and item == "a":
            die()
        return {"done": [item]}

    def reduce(state: State) -> dict[str, Any]:
        pay("notify")
        if first and kill == "start of reduce":
            die()
        return {}

    graph = StateGraph(State)
    graph.add_node("plan", lambda state: {})
    graph.add_node("branch", branch)
    graph.add_node("reduce", reduce)
    graph.add_edge(START, "plan")
    graph.add_conditional_edges(
        "plan", lambda s: [Send("branch", {"item": i}) for i in s["items"]], ["branch"]
    )
    graph.add_edge("branch", "reduce")
    graph.add_edge("reduce", END)
    conn = sqlite3.connect(db, check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))
    config: Any = {"configurable": {"thread_id": "t1"}}
    app.invoke({"items": ["a", "b", "c"]} if first else None, config, durability=durability)


def once(kill: str, durability: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        ledger, db = str(Path(tmp) / "ledger"), str(Path(tmp) / "c.db")
        for phase in ("first", "resume"):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    __spec__.name,
                    "--phase",
                    phase,
                    ledger,
                    db,
                    kill,
                    durability,
                ],
                check=False,
                stderr=subprocess.DEVNULL,
            )
        lines = Counter(Path(ledger).read_text().split())
    return " ".join(f"{k}={v}" for k, v in sorted(lines.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=6)
    parser.add_argument("--phase", nargs=5, metavar=("PHASE", "LEDGER", "DB", "KILL", "DUR"))
    args = parser.parse_args()
    if args.phase:
        phase, ledger, db, kill, durability = args.phase
        run_phase(ledger, db, kill, durability, phase)
        return
    print(f"langgraph {metadata.version('langgraph')}, sqlite checkpointer")
    for kill in KILLS:
        for durability in ("async", "sync"):
            counts = Counter(once(kill, durability) for _ in range(args.runs))
            shown = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
            print(f"{kill:16} {durability:5} {shown}", flush=True)


if __name__ == "__main__":
    main()
