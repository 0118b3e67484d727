"""Writing every format of a report into its run folder."""

from __future__ import annotations

from pathlib import Path

from ._html import render_html
from ._junit import render_junit
from ._markdown import render_markdown
from ._schema import Report


def write_reports(report: Report, folder: Path) -> dict[str, Path]:
    """Write ``report.json``, ``report.html``, ``junit.xml`` and ``summary.md``
    into ``folder`` (where the run's histories are kept); returns their paths
    by name. The same report and folder always give the same bytes."""
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
