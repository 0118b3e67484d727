"""Settings: one frozen object, named profiles, layered configuration.

Precedence, lowest first: the profile's defaults, ``[tool.harness]`` in the
nearest ``pyproject.toml``, ``HARNESS_*`` environment variables, then explicit
arguments (command line or pytest options). ``ci`` is the default profile when
the ``CI`` environment variable is set: derandomized, so a CI failure replays
anywhere, and bounded in time.
"""

from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ._errors import UsageError

#: ``max_episodes`` bounds a sampled scenario's fault episodes: longer
#: scenarios (a swarm's long run of one or two fault kinds) where the budget
#: allows them. ``ci`` keeps the default 4, for its 60 s on SQLite.
PROFILES: dict[str, dict[str, Any]] = {
    "dev": {"max_examples": 12, "budget_seconds": 60.0, "derandomize": False, "max_runs": 2},
    "ci": {"max_examples": 150, "budget_seconds": 180.0, "derandomize": True, "max_runs": 3},
    "thorough": {
        "max_examples": 400,
        "budget_seconds": 3600.0,
        "derandomize": False,
        "max_runs": 3,
        "max_episodes": 8,
        "jobs": None,
    },
}


MODES = ("search", "random-kill")


@dataclass(frozen=True)
class Settings:
    """How hard and how long to search. Build with :func:`load_settings`."""

    profile: str = "dev"
    max_examples: int = 12
    budget_seconds: float = 60.0
    #: shrinking's own budget, after the search (``--shrink-budget``); None:
    #: a quarter of ``budget_seconds`` (see ``harness.session._engine.shrink_deadline``)
    shrink_budget_seconds: float | None = None
    derandomize: bool = False
    seed: int | None = None
    max_runs: int = 2
    max_episodes: int = 4
    families: tuple[str, ...] | None = None
    report_dir: str = "reports"
    exhaustive: bool = False
    #: ``search`` (event-triggered faults, shrinking) or ``random-kill`` (the
    #: baseline: SIGKILL at random wall-clock moments, no shrinking)
    mode: str = "search"
    #: run the targeted schedules (``scenarios.targeted``) before sampling
    targeted: bool = True
    #: stop the search at the first failing scenario (else it goes on judging
    #: every property until each has failed, or the plan or budget ends)
    stop_on_first: bool = False
    #: ``(K, N)``: run only shard K of N of the search's plan (``--shard K/N``,
    #: see ``harness.session._engine.shard_plan``); None: the whole plan
    shard: tuple[int, int] | None = None
    #: parallel processes the search runs in (``--jobs N``, see
    #: ``harness._jobs``); None: ``auto``, one per usable core (at most one
    #: per :data:`SCENARIOS_PER_JOB` planned scenarios). 1: today's single
    #: process, the default of every profile but ``thorough``
    jobs: int | None = 1
    #: where the sampled search keeps and replays its failing examples
    #: (``--example-db PATH|redis://...``, see ``harness._exampledb``);
    #: None: nowhere
    example_db: str | None = None
    #: seconds one worker may run before it is killed and called stuck
    #: (``--worker-timeout``); None: the adapter's ``worker_timeout``, else
    #: 120 (``harness.nemesis.resolve_worker_timeout``)
    worker_timeout: float | None = None
    #: fault-free runs of each workflow that must agree before the oracle is
    #: trusted (``--determinism-runs``, see ``harness.session._oracle``); 1:
    #: one run, trusted unchecked
    determinism_runs: int = 2

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


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
    if name == "shard":
        return parse_shard(value, source)
    if name == "jobs":
        return parse_jobs(value, source)
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


SHARD_FIX = "give it as K/N with 1 <= K <= N (say --shard 2/4 for the second of four machines)"


def parse_shard(value: Any, source: str = "the command line") -> tuple[int, int] | None:
    """``"K/N"`` (or a pair ``(K, N)``) as ``(K, N)``; None for none.
    Raises :class:`UsageError` saying what is wrong and how to fix it."""
    if value is None or value == "" or value == "none":
        return None
    if isinstance(value, (tuple, list)) and len(value) == 2:
        parts = [str(v) for v in value]
    elif isinstance(value, str) and value.count("/") == 1:
        parts = value.split("/")
    else:
        raise UsageError(f"shard {value!r} from {source} is not K/N; {SHARD_FIX}")
    try:
        k, n = (int(part.strip()) for part in parts)
    except ValueError:
        raise UsageError(
            f"shard {value!r} from {source} is not two whole numbers; {SHARD_FIX}"
        ) from None
    if n < 1 or n > MAX_SHARDS:
        raise UsageError(
            f"shard {value!r} from {source}: N={n} machines is out of range (1 to "
            f"{MAX_SHARDS}); {SHARD_FIX}"
        )
    if not 1 <= k <= n:
        raise UsageError(
            f"shard {value!r} from {source}: K={k} is not one of the N={n} shards; {SHARD_FIX}"
        )
    return k, n


#: the most machines a search may be spread over
MAX_SHARDS = 10_000

#: the most parallel jobs one machine runs
MAX_JOBS = 256
#: ``--jobs auto`` gives each job at least this many planned scenarios: a
#: job's own start (probing the adapter, checking its declarations, its
#: fault-free oracles) costs about as much as a handful of scenarios
SCENARIOS_PER_JOB = 40

JOBS_FIX = (
    "give a whole number of parallel processes from 1 to 256 (say --jobs 2), or "
    "--jobs auto for one per usable core"
)


def parse_jobs(value: Any, source: str = "the command line") -> int | None:
    """``"auto"`` as None, else a whole number of jobs from 1 to
    :data:`MAX_JOBS`. Raises :class:`UsageError` saying what is wrong and
    how to fix it."""
    if value is None or (isinstance(value, str) and value.strip().lower() == "auto"):
        return None
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError(value)
        n = int(value)
    except (TypeError, ValueError):
        raise UsageError(f"jobs {value!r} from {source} is not a number; {JOBS_FIX}") from None
    if not 1 <= n <= MAX_JOBS:
        raise UsageError(f"jobs {value!r} from {source} is out of range; {JOBS_FIX}")
    return n


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


#: setting -> (lowest, highest, what it means): a number outside is refused
#: at parse time, with the reason, instead of running a nonsense search
BOUNDS: dict[str, tuple[float, float, str]] = {
    "max_examples": (1, 1_000_000, "scenarios to run (at least one, or nothing is judged)"),
    "budget_seconds": (0.001, 30 * 24 * 3600.0, "seconds the search may take"),
    "shrink_budget_seconds": (0, 30 * 24 * 3600.0, "seconds shrinking may take"),
    "seed": (0, 2**64 - 1, "the search's seed"),
    "max_runs": (1, 50, "runs per scenario"),
    "max_episodes": (1, 50, "fault episodes per scenario"),
    "worker_timeout": (1, 24 * 3600.0, "seconds one worker may run"),
    "determinism_runs": (
        1,
        20,
        "fault-free runs of each workflow compared before they are trusted (2, the "
        "default, catches most nondeterminism; 1 trusts one run unchecked)",
    ),
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
