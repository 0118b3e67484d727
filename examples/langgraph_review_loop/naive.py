"""The review loop as it is usually first written. The harness finds two bugs.

* Each round bills the reviewer's fee **right before ``interrupt()``, in the
  same node**, with **no idempotency key**. LangGraph re-runs an interrupted
  node from its start when it is resumed (earlier ``interrupt()`` calls
  return their recorded answers), so every resume bills every earlier round
  again: with two reviewers the first fee is charged three times and the
  second twice in a run without any fault (``exactly_once_effects``). This
  is upstream issue #7780 ("interrupt() in a loop will cause extra
  resumes"), measured on langgraph 1.2.24: ``measure_replay.py``.
* Like every LangGraph application without a guard of its own, two
  workers that take up one thread at once both run it: the checkpoint
  history forks (``legal_transitions``).

A fee billed once more than in the fault-free run (a worker killed right
after the payment service applied one) also fails ``resume_equivalence``
and ``state_equivalence``: the duplicate's payment ref ends up in the run's
output and state. And with no retry, a payment service that times out once
fails a run that the fault-free one completed (``resume_equivalence``). It
runs with LangGraph's default ``async`` durability.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_review_loop.naive:APP
"""

from __future__ import annotations

from typing import Any

from harness.adapters.langgraph import LangGraphApp

from ._review import DELIVERY, REVIEW, build_graph


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, split=False, idempotent=False)


APP = LangGraphApp(
    name="review-loop-naive",
    build=build,
    workflows=(REVIEW,),
    delivery=DELIVERY,
    durability="async",
)
