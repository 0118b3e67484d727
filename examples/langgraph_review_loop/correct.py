"""The review loop written to survive resumes, crashes and races.

What makes it correct, each against a bug of ``naive.py``:

* **The fee is billed in a node of its own** (``bill``), and the verdict
  waited for in the next one (``ask``): a resume re-runs only ``ask``, whose
  single ``interrupt()`` returns the answer, and nothing is billed again.
  The loop is the graph's (``bill -> ask -> bill ...``), not a Python loop
  around ``interrupt()``.
* **An idempotency key from stable ids**: round ``k``'s fee carries
  ``"{thread_id}:review-fee:{k}"``, the same in every process that ever
  bills it, and is retried with it after a timeout; a worker killed right
  after the payment service applied the fee re-runs ``bill``, and the
  service applies the fee once.
* **``sync`` durability**: each checkpoint is written before the next step
  starts, so a finished ``bill`` does not run again after a kill.
* **A single writer per thread**: the refund example's lock (a Postgres
  advisory lock, or an ``flock`` for SQLite) around every resume.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_review_loop.correct:APP
"""

from __future__ import annotations

from typing import Any

from examples.langgraph_refund.correct import single_writer
from harness.adapters.langgraph import LangGraphApp

from ._review import DELIVERY, REVIEW, build_graph


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, split=True, idempotent=True)


APP = LangGraphApp(
    name="review-loop-correct",
    build=build,
    workflows=(REVIEW,),
    delivery=DELIVERY,
    durability="sync",
    guard=single_writer,
)
