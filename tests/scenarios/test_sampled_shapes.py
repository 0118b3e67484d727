"""Workload shapes the sampled search draws (issue 28): twins and
misdirected decisions, deliveries while a worker holds a run, rollback
orders of code versions, runs left down past every deadline after a crash;
and the search's skipping of repeated draws.

Each shape is found by a bounded search over the strategy alone (no
runtime runs), and what is found is a scenario the adapter can take."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import Phase, find, settings

from harness.adapters import Capability, MemoryTarget, WorkflowSpec
from harness.model import (
    AdvanceClock,
    Approve,
    ContinueWorker,
    InjectMemory,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)
from harness.nemesis import validate
from harness.scenarios import Universe, scenarios
from harness.scenarios._schedules.commits import DOWNTIME
from harness.session._draws import repeat as _repeat

WORKFLOWS = (
    WorkflowSpec(
        name="refund",
        inputs=({"order": "o-1", "amount_cents": 500},),
        effects=("payments.refund", "email.send"),
        needs_approval=True,
        memory_targets=(MemoryTarget(namespace="policy", key="waive_below", value=10**9),),
    ),
    WorkflowSpec(name="digest", inputs=({"topic": "tides"},), effects=("email.send",)),
)
POINTS = ("after_intent_commit", "before_effect")
UNIVERSE = Universe(
    workflows=WORKFLOWS,
    crash_points=POINTS,
    pause_points=POINTS,
    capabilities=frozenset(Capability),
    lease_seconds=30.0,
    rollbacks=True,
)
#: generation only: the first scenario of the shape is enough (a shrink of
#: these long scenarios costs minutes on a busy machine)
SEARCH = settings(max_examples=1500, database=None, phases=[Phase.generate])


def _found(condition: Any) -> Scenario:
    scenario: Scenario = find(scenarios(UNIVERSE), condition, settings=SEARCH)
    validate(scenario, frozenset(Capability))
    return scenario


def _submitted(s: Scenario) -> dict[str, RunSpec]:
    return {step.run.run_id: step.run for step in s.steps if isinstance(step, Submit)}


def test_a_misdirected_decision_is_signed_for_a_twin_of_the_run_it_is_sent_to() -> None:
    s = _found(
        lambda s: any(isinstance(x, Approve) and x.variant == "misdirected" for x in s.steps)
    )
    runs = _submitted(s)
    sent = next(x for x in s.steps if isinstance(x, Approve) and x.variant == "misdirected")
    assert sent.signed_for is not None and sent.signed_for != sent.run_id
    to, signer = runs[sent.run_id], runs[sent.signed_for]
    # the same tenant, workflow and input: only the approval differs
    assert (to.tenant, to.workflow, to.input) == (signer.tenant, signer.workflow, signer.input)


def test_a_decision_is_delivered_while_a_paused_worker_holds_the_run() -> None:
    # The whole shape: a message to ignore first (a forged decision: the
    # held worker has a run to claim), the worker paused, the valid
    # decision, the worker goes on. Other episodes side by side can make
    # the last three steps without the first, so the shape is asked whole.
    def held(s: Scenario) -> bool:
        steps = list(s.steps)
        return any(
            isinstance(f, Approve)
            and f.variant == "forged"
            and isinstance(a, RunWorker)
            and a.crash is not None
            and a.crash.action == "pause"
            and isinstance(b, Approve)
            and b.variant == "valid"
            and b.run_id == f.run_id
            and isinstance(c, ContinueWorker)
            and c.worker_id == a.worker_id
            for f, a, b, c in zip(steps, steps[1:], steps[2:], steps[3:], strict=False)
        )

    assert held(_found(held))


def test_a_rollback_runs_this_code_then_the_older_release() -> None:
    def rollback(s: Scenario) -> bool:
        steps = list(s.steps)
        return any(
            isinstance(a, RunWorker)
            and a.code_version is None
            and a.worker_id.startswith("u")
            and isinstance(b, RunWorker)
            and b.code_version == 1
            for a, b in itertools.pairwise(steps)
        )

    s = _found(rollback)
    # the final quiesce is this release again: this, older, this
    assert isinstance(s.steps[-1], Quiesce)


def test_a_crash_may_leave_the_runs_down_past_every_deadline() -> None:
    def down(s: Scenario) -> bool:
        steps = list(s.steps)
        return any(
            isinstance(a, RunWorker)
            and a.crash is not None
            and a.crash.action == "kill"
            and isinstance(b, AdvanceClock)
            and b.seconds == DOWNTIME
            for a, b in itertools.pairwise(steps)
        )

    s = _found(down)
    assert DOWNTIME > 3600  # past the default approval lifetime and wait deadline
    assert any(isinstance(x, Quiesce) for x in s.steps)


def test_memory_plants_include_a_verified_version_under_a_lapsed_newest_one() -> None:
    s = _found(
        lambda s: any(isinstance(x, InjectMemory) and x.kind == "lapsed_newest" for x in s.steps)
    )
    plant = next(x for x in s.steps if isinstance(x, InjectMemory))
    assert plant.provenance == "system_verified"


def test_a_repeated_draw_is_the_same_steps_whatever_its_name() -> None:
    run = RunSpec(run_id="r1", tenant="acme", workflow="digest", input={"topic": "tides"})
    steps = (Submit(run=run), Quiesce())
    seen: set[str] = set()
    assert not _repeat(seen, Scenario(name="swarm: crash", steps=steps))
    assert _repeat(seen, Scenario(name="swarm: world", steps=steps))
    assert not _repeat(seen, Scenario(name="swarm: crash", steps=steps[1:]))


def test_shrinking_a_workload_goes_to_today_s_release() -> None:
    # A run of an older release is drawn one time in four; the simplest
    # workload Hypothesis can shrink to holds today's release, so a
    # counterexample names the older one only when its failure needs it.
    from harness.scenarios._strategies import run_specs

    runs = find(run_specs(UNIVERSE), lambda rs: True, settings=settings(database=None))
    assert [r.code_version for r in runs] == [None]
    old = find(
        run_specs(UNIVERSE),
        lambda rs: any(r.code_version == 1 for r in rs),
        settings=settings(max_examples=200, database=None),
    )
    assert [r.code_version for r in old] == [1]
