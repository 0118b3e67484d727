"""Scenarios and helpers of the OpenAI Agents SDK tests (a uniquely named module)."""

from __future__ import annotations

from pathlib import Path

from scenario_support import execute as run_one
from scenario_support import result as result
from scenario_support import verdicts as verdicts

from harness import Example
from harness.adapters.openai_agents import OpenAIAgentsAdapter
from harness.model import (
    ArmWorldFault,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)

ADAPTER = "harness.adapters.openai_agents:OpenAIAgentsAdapter"
NAIVE = "examples.openai_agents_refund.naive:APP"
CAREFUL = "examples.openai_agents_refund.careful:APP"

R1 = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)

#: The first worker is killed right after the payment service applied the
#: refund (the SDK has saved the user's message, not the tool call); recovery
#: follows. The minimal counterexample a search of the naive app shrinks to.
KILL_AFTER_REFUND = Scenario(
    name="kill-after-refund",
    steps=(
        Submit(run=R1),
        ArmWorldFault(service="payments", action="refund", mode="kill_after_apply"),
        RunWorker(worker_id="w0"),
        Quiesce(),
    ),
)


def execute(app: str, scenario: Scenario, workdir: Path) -> Example:
    """Run ``scenario`` on ``app`` and its fault-free oracle; check every property."""
    return run_one(OpenAIAgentsAdapter(app=app), scenario, workdir)
