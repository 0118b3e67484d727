"""Pacing the search on what it measures (issue 33): the sampled phase stops
drawing once the budget is spent, the plan's measured cost leaves out the
first fault-free run (first-use costs), and the sampling reserve follows the
search's own pace after a few scenarios."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from upgrade_toy import UpgradeToy

from harness._errors import UsageError
from harness._settings import load_settings
from harness.outcome import Draft
from harness.scenarios import probe_universe
from harness.session import Engine
from harness.session._plan import MEASURED_RUNS, REFIT_AFTER, left_for_sampling


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[Engine]:
    settings = load_settings(
        "dev", seed=0, targeted=False, max_examples=40, budget_seconds=0.001,
        report_dir=str(tmp_path / "r"),
    )  # fmt: skip
    engine = Engine(UpgradeToy("action"), settings)
    yield engine
    engine.close()


def test_the_sampled_phase_stops_drawing_once_the_budget_is_spent(engine: Engine) -> None:
    # A budget spent at once: the search runs its one scenario, and the next
    # draw finds the budget spent. Before, Hypothesis drew all 40 anyway.
    outcome = engine.run(probe_universe(engine.adapter))
    assert outcome.budget_cut and outcome.searched == 1
    assert engine.sampled_draws == 2


def test_the_measured_cost_leaves_out_the_first_fault_free_run(engine: Engine) -> None:
    engine.fault_free_seconds = [20.0, 1.0, 1.2]  # the first paid the fork server's start
    cost, source = engine.scenario_cost()
    assert cost == pytest.approx(MEASURED_RUNS * 1.1) and source == "measured"
    engine.fault_free_seconds = [20.0]  # nothing else measured yet: that one
    assert engine.scenario_cost() == (MEASURED_RUNS * 20.0, "measured")


def test_an_adapter_on_real_time_declares_what_its_faults_wait(engine: Engine) -> None:
    """``fault_seconds``: a runtime whose faults wait out real time that no
    fault-free run waits (a retry's interval, a timed-out attempt) adds it
    to the measured cost, which still follows the machine's pace. Anything
    but a number >= 0 is refused."""
    engine.adapter.fault_seconds = 0.5  # type: ignore[attr-defined]
    engine.fault_free_seconds = [20.0, 1.0, 1.2]
    assert engine.scenario_cost() == (pytest.approx(MEASURED_RUNS * 1.1 + 0.5), "measured")
    engine.adapter.fault_seconds = -1  # type: ignore[attr-defined]
    with pytest.raises(UsageError, match=r"fault_seconds=-1: it must be .* a number >= 0"):
        engine.scenario_cost()


def _outcome(engine: Engine, cost: str) -> Draft:
    outcome = Draft(
        adapter="toy", adapter_options={}, capabilities=[], settings=engine.settings,
        seed=0, planned=40, searched=REFIT_AFTER, sampled_planned=30,
    )  # fmt: skip
    outcome.scenario_seconds, outcome.scenario_cost = 30.0, cost
    return outcome


def test_the_sampling_reserve_follows_the_measured_pace(engine: Engine) -> None:
    """A plan measured at 30 s a scenario (cold fault-free runs) whose first
    scenarios took 1 s each, 27 s of a 30 s budget left: the search's pace
    says 27 more fit, so the targeted schedules go on; the plan's estimate
    would have said one, all sampling's."""
    elapsed = REFIT_AFTER * 1.0
    assert not left_for_sampling(_outcome(engine, "measured"), elapsed, 30.0)
    # a declared cost stays the adapter's word for longer (a runtime on real time)
    assert left_for_sampling(_outcome(engine, "declared"), elapsed, 30.0)


def test_a_measured_plan_has_a_warm_run_before_the_search(tmp_path: Path) -> None:
    """The first planned scenario's oracle runs before the plan (it is cached:
    that scenario runs it anyway), so even with no probe run before it the
    plan is measured, and the estimate leaves out a first run when it has
    another."""
    settings = load_settings(
        "dev", seed=0, max_examples=3, budget_seconds=600, report_dir=str(tmp_path / "r")
    )
    engine = Engine(UpgradeToy("action"), settings)
    try:
        outcome = engine.run(probe_universe(engine.adapter))
    finally:
        engine.close()
    assert outcome.scenario_cost == "measured" and outcome.scenario_seconds is not None
    assert outcome.scenario_seconds == MEASURED_RUNS * engine.fault_free_seconds[0]
