"""The nemesis: every fault's handler, and the check that a scenario's
faults are ones the adapter can take.

One module per fault family (the module a family's record names in
``FaultFamily.handlers``; this package imports each, in the records' order):

=================  =========================================================
``_processes``      kill, continue after a pause, kill at a random moment, race,
                    release paused workers together from a barrier
``_clock``          virtual time jumps and the lease wait after a kill
``_storage``        cut storage connections; an operator's cancellation
``_network``        a lost commit acknowledgement, a reset mid-transaction
``_memory``         records planted in long-term memory
``_world``          fault rules armed at the world's services, outages
``_model``          fault rules armed at the world's model endpoint
``_messages``       forged, wrong and duplicated approval decisions
``_operator``       the operator's answer to a run at ``needs_operator``
                    (no fault: the runner's, from the world's record)
``_validate``       capabilities each step needs, checked before a run
``_registry``       who handles each step type, how fired world rules read
=================  =========================================================

A handler is ``handler(ctx, step)`` over a :class:`StepContext` that the
runner implements; the runner decides the order, the nemesis what a fault
does and how it is recorded. To add a fault: a step in :mod:`harness.model`
(naming the capability it ``needs``), and its handler in the family's
module, registered with ``@handles(StepType)``; a family whose rules fire
in the world says how they read with ``@fires_at(target)``. The runner
finds both in :data:`HANDLERS` and :func:`fired_fault_event`.
"""

from __future__ import annotations

from importlib import import_module

from ..vocabulary import FAULT_FAMILIES
from ._clock import advance
from ._context import Recorder, ScenarioError, StepContext
from ._messages import approve
from ._operator import answer_operator
from ._processes import (
    WORKER_TIMEOUT,
    continue_worker,
    resolve_worker_timeout,
    wait_worker,
    worker_timeout,
    worker_timeout_limit,
)
from ._registry import FIRED_EVENTS, HANDLERS, fired_fault_event, fires_at, handles
from ._validate import needs, validate
from ._world import OUTAGE_MODE, name_outage_runs

# Each family's handler module registers its handlers as it is imported:
# every module a record names, in the records' order (a family added with
# its record and its module needs no line here). The runner reaches every
# fault step's handler through HANDLERS, never by name.
for _module in dict.fromkeys(f.handlers for f in FAULT_FAMILIES if f.handlers):
    import_module(f"{__name__}.{_module}")

from ._network import routing_for  # noqa: E402 (after the families, in their order)

__all__ = [
    "FIRED_EVENTS",
    "HANDLERS",
    "OUTAGE_MODE",
    "WORKER_TIMEOUT",
    "Recorder",
    "ScenarioError",
    "StepContext",
    "advance",
    "answer_operator",
    "approve",
    "continue_worker",
    "fired_fault_event",
    "fires_at",
    "handles",
    "name_outage_runs",
    "needs",
    "resolve_worker_timeout",
    "routing_for",
    "validate",
    "wait_worker",
    "worker_timeout",
    "worker_timeout_limit",
]
