"""The map-reduce refund as it is usually first written.

* Each branch's refund carries an idempotency key, but a **fresh ``uuid4``
  per call**: "unique per request" is not "the same for the same request",
  so the payment service cannot tell a repeated refund from a new one. A
  worker killed right after the service applied one line's refund -- and
  the resume that re-runs that branch -- refunds that line twice
  (``exactly_once_effects``).
* It runs with LangGraph's default **``async`` durability**: when the worker
  dies in the reduce node, the checkpoint that closed the fan-out superstep
  may not be written yet, and every branch runs again (measured: all of them,
  10 times in 10).

And, like every LangGraph application without a guard of its own, two
processes resuming one thread both run it (``legal_transitions``).

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_fanout.naive:APP --profile dev
"""

from __future__ import annotations

from typing import Any

from harness.adapters.langgraph import LangGraphApp

from ._fanout import DELIVERY, REFUND_ORDER, build_graph


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, stable_keys=False)


APP = LangGraphApp(
    name="fanout-naive",
    build=build,
    workflows=(REFUND_ORDER,),
    delivery=DELIVERY,
    durability="async",
)
