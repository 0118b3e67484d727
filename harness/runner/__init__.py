"""The runner: the only part of the harness that owns time and ordering.

:func:`run_scenario` executes one scenario, one step at a time, in a fresh
environment an adapter opens, and records what happened as a history; the
:class:`Coverage` it returns counts the faults armed and fired. A scenario
that cannot run as written raises :class:`ScenarioError`, before its first
step when the adapter lacks a capability a step needs (:func:`validate`).
Fault steps are handled by :mod:`harness.nemesis`; worker processes belong
to :mod:`harness.procs`. The fault-free runs a search is aimed from are the
runner's too (:func:`environment_facts`, :func:`profile_traces`).
"""

from __future__ import annotations

from harness.nemesis import WORKER_TIMEOUT, ScenarioError, validate
from harness.runner._interpreter import RunResult, run_scenario
from harness.runner._profiling import EnvironmentFacts, environment_facts, profile_traces
from harness.runner._recorder import Coverage

__all__ = [
    "WORKER_TIMEOUT",
    "Coverage",
    "EnvironmentFacts",
    "RunResult",
    "ScenarioError",
    "environment_facts",
    "profile_traces",
    "run_scenario",
    "validate",
]
