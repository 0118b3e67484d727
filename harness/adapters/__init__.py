"""Adapters: the only way the harness touches a runtime.

The contract (``_contract``) is public here, for adapters written outside
this package: see ``docs/adapters.md``.
"""

from __future__ import annotations

from ._contract import (
    STORAGE_KINDS,
    Adapter,
    Capability,
    Declarations,
    Environment,
    Observation,
    RunView,
    WorkerExit,
    WorkerHandle,
    WorkflowSpec,
)

__all__ = [
    "STORAGE_KINDS",
    "Adapter",
    "Capability",
    "Declarations",
    "Environment",
    "Observation",
    "RunView",
    "WorkerExit",
    "WorkerHandle",
    "WorkflowSpec",
]
