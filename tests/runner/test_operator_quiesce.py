"""The final quiesce answers for an operator: a run of the reference
runtime stopped at needs_operator (an at-most-once e-mail of unknown
outcome) is told what the world knows of the call, and moves on, the
e-mail applied exactly once either way. Real worker processes, SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapters._loading import load_adapter
from harness.checkers import check_all
from harness.history import History
from harness.model import (
    OPERATOR_ANSWER,
    ArmWorldFault,
    EventF,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
    Verdict,
)
from harness.runner import run_scenario

RESEARCH = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="research",
    input={"topic": "tides", "sources": 2, "requester": "u-1"},
)


@pytest.mark.parametrize(
    ("mode", "applied"), [("apply_then_timeout", True), ("timeout_before_apply", False)]
)
def test_a_run_waiting_for_an_operator_is_answered_from_the_world(
    mode: str, applied: bool, tmp_path: Path
) -> None:
    adapter = load_adapter("reference", {})
    scenario = Scenario(
        name="t",
        steps=(
            Submit(run=RESEARCH),
            ArmWorldFault(service="email", action="send", mode=mode),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )
    done = run_scenario(adapter, scenario, tmp_path / "faulted")
    oracle = run_scenario(adapter, scenario.fault_free(), tmp_path / "oracle")
    history = History.load(done.history_path)
    answers = [
        e
        for e in history.by_f(EventF.DELIVER)
        if e.type == "invoke" and e.value.get("variant") == OPERATOR_ANSWER
    ]
    assert [(a.value["waiting_on"], a.value["applied"]) for a in answers] == [
        ("operator:r1/send_report", applied)
    ]
    (final,) = [e for e in history.by_f(EventF.FINAL) if e.value["run_id"] == "r1"]
    assert final.value["state"] == "completed"
    sent = [e for e in history.by_f(EventF.EFFECT) if e.value.get("kind") == "email.send"]
    assert sum(1 for e in sent if e.value.get("applied")) == 1
    # what the operator said applied is not sent again; what it said was not, is
    assert len(sent) == (1 if applied else 2)
    results = {r.name: r for r in check_all(history, History.load(oracle.history_path))}
    failed = {n: r.message for n, r in results.items() if r.verdict is Verdict.FAIL}
    assert not failed
    assert results["resume_equivalence"].counts["needs_operator"] == 0
