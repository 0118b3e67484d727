"""Loading settings in layers: a profile's defaults, ``[tool.harness]``,
``HARNESS_*`` variables, then explicit arguments, each value read and
range-checked (:data:`BOUNDS`); and how many jobs a run gets."""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Mapping
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from .._errors import UsageError
from ._fields import Settings, setting_options
from ._values import (
    MODES,
    PROFILES,
    SCENARIOS_PER_JOB,
)


def default_profile() -> str:
    return "ci" if os.environ.get("CI") else "dev"


def _pyproject(start: Path) -> dict[str, Any]:
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            with candidate.open("rb") as fh:
                data = tomllib.load(fh)
            section = data.get("tool", {}).get("harness", {})
            return dict(section) if isinstance(section, dict) else {}
    return {}


def _coerce(name: str, value: Any, source: str) -> Any:
    kinds = {f.name: f.type for f in fields(Settings)}
    if name not in kinds:
        raise UsageError(
            f"unknown harness setting {name!r} in {source}; known: {', '.join(sorted(kinds))}"
        )
    target = kinds[name]
    parse = dict(setting_options())[name].parse
    if parse is not None:
        return parse(value, source)
    try:
        if target == "float | None":
            return None if value in (None, "", "none") else float(value)
        if "int" in str(target) and "None" in str(target):
            return None if value in (None, "", "none") else int(value)
        if target in ("int", int):
            return int(value)
        if target in ("float", float):
            return float(value)
        if target in ("bool", bool):
            if isinstance(value, bool):
                return value
            return str(value).lower() in ("1", "true", "yes", "on")
        if "tuple" in str(target):
            if value is None:
                return None
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(v).strip() for v in items if str(v).strip())
        return str(value)
    except (TypeError, ValueError) as exc:
        raise UsageError(
            f"harness setting {name}={value!r} from {source} is invalid: {exc}"
        ) from exc


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # not Linux
        return max(os.cpu_count() or 1, 1)


def resolve_jobs(settings: Settings) -> int:
    """How many jobs ``settings`` asks for: its ``jobs``, or for ``auto``
    the usable cores, at most one per :data:`SCENARIOS_PER_JOB` planned
    scenarios (a plan of 40 or fewer runs in one process)."""
    if settings.jobs is not None:
        return settings.jobs
    return max(1, min(usable_cores(), settings.max_examples // SCENARIOS_PER_JOB))


def load_settings(
    profile: str | None = None, *, start: Path | None = None, **overrides: Any
) -> Settings:
    """Resolve settings; raises UsageError naming the bad value and its source."""
    file_cfg = _pyproject(start or Path.cwd())
    # An empty HARNESS_* variable is an unset one: CI systems give an absent
    # secret or variable as the empty string (a fork's pull request has
    # none), and "use nothing" is what the workflow meant.
    env_cfg = {
        k.removeprefix("HARNESS_").lower(): v
        for k, v in os.environ.items()
        if k.startswith("HARNESS_")
        and v.strip() != ""
        and k.removeprefix("HARNESS_").lower() in {f.name for f in fields(Settings)}
    }
    name = profile or env_cfg.get("profile") or file_cfg.get("profile") or default_profile()
    if name not in PROFILES:
        raise UsageError(f"unknown profile {name!r}; choose one of {', '.join(PROFILES)}")
    values: dict[str, Any] = {"profile": name, **PROFILES[name]}
    for source, layer in (
        ("[tool.harness] in pyproject.toml", file_cfg),
        ("the environment (HARNESS_*)", env_cfg),
        ("the command line", {k: v for k, v in overrides.items() if v is not None}),
    ):
        for key, value in layer.items():
            if key == "profile":
                continue
            values[key] = _coerce(key, value, source)
    if values.get("mode", "search") not in MODES:
        raise UsageError(f"unknown mode {values['mode']!r}; choose one of {', '.join(MODES)}")
    settings = Settings(**values)
    _check_bounds(settings)
    return settings


def run_settings(
    settings: Settings | None, overrides: Mapping[str, Any], *, what: str = "harness.run()"
) -> Settings:
    """The settings a run of ``what`` is given: ``settings`` (None: those
    :func:`load_settings` resolves, for the ``profile`` among
    ``overrides``) with ``overrides`` on top. An override names a setting by
    its field (``budget_seconds``) or by its flag (``budget``); None is
    not given. Each is read and checked as the command line's are; an
    unknown name is a :class:`UsageError` naming the closest one."""
    given: dict[str, Any] = {}
    for key, value in overrides.items():
        name = _setting_name(key, what)
        if value is None:
            continue
        if name in given:
            raise UsageError(
                f"setting {name} given twice to {what} (as {name} and by its flag's name): "
                "give it once"
            )
        given[name] = value
    profile = given.pop("profile", None)
    if settings is None:
        return load_settings(profile, **given)
    if profile is not None and profile != settings.profile:
        raise UsageError(
            f"profile={profile!r} and settings= (of profile {settings.profile!r}) both given "
            f"to {what}: settings start from one profile; pass "
            f"settings=load_settings({profile!r}, ...), or drop profile="
        )
    changes = {name: _coerce(name, value, "the command line") for name, value in given.items()}
    chosen = replace(settings, **changes)
    if chosen.mode not in MODES:
        raise UsageError(f"unknown mode {chosen.mode!r}; choose one of {', '.join(MODES)}")
    _check_bounds(chosen)
    return chosen


def _setting_name(key: str, what: str) -> str:
    """The field ``key`` names: itself, or the setting whose flag it names."""
    names = {name: name for name, _ in setting_options()}
    for name, option in setting_options():
        if option.keyword is not None:
            names.setdefault(option.keyword, name)
    if key in names:
        return names[key]
    close = difflib.get_close_matches(key, list(names), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    raise UsageError(
        f"unknown setting {key!r} given to {what}{hint}: name a harness.Settings field, or "
        f"its flag (budget for budget_seconds); the settings: {', '.join(sorted(names))}"
    )


#: setting -> (lowest, highest, what it means): a number outside is refused
#: at parse time, with the reason, instead of running a nonsense search;
#: from each field's ``Option(bounds=...)``
BOUNDS: dict[str, tuple[float, float, str]] = {
    name: o.bounds for name, o in setting_options() if o.bounds is not None
}


def _check_bounds(settings: Settings) -> None:
    for name, (low, high, what) in BOUNDS.items():
        value = getattr(settings, name)
        if value is None:
            continue
        if not math.isfinite(value) or not low <= value <= high:
            shown = f"{low:g}" if isinstance(low, float) else str(low)
            raise UsageError(
                f"{name.replace('_seconds', '').replace('_', '-')}={value!r} is out of range: "
                f"{what} must be a finite number from {shown} to {high:g}"
            )
