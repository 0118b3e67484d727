"""The hiring workflow as it is usually first written. The harness finds two bugs.

* The background check is bought in a ``@task`` with **no idempotency
  key**. LangGraph keeps a finished task's result, so resuming the screening
  subgraph after the manager's decision does not buy it again (upstream
  issue #6792 does not reproduce on langgraph 1.2.24: ``measure_replay.py``).
  But a worker killed right after the provider charged -- before the task
  returned and its result was saved -- leaves a task without a result, and
  the resume runs it again: the check is paid twice
  (``exactly_once_effects``).
* Like every LangGraph application without a guard of its own, two
  workers that take up one thread at once both run it: the checkpoint
  history forks (``legal_transitions``).

A check paid once more than in the fault-free run (a worker killed right
after the payment service charged) also fails ``resume_equivalence``
and ``state_equivalence``: the duplicate's payment ref ends up in the run's
output and state. And with no retry, a payment service that times out once
fails a run that the fault-free one completed (``resume_equivalence``). It
runs with LangGraph's default ``async`` durability.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_subgraph_task.naive:APP
"""

from __future__ import annotations

from typing import Any

from harness.adapters.langgraph import LangGraphApp

from ._hiring import DELIVERY, HIRING, build_graph


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, idempotent=False)


APP = LangGraphApp(
    name="subgraph-task-naive",
    build=build,
    workflows=(HIRING,),
    delivery=DELIVERY,
    durability="async",
)
