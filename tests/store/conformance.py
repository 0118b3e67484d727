"""The whole store contract as one class a backend's test class inherits.

See the package docstring for how a backend runs it. The parts live in
``contract_runs``, ``contract_leases`` and ``contract_memory``, one class per
group of promises, so a failure names the group.
"""

from __future__ import annotations

from .contract_leases import InboxContract, LeaseContract
from .contract_memory import MemoryContract, OperatorContract, ProcessContract
from .contract_runs import CheckpointContract, CrashContract, RunContract

__all__ = ["StoreConformance"]


class StoreConformance(
    RunContract,
    CheckpointContract,
    CrashContract,
    LeaseContract,
    InboxContract,
    MemoryContract,
    OperatorContract,
    ProcessContract,
):
    """Every promise of :class:`reference_runtime.store.Store`; each test
    takes the ``store`` fixture the backend's test module defines."""
