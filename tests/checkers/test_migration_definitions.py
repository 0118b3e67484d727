"""``migration_safety`` holds a run to the definition it started on, where
the adapter keeps definitions (``keeps_definitions``): the oracle then
submits the run to the older release that accepted it (a ``migration``
fault at ``submit`` in the oracle itself), and the steps the run went
through (its contexts' steps) must be the oracle's. An oracle that ran the
run on today's code from the start (no such fault) compares no steps: an
adapter that makes no such promise is judged as before."""

from __future__ import annotations

from typing import Any

from history_builder import CHARGE, H

from harness.checkers import check_migration_safety
from harness.model import EventF, Scenario, Verdict

DECL = {CHARGE: "exactly_once"}
OLD_STEPS = ("validate", "approval", "refund", "done")
NEW_STEPS = ("validate", "fraud_check", "approval", "refund", "done")


def _submitted_old(h: H) -> H:
    value: dict[str, Any] = {
        "kind": "migration",
        "fired": True,
        "code_version": 1,
        "runs": ["r1"],
        "at": "submit",
    }
    return h.add("info", EventF.FAULT, value, process="nemesis")


def _run(steps: tuple[str, ...], *, oracle_kept_release: bool) -> H:
    h = H().declaration(DECL)
    if oracle_kept_release:
        _submitted_old(h)
    h.submit("r1").effect("r1", CHARGE, "h1")
    for step in steps:
        h.context("r1", step, {"step": step})
    return h.final("r1", "completed", output={"ref": "pay-1"})


def _history(steps: tuple[str, ...]) -> H:
    # submitted by the older release, a worker of it ran first
    h = _submitted_old(H().declaration(DECL)).fault("migration", runs=["r1"])
    h.submit("r1").effect("r1", CHARGE, "h1")
    for step in steps:
        h.context("r1", step, {"step": step})
    return h.final("r1", "completed", output={"ref": "pay-1"})


def test_a_run_moved_to_another_definition_fails_against_its_release_oracle() -> None:
    oracle = _run(NEW_STEPS, oracle_kept_release=True).build()
    r = check_migration_safety(_history(OLD_STEPS).build(), oracle)
    assert r.verdict is Verdict.FAIL, r.message
    assert "skipped step(s) fraud_check the oracle took" in r.message
    r = check_migration_safety(
        _history(NEW_STEPS).build(), _run(OLD_STEPS, oracle_kept_release=True).build()
    )
    assert r.verdict is Verdict.FAIL, r.message
    assert "went through step(s) fraud_check the oracle never took" in r.message


def test_the_same_steps_pass_and_a_repeated_step_is_no_difference() -> None:
    oracle = _run(OLD_STEPS, oracle_kept_release=True).build()
    resumed = ("validate", "approval", "approval", "refund", "refund", "done")
    r = check_migration_safety(_history(resumed).build(), oracle)
    assert r.verdict is Verdict.PASS, r.message
    assert r.counts["steps_compared"] == 1 and r.counts["equivalent"] == 1


def test_an_oracle_on_todays_code_compares_no_steps() -> None:
    # the adapter does not keep definitions: today's oracle runs today's
    # definition, and a run on its older one is not a difference
    oracle = _run(NEW_STEPS, oracle_kept_release=False).build()
    r = check_migration_safety(_history(OLD_STEPS).build(), oracle)
    assert r.verdict is Verdict.PASS, r.message
    assert "steps_compared" not in r.counts


def test_the_oracle_keeps_the_older_release_only_when_asked() -> None:
    steps = [
        {
            "op": "submit",
            "run": {
                "run_id": "r1",
                "tenant": "acme",
                "workflow": "refund",
                "input": {"amount": 5},
                "code_version": 1,
            },
        },
        {"op": "run_worker", "worker_id": "v1", "code_version": 1},
    ]
    scenario = Scenario.model_validate({"name": "s", "steps": steps})
    today = scenario.fault_free(lambda run: {"amount_cents": 5})
    kept = scenario.fault_free(lambda run: {"amount_cents": 5}, keep_releases=True)
    assert [r.code_version for r in today.runs] == [None]
    assert [r.input for r in today.runs] == [{"amount_cents": 5}]
    assert [r.code_version for r in kept.runs] == [1]
    assert [r.input for r in kept.runs] == [{"amount": 5}]
