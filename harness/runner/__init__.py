"""The runner: the only part of the harness that owns time and ordering.

:func:`run_scenario` executes one scenario, one step at a time, in a fresh
environment an adapter opens, and records what happened as a history; the
:class:`Coverage` it returns counts the faults armed and fired. A scenario
that cannot run as written raises :class:`ScenarioError`. Worker processes
themselves belong to :mod:`harness.procs`.
"""

from __future__ import annotations

from harness.runner._interpreter import (
    WORKER_TIMEOUT,
    Coverage,
    RunResult,
    ScenarioError,
    run_scenario,
)

__all__ = [
    "WORKER_TIMEOUT",
    "Coverage",
    "RunResult",
    "ScenarioError",
    "run_scenario",
]
