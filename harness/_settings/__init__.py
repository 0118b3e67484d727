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

from ._fields import Option, Settings, flag_values, plugin_option, setting_options
from ._load import BOUNDS, default_profile, load_settings, resolve_jobs, run_settings, usable_cores
from ._values import (
    JOBS_FIX,
    MAX_JOBS,
    MAX_SHARDS,
    MODES,
    PROFILES,
    SCENARIOS_PER_JOB,
    SHARD_FIX,
    parse_jobs,
    parse_shard,
    profile_defaults,
)

__all__ = [
    "BOUNDS",
    "JOBS_FIX",
    "MAX_JOBS",
    "MAX_SHARDS",
    "MODES",
    "PROFILES",
    "SCENARIOS_PER_JOB",
    "SHARD_FIX",
    "Option",
    "Settings",
    "default_profile",
    "flag_values",
    "load_settings",
    "parse_jobs",
    "parse_shard",
    "plugin_option",
    "profile_defaults",
    "resolve_jobs",
    "run_settings",
    "setting_options",
    "usable_cores",
]
