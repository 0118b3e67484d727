"""``report.html``: one self-contained page (inline CSS and SVG, no scripts,
no fonts, nothing fetched), rendered with Jinja2 from the report and the
histories kept beside it."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from ..model import Verdict
from ._schema import FaultCoverage, Report
from ._shown import (
    COUNTEREXAMPLES_SHOWN,
    NAMES_SHOWN,
    PROPERTIES_SHOWN,
    WITNESS_SHOWN,
    more_counterexamples,
    more_names,
    more_properties,
    more_steps,
    shown_names,
    shown_properties,
    shown_steps,
)
from ._start import start_here
from ._store import load_history, load_results
from ._timeline import Timeline, build_timeline, describe_event


@dataclass
class ScenarioView:
    """One scenario shown with its timeline (a failing one, or a sample)."""

    title: str
    #: the failed properties it names (up to NAMES_SHOWN), and how many more
    failed_properties: list[str]
    steps: list[str]
    folder: str
    replay: str | None = None
    timeline: Timeline | None = None
    witness_events: list[str] = field(default_factory=list)
    #: what the checkers said (up to PROPERTIES_SHOWN), and how many more
    messages: list[str] = field(default_factory=list)
    more_failed: int = 0
    more_messages: int = 0
    #: the workers' output kept beside it (relative to the report), if any
    worker_log: str | None = None


#: what the matrix's last cell says of each status
_RESULT = {
    "broke": "a property failed",
    "held": "held",
    "unfired": "never fired",
    "not_tested": "not tested",
    "unarmed": "never armed",
}


@dataclass(frozen=True)
class CoverageRow:
    """One row of the fault coverage matrix."""

    group: str
    name: str
    cov: FaultCoverage

    @property
    def status(self) -> str:
        """``broke`` (a property failed after it fired), ``held``, ``unfired``
        (armed, never fired), ``not_tested`` (never armed, for the reasons
        in ``cov.untested``: the runtime left it nothing to aim at) or
        ``unarmed``."""
        if self.cov.failed_after:
            return "broke"
        if self.cov.fired:
            return "held"
        if self.cov.armed:
            return "unfired"
        return "not_tested" if self.cov.not_tested() else "unarmed"

    def cells(self) -> tuple[str, str, int, int, int, int, int, str, str]:
        """What the row shows, worked out once (a matrix may have
        thousands of rows): group, name, armed, fired, scenarios, survived,
        failed after, status, and the result in words."""
        c, status = self.cov, self.status
        result = _RESULT[status]
        if status == "unfired":
            why = (
                "; ".join(c.unfired)
                if c.unfired
                else "the runtime never reached where it was aimed"
            )
            result += f": {why}"
        untested = c.not_tested()
        if status == "not_tested":
            result += f": {'; '.join(untested)}"
        elif untested:  # armed or fired elsewhere, not tested here
            result += f"; not tested: {'; '.join(untested)}"
        return (
            self.group,
            self.name,
            c.armed,
            c.fired,
            c.scenarios,
            c.survived,
            c.failed_after,
            status,
            result,
        )


@functools.cache
def _env() -> Environment:
    """The page's Jinja environment, made (and its template compiled) once
    a process: compiling costs more than rendering a page of 100 rows."""
    env = Environment(
        loader=PackageLoader("harness.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals.update(
        shown_steps=shown_steps,
        more_steps=more_steps,
        more_names=more_names,
        more_properties=more_properties,
        more_counterexamples=more_counterexamples,
        names_shown=NAMES_SHOWN,
        witness_shown=WITNESS_SHOWN,
    )
    return env


def coverage_rows(report: Report) -> list[CoverageRow]:
    """The matrix's rows: fault kinds, then crash points."""
    rows = [CoverageRow("fault kind", k, c) for k, c in sorted(report.faults.items())]
    rows += [CoverageRow("crash point", k, c) for k, c in sorted(report.crash_points.items())]
    return rows


def scenario_views(report: Report, folder: Path) -> list[ScenarioView]:
    """The counterexample and the first :data:`COUNTEREXAMPLES_SHOWN` other
    failures, each with its timeline; for a passing run, the sample
    scenario that was kept."""
    views: list[ScenarioView] = []
    ce = report.counterexample
    if ce is not None:
        failed = report.failed
        witness = sorted({i for p in failed for i in p.witness})
        names, more = shown_names(ce.failed_properties)
        view = ScenarioView(
            title="Minimal counterexample",
            failed_properties=names,
            more_failed=more,
            steps=ce.steps,
            folder=".",
            replay=ce.replay,
            messages=[f"{p.name}: {p.message}" for p in failed[:PROPERTIES_SHOWN]],
            more_messages=max(0, len(failed) - PROPERTIES_SHOWN),
        )
        _attach(view, folder / ce.history, tuple(witness), folder)
        view.worker_log = _log(folder, ".")
        views.append(view)
    for n, other in enumerate(report.other_failures[:COUNTEREXAMPLES_SHOWN], 1):
        sub = folder / (other.folder or f"failures/{n}")
        results = [
            r for r in load_results(sub / "results.json", folder) if r.verdict is Verdict.FAIL
        ]
        names, more = shown_names(other.failed_properties)
        title = ", ".join([*names, *([more_names(more)] if more else [])])
        view = ScenarioView(
            title=f"Another failure ({title})",
            failed_properties=names,
            more_failed=more,
            steps=other.steps,
            folder=other.folder or f"failures/{n}",
            messages=[f"{r.name}: {r.message}" for r in results[:PROPERTIES_SHOWN]],
            more_messages=max(0, len(results) - PROPERTIES_SHOWN),
        )
        marks = tuple(sorted({i for r in results for i in r.witness}))
        _attach(view, sub / "history.jsonl", marks, folder)
        view.worker_log = _log(folder, view.folder)
        views.append(view)
    if not views and (folder / "history.jsonl").is_file():
        view = ScenarioView(
            title="A sample scenario (every property held)",
            failed_properties=[],
            steps=[],
            folder=".",
        )
        _attach(view, folder / "history.jsonl", (), folder)
        views.append(view)
    return views


def _log(folder: Path, sub: str) -> str | None:
    """The kept worker output of the scenario in ``folder/sub``, as a link."""
    path = "workers.log" if sub == "." else f"{sub}/workers.log"
    return path if (folder / path).is_file() else None


def _attach(view: ScenarioView, history_path: Path, witness: tuple[int, ...], folder: Path) -> None:
    history = load_history(history_path, folder)
    if history is None:
        return
    view.timeline = build_timeline(history, witness)
    for i in witness:
        e = history.event(i)
        if e is not None:
            view.witness_events.append(describe_event(e))


def render_html(report: Report, folder: Path) -> str:
    """The report page for ``report``, whose run is kept in ``folder``."""
    template = _env().get_template("report.html.j2")
    listed, left_out = shown_properties(report.properties)
    others = len(report.other_failures) - COUNTEREXAMPLES_SHOWN
    return template.render(
        report=report,
        failed=len(report.failed),
        properties=listed,
        more_props=left_out,
        more_others=max(0, others),
        start=start_here(report),
        views=scenario_views(report, folder),
        coverage=[row.cells() for row in coverage_rows(report)],
    )
