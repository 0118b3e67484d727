"""The subscription workflow as LangGraph's memory examples write it.

* The memory item is keyed by a **fresh ``uuid4``**. A store write is not
  rolled back with the step that made it: when the worker dies after the
  charge, the resumed ``subscribe`` node puts the item again, and the
  customer's namespace holds two copies of one memory
  (``state_equivalence``: the adapter puts the run's store items in its
  durable state). The charge itself is keyed by the thread id and is
  applied once.
* It runs with LangGraph's default **``async`` durability**: a kill in
  ``welcome`` can find the checkpoint after ``subscribe`` unwritten, and
  ``subscribe`` -- memory and all -- runs again.

And, like every LangGraph application without a guard of its own, two
processes resuming one thread both run it (``legal_transitions``).

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_store.naive:APP --profile dev
"""

from __future__ import annotations

from typing import Any

from harness.adapters.langgraph import LangGraphApp

from ._memory import DELIVERY, SUBSCRIBE, build_graph, namespace


def build(checkpointer: Any, code_version: int, *, store: Any) -> Any:
    return build_graph(checkpointer, code_version, store=store, stable_memory_key=False)


APP = LangGraphApp(
    name="store-naive",
    build=build,
    workflows=(SUBSCRIBE,),
    delivery=DELIVERY,
    durability="async",
    store=True,
    store_namespace=namespace,
)
