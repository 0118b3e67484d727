"""Scenarios and helpers of the LangGraph tests (a uniquely named module)."""

from __future__ import annotations

from pathlib import Path

from scenario_support import engine as engine
from scenario_support import execute as execute
from scenario_support import failed as failed
from scenario_support import result as result
from scenario_support import verdicts as verdicts

from harness.adapters.langgraph import LangGraphAdapter
from harness.checkers import check_all
from harness.history import History
from harness.model import (
    Approve,
    ArmWorldFault,
    PropertyResult,
    Quiesce,
    RaceWorkers,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)
from harness.runner import run_scenario

NAIVE = "examples.langgraph_refund.naive:APP"
CORRECT = "examples.langgraph_refund.correct:APP"
ADAPTER = "harness.adapters.langgraph:LangGraphAdapter"

R1 = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)

#: The worker that resumes after the approval is killed right after the
#: payment service applied the refund; recovery follows.
KILL_AFTER_REFUND = Scenario(
    name="kill-after-refund",
    steps=(
        Submit(run=R1),
        RunWorker(worker_id="w0"),
        Approve(run_id="r1"),
        ArmWorldFault(service="payments", action="refund", mode="kill_after_apply"),
        RunWorker(worker_id="w1"),
        Quiesce(),
    ),
)

#: The worker ``w1`` resumes the approved run, with no fault armed: an
#: application of ``lg_kill_mid_write`` makes it kill itself; recovery follows.
RESUME_AFTER_APPROVAL = Scenario(
    name="resume-after-approval",
    steps=(
        Submit(run=R1),
        RunWorker(worker_id="w0"),
        Approve(run_id="r1"),
        RunWorker(worker_id="w1"),
        Quiesce(),
    ),
)

#: Two workers resume the approved run at once; the first is held 1 s inside
#: the refund, so the second reads the same checkpoint meanwhile.
CONCURRENT_RESUME = Scenario(
    name="concurrent-resume",
    steps=(
        Submit(run=R1),
        RunWorker(worker_id="w0"),
        Approve(run_id="r1"),
        # The first racer is held inside the refund long enough for the second
        # to start and read the same checkpoint even on a loaded machine (at
        # 1 s, a CI run once saw the second start after the first had left).
        ArmWorldFault(service="payments", action="refund", mode="slow", delay=3.0),
        RaceWorkers(worker_ids=("a0", "b0")),
        Quiesce(),
    ),
)

#: Code version 1 starts the run (it stops at the approval); the current
#: code, which renamed amount -> amount_cents, resumes it.
VERSION_SWITCH = Scenario(
    name="version-switch",
    steps=(Submit(run=R1), RunWorker(worker_id="v0", code_version=1), Quiesce()),
)


def adapter(
    app: str, checkpointer: str, postgres_url: str | None, durability: str | None = None
) -> LangGraphAdapter:
    return LangGraphAdapter(
        app=app, checkpointer=checkpointer, postgres_url=postgres_url, durability=durability
    )


def run_and_check(
    adapter: LangGraphAdapter, scenario: Scenario, workdir: Path, *properties: str
) -> tuple[History, dict[str, PropertyResult]]:
    """Run ``scenario`` alone (no oracle) and check ``properties`` that need none."""
    history = History.load(run_scenario(adapter, scenario, workdir).history_path)
    return history, {r.name: r for r in check_all(history, None, only=properties)}
