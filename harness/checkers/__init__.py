"""The properties, as pure functions of a history.

Each checker is ``check_<name>(history, oracle) -> PropertyResult``: it
reads the recorded :class:`~harness.history.History` (and, for comparisons,
the fault-free *oracle* history of the same workload) and never talks to
the runtime. Verdicts are ``pass``, ``fail`` (the witness is the smallest set
of event indexes that proves it) or ``unknown`` (the message says why: a
missing capability, no oracle, a malformed or incomplete history). Checkers
never raise on odd histories. Verdicts merge by Jepsen's priority,
``pass < unknown < fail`` (:func:`merge_verdicts`).

A three-line tour::

    history, oracle = History.load("history.jsonl"), History.load("oracle.jsonl")
    results = check_all(history, oracle)
    overall = merge_verdicts(r.verdict for r in results)

The properties, in report order, are the keys of :data:`CHECKERS`; each is
a :class:`Property` record in :data:`BUILTIN`. A user's own invariants are
records of the same type (:func:`invariant`), judged on a
:class:`ScenarioView` after the built-in ones (:func:`check_properties`).
"""

from __future__ import annotations

from ._accounted import check_effects_accounted
from ._approvals import check_approval_integrity
from ._base import Checker, oracle_disagreement
from ._context import check_context_rebuild
from ._exactly_once import check_exactly_once_effects
from ._memory import check_memory_safety
from ._migration import check_migration_safety
from ._progress import check_progress
from ._property import (
    Effect,
    Held,
    Property,
    Run,
    ScenarioView,
    Violated,
    held,
    invariant,
    split_traceback,
    violated,
)
from ._registry import BUILTIN, CHECKERS, check_all, check_properties, merge_verdicts
from ._resume import check_resume_equivalence
from ._state import check_state_equivalence
from ._transitions import check_legal_transitions

__all__ = [
    "BUILTIN",
    "CHECKERS",
    "Checker",
    "Effect",
    "Held",
    "Property",
    "Run",
    "ScenarioView",
    "Violated",
    "check_all",
    "check_approval_integrity",
    "check_context_rebuild",
    "check_effects_accounted",
    "check_exactly_once_effects",
    "check_legal_transitions",
    "check_memory_safety",
    "check_migration_safety",
    "check_progress",
    "check_properties",
    "check_resume_equivalence",
    "check_state_equivalence",
    "held",
    "invariant",
    "merge_verdicts",
    "oracle_disagreement",
    "split_traceback",
    "violated",
]
