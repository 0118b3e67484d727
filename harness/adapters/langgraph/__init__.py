"""Point the harness at a LangGraph application (the ``langgraph`` extra).

    harness run --adapter harness.adapters.langgraph:LangGraphAdapter \\
        --adapter-opt app=examples.langgraph_refund.correct:APP \\
        --adapter-opt checkpointer=postgres

An application is a :class:`LangGraphApp` (graph factory, workflows,
declarations, completion marker, optional single-writer guard); its nodes
reach the world through :func:`worker_context`. See ``docs/adapters.md``.
LangGraph itself is imported only when an environment is opened or a worker
runs, so this package imports without the extra.
"""

from __future__ import annotations

from ._adapter import LangGraphAdapter, LangGraphEnvironment
from ._app import (
    CONTEXT_KEY,
    DURABILITIES,
    Durability,
    Guard,
    GuardSite,
    LangGraphApp,
    WorkerContext,
    no_guard,
    worker_context,
)

__all__ = [
    "CONTEXT_KEY",
    "DURABILITIES",
    "Durability",
    "Guard",
    "GuardSite",
    "LangGraphAdapter",
    "LangGraphApp",
    "LangGraphEnvironment",
    "WorkerContext",
    "no_guard",
    "worker_context",
]
