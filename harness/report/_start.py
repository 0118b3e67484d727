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

import re
from dataclasses import dataclass, field, replace

from ..checkers import BUILTIN
from ._schema import Report

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


def property_hint(report: Report, name: str) -> str | None:
    """What a failure of property ``name`` usually means (see :func:`hint_of`)."""
    p = next((p for p in report.properties if p.name == name), None)
    if p is not None and p.user:
        return hint_of(p.doc)
    builtin = BUILTIN.get(name)
    return hint_of(builtin.doc if builtin is not None else p.doc if p is not None else None)


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

    @property
    def first(self) -> FailedProperty:
        return self.properties[0]

    @property
    def also(self) -> list[FailedProperty]:
        return self.properties[1:]


@dataclass(frozen=True)
class StartHere:
    """The failures, shortest counterexample first."""

    groups: list[FailureGroup] = field(default_factory=list)

    @property
    def first(self) -> FailureGroup:
        return self.groups[0]


def start_here(report: Report) -> StartHere | None:
    """The "start here" block of a failing report (None unless it failed
    and kept a counterexample)."""
    if report.verdict != "fail" or report.counterexample is None:
        return None
    order = {p.name: i for i, p in enumerate(report.properties)}
    failed = {p.name: p for p in report.failed}

    def props(names: list[str]) -> list[FailedProperty]:
        seen = sorted(dict.fromkeys(n for n in names if n in failed), key=lambda n: order[n])
        return [FailedProperty(n, failed[n].message, property_hint(report, n)) for n in seen]

    ce = report.counterexample
    groups = [
        FailureGroup(
            props(ce.counterexample_for or ce.failed_properties),
            list(ce.steps),
            ce.replay,
            ".",
            ce.fully_shrunk,
        )
    ]
    for n, other in enumerate(report.other_failures, 1):
        groups.append(
            FailureGroup(
                props(other.counterexample_for or other.failed_properties),
                list(other.steps),
                other.replay,
                other.folder or f"failures/{n}",
                other.fully_shrunk,
            )
        )
    # the shortest first; on a tie, the main counterexample, then report order
    groups.sort(key=lambda g: len(g.steps))
    # each property once, under the shortest scenario that fails it
    seen: set[str] = set()
    kept = []
    for g in groups:
        mine = [p for p in g.properties if p.name not in seen]
        seen.update(p.name for p in mine)
        if mine:
            kept.append(replace(g, properties=mine))
    return StartHere(kept) if kept else None
