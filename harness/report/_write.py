"""Writing every format of a report into its run folder."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..outcome import Example, Outcome
from ._build import other_failures
from ._html import render_html
from ._junit import render_junit
from ._markdown import render_markdown
from ._schema import Report


def write_reports(report: Report, folder: Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.html``, ``junit.xml`` and ``summary.md``
    into ``folder`` (where the run's histories are kept); returns their paths
    by name. The same report and folder always give the same bytes."""
    report._folder = folder
    texts = {
        "report.json": report.to_json(),
        "report.html": render_html(report, folder),
        "junit.xml": render_junit(report, folder),
        "summary.md": render_markdown(report),
    }
    paths = {}
    for name, text in texts.items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        paths[name] = path
    return paths


def write_run(report: Report, outcome: Outcome, last: Example | None, folder: Path) -> None:
    """Keep the run in ``folder``: the main counterexample's scenario and
    histories (or, when nothing failed, the last example's), every other
    counterexample under ``failures/N``, then every format of ``report``."""
    _keep_example(outcome.failure or last, folder)
    shutil.rmtree(folder / "failures", ignore_errors=True)
    for n, (_, ex) in enumerate(other_failures(outcome), 1):
        _keep_example(ex, folder / "failures" / str(n))
    write_reports(report, folder)


def _keep_example(example: Example | None, folder: Path) -> None:
    if example is None:
        return
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("history.jsonl", "oracle.jsonl", "scenario.json"):
        src = example.folder / name
        if src.exists():
            shutil.copyfile(src, folder / name)
    (folder / "results.json").write_text(
        json.dumps([r.model_dump(mode="json") for r in example.results], indent=2)
    )
