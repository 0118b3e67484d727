"""The random-kill mode: SIGKILL workers at uniformly random moments.

The baseline that event-triggered search is measured against (and a soak
mode): the same workloads as the search, the same checkers, but the faults
are the classic ones -- start a worker, kill it after a delay drawn from a
seeded RNG over a worker's typical run time, wait out its lease, repeat a few
times, then quiesce. Where a kill lands depends on the OS scheduler, so a
failure found here is reported like any other but is not shrunk, and its
replay may not reproduce it.
"""

from __future__ import annotations

import random
import time

from ..adapters import Capability
from ..history import History
from ..model import Approve, EventF, KillAfter, Quiesce, RunSpec, Scenario, Step, Submit, Verdict
from ..outcome import Outcome
from ..scenarios import TENANTS, Universe
from ._engine import Engine

#: kills per scenario, drawn uniformly from this range
KILLS = (1, 4)
#: a kill is drawn uniformly over [0, SPREAD x a worker's typical run time]
SPREAD = 1.2


def random_workload(rng: random.Random, universe: Universe) -> tuple[RunSpec, ...]:
    """A workload drawn like the search's (``harness.scenarios.run_specs``), from ``rng``."""
    runs = []
    for i in range(rng.randint(1, universe.max_runs)):
        wf = rng.choice(universe.workflows)
        decision = rng.choice(("approved", "approved", "approved", "rejected"))
        old = Capability.VERSION_SWITCH in universe.capabilities and rng.randint(0, 3) == 0
        runs.append(
            RunSpec(
                run_id=f"r{i + 1}",
                tenant=rng.choice(TENANTS),
                workflow=wf.name,
                input=dict(rng.choice(wf.inputs)),
                decision=decision if wf.needs_approval else "approved",
                code_version=1 if old else None,
            )
        )
    return tuple(runs)


def typical_worker_seconds(oracle: History, seconds: float) -> float:
    """A worker's typical wall time in the fault-free run of this workload."""
    workers = sum(1 for e in oracle.by_f(EventF.WORKER) if e.type == "invoke")
    return max(0.002, seconds / max(1, workers))


def run_random_kill(engine: Engine, universe: Universe) -> Outcome:
    """Run random-kill scenarios until one fails, ``max_examples`` ran, or the
    budget is spent; the first failure ends the run (no shrinking)."""
    s = engine.settings
    rng = random.Random(engine.seed)
    outcome = engine.new_outcome(universe)
    # Random kills only: the other families are off for this run (their
    # properties read not_tested, which is not inconclusive).
    outcome.families = []
    started = time.monotonic()
    timing: dict[str, float] = {}
    while outcome.examples < s.max_examples and not (outcome.examples and engine.over_budget()):
        runs = random_workload(rng, universe)
        workload = Scenario(name="random-kill", steps=(*(Submit(run=r) for r in runs), Quiesce()))
        key = workload.model_dump_json()
        if key not in timing:
            t0 = time.monotonic()
            oracle = History.load(engine.oracle(workload))
            timing[key] = typical_worker_seconds(oracle, time.monotonic() - t0)
        steps: list[Step] = [Submit(run=r) for r in runs]
        for k in range(rng.randint(*KILLS)):
            steps.append(KillAfter(worker_id=f"k{k}", delay=rng.uniform(0, SPREAD * timing[key])))
            # Decide what waits, as an operator would between restarts (the
            # quiesce does the same): the kills must not stall at approvals.
            steps += [Approve(run_id=r.run_id) for r in runs]
        steps.append(Quiesce())
        example = engine.execute(Scenario(name="random-kill", steps=tuple(steps)))
        engine.account(outcome, example)
        if example.failed:
            outcome.counterexamples = {
                r.name: example for r in example.results if r.verdict is Verdict.FAIL
            }
            outcome.stopped_on_first = True
            break
        engine.keep_last(example)
    outcome.searched = outcome.examples
    if not outcome.counterexamples and outcome.examples < s.max_examples:
        outcome.budget_cut = True  # the loop ended on the budget
        outcome.planned = s.max_examples
    outcome.seconds = time.monotonic() - started
    return outcome.freeze()
