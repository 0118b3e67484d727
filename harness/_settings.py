"""Settings: one frozen object, named profiles, layered configuration.

Precedence, lowest first: the profile's defaults, ``[tool.harness]`` in the
nearest ``pyproject.toml``, ``HARNESS_*`` environment variables, then explicit
arguments (command line or pytest options). ``ci`` is the default profile when
the ``CI`` environment variable is set: derandomized, so a CI failure replays
anywhere, and bounded in time.

Each setting is spelled once, here: its :class:`Settings` field carries an
:class:`Option` (its ``harness run`` flag, help, how a value is read, and
whether the pytest plugin offers it), from which the command line, the
pytest plugin and :func:`harness.run`'s keyword arguments are made.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
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


def profile_defaults(key: str) -> str:
    """A setting's default in each profile, as help shows it (the profiles
    are the one home of the numbers): ``dev 12, ci 150, thorough 400``."""
    return ", ".join(f"{name} {values[key]:g}" for name, values in PROFILES.items())


SHARD_FIX = "give it as K/N with 1 <= K <= N (say --shard 2/4 for the second of four machines)"

#: the most machines a search may be spread over
MAX_SHARDS = 10_000


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


@dataclass(frozen=True)
class Option:
    """How one setting is given from outside the code, beside
    ``[tool.harness]`` and ``HARNESS_<NAME>`` (which every setting has):
    its ``harness run`` flag and help, how the flag's words are read, and
    whether the pytest plugin offers it too, as ``--harness-<flag>``.

    Every :class:`Settings` field carries one (:func:`setting_options`);
    ``harness run``'s options for settings and the plugin's are made from
    them, and :func:`harness.run` takes the settings by field name (or by
    the name of their flag: ``budget``)."""

    #: ``--budget``; None: no flag (``[tool.harness]`` and ``HARNESS_*`` only)
    flag: str | None
    #: what the flag does, with its default (argparse's help: no ``%``)
    help: str
    metavar: str | None = None
    #: argparse's ``type`` for the flag's words (``int``, ``float``: argparse's
    #: own "invalid int value" message); None: the words as given
    type: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    #: a switch: the flag takes no value and sets the setting to this one
    switch: bool | None = None
    #: the setting's own reader for every layer (``value, source``), raising
    #: :class:`UsageError`; None: by the field's type (see ``_coerce``)
    parse: Callable[[Any, str], Any] | None = None
    #: the pytest plugin offers it too (``--harness-seed``, dest ``harness_seed``)
    pytest: bool = False

    @property
    def keyword(self) -> str | None:
        """The flag's name as a keyword argument of :func:`harness.run`
        (``--shrink-budget``: ``shrink_budget``); None for a switch or no flag."""
        if self.flag is None or self.switch is not None:
            return None
        return self.flag.removeprefix("--").replace("-", "_")


def _setting(default: Any, option: Option) -> Any:
    return field(default=default, metadata={"option": option})


@dataclass(frozen=True)
class Settings:
    """How hard and how long to search. Build with :func:`load_settings`."""

    profile: str = _setting(
        "dev",
        Option(
            "--profile",
            "how hard and how long to search (default: dev, or ci when $CI is set); "
            f"max examples: {profile_defaults('max_examples')}; budget seconds: "
            f"{profile_defaults('budget_seconds')}",
            choices=tuple(PROFILES),
            pytest=True,
        ),
    )
    max_examples: int = _setting(
        12,
        Option(
            "--max-examples",
            "how many sampled scenarios the search plans, on top of the targeted schedules "
            f"(default: the profile's: {profile_defaults('max_examples')})",
            metavar="N",
            type=int,
        ),
    )
    budget_seconds: float = _setting(
        60.0,
        Option(
            "--budget",
            "how long the search may take, in seconds (default: the profile's: "
            f"{profile_defaults('budget_seconds')}); what it cuts is reported as not run",
            metavar="SECONDS",
            type=float,
        ),
    )
    #: shrinking's own budget, after the search (``--shrink-budget``); None:
    #: a quarter of ``budget_seconds`` (see ``harness.session._plan.shrink_deadline``)
    shrink_budget_seconds: float | None = _setting(
        None,
        Option(
            "--shrink-budget",
            "how long shrinking a failure may take, after the search and on top of --budget "
            "(default: a quarter of --budget, plus what the search left of it); a "
            "counterexample whose shrinking it stops is reported as not fully shrunk",
            metavar="SECONDS",
            type=float,
        ),
    )
    derandomize: bool = _setting(
        False,
        Option(None, "a fixed seed (0) when none is given: the ci profile's; no flag"),
    )
    seed: int | None = _setting(
        None,
        Option(
            "--seed",
            "the search's seed, to repeat a run exactly (default: random, printed at the "
            "start; the ci profile is derandomized: seed 0)",
            metavar="N",
            type=int,
            pytest=True,
        ),
    )
    max_runs: int = _setting(2, Option(None, "runs per scenario (the profile's); no flag"))
    max_episodes: int = _setting(
        4, Option(None, "fault episodes per sampled scenario (the profile's); no flag")
    )
    families: tuple[str, ...] | None = _setting(
        None, Option(None, "the fault families to arm, comma-separated (default: all); no flag")
    )
    report_dir: str = _setting(
        "reports",
        Option(
            "--report-dir",
            "where to write the report folder (default: reports); a folder another tool "
            "wrote is refused, a harness report folder is replaced",
            metavar="DIR",
        ),
    )
    exhaustive: bool = _setting(
        False,
        Option(
            None,
            "read by nothing: harness run --exhaustive WORKFLOW (harness.run(exhaustive=...)) "
            "names the workflow instead; no flag",
        ),
    )
    #: ``search`` (event-triggered faults, shrinking) or ``random-kill`` (the
    #: baseline: SIGKILL at random wall-clock moments, no shrinking)
    mode: str = _setting(
        "search",
        Option(
            "--mode",
            "search (default): generated scenarios with event-triggered faults, a failure "
            "shrunk to a minimal counterexample; random-kill: the baseline -- the same "
            "workloads, workers SIGKILLed at uniformly random moments (a seeded delay over a "
            "worker's typical run time), checked by the same properties, the first failure "
            "reported as found (no shrinking, and its replay may not reproduce it)",
            choices=MODES,
        ),
    )
    #: run the targeted schedules (``scenarios.targeted``) before sampling
    targeted: bool = _setting(
        True,
        Option(
            "--no-targeted",
            "skip the targeted schedules that a search runs before sampling",
            switch=False,
        ),
    )
    #: stop the search at the first failing scenario (else it goes on judging
    #: every property until each has failed, or the plan or budget ends)
    stop_on_first: bool = _setting(
        False,
        Option(
            "--stop-on-first",
            "stop the search at the first failing scenario (by default it goes on until "
            "every property has failed once or the plan or budget ends, and shrinks one "
            "counterexample per failing property)",
            switch=True,
        ),
    )
    #: ``(K, N)``: run only shard K of N of the search's plan (``--shard K/N``,
    #: see ``harness.session._plan.shard_plan``); None: the whole plan
    shard: tuple[int, int] | None = _setting(
        None,
        Option(
            "--shard",
            "run only shard K of N of the search's plan (1 <= K <= N; say 2/4), to spread "
            "one search over N machines; every shard needs the same --seed, profile and "
            "options, and `harness merge` joins their report folders into one report",
            metavar="K/N",
            parse=parse_shard,
        ),
    )
    #: parallel processes the search runs in (``--jobs N``, see
    #: ``harness._jobs``); None: ``auto``, one per usable core (at most one
    #: per :data:`SCENARIOS_PER_JOB` planned scenarios). 1: today's single
    #: process, the default of every profile but ``thorough``
    jobs: int | None = _setting(
        1,
        Option(
            "--jobs",
            "run the search in N processes of this machine (auto: one per usable core, at "
            "most one per 40 planned scenarios), as N shards of its plan merged into one "
            "report; the plan, the verdicts and every scenario's history are those of --jobs "
            "1 (default: 1, or HARNESS_JOBS / jobs in [tool.harness]; the thorough profile: "
            "auto)",
            metavar="N|auto",
            parse=parse_jobs,
        ),
    )
    #: where the sampled search keeps and replays its failing examples
    #: (``--example-db PATH|redis://...``, see ``harness._exampledb``);
    #: None: nowhere
    example_db: str | None = _setting(
        None,
        Option(
            "--example-db",
            "keep the sampled search's failing examples in this folder (or Redis) and "
            "replay them first in every later run that names it, whatever its seed (a "
            "writable folder, created if missing, or a reachable Redis; the replays count "
            "against --budget)",
            metavar="PATH|redis://...",
        ),
    )
    #: seconds one worker may run before it is killed and called stuck
    #: (``--worker-timeout``); None: the adapter's ``worker_timeout``, else
    #: 120 (``harness.nemesis.resolve_worker_timeout``)
    worker_timeout: float | None = _setting(
        None,
        Option(
            "--worker-timeout",
            "how long one worker may run before it is killed and called stuck (default: "
            "the adapter's worker_timeout, else 120; never more than the budget left, nor "
            "under 30 s unless set lower)",
            metavar="SECONDS",
            type=float,
        ),
    )
    #: fault-free runs of each workflow that must agree before the oracle is
    #: trusted (``--determinism-runs``, see ``harness.session._oracle``); 1:
    #: one run, trusted unchecked
    determinism_runs: int = _setting(
        2,
        Option(
            "--determinism-runs",
            "fault-free runs of each workflow that must agree before the properties that "
            "compare with them are judged (default: 2; 1 trusts one run unchecked): where "
            "they disagree those properties read unknown, never fail",
            metavar="N",
            type=int,
            pytest=True,
        ),
    )

    def with_(self, **changes: Any) -> Settings:
        return replace(self, **changes)


def setting_options() -> list[tuple[str, Option]]:
    """Every setting's name and :class:`Option`, in the fields' order."""
    return [(f.name, f.metadata["option"]) for f in fields(Settings)]


def flag_values(ns: object) -> dict[str, Any]:
    """The settings a parsed ``harness run`` command line gives, by field
    name (None: the flag was not given): the argparse namespace of the
    options :class:`Option` made, whose ``dest`` is the field's name."""
    return {name: getattr(ns, name, None) for name, o in setting_options() if o.flag is not None}


def plugin_option(name: str, option: Option) -> tuple[str, str]:
    """The pytest plugin's flag and ``dest`` for a setting it offers
    (``--seed``: ``--harness-seed``, ``harness_seed``)."""
    assert option.flag is not None, name
    return f"--harness-{option.flag.removeprefix('--')}", f"harness_{name}"


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
