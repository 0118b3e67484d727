"""Counterexamples a search once drew against the correct reference runtime,
kept as regression tests: each failed before its fix and must pass now."""

from __future__ import annotations

from pathlib import Path

from harness.adapters.reference import ReferenceAdapter
from harness.checkers import check_all
from harness.history import History
from harness.model import ArmWorldFault, Quiesce, RunSpec, RunWorker, Scenario, Submit
from harness.runner import run_scenario

TIDES = {"topic": "tides", "sources": 2, "requester": "u-1"}


def test_a_second_research_run_on_one_topic_leaves_the_first_run_s_context_alone(
    tmp_path: Path,
) -> None:
    """Seed 11 of the ci profile, 2026-11-29 (context_rebuild): r2 wrote the
    same evidence again as new versions while r1 waited to retry its email,
    so r1's context after the retry held other ids than the oracle's."""
    r1 = RunSpec(run_id="r1", tenant="globex", workflow="research", input=TIDES)
    r2 = RunSpec(run_id="r2", tenant="globex", workflow="research", input=TIDES, code_version=1)
    scenario = Scenario(
        name="shared-topic",
        steps=(
            Submit(run=r1),
            Submit(run=r2),
            ArmWorldFault(service="email", action="send", mode="reject"),
            RunWorker(worker_id="w0"),
            Quiesce(),
        ),
    )
    adapter = ReferenceAdapter()
    run = run_scenario(adapter, scenario, tmp_path / "run")
    oracle = run_scenario(adapter, scenario.fault_free(), tmp_path / "oracle")
    assert run.coverage.fired.get("world_fault") == 1  # the email was refused once
    results = {
        r.name: r
        for r in check_all(History.load(run.history_path), History.load(oracle.history_path))
    }
    assert results["context_rebuild"].verdict == "pass", results["context_rebuild"].message
    assert results["context_rebuild"].counts["matched"] >= 6
