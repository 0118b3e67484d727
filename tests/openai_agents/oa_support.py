"""Scenarios and helpers of the OpenAI Agents SDK tests (a uniquely named module)."""

from __future__ import annotations

from pathlib import Path

from harness import Engine, Example, load_settings
from harness.adapters.openai_agents import OpenAIAgentsAdapter
from harness.model import (
    ArmWorldFault,
    PropertyResult,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
    Verdict,
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
    adapter = OpenAIAgentsAdapter(app=app)
    return Engine(adapter, load_settings("dev", start=workdir), workdir=workdir).execute(scenario)


def result(example: Example, name: str) -> PropertyResult:
    return next(r for r in example.results if r.name == name)


def verdicts(example: Example) -> dict[str, Verdict]:
    return {r.name: r.verdict for r in example.results}
