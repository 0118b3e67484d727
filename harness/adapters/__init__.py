"""Adapters: the only way the harness touches a runtime.

The contract (``_contract``, with the records an environment reports in
``_records`` and what an adapter offers in ``_workflows``) is public here,
for adapters written outside this package: see ``docs/adapters.md``.
``BaseEnvironment`` holds the defaults for what an environment without a
capability need not do; ``ForkServerWorker`` and ``shared_fork_server`` are
the usual way to start worker processes. The kit (``harness.adapters.kit``,
its main names also here) holds what every adapter otherwise writes itself:
a worker set, clocks, a run registry with a transitions cursor, a transition
table for a runtime without one, an idle policy and a deduplicating inbox.
``HttpWorld`` and ``HttpWorldWorker`` serve an environment's world over
HTTP to an app that reaches its services and model by URL.
What an adapter passes or receives from elsewhere (``RunSpec``,
``CrashSpec``, ``RunState``, the world's ``World``, ``WorldClient`` and
``Caller``) is re-exported, so one import serves.

Names are imported on first use, so that a worker-side module under this
package (a runtime's services factory, a worker target) imports only what it
uses: a worker forked from a fork server that preloads it copies fewer pages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

#: public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    "Adapter": "harness.adapters._contract",
    "AdapterLifecycle": "harness.adapters._contract",
    "ApprovalRecord": "harness.adapters._records",
    "BaseEnvironment": "harness.adapters._contract",
    "Caller": "harness.world",
    "Capability": "harness.adapters._contract",
    "ConstantClock": "harness.adapters.kit",
    "ContextRecord": "harness.adapters._records",
    "CrashPoints": "harness.adapters._crashpoints",
    "CrashSpec": "harness.model",
    "Declarations": "harness.adapters._workflows",
    "DedupInbox": "harness.adapters.kit",
    "DurableState": "harness.adapters._records",
    "Endpoint": "harness.adapters._records",
    "Environment": "harness.adapters._contract",
    "FileClock": "harness.adapters.kit",
    "ForkServerWorker": "harness.adapters._workers",
    "HttpWorld": "harness.adapters._http_world",
    "HttpWorldWorker": "harness.adapters._http_world",
    "IdlePolicy": "harness.adapters.kit",
    "MemoryTarget": "harness.adapters._workflows",
    "Observation": "harness.adapters._records",
    "RunRegistry": "harness.adapters.kit",
    "RunSpec": "harness.model",
    "RunState": "harness.model",
    "RunView": "harness.adapters._records",
    "STORAGE_KINDS": "harness.adapters._contract",
    "Transition": "harness.adapters._records",
    "WorkerExit": "harness.adapters._records",
    "WorkerHandle": "harness.adapters._contract",
    "WorkerSet": "harness.adapters.kit",
    "WorkflowSpec": "harness.adapters._workflows",
    "World": "harness.world",
    "WorldClient": "harness.world",
    "crash_point_trace": "harness.adapters._crashpoints",
    "read_crash_log": "harness.adapters._crashpoints",
    "release_routes": "harness.adapters._contract",
    "route_worker": "harness.adapters._contract",
    "shared_fork_server": "harness.adapters._workers",
    "tcp_connections": "harness.adapters._netinfo",
    "transitions_from_sequence": "harness.adapters.kit",
    "work_until_idle": "harness.adapters.kit",
}

__all__ = [
    "STORAGE_KINDS",
    "Adapter",
    "AdapterLifecycle",
    "ApprovalRecord",
    "BaseEnvironment",
    "Caller",
    "Capability",
    "ConstantClock",
    "ContextRecord",
    "CrashPoints",
    "CrashSpec",
    "Declarations",
    "DedupInbox",
    "DurableState",
    "Endpoint",
    "Environment",
    "FileClock",
    "ForkServerWorker",
    "HttpWorld",
    "HttpWorldWorker",
    "IdlePolicy",
    "MemoryTarget",
    "Observation",
    "RunRegistry",
    "RunSpec",
    "RunState",
    "RunView",
    "Transition",
    "WorkerExit",
    "WorkerHandle",
    "WorkerSet",
    "WorkflowSpec",
    "World",
    "WorldClient",
    "crash_point_trace",
    "read_crash_log",
    "release_routes",
    "route_worker",
    "shared_fork_server",
    "tcp_connections",
    "transitions_from_sequence",
    "work_until_idle",
]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals(), __all__)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from ..model import CrashSpec, RunSpec, RunState
    from ..world import Caller, World, WorldClient
    from ._contract import (
        STORAGE_KINDS,
        Adapter,
        AdapterLifecycle,
        BaseEnvironment,
        Capability,
        Environment,
        WorkerHandle,
        release_routes,
        route_worker,
    )
    from ._crashpoints import CrashPoints, crash_point_trace, read_crash_log
    from ._http_world import HttpWorld, HttpWorldWorker
    from ._netinfo import tcp_connections
    from ._records import (
        ApprovalRecord,
        ContextRecord,
        DurableState,
        Endpoint,
        Observation,
        RunView,
        Transition,
        WorkerExit,
    )
    from ._workers import ForkServerWorker, shared_fork_server
    from ._workflows import Declarations, MemoryTarget, WorkflowSpec
    from .kit import (
        ConstantClock,
        DedupInbox,
        FileClock,
        IdlePolicy,
        RunRegistry,
        WorkerSet,
        transitions_from_sequence,
        work_until_idle,
    )
