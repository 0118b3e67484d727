"""The harness's data model: history events, scenario steps, verdicts.

This module sits at the bottom of the one-way flow (scenarios -> runner ->
adapter -> runtime and world -> history -> checkers -> report): everything may
import it, it imports nothing of the harness but its vocabulary
(:mod:`harness.vocabulary`). All values are frozen and
round-trip through JSON with a type tag (``f`` for events, ``op`` for steps)
and a schema version, so a history or a scenario written today can be replayed
and re-checked later.

History events follow Jepsen: an operation is an ``invoke`` followed by its
completion -- ``ok``, ``fail`` (certainly did not happen) or ``info`` (may
have happened: a timeout, a killed worker). Everything the harness merely
observes (an effect at the world, a state transition in the runtime, a fault
that fired) is an ``info`` event.
"""

from ._records import (
    OPERATOR_ANSWER,
    SCHEMA_VERSION,
    CrashSpec,
    Event,
    EventF,
    EventType,
    Needs,
    PropertyResult,
    RunSpec,
    RunState,
    Verdict,
    _Frozen,
)
from ._scenario import Scenario, describe_step
from ._steps import (
    AdvanceClock,
    Approve,
    ArmModelFault,
    ArmWorldFault,
    Cancel,
    ContinueWorker,
    InjectMemory,
    KillAfter,
    KillWorker,
    NetworkFault,
    NetworkKind,
    Quiesce,
    RaceWorkers,
    ReleaseWorkers,
    RunWorker,
    Step,
    StorageFault,
    StorageKind,
    Submit,
    _Step,
)

__all__ = [
    "OPERATOR_ANSWER",
    "SCHEMA_VERSION",
    "AdvanceClock",
    "Approve",
    "ArmModelFault",
    "ArmWorldFault",
    "Cancel",
    "ContinueWorker",
    "CrashSpec",
    "Event",
    "EventF",
    "EventType",
    "InjectMemory",
    "KillAfter",
    "KillWorker",
    "Needs",
    "NetworkFault",
    "NetworkKind",
    "PropertyResult",
    "Quiesce",
    "RaceWorkers",
    "ReleaseWorkers",
    "RunSpec",
    "RunState",
    "RunWorker",
    "Scenario",
    "Step",
    "StorageFault",
    "StorageKind",
    "Submit",
    "Verdict",
    "_Frozen",
    "_Step",
    "describe_step",
]
