"""``report.html``: one self-contained page (inline CSS and SVG, no scripts,
no fonts, nothing fetched), rendered with Jinja2 from the report and the
histories kept beside it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from ..model import Verdict
from ._schema import FaultCoverage, Report
from ._shown import more_steps, shown_steps
from ._start import start_here
from ._store import load_history, load_results
from ._timeline import Timeline, build_timeline, describe_event


@dataclass
class ScenarioView:
    """One scenario shown with its timeline (a failing one, or a sample)."""

    title: str
    failed_properties: list[str]
    steps: list[str]
    folder: str
    replay: str | None = None
    timeline: Timeline | None = None
    witness_events: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    #: the workers' output kept beside it (relative to the report), if any
    worker_log: str | None = None


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
        in ``cov.unfired``: the runtime left it nothing to aim at) or
        ``unarmed``."""
        if self.cov.failed_after:
            return "broke"
        if self.cov.fired:
            return "held"
        if self.cov.armed:
            return "unfired"
        return "not_tested" if self.cov.unfired else "unarmed"


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("harness.report", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.globals.update(shown_steps=shown_steps, more_steps=more_steps)
    return env


def coverage_rows(report: Report) -> list[CoverageRow]:
    """The matrix's rows: fault kinds, then crash points."""
    rows = [CoverageRow("fault kind", k, c) for k, c in sorted(report.faults.items())]
    rows += [CoverageRow("crash point", k, c) for k, c in sorted(report.crash_points.items())]
    return rows


def scenario_views(report: Report, folder: Path) -> list[ScenarioView]:
    """The counterexample and every other failure, each with its timeline;
    for a passing run, the sample scenario that was kept."""
    views: list[ScenarioView] = []
    ce = report.counterexample
    if ce is not None:
        witness = sorted({i for p in report.failed for i in p.witness})
        view = ScenarioView(
            title="Minimal counterexample",
            failed_properties=ce.failed_properties,
            steps=ce.steps,
            folder=".",
            replay=ce.replay,
            messages=[f"{p.name}: {p.message}" for p in report.failed],
        )
        _attach(view, folder / ce.history, tuple(witness), folder)
        view.worker_log = _log(folder, ".")
        views.append(view)
    for n, other in enumerate(report.other_failures, 1):
        sub = folder / (other.folder or f"failures/{n}")
        results = [
            r for r in load_results(sub / "results.json", folder) if r.verdict is Verdict.FAIL
        ]
        view = ScenarioView(
            title=f"Another failure ({', '.join(other.failed_properties)})",
            failed_properties=other.failed_properties,
            steps=other.steps,
            folder=other.folder or f"failures/{n}",
            messages=[f"{r.name}: {r.message}" for r in results],
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
    return template.render(
        report=report,
        start=start_here(report),
        views=scenario_views(report, folder),
        coverage=coverage_rows(report),
    )
