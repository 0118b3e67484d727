"""Scenarios and helpers of the ADK tests (a uniquely named module)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: every ADK test module imports this first: skipped, with the reason, without ADK
ADK = pytest.importorskip(
    "google.adk", reason="google-adk is not installed: pip install -e '.[adk]'"
)

from scenario_support import execute as run_one  # noqa: E402
from scenario_support import result as result  # noqa: E402
from scenario_support import verdicts as verdicts  # noqa: E402

from harness import Example  # noqa: E402
from harness.adapters.adk import ADKAdapter  # noqa: E402
from harness.model import (  # noqa: E402
    ArmWorldFault,
    CrashSpec,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)

R1 = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)


def app(name: str) -> str:
    return f"examples.adk_refund.{name}:APP"


def world_fault(mode: str) -> Scenario:
    """The refund's first call meets ``mode``; then workers until nothing moves."""
    return Scenario(
        name=mode,
        steps=(
            Submit(run=R1),
            ArmWorldFault(service="payments", action="refund", mode=mode),
            RunWorker(worker_id="w0"),
            Quiesce(),
        ),
    )


#: killed right after the payments API applied the refund
KILL_AFTER_REFUND = world_fault("kill_after_apply")

#: killed after ADK stored the model's answer (the 4th event appended: the
#: user's message, the call, its response, the answer), before it stored
#: end_of_agent
KILL_BEFORE_END = Scenario(
    name="kill-before-end-of-agent",
    steps=(
        Submit(run=R1),
        RunWorker(worker_id="w0", crash=CrashSpec(site="event_appended", nth=4)),
        Quiesce(),
    ),
)


def execute(name: str, scenario: Scenario, workdir: Path) -> Example:
    """Run ``scenario`` on the app ``name`` and its fault-free oracle; check every property."""
    return run_one(ADKAdapter(app=app(name)), scenario, workdir)
