"""Adapters: the only way the harness touches a runtime.

The contract (``_contract``) is public here, for adapters written outside
this package: see ``docs/adapters.md``. ``BaseEnvironment`` holds the
defaults for what an environment without a capability need not do;
``ForkServerWorker`` and ``shared_fork_server`` are the usual way to start
worker processes.
"""

from __future__ import annotations

from ._contract import (
    STORAGE_KINDS,
    Adapter,
    BaseEnvironment,
    Capability,
    Declarations,
    DurableState,
    Environment,
    Observation,
    RunView,
    WorkerExit,
    WorkerHandle,
    WorkflowSpec,
)
from ._workers import ForkServerWorker, shared_fork_server

__all__ = [
    "STORAGE_KINDS",
    "Adapter",
    "BaseEnvironment",
    "Capability",
    "Declarations",
    "DurableState",
    "Environment",
    "ForkServerWorker",
    "Observation",
    "RunView",
    "WorkerExit",
    "WorkerHandle",
    "WorkflowSpec",
    "shared_fork_server",
]
