"""Hypothesis strategies that generate workloads and fault schedules.

``scenarios(universe)`` draws a :class:`harness.model.Scenario` from what an
adapter declares (:class:`Universe`); ``exhaustive(...)`` enumerates every
(crash point x hit) for one workflow instead of sampling; ``targeted(universe)``
lists the aimed schedules a search runs before sampling.
"""

from __future__ import annotations

from ._exhaustive import exhaustive
from ._strategies import FAMILIES, TENANTS, Universe, episode, run_specs, scenarios
from ._targeted import targeted

__all__ = [
    "FAMILIES",
    "TENANTS",
    "Universe",
    "episode",
    "exhaustive",
    "run_specs",
    "scenarios",
    "targeted",
]
