"""A user's invariant on the reference runtime: the view carries its ledger.

The reference runtime declares ``operations`` and ``durable_state``: an
invariant that needs them reads each run's ledger and durable state from
the view. On the correct runtime it holds, exercised; with a seeded bug it
stays quiet about what it does not judge (the built-in property that the
bug breaks fails, as always).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import harness


@harness.invariant(needs=("operations", "durable_state"))
def every_refund_is_in_its_runs_ledger(view: harness.ScenarioView) -> object:
    """Every refund the world applied is in its run's ledger, and no refund
    pays more than the run asked for."""
    judged = 0
    for effect in view.effects_of("payments.refund"):
        run = view.runs.get(effect.run_id or "")
        if run is None or run.operations is None:
            continue
        asked = run.input.get("amount_cents", run.input.get("amount"))
        if effect.request["amount_cents"] > asked:
            return harness.violated(f"run {run.run_id} refunded more than it asked", effect.event)
        kinds = [op["kind"] for op in run.operations]
        if run.state is harness.RunState.COMPLETED and "payments.refund" not in kinds:
            return harness.violated(f"run {run.run_id}'s ledger has no refund", effect.event)
        judged += 1
    return harness.held(judged, "" if judged else "no refund was applied")


@pytest.mark.slow
def test_an_invariant_needing_the_ledger_holds_on_the_reference_runtime(tmp_path: Path) -> None:
    report = harness.run(
        "reference",
        seed=0,
        max_examples=4,
        budget=60,
        properties=[every_refund_is_in_its_runs_ledger],
        report_dir=tmp_path / "report",
    )
    (mine,) = [p for p in report.properties if p.source == "run"]
    assert mine.verdict == "pass", mine
    assert mine.exercised > 0 and mine.needs == ["operations", "durable_state"]


def test_an_invariant_needing_what_the_adapter_lacks_is_not_tested(tmp_path: Path) -> None:
    report = harness.run(
        "examples.invariants.refund_desk:RefundDesk",
        seed=0,
        max_examples=1,
        budget=60,
        properties=[every_refund_is_in_its_runs_ledger],
        report_dir=tmp_path / "report",
    )
    (mine,) = [p for p in report.properties if p.source == "run"]
    assert mine.verdict == "not_tested"
    assert (
        mine.reason == "the adapter does not declare the operations and durable_state capabilities"
    )
    assert report.verdict != "fail"
