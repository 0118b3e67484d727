"""What a run found, as the report reads it: :class:`Outcome` (every executed
:class:`Example`, summed; built once from frozen parts, :class:`Plan`,
:class:`Tallies` and :class:`Cut`, by the session's :class:`Draft`) and the
rules that turn the sums into verdicts (:func:`judge`: a pass is earned by
exercising a property; a family that never fired, a capability not declared
or a budget that cut the plan is said)."""

from __future__ import annotations

from ..vocabulary import KIND_FAMILY
from ._draft import Draft
from ._outcome import Example, Outcome
from ._parts import Cut, Plan, Tallies
from ._verdicts import NEEDS_CAPABILITY, NEEDS_FAMILY, Judgement, Tally, judge

__all__ = [
    "KIND_FAMILY",
    "NEEDS_CAPABILITY",
    "NEEDS_FAMILY",
    "Cut",
    "Draft",
    "Example",
    "Judgement",
    "Outcome",
    "Plan",
    "Tallies",
    "Tally",
    "judge",
]
