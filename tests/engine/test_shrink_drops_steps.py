"""The last pass of shrinking (issue 34): after Hypothesis's shrink, each
step is deleted in turn and the deletion kept when the shorter scenario
fails the same property, so a counterexample holds no step its failure
does not need -- such as a step drawn as part of an episode."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import load_settings
from harness.adapters import Capability
from harness.adapters.reference import ReferenceAdapter
from harness.model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    ContinueWorker,
    CrashSpec,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)
from harness.nemesis import ScenarioError, validate
from harness.outcome import Example, Outcome
from harness.report import Report, build_report
from harness.scenarios import probe_universe
from harness.session import Engine
from harness.session._drop import deletions, runnable
from harness.session._shrink import failed_properties

R1 = RunSpec(run_id="r1", tenant="acme", workflow="refund", input={"amount": 5})
PAUSE = CrashSpec(site="before_effect", action="pause")

#: Prefect 2's counterexample as a search shrank it: a zombie episode (z1
#: paused, the clock past its lease, w1 takes over, z1 continued), then the
#: quiesce, which continues every paused worker first
ZOMBIE = Scenario(
    name="zombie",
    steps=(
        Submit(run=R1),
        RunWorker(worker_id="z1", crash=PAUSE),
        AdvanceClock(seconds=91.0),
        RunWorker(worker_id="w1"),
        ContinueWorker(worker_id="z1"),
        Quiesce(),
    ),
)


#: an adapter that can take any step
EVERY = frozenset(Capability)


def _without(scenario: Scenario) -> list[list[str]]:
    return [[s.op for s in c.steps] for c in deletions(scenario, EVERY)]


def test_deletions_go_last_first_and_keep_the_submission_and_the_final_quiesce() -> None:
    assert _without(ZOMBIE) == [
        ["submit", "run_worker", "advance_clock", "run_worker", "quiesce"],
        ["submit", "run_worker", "advance_clock", "continue_worker", "quiesce"],
        ["submit", "run_worker", "run_worker", "continue_worker", "quiesce"],
        ["submit", "advance_clock", "run_worker", "continue_worker", "quiesce"],
    ]
    # the shorter scenarios keep the original's name and seed
    assert all((c.name, c.seed) == ("zombie", 0) for c in deletions(ZOMBIE, EVERY))


def test_no_deletion_starts_a_worker_its_own_pause_may_still_hold() -> None:
    again = Scenario(
        steps=(
            Submit(run=R1),
            RunWorker(worker_id="z1", crash=PAUSE),
            ContinueWorker(worker_id="z1"),
            RunWorker(worker_id="z1"),
            Quiesce(),
        )
    )
    kept = _without(again)
    # the runner would refuse z1 started while paused: never tried
    assert ["submit", "run_worker", "run_worker", "quiesce"] not in kept
    assert not runnable((*again.steps[:2], *again.steps[3:]))
    # a kill crash holds nothing: started again is fine
    killed = (Submit(run=R1), RunWorker(worker_id="z1", crash=CrashSpec(site="s")))
    assert runnable((*killed, RunWorker(worker_id="z1"), Quiesce()))


def test_no_deletion_leaves_a_step_naming_a_run_never_submitted() -> None:
    r2 = R1.model_copy(update={"run_id": "r2"})
    scenario = Scenario(
        steps=(
            Submit(run=R1),
            Submit(run=r2),
            RunWorker(worker_id="w1"),
            Approve(run_id="r2", variant="misdirected", signed_for="r1"),
            Quiesce(),
        )
    )
    assert _without(scenario) == [
        ["submit", "submit", "run_worker", "quiesce"],
        ["submit", "submit", "approve", "quiesce"],
    ]
    # and never one without any run
    assert _without(Scenario(steps=(Submit(run=R1), Quiesce()))) == []


def test_every_deletion_validates_against_the_adapter_s_capabilities() -> None:
    # a deletion asks for no capability its original did not: the one
    # that took the clock step away validates where the original did not
    clocked = Scenario(steps=(Submit(run=R1), AdvanceClock(seconds=1.0), Quiesce()))
    with pytest.raises(ScenarioError, match="clock"):
        validate(clocked, ())
    for candidate in deletions(clocked, ()):
        validate(candidate, ())
    assert [[s.op for s in c.steps] for c in deletions(clocked, {Capability.CLOCK})] == [
        ["submit", "quiesce"]
    ]


def _search(
    tmp_path: Path, bug: str, family: str, *, targeted: bool
) -> tuple[Outcome, Report, list[Example]]:
    """A dev search of one fault family on the reference runtime with
    ``bug``, stopped at its first failure: its outcome, its report, and
    every failing example it ran (the shrink phase's included)."""
    settings = load_settings(
        "dev", seed=0, targeted=targeted, max_examples=12, families=(family,),
        stop_on_first=True, determinism_runs=1, report_dir=str(tmp_path / "r"),
    )  # fmt: skip
    adapter = ReferenceAdapter(bugs=frozenset({bug}))
    engine = Engine(adapter, settings)
    try:
        universe = probe_universe(
            adapter, families=settings.families, aim_effects=targeted,
            max_runs=settings.max_runs, max_episodes=settings.max_episodes,
        )  # fmt: skip
        outcome = engine.run(universe)
        report = build_report(outcome, adapter, "reference", {}, tmp_path / "r")
        return outcome, report, engine.failures
    finally:
        engine.close()


def test_a_targeted_zombie_loses_the_continue_right_before_the_quiesce(tmp_path: Path) -> None:
    """Prefect 2's shape on the reference runtime without fencing: the
    targeted zombie schedule (z1 paused, the clock past its lease, w1 takes
    over, z1 continued, the quiesce) fails exactly_once_effects; z1's
    ContinueWorker is redundant (the quiesce continues it first), and the
    last pass deletes it, though Hypothesis never shrinks a targeted schedule."""
    outcome, report, failures = _search(tmp_path, "no-fencing", "zombie", targeted=True)
    ce = outcome.counterexamples["exactly_once_effects"]
    assert ce.scenario.name.startswith("targeted/") and "zombie_before" in ce.scenario.name
    ops = [s.op for s in ce.scenario.steps]
    assert ops[-4:] == ["run_worker", "advance_clock", "run_worker", "quiesce"], ops
    assert "exactly_once_effects" in failed_properties(ce)
    # the schedule as the search ran it ended with z1 continued, and failed alike
    schedule = next(ex for ex in failures if ex.scenario.name == ce.scenario.name)
    assert [s.op for s in schedule.scenario.steps] == [*ops[:-1], "continue_worker", "quiesce"]
    assert outcome.dropped_steps["exactly_once_effects"] == 1
    assert report.counterexample is not None and report.counterexample.dropped_steps == 1
    assert report.counterexample.fully_shrunk


def test_a_search_drops_the_worker_a_world_fault_episode_drew_before_the_quiesce(
    tmp_path: Path,
) -> None:
    """Seed 0 of a sampled search of the world family on the reference
    runtime without idempotency keys: Hypothesis shrinks the double charge
    to an episode (the fault armed, a worker started) and the quiesce; the
    worker is redundant (the quiesce's first worker meets the fault just
    the same), and the last pass deletes it."""
    outcome, report, failures = _search(tmp_path, "no-idempotency-key", "world", targeted=False)
    ce = outcome.counterexamples["exactly_once_effects"]
    assert [type(s) for s in ce.scenario.steps] == [Submit, ArmWorldFault, Quiesce], ce.scenario
    assert "exactly_once_effects" in failed_properties(ce)
    assert outcome.dropped_steps["exactly_once_effects"] == 1
    assert "exactly_once_effects" not in outcome.not_fully_shrunk
    # the report says so beside the steps
    assert report.counterexample is not None and report.counterexample.fully_shrunk
    assert len(report.counterexample.steps) == 3
    assert report.counterexample.dropped_steps == 1
    # what Hypothesis left had a worker before the quiesce, and failed the same way
    drawn = [
        ex.scenario.steps
        for ex in failures
        if ex.scenario.steps[:2] == ce.scenario.steps[:2]
        and [type(s) for s in ex.scenario.steps[2:]] == [RunWorker, Quiesce]
    ]
    assert drawn, [ex.scenario.describe() for ex in failures]
