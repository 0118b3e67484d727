"""Scenario files: a scenario kept as JSON, to replay or to run again as a
regression (``harness replay FILE --adapter A``, ``harness run --scenario
FILE``). A run folder's ``scenario.json`` is one; so is every file a project
keeps under its ``scenarios/`` folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .._errors import UsageError
from ..model import SCHEMA_VERSION, Scenario

_HOW = (
    "a scenario file is the scenario.json of a harness run folder (copy it from "
    "<report-dir>/ or <report-dir>/failures/N/)"
)


class ScenarioFileError(UsageError):
    """A scenario file that cannot be read (exit code 2)."""


def load_scenario_file(path: Path) -> Scenario:
    """The scenario in ``path``, validated; :class:`ScenarioFileError` names
    what is wrong and how to fix it."""
    try:
        raw: Any = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise ScenarioFileError(f"{path}: no such scenario file; {_HOW}") from exc
    except IsADirectoryError as exc:
        raise ScenarioFileError(f"{path} is a folder, not a scenario file; {_HOW}") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ScenarioFileError(f"{path} is not JSON ({exc}); {_HOW}") from exc
    except OSError as exc:
        raise ScenarioFileError(f"{path} cannot be read ({exc.strerror})") from exc
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
            files = sorted(p for p in path.glob("*.json") if p.is_file())
            if not files:
                raise ScenarioFileError(f"{path} holds no *.json scenario files; {_HOW}")
            out += [(f, load_scenario_file(f)) for f in files]
        else:
            out.append((path, load_scenario_file(path)))
    return out
