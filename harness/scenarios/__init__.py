"""Scenarios: what to run, drawn from what an adapter declares.

:func:`probe_universe` reads the :class:`Universe` an adapter offers (its
workflows, crash points, capabilities, and each workflow's site profile: where
a fault-free run goes). From it, ``scenarios(universe)`` is the Hypothesis
strategy that draws a :class:`harness.model.Scenario`; ``targeted(universe)``
lists the aimed schedules a search runs before sampling; ``exhaustive(...)``
enumerates every (crash point x hit) for one workflow.

Scenario *files* (saved counterexamples, regression scenarios) live in the
repository's top-level ``scenarios/`` folder as JSON; see its README.
"""

from __future__ import annotations

from ..vocabulary import FAMILIES
from ._exhaustive import exhaustive
from ._files import ScenarioFileError, load_scenario_file, scenario_files
from ._profile import Commit, EffectSite, WorkflowProfile, profile_workflow
from ._schedules._common import schedule_kind
from ._seeded import sampled_stream
from ._strategies import episode, run_specs, scenarios
from ._targeted import commit_pair_rows, targeted, targeted_plan
from ._universe import PLANTED_KEY, TENANTS, Universe, probe_universe

__all__ = [
    "FAMILIES",
    "PLANTED_KEY",
    "TENANTS",
    "Commit",
    "EffectSite",
    "ScenarioFileError",
    "Universe",
    "WorkflowProfile",
    "commit_pair_rows",
    "episode",
    "exhaustive",
    "load_scenario_file",
    "probe_universe",
    "profile_workflow",
    "run_specs",
    "sampled_stream",
    "scenario_files",
    "scenarios",
    "schedule_kind",
    "targeted",
    "targeted_plan",
]
