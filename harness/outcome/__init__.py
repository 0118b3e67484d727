"""What a run found, as the report reads it: :class:`Outcome` (every executed
:class:`Example`, summed) and the rules that turn the sums into verdicts
(:func:`judge`: a pass is earned by exercising a property; a family that never
fired, a capability not declared or a budget that cut the plan is said)."""

from __future__ import annotations

from ..vocabulary import KIND_FAMILY
from ._outcome import Example, Outcome
from ._verdicts import NEEDS_CAPABILITY, NEEDS_FAMILY, Judgement, Tally, judge

__all__ = [
    "KIND_FAMILY",
    "NEEDS_CAPABILITY",
    "NEEDS_FAMILY",
    "Example",
    "Judgement",
    "Outcome",
    "Tally",
    "judge",
]
