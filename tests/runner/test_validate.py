"""A scenario is checked against the adapter's capabilities before it runs.

The toy adapter of ``examples/minimal_adapter`` declares no capability, so a
scenario with a clock jump or a storage fault cannot run on it: the runner
must refuse the whole scenario before its first step touches anything.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from examples.minimal_adapter.adapter import ToyAdapter
from harness.adapters import Capability
from harness.model import (
    AdvanceClock,
    CrashSpec,
    Event,
    EventF,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    StorageFault,
    Submit,
)
from harness.runner import ScenarioError, run_scenario, validate

RUN = RunSpec(run_id="r1", tenant="acme", workflow="charge", input={"amount_cents": 500})
GOOD_START = (Submit(run=RUN), RunWorker(worker_id="w1"))
SCENARIO = Scenario(
    name="needs-more",
    steps=(
        *GOOD_START,
        AdvanceClock(seconds=60),
        StorageFault(kind="pg_terminate"),
        Quiesce(),
    ),
)


def _events(path: Path) -> list[Event]:
    return [Event.model_validate_json(line) for line in path.read_text().splitlines()]


def test_a_step_needing_an_undeclared_capability_fails_the_scenario_before_step_one(
    tmp_path: Path,
) -> None:
    with pytest.raises(ScenarioError) as caught:
        run_scenario(ToyAdapter(), SCENARIO, tmp_path)
    # Every problem is listed, with its step number and the capability.
    assert caught.value.problems == (
        "step 3 (advance_clock): advancing the clock needs the clock capability",
        "step 4 (storage_fault): storage faults need the storage_faults capability",
    )
    message = str(caught.value)
    assert "'needs-more'" in message and "declared: none" in message
    assert "declare clock, storage_faults" in message
    # Nothing ran: no environment was opened (the submit of step 1 would
    # have written the run into it), no history was started.
    assert not (tmp_path / "env").exists()
    assert not (tmp_path / "history.jsonl").exists()


def test_the_same_steps_without_the_undeclared_ones_run_and_leave_a_history(
    tmp_path: Path,
) -> None:
    # The control for the test above: the first two steps do reach the
    # environment and the history when nothing stops them.
    run_scenario(ToyAdapter(), Scenario(steps=(*GOOD_START, Quiesce())), tmp_path)
    assert (tmp_path / "env" / "runs" / "r1.json").exists()
    submits = [e for e in _events(tmp_path / "history.jsonl") if e.f is EventF.SUBMIT]
    assert [e.type for e in submits] == ["invoke", "ok"]


def test_validate_takes_an_adapter_or_its_capabilities() -> None:
    crash = Scenario(steps=(RunWorker(worker_id="w1", crash=CrashSpec(site="s")),))
    validate(crash, {Capability.CRASH_POINTS})
    validate(Scenario(steps=GOOD_START), ToyAdapter())
    with pytest.raises(ScenarioError, match=r"step 1 \(run_worker\): crash points need"):
        validate(crash, ToyAdapter())
