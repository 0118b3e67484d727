"""How much of a counterexample's steps and of a property's witness a
rendering shows.

A shrunk counterexample has a handful of steps, an unshrunk one a few
hundred; a ``report.json`` anyone may have written can hold millions, and
rendering each into HTML, JUnit and Markdown made ``harness report`` ten
times slower than reading the report. Every rendering shows the first
:data:`STEPS_SHOWN` and says how many more there are; ``report.json`` and
the folder's ``scenario.json`` keep them all.
"""

from __future__ import annotations

from collections.abc import Sequence

#: the steps of one counterexample a rendering shows
STEPS_SHOWN = 100
#: the witness events of one property junit.xml (and pytest) shows
WITNESS_SHOWN = 200


def shown_steps(steps: Sequence[str]) -> tuple[Sequence[str], int]:
    """The first :data:`STEPS_SHOWN` of ``steps``, and how many are left out."""
    return steps[:STEPS_SHOWN], max(0, len(steps) - STEPS_SHOWN)


def more_steps(left_out: int) -> str:
    """The line that stands for the ``left_out`` steps not shown."""
    return f"... and {left_out:,} more steps (the folder's scenario.json holds every one)"
