"""The map-reduce refund written to survive crashes and races.

* **A key per branch from stable ids**: line ``sku`` of thread ``t`` is
  refunded with the key ``"t:refund:sku"``, the same in every process that
  ever runs the branch, so a repeated refund is applied once; a timeout is
  retried with the same key. (LangGraph keeps the writes of the branches
  that finished before a kill and re-runs only the others, but a branch
  killed after its call returned, before its writes were saved, runs again.)
* **``sync`` durability**: the checkpoint that closes the fan-out is written
  before the reduce node starts, so a kill there does not run the branches
  again.
* **A single writer per thread**: the refund example's guard (an ``flock``
  per thread for SQLite, a Postgres advisory lock), held around every resume.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_fanout.correct:APP --profile dev
"""

from __future__ import annotations

from typing import Any

from examples.langgraph_refund.correct import single_writer
from harness.adapters.langgraph import LangGraphApp

from ._fanout import DELIVERY, REFUND_ORDER, build_graph


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, stable_keys=True)


APP = LangGraphApp(
    name="fanout-correct",
    build=build,
    workflows=(REFUND_ORDER,),
    delivery=DELIVERY,
    durability="sync",
    guard=single_writer,
)
