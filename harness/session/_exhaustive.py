"""The exhaustive mode: every crash point of one workflow, in turn."""

from __future__ import annotations

import time

from .._errors import UsageError
from ..model import RunSpec, Verdict
from ..outcome import Outcome
from ..scenarios import Universe, exhaustive
from ._engine import Engine


def run_exhaustive(engine: Engine, universe: Universe, workflow: str) -> Outcome:
    """Kill the first worker at every (crash point x hit) of one run of
    ``workflow``, hit 1 up, while a site still fires; no sampling. Every
    property is judged over all of them; the smallest failing scenario per
    property is kept."""
    adapter = engine.adapter
    spec = next((w for w in adapter.workflows() if w.name == workflow), None)
    if spec is None:
        names = ", ".join(w.name for w in adapter.workflows())
        raise UsageError(f"--exhaustive {workflow!r}: the adapter has no such workflow ({names})")
    if not universe.crash_points:
        raise UsageError(
            f"--exhaustive needs crash points, and adapter {adapter.name!r} declares none "
            "(capability crash_points); run without --exhaustive to sample effect-boundary kills"
        )
    run_spec = RunSpec(run_id="r1", tenant="acme", workflow=workflow, input=dict(spec.inputs[0]))
    outcome = engine.new_outcome(universe)
    # Only kills at crash points: the other families are off for this run
    # (their properties read not_tested, which is not inconclusive).
    outcome.families = ["crash"]
    started = time.monotonic()
    sites = list(universe.crash_points)
    nth = 1
    while sites and nth <= 8 and not outcome.budget_cut:
        still_firing = set()
        planned = list(exhaustive(run_spec, sites, nth))
        for i, scenario in enumerate(planned):
            if engine.over_budget() and outcome.searched > 0:
                # What this round still had is known; later rounds are not
                # (they depend on which sites fire), so this is a lower bound.
                outcome.budget_cut = True
                outcome.planned = outcome.searched + len(planned) - i
                break
            example = engine.execute(scenario)
            engine.account(outcome, example)
            outcome.searched += 1
            site = scenario.steps[1].crash or scenario.steps[3].crash  # type: ignore[union-attr]
            if example.coverage.fired.get("crash_point") and site is not None:
                still_firing.add(site.site)
            if example.failed:
                for r in example.results:
                    best = outcome.counterexamples.get(r.name)
                    if r.verdict is Verdict.FAIL and (best is None or example.size < best.size):
                        outcome.counterexamples[r.name] = example
            else:
                engine.keep_last(example)
        sites = sorted(still_firing)
        nth += 1
    outcome.seconds = time.monotonic() - started
    return outcome.freeze()
