"""Scenario files: a scenario kept as JSON, to replay or to run again as a
regression (``harness replay FILE --adapter A``, ``harness run --scenario
FILE``). A run folder's ``scenario.json`` is one; so is every file a project
keeps under its ``scenarios/`` folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._artifacts import loads_json, read_artifact
from .._errors import UsageError
from ..model import SCHEMA_VERSION, Scenario

_HOW = (
    "a scenario file is the scenario.json of a harness run folder (copy it from "
    "<report-dir>/ or <report-dir>/failures/N/)"
)


class ScenarioFileError(UsageError):
    """A scenario file that cannot be read (exit code 2)."""


def load_scenario_file(path: Path, *, follow: bool = True) -> Scenario:
    """The scenario in ``path``, validated; :class:`ScenarioFileError` names
    what is wrong and how to fix it. Only a regular file is read (not a
    FIFO, a device, nor, with ``follow=False``, a link), up to the artifact
    size cap, as strict JSON."""
    if path.is_dir():
        raise ScenarioFileError(f"{path} is a folder, not a scenario file; {_HOW}")
    try:
        data = read_artifact(path, follow=follow, error=ScenarioFileError, fix=_HOW)
    except FileNotFoundError as exc:
        raise ScenarioFileError(f"{path}: no such scenario file; {_HOW}") from exc
    try:
        raw: Any = loads_json(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(f"{path} is not JSON ({exc}); {_HOW}") from None
    version = raw.get("schema_version", SCHEMA_VERSION) if isinstance(raw, dict) else 0
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise ScenarioFileError(
            f"{path} was written by a newer harness (scenario schema {version}, this harness "
            f"reads up to {SCHEMA_VERSION}); upgrade stateful-agent-harness to run it"
        )
    try:
        return Scenario.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        raise ScenarioFileError(
            f"{path} is not a valid scenario: {where}: {first['msg']} "
            f"({exc.error_count()} problem(s)); {_HOW}"
        ) from exc


def scenario_files(paths: list[Path]) -> list[tuple[Path, Scenario]]:
    """Every scenario named by ``paths``: a file, or a folder's ``*.json``
    files (sorted, not recursive), each loaded and validated."""
    out: list[tuple[Path, Scenario]] = []
    for path in paths:
        if path.is_dir():
            # every entry but a folder: a FIFO or a link among them is named, not skipped
            files = sorted(p for p in path.glob("*.json") if p.is_symlink() or not p.is_dir())
            if not files:
                raise ScenarioFileError(f"{path} holds no *.json scenario files; {_HOW}")
            out += [(f, load_scenario_file(f, follow=False)) for f in files]
        else:
            out.append((path, load_scenario_file(path)))
    return out
