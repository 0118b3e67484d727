"""The named profiles and the values read on their own: modes, a shard
(``K/N``) and a number of jobs, each refused with how to fix it."""

from __future__ import annotations

from typing import Any

from .._errors import UsageError

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
