"""The clock set to exactly a run's own deadline (``AdvanceClock(until=...)``).

A comparison with a deadline off by one (``>`` where ``>=`` belongs) shows
only at the deadline itself, and the clock faults before jumped a day past
it. The targeted plan now sets the clock to exactly the ``wake_at`` a
waiting run reports (and, for a decision, a second before it). A mistake of
our own making in that class -- an event wait that times out only *after*
its deadline, so the run woken at it finds nothing to do and is claimed
again and again -- is caught there, and the correct runtime passes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mutants_support import load_mutants

from harness.adapters.reference import ReferenceAdapter
from harness.model import AdvanceClock, Quiesce, RunSpec, Scenario, Submit
from harness.model._scenario import describe_step
from harness.scenarios import probe_universe, targeted

#: "a wait times out once its deadline has passed": ``>`` where ``>=`` was
TIMES_OUT_AFTER_THE_DEADLINE = (
    "_executor/_inbox.py",
    "    if run.wake_at is not None and now >= run.wake_at:\n",
    "    if run.wake_at is not None and now > run.wake_at:\n",
)


@pytest.fixture(scope="module")
def boundaries() -> list[Scenario]:
    plan = targeted(probe_universe(ReferenceAdapter()))
    return [s for s in plan if "/deadline_boundary/" in s.name]


def test_a_plain_jump_keeps_its_form_and_a_boundary_says_where_it_lands() -> None:
    # a saved scenario's clock jump reads and writes as it always did
    assert AdvanceClock(seconds=5).model_dump() == {"op": "advance_clock", "seconds": 5.0}
    exact = AdvanceClock(seconds=0, until="r1")
    assert AdvanceClock.model_validate(exact.model_dump()) == exact
    assert "exactly r1's deadline" in describe_step(exact)
    assert "1 s before r1's deadline" in describe_step(AdvanceClock(seconds=-1, until="r1"))


def test_the_plan_sets_the_clock_to_each_kind_of_deadline(boundaries: list[Scenario]) -> None:
    names = [s.name.split("/", 2)[2] for s in boundaries]
    assert "deadline_boundary/exact/approval" in names
    assert "deadline_boundary/just_before/approval" in names
    assert any(n.startswith("deadline_boundary/exact/r") for n in names)  # a hand-off's wait
    for s in boundaries:
        (jump,) = [step for step in s.steps if isinstance(step, AdvanceClock)]
        assert jump.until == "r1" and jump.seconds in (0.0, -1.0)


def test_a_wait_timed_out_only_after_its_deadline_is_caught_at_it(
    boundaries: list[Scenario], tmp_path: Path
) -> None:
    mutants = load_mutants()
    (handoff,) = [s for s in boundaries if "/exact/r" in s.name][:1]
    scenario = handoff.model_dump(mode="json")
    failed = {}
    for label, edits in (("correct", ()), ("mutant", (TIMES_OUT_AFTER_THE_DEADLINE,))):
        copy = mutants.mutated_copy(tmp_path / label / "src", [mutants.Edit(*e) for e in edits])
        execution = mutants.execute(copy, scenario, tmp_path / label / "work")
        failed[label] = execution.failed
        lines = (tmp_path / label / "work" / "example" / "history.jsonl").read_text()
        events = [json.loads(line) for line in lines.splitlines()]
        (jump,) = [e for e in events if e["f"] == "fault" and e["value"]["kind"] == "clock"]
        waits = [e for e in events if e["f"] == "wait" and e["value"]["run_id"] == "r1"]
        # it fired, naming the run, and landed on the deadline itself (an
        # ``at`` would say where it landed instead)
        assert jump["value"]["fired"] and jump["value"]["until"] == "r1"
        assert "at" not in jump["value"] and jump["value"]["runs"] == ["r1"]
        assert jump["time"] == waits[-1]["value"]["wake_at"]
    assert failed["correct"] == []
    # woken at its deadline it found its wait not yet over, and was left
    # there: stuck, and not where the fault-free run ends
    assert "progress" in failed["mutant"]


def test_a_run_with_no_deadline_ahead_moves_no_clock_and_says_why(tmp_path: Path) -> None:
    mutants = load_mutants()
    run = RunSpec(run_id="r1", tenant="acme", workflow="refund", input={"amount_cents": 100})
    scenario = Scenario(
        name="no-deadline-yet",
        steps=(Submit(run=run), AdvanceClock(seconds=0, until="r1"), Quiesce()),
    )
    copy = mutants.mutated_copy(tmp_path / "src")
    mutants.execute(copy, scenario.model_dump(mode="json"), tmp_path / "work")
    lines = (tmp_path / "work" / "example" / "history.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    (jump,) = [e for e in events if e["f"] == "fault" and e["value"]["kind"] == "clock"]
    # submitted, never run: no wake_at yet, so nothing moved, and it says so
    assert jump["value"]["fired"] is False
    assert "reports no deadline" in jump["value"]["reason"]
    assert jump["time"] == events[0]["time"]
