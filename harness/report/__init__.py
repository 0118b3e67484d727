"""Resilience reports: ``report.json`` (a published contract with a JSON
Schema), ``report.html`` (self-contained, with a timeline per failing
scenario and a fault coverage matrix), ``junit.xml`` and ``summary.md``.

The report is the last stage of the one-way flow: it is built once from the
engine's outcome (:func:`build_report`), written with every rendering beside
the kept histories (:func:`write_reports`), and can be re-rendered later from
that folder alone (:func:`load_report`, then :func:`write_reports`). The
folder is the harness's only where its marker says so
(:func:`claim_report_folder`, before a run).
"""

from __future__ import annotations

from ._build import CAPABILITY_GAPS, build_report, not_tested, other_failures, replay_command
from ._folder import MARKER, ReportFolderError, claim_report_folder
from ._html import render_html
from ._junit import render_junit
from ._markdown import render_markdown
from ._merge import merge_reports
from ._schema import REPORT_SCHEMA_VERSION, Report, report_schema, report_schema_text
from ._shards import MergeError
from ._store import REPORT_FILES, load_report, load_run_folder
from ._write import write_merged, write_reports, write_run

__all__ = [
    "CAPABILITY_GAPS",
    "MARKER",
    "REPORT_FILES",
    "REPORT_SCHEMA_VERSION",
    "MergeError",
    "Report",
    "ReportFolderError",
    "build_report",
    "claim_report_folder",
    "load_report",
    "load_run_folder",
    "merge_reports",
    "not_tested",
    "other_failures",
    "render_html",
    "render_junit",
    "render_markdown",
    "replay_command",
    "report_schema",
    "report_schema_text",
    "write_merged",
    "write_reports",
    "write_run",
]
