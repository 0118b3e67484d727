"""Adapters: the only way the harness touches a runtime.

The contract (``_contract``) is public here, for adapters written outside
this package: see ``docs/adapters.md``. ``BaseEnvironment`` holds the
defaults for what an environment without a capability need not do;
``ForkServerWorker`` and ``shared_fork_server`` are the usual way to start
worker processes. The kit (``harness.adapters.kit``, its main names also
here) holds what every adapter otherwise writes itself: a worker set, clocks,
a run registry with a transitions cursor, a transition table for a runtime
without one, an idle policy and a deduplicating inbox. What an adapter
passes or receives from elsewhere (``RunSpec``, ``CrashSpec``, ``RunState``,
the world's ``World``, ``WorldClient`` and ``Caller``) is re-exported, so
one import serves.
"""

from __future__ import annotations

from ..model import CrashSpec, RunSpec, RunState
from ..world import Caller, World, WorldClient
from ._contract import (
    STORAGE_KINDS,
    Adapter,
    AdapterLifecycle,
    ApprovalRecord,
    BaseEnvironment,
    Capability,
    ContextRecord,
    Declarations,
    DurableState,
    Endpoint,
    Environment,
    Observation,
    RunView,
    Transition,
    WorkerExit,
    WorkerHandle,
    WorkflowSpec,
)
from ._netinfo import tcp_connections
from ._workers import ForkServerWorker, shared_fork_server
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
    "CrashSpec",
    "Declarations",
    "DedupInbox",
    "DurableState",
    "Endpoint",
    "Environment",
    "FileClock",
    "ForkServerWorker",
    "IdlePolicy",
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
    "shared_fork_server",
    "tcp_connections",
    "transitions_from_sequence",
    "work_until_idle",
]
