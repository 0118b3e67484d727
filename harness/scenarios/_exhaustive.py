"""Exhaustive mode: one scenario per (crash point x hit) for one workflow.

Sampling finds bugs quickly; enumeration proves a workflow survives a kill at
*every* boundary it passes. For each declared crash point and each hit number
from 1 up, the scenario kills the first worker there and lets the runtime
recover; a hit number the workflow never reaches simply does not fire (the
history says so), which ends that site's enumeration.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..model import Approve, CrashSpec, Quiesce, RunSpec, RunWorker, Scenario, Step, Submit


def exhaustive(run: RunSpec, sites: list[str], nth: int) -> Iterator[Scenario]:
    """Scenarios killing a worker at hit ``nth`` of each site in ``sites``, in
    the first round of work (up to an approval wait) or in the second (after
    the approval): together they cover every boundary of a workflow with one
    human decision."""
    for rnd in (1, 2):
        for site in sites:
            crash = CrashSpec(site=site, nth=nth)
            steps: list[Step] = [
                Submit(run=run),
                RunWorker(worker_id="w1", crash=crash if rnd == 1 else None),
                Approve(run_id=run.run_id),
                RunWorker(worker_id="w2", crash=crash if rnd == 2 else None),
                Quiesce(),
            ]
            yield Scenario(
                name=f"exhaustive/{run.workflow}/round{rnd}/{site}@{nth}", steps=tuple(steps)
            )
