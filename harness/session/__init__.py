"""The session layer: one run, from plan to outcome.

:class:`Engine` executes scenarios (each in a fresh environment, checked
against its fault-free oracle) and drives the search: the targeted schedules,
then Hypothesis-sampled scenarios, then one shrink per failing property.
:func:`run_random_kill` and :func:`run_exhaustive` are the other two modes;
:func:`check_declarations` runs each workflow once without faults before
any search: it refuses an adapter whose declarations contradict that run
(exit 2), and returns the workflows whose run the runtime could not finish
(a finding: ``progress`` fails, see ``_probe``). What a session returns is an
:class:`harness.outcome.Outcome`; turning it into a report is
``harness.run``'s job, one layer up.
"""

from __future__ import annotations

from ._engine import Engine
from ._exhaustive import run_exhaustive
from ._probe import check_declarations, probe_scenario
from ._random_kill import run_random_kill

__all__ = ["Engine", "check_declarations", "probe_scenario", "run_exhaustive", "run_random_kill"]
