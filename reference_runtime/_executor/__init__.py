"""Executing one leased run: load, rebuild context, decide, act, checkpoint.

The executor is where the runtime keeps its promise that a fresh worker can
continue after any crash without repeating a dangerous action:

* the model context is rebuilt from durable records only (:func:`build_context`);
* every checkpoint is one :meth:`Store.commit` -- run row, working state,
  operation, approval, audit and inbox acknowledgements together -- guarded by
  the ``state_version`` it read and the fencing token of its lease;
* effects follow the protocol *persist intent -> call with the idempotency key
  -> record the confirmed result*; an intent found without a result means "we
  may have called", and the run reconciles (asks the service by key or
  business key) before any retry. A service that can neither deduplicate nor be
  asked gets a ``sent`` mark before the call; an unknown outcome after it is
  handed to an operator (at-most-once) or resent (at-least-once), as the effect
  kind declares.

Importing this package declares every crash point the executor passes.

Modules, lowest first: ``_sites`` (crash points and commit boundaries),
``_context`` (the model's view of a run), ``_step`` (the :class:`StepContext`
every step shares, and its checkpoint), then one module per kind of step --
``_local_steps`` (no external effect), ``_inbox`` (waiting on messages),
``_approval_steps`` and ``_effects`` -- and ``_loop`` (the :class:`Executor`).
"""

from __future__ import annotations

from ._context import build_context, idempotency_key, op_id_for
from ._loop import Executor
from ._step import ExecutorSettings, LeaseKeeper, StepContext

__all__ = [
    "Executor",
    "ExecutorSettings",
    "LeaseKeeper",
    "StepContext",
    "build_context",
    "idempotency_key",
    "op_id_for",
]
