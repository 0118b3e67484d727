"""A run folder on disk: loading it back, checked, and writing every format.

A run folder (``--report-dir``) holds ``report.json``, the kept example's
``scenario.json``, ``history.jsonl``, ``oracle.jsonl`` and ``results.json``,
and ``failures/N/`` for other failures. Everything a rendering needs is there,
so ``harness report DIR`` re-renders without re-running anything.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._errors import RunFolderError
from ..history import History
from ..model import SCHEMA_VERSION, PropertyResult, Scenario
from ._schema import REPORT_SCHEMA_VERSION, Report

_RERUN = "run `harness run --report-dir DIR` again to write a fresh one"

#: The files :func:`write_reports` writes (it writes ``report.json`` last).
REPORT_FILES = ("report.json", "report.html", "junit.xml", "summary.md")


def _read_json(folder: Path, path: Path) -> Any:
    """The JSON document at ``path`` of the run folder ``folder``, or a
    :class:`RunFolderError` saying what is wrong with it."""
    try:
        return json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise RunFolderError(
            f"{folder} is not a complete run folder: {path.name} is missing; {_RERUN}"
        ) from exc
    except OSError as exc:  # a directory, no permission, an I/O error
        raise RunFolderError(f"cannot read {path} ({exc.strerror or exc}); {_RERUN}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path} is corrupt ({exc}); {_RERUN}") from exc
    except RecursionError as exc:
        raise RunFolderError(f"{path} is nested too deeply to be a harness file; {_RERUN}") from exc


def load_report(folder: Path) -> Report:
    """The report kept in ``folder``, validated.

    Raises :class:`RunFolderError` (exit code 2) naming the problem when the
    folder or its ``report.json`` is missing or corrupt, is not a harness
    report, or was written by a newer harness.
    """
    if not folder.is_dir():
        raise RunFolderError(f"{folder} is not a folder; give the --report-dir of a harness run")
    path = folder / "report.json"
    raw = _read_json(folder, path)
    adapter = raw.get("adapter") if isinstance(raw, dict) else None
    if not isinstance(adapter, dict) or not isinstance(adapter.get("spec"), str):
        raise RunFolderError(f"{path} is not a harness report (no adapter.spec); {_RERUN}")
    # The version is checked before the rest is parsed: a newer harness's
    # report may not parse here, and "upgrade" is the useful answer then.
    version = raw.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunFolderError(f"{path} has schema_version {version!r}, not an integer; {_RERUN}")
    if version < 0:
        raise RunFolderError(f"{path} has schema_version {version}, below 0; {_RERUN}")
    if version > REPORT_SCHEMA_VERSION:
        raise RunFolderError(
            f"{folder} was written by a newer harness (report schema {version}, this harness "
            f"reads up to {REPORT_SCHEMA_VERSION}); upgrade stateful-agent-harness to read it"
        )
    try:
        report = Report.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise RunFolderError(
            f"{path} is not a valid report: {where}: {first['msg']} "
            f"({exc.error_count()} problem(s)); {_RERUN}"
        ) from exc
    report._folder = folder
    return report


def load_scenario(folder: Path) -> Scenario:
    """The kept scenario of ``folder`` (the counterexample when the run failed),
    checked like :func:`load_report`."""
    path = folder / "scenario.json"
    raw = _read_json(folder, path)
    version = raw.get("schema_version", SCHEMA_VERSION) if isinstance(raw, dict) else 0
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise RunFolderError(
            f"{path} was written by a newer harness (scenario schema {version}, this harness "
            f"reads up to {SCHEMA_VERSION}); upgrade stateful-agent-harness to replay it"
        )
    try:
        return Scenario.model_validate(raw)
    except ValueError as exc:
        raise RunFolderError(f"{path} is not a valid scenario ({exc}); {_RERUN}") from exc


def load_run_folder(folder: Path) -> tuple[Report, Scenario]:
    """The report and the kept scenario of a run folder (what replay needs).
    ``folder`` may also be one of its other counterexamples, ``DIR/failures/N``:
    the scenario is that one's, the report (the adapter to load) the run's."""
    run = folder
    if (
        folder.parent.name == "failures"
        and not (folder / "report.json").exists()
        and (folder.parent.parent / "report.json").is_file()
    ):
        run = folder.parent.parent
    report = load_report(run)
    return report, load_scenario(folder)


def load_history(path: Path) -> History | None:
    """The history at ``path``, or None when it was not kept. A corrupt line
    is skipped (and listed in ``History.problems``), never fatal: a report
    should still render what is readable."""
    if not path.is_file():
        return None
    return History.load(path)


def load_results(path: Path) -> list[PropertyResult]:
    """The checker results kept at ``path`` (``results.json``); empty if absent
    or unreadable (they only add witnesses to a rendering)."""
    try:
        raw = json.loads(path.read_bytes())
        return [PropertyResult.model_validate(r) for r in raw]
    except (OSError, ValueError, TypeError, RecursionError):
        return []
