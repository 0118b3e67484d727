"""The hiring workflow written to survive crashes and races.

What makes it correct, each against a bug of ``naive.py``:

* **The side effect in a ``@task``**, called before the subgraph's
  ``interrupt()``: the task's result is checkpointed, and the resume after
  the decision reuses it instead of paying again (measured on langgraph
  1.2.24; a plain call in the node would run again at every resume).
* **An idempotency key from stable ids**: the check carries
  ``"{thread_id}:background-check"``, the same in every process that ever
  runs the task, and is retried with it after a timeout; a worker killed
  right after the provider charged runs the task again, and the provider
  charges once.
* **``sync`` durability**: each checkpoint is written before the next step
  starts, so a finished node does not run again after a kill.
* **A single writer per thread**: the refund example's lock (a Postgres
  advisory lock, or an ``flock`` for SQLite) around every resume.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_subgraph_task.correct:APP
"""

from __future__ import annotations

from typing import Any

from examples.langgraph_refund.correct import single_writer
from harness.adapters.langgraph import LangGraphApp

from ._hiring import DELIVERY, HIRING, build_graph


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, idempotent=True)


APP = LangGraphApp(
    name="subgraph-task-correct",
    build=build,
    workflows=(HIRING,),
    delivery=DELIVERY,
    durability="sync",
    guard=single_writer,
)
