"""Where to start reading a failing report: the first block of report.html and summary.md.

A failing run can fail five properties with one root cause, each row of the
properties table with equal weight. The "start here" block says what to do
first: the failing property with the shortest counterexample, that
counterexample's steps and replay command, then every failure grouped by
the scenario that shows it (a root cause and the properties it also broke),
each property with a one-line hint of what such a failure usually means.

The hint comes from the property's own doc, one home for the fact: a
paragraph that begins "A failure usually means:" (every built-in checker's
docstring has one; a user's invariant may), else the doc's first line.
Built from the :class:`Report` alone, so ``harness report DIR`` re-renders it.
"""

from __future__ import annotations

import heapq
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from ..checkers import BUILTIN
from ._schema import Counterexample, PropertyReport, Report
from ._shown import PROPERTIES_SHOWN

#: The paragraph of a property's doc that is its hint.
HINT = re.compile(r"^\s*A failure usually means:\s*(.+)$", re.IGNORECASE | re.DOTALL)


def hint_of(doc: str | None) -> str | None:
    """The hint in ``doc``: its "A failure usually means: ..." paragraph,
    on one line, else its first line (None for no doc)."""
    if not doc or not doc.strip():
        return None
    for para in re.split(r"\n\s*\n", doc):
        m = HINT.match(para)
        if m:
            return " ".join(m.group(1).split())
    return doc.strip().splitlines()[0].strip()


def property_hint(prop: PropertyReport) -> str | None:
    """What a failure of ``prop`` usually means (see :func:`hint_of`): a
    user's invariant's own doc, else the built-in property's."""
    if prop.user:
        return hint_of(prop.doc)
    builtin = BUILTIN.get(prop.name)
    return hint_of(builtin.doc if builtin is not None else prop.doc)


@dataclass(frozen=True)
class FailedProperty:
    name: str
    #: what the checker said (the run's message)
    message: str
    hint: str | None


@dataclass(frozen=True)
class FailureGroup:
    """One failing scenario and the properties it is the counterexample of:
    the first is the one to read first, the others failed with it."""

    properties: list[FailedProperty]
    steps: list[str]
    replay: str | None
    #: where the scenario is kept, relative to the report ("." for the main one)
    folder: str
    fully_shrunk: bool = True
    #: its properties past :data:`PROPERTIES_SHOWN`, not listed
    left_out: int = 0

    @property
    def first(self) -> FailedProperty:
        return self.properties[0]

    @property
    def also(self) -> list[FailedProperty]:
        return self.properties[1:]

    @property
    def also_count(self) -> int:
        """How many properties failed with the first: listed or not."""
        return len(self.properties) - 1 + self.left_out


@dataclass(frozen=True)
class StartHere:
    """The failures, shortest counterexample first: at most
    :data:`PROPERTIES_SHOWN` properties listed, ``left_out`` more."""

    groups: list[FailureGroup] = field(default_factory=list)
    left_out: int = 0

    @property
    def first(self) -> FailureGroup:
        return self.groups[0]


#: within :func:`once_per_report`: the blocks worked out, by report
_WORKED_OUT: ContextVar[dict[int, tuple[Report, StartHere | None]] | None] = ContextVar(
    "start_here_worked_out", default=None
)


@contextmanager
def once_per_report() -> Iterator[None]:
    """Within: :func:`start_here` of a report is worked out once, however
    many renderings ask for it (report.html and summary.md both do)."""
    token = _WORKED_OUT.set({})
    try:
        yield
    finally:
        _WORKED_OUT.reset(token)


def start_here(report: Report) -> StartHere | None:
    """The "start here" block of a failing report (None unless it failed
    and kept a counterexample). Each failed property is counted once, under
    the shortest scenario that fails it; the first :data:`PROPERTIES_SHOWN`
    of them are listed (with their hints), the rest only counted."""
    if report.verdict != "fail" or report.counterexample is None:
        return None
    memo = _WORKED_OUT.get()
    if memo is not None and id(report) in memo and memo[id(report)][0] is report:
        return memo[id(report)][1]
    start = _work_out(report, report.counterexample)
    if memo is not None:
        memo[id(report)] = (report, start)
    return start


def _work_out(report: Report, ce: Counterexample) -> StartHere | None:
    properties = report.properties
    # one pass over the properties: a lookup per name, never a scan per name;
    # then C loops over the names (a counterexample may serve thousands)
    order = {p.name: i for i, p in enumerate(properties) if p.verdict == "fail"}
    found: list[tuple[list[str], list[str], str | None, str, bool]] = [
        (ce.counterexample_for or ce.failed_properties, ce.steps, ce.replay, ".", ce.fully_shrunk)
    ]
    for n, other in enumerate(report.other_failures, 1):
        found.append(
            (
                other.counterexample_for or other.failed_properties,
                other.steps,
                other.replay,
                other.folder or f"failures/{n}",
                other.fully_shrunk,
            )
        )
    # the shortest first; on a tie, the main counterexample, then report order
    found.sort(key=lambda g: len(g[1]))
    # each failed property once, under the shortest scenario that fails it;
    # the first PROPERTIES_SHOWN listed, in report order within a scenario
    seen: set[str] = set()
    kept: list[FailureGroup] = []
    room, left_out = PROPERTIES_SHOWN, 0
    for names, steps, replay, folder, fully_shrunk in found:
        mine = set(filter(order.__contains__, names))
        mine -= seen
        seen |= mine
        listed = heapq.nsmallest(room, mine, key=order.__getitem__)
        room -= len(listed)
        left_out += len(mine) - len(listed)
        if listed:
            shown = [properties[order[n]] for n in listed]
            props = [FailedProperty(p.name, p.message, property_hint(p)) for p in shown]
            kept.append(
                FailureGroup(
                    props, list(steps), replay, folder, fully_shrunk, len(mine) - len(listed)
                )
            )
    return StartHere(kept, left_out) if kept else None
