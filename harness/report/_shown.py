"""How much of a report each human rendering lists.

A shrunk counterexample has a handful of steps, an unshrunk one a few
hundred; a run checks a dozen properties, a run with many invariants
(or a ``report.json`` anyone may have written) thousands. Rendering every
step and every property into HTML, JUnit and Markdown made ``harness
report`` ten (2,000,000 steps) to forty (12,000 properties) times slower
than reading the report (issue 27: within 2x). Every rendering lists the
first :data:`STEPS_SHOWN` steps, :data:`PROPERTIES_SHOWN` properties
(failing ones first: a failure is never the one left out while a pass is
listed) and :data:`COUNTEREXAMPLES_SHOWN` other counterexamples, and says
how many more there are; the verdict and the counts always count every
property. ``report.json`` keeps them all, and ``junit.xml`` keeps one test
case per property (CI names failures by them), the ones past the cap with
a short failure body.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import chain, islice

from ._schema import PropertyReport

#: the steps of one counterexample a rendering shows
STEPS_SHOWN = 100
#: the witness events of one property junit.xml (and pytest) shows
WITNESS_SHOWN = 200
#: the properties report.html and summary.md list (failing ones first), and
#: the failures junit.xml shows in full
PROPERTIES_SHOWN = 100
#: the property names one line of prose names ("so did a, b, ... and 9 more")
NAMES_SHOWN = 10
#: the other counterexamples (``failures/N``) report.html and summary.md show
COUNTEREXAMPLES_SHOWN = 20


def shown_steps(steps: Sequence[str]) -> tuple[Sequence[str], int]:
    """The first :data:`STEPS_SHOWN` of ``steps``, and how many are left out."""
    return steps[:STEPS_SHOWN], max(0, len(steps) - STEPS_SHOWN)


def more_steps(left_out: int) -> str:
    """The line that stands for the ``left_out`` steps not shown."""
    return f"... and {left_out:,} more steps (the folder's scenario.json holds every one)"


def shown_properties(
    properties: Sequence[PropertyReport],
) -> tuple[list[PropertyReport], int]:
    """The properties a rendering lists, at most :data:`PROPERTIES_SHOWN`:
    the failing ones, then the unknown ones, then the rest, each in report
    order; and how many are left out."""
    listed = list(
        islice(
            chain(
                (p for p in properties if p.verdict == "fail"),
                (p for p in properties if p.verdict == "unknown"),
                (p for p in properties if p.verdict not in ("fail", "unknown")),
            ),
            PROPERTIES_SHOWN,
        )
    )
    return listed, len(properties) - len(listed)


def more_properties(left_out: int, kind: str = "") -> str:
    """The line that stands for the ``left_out`` properties not listed
    (``kind``: "failed" when only failed ones are listed)."""
    what = f"{kind} properties" if kind else "properties"
    return f"... and {left_out:,} more {what} (report.json lists every one)"


def shown_names(names: Iterable[str]) -> tuple[list[str], int]:
    """The first :data:`NAMES_SHOWN` of ``names``, and how many are left out."""
    names = list(names)
    return names[:NAMES_SHOWN], max(0, len(names) - NAMES_SHOWN)


def more_names(left_out: int) -> str:
    """What stands for the ``left_out`` names not written out, after a comma."""
    return f"and {left_out:,} more"


def more_counterexamples(left_out: int) -> str:
    """The line that stands for the ``left_out`` other counterexamples not shown."""
    return (
        f"... and {left_out:,} more counterexamples (report.json lists every one; "
        "each is kept in its failures/N folder)"
    )
