"""The refund workflow as it is usually first written. The harness finds three bugs.

* The refund carries **no idempotency key**, so a worker killed after the
  payment service applied it -- and the resume that re-runs the node --
  refunds twice (``exactly_once_effects``).
* It runs with LangGraph's default **``async`` durability**: a checkpoint may
  not be written when the worker dies, so finished nodes run again. Measured
  (README, ``measure_kill``): a kill right after the refund applied refunds
  twice in 30 of 30 runs under ``async`` *and* under ``sync`` -- the kill
  lands inside the node, so neither saves it; ``sync`` helps only against a
  kill after a node returned (a repeat payment in 15 of 15 under ``async``,
  none under ``sync``).
* Code version 2 renamed the state field ``amount`` to ``amount_cents``
  **without a migration**: a run started by version 1 and resumed by version
  2 silently loses the amount (LangGraph drops channels the new schema does
  not declare) and fails (``migration_safety``).

And, like every LangGraph application without a guard of its own, two
processes resuming one thread both run it: the checkpoint history forks
(``legal_transitions``).

    PYTHONPATH=. harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_refund.naive:APP
"""

from __future__ import annotations

from typing import Any

from harness.adapters.langgraph import LangGraphApp

from ._refund import DELIVERY, NEEDS_APPROVAL, REFUND, build_graph, start_input


def build(checkpointer: Any, code_version: int) -> Any:
    return build_graph(checkpointer, code_version, idempotent=False, migrate=False)


APP = LangGraphApp(
    name="refund-naive",
    build=build,
    workflows=(REFUND,),
    delivery=DELIVERY,
    needs_approval=NEEDS_APPROVAL,
    versions=(1, 2),
    start_input=start_input,
    durability="async",
    # build only compiles: one compiled graph per version, each worker binds its saver
    compile_once=True,
)
