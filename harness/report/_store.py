"""A run folder on disk: loading it back, checked, and writing every format.

A run folder (``--report-dir``) holds ``report.json``, the kept example's
``scenario.json``, ``history.jsonl``, ``oracle.jsonl`` and ``results.json``,
and ``failures/N/`` for other failures. Everything a rendering needs is there,
so ``harness report DIR`` re-renders without re-running anything.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._artifacts import loads_json, read_artifact
from .._errors import RunFolderError
from ..history import History
from ..model import SCHEMA_VERSION, PropertyResult, Scenario
from ._schema import REPORT_SCHEMA_VERSION, Report

_RERUN = "run `harness run --report-dir DIR` again to write a fresh one"

#: a profile's name (dev, ci, thorough: a newer harness may add one)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")

#: The files :func:`write_reports` writes (it writes ``report.json`` last).
REPORT_FILES = ("report.json", "report.html", "junit.xml", "summary.md")


def _read_json(folder: Path, path: Path) -> Any:
    """The JSON document at ``path`` of the run folder ``folder``, or a
    :class:`RunFolderError` saying what is wrong with it: missing, not a
    regular file inside the folder (a link, a FIFO, a device), too large,
    or not strict JSON (``NaN`` and ``Infinity`` are not JSON)."""
    try:
        data = read_artifact(path, inside=folder, error=RunFolderError, fix=_RERUN)
    except FileNotFoundError as exc:
        raise RunFolderError(
            f"{folder} is not a complete run folder: {path.name} is missing; {_RERUN}"
        ) from exc
    try:
        return loads_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFolderError(f"{path} is corrupt ({exc}); {_RERUN}") from None


def _negative(raw: Any, where: str = "") -> str | None:
    """The first place in a report's JSON holding a negative integer where
    only counts, indexes and sizes are (everything but ``seed`` and the
    adapter's own description), or None."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return where if raw < 0 else None
    if isinstance(raw, dict):
        items: Any = raw.items()
    elif isinstance(raw, list):
        items = enumerate(raw)
    else:
        return None
    for key, value in items:
        here = f"{where}.{key}" if where else str(key)
        if here in ("seed", "adapter"):
            continue
        found = _negative(value, here)
        if found is not None:
            return found
    return None


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
    negative = _negative(raw)
    if negative is not None:
        raise RunFolderError(
            f"{path} is not a valid report: {negative} is negative, and only a count or an "
            f"index can be there; {_RERUN}"
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
    if not _NAME.fullmatch(report.profile):
        raise RunFolderError(
            f"{path} is not a valid report: profile {report.profile[:80]!r} is not a profile "
            f"name (letters, digits, '.', '_', '-'); {_RERUN}"
        )
    shard, merged = report.shard, report.merged
    if shard is not None and shard.k > shard.n:
        raise RunFolderError(
            f"{path} is not a valid report: shard.k {shard.k} is more than shard.n "
            f"{shard.n} (a shard is K of N, 1 <= K <= N); {_RERUN}"
        )
    named = [] if merged is None else [*merged.shards, *merged.missing]
    if merged is not None and not all(1 <= k <= merged.n for k in named):
        raise RunFolderError(
            f"{path} is not a valid report: merged names a shard outside 1..{merged.n}; {_RERUN}"
        )
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


def load_history(path: Path, inside: Path | None = None) -> History | None:
    """The history at ``path``, or None when it was not kept (or is not a
    regular file: a FIFO, a device, a link; or leads out of the folder
    ``inside``). A corrupt line is skipped (and listed in
    ``History.problems``), never fatal: a report should still render what
    is readable. Larger than the artifact cap: exit 2."""
    try:
        data = read_artifact(path, inside=inside, error=RunFolderError, fix=_RERUN)
    except FileNotFoundError:
        return None
    except RunFolderError:
        if path.is_symlink() or not path.is_file() or not _within(path, inside):
            return None
        raise
    return History.from_lines(data.splitlines(keepends=True), source=str(path))


def load_results(path: Path, inside: Path | None = None) -> list[PropertyResult]:
    """The checker results kept at ``path`` (``results.json``); empty if absent,
    unreadable or outside the folder ``inside`` (they only add witnesses to
    a rendering)."""
    try:
        raw = loads_json(read_artifact(path, inside=inside, error=RunFolderError))
        return [PropertyResult.model_validate(r) for r in raw]
    except (OSError, ValueError, TypeError, RunFolderError):
        return []


def _within(path: Path, inside: Path | None) -> bool:
    if inside is None:
        return True
    real, root = path.resolve(), inside.resolve()
    return real == root or root in real.parents
