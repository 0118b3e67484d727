"""The subscription workflow with memory that survives a repeated step.

* **The memory item is keyed by thread id and step** (``"t:subscribe"``):
  the resumed node that writes it again overwrites the same item, so the
  namespace holds one copy whatever the number of attempts. (LangGraph does
  not roll a store write back with its step; only the key can make the
  repeat harmless.) The charge is keyed by the thread id too.
* **``sync`` durability**: a kill in ``welcome`` does not run ``subscribe``
  again.
* **A single writer per thread**: the refund example's guard (an ``flock``
  per thread for SQLite, a Postgres advisory lock), held around every resume.

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_store.correct:APP --profile dev
"""

from __future__ import annotations

from typing import Any

from examples.langgraph_refund.correct import single_writer
from harness.adapters.langgraph import LangGraphApp

from ._memory import DELIVERY, SUBSCRIBE, build_graph, namespace


def build(checkpointer: Any, code_version: int, *, store: Any) -> Any:
    return build_graph(checkpointer, code_version, store=store, stable_memory_key=True)


APP = LangGraphApp(
    name="store-correct",
    build=build,
    workflows=(SUBSCRIBE,),
    delivery=DELIVERY,
    durability="sync",
    guard=single_writer,
    store=True,
    store_namespace=namespace,
)
