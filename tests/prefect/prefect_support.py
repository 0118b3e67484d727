"""Scenarios and helpers of the Prefect tests (a uniquely named module)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

#: every Prefect test module imports this first: skipped, with the reason, without Prefect
PREFECT = pytest.importorskip(
    "prefect", reason="prefect is not installed: pip install -e '.[prefect]'"
)

from scenario_support import execute as run_one  # noqa: E402
from scenario_support import result as result  # noqa: E402
from scenario_support import verdicts as verdicts  # noqa: E402

from harness import Example  # noqa: E402
from harness.adapters.prefect import PrefectAdapter  # noqa: E402
from harness.model import (  # noqa: E402
    AdvanceClock,
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

#: killed right after the payments API applied the refund; the next worker
#: finds the run RUNNING with its process gone, crashes and retries it
KILL_AFTER_REFUND = Scenario(
    name="kill_after_apply",
    steps=(
        Submit(run=R1),
        ArmWorldFault(service="payments", action="refund", mode="kill_after_apply"),
        RunWorker(worker_id="w0"),
        Quiesce(),
    ),
)

#: killed after the refund task completed, right before the flow run's
#: COMPLETED (its 2nd flow-run state: RUNNING, then COMPLETED)
KILL_BEFORE_COMPLETED = Scenario(
    name="kill-before-completed",
    steps=(
        Submit(run=R1),
        RunWorker(worker_id="w0", crash=CrashSpec(site="flow_state", nth=2)),
        Quiesce(),
    ),
)


def zombie(nth: int) -> Scenario:
    """Prefect 2's shape: z1 claims the run and stops at its ``nth`` flow-run
    state (1: before RUNNING), its heartbeat goes stale (91 s), w1 crashes,
    retries and completes the run, and the quiesce wakes z1 up (it continues
    paused workers first). Five steps: the zombie episode a search draws has
    a sixth, a ContinueWorker right before the quiesce, which changes
    nothing."""
    return Scenario(
        name=f"zombie-at-flow-state-{nth}",
        steps=(
            Submit(run=R1),
            RunWorker(worker_id="z1", crash=CrashSpec(site="flow_state", nth=nth, action="pause")),
            AdvanceClock(seconds=91.0),
            RunWorker(worker_id="w1"),
            Quiesce(),
        ),
    )


class Server:
    """One Prefect server for a module's adapters: starting one is most of a
    test's time. The first adapter starts it; each other shares it (its
    setup() then starts none); only the first is closed."""

    def __init__(self) -> None:
        self.first: PrefectAdapter | None = None

    def adapter(self, app: str, crash_detection: str = "exit") -> PrefectAdapter:
        spec = f"examples.prefect_refund.{app}:APP"
        made = PrefectAdapter(app=spec, crash_detection=crash_detection)
        if self.first is None:
            made.setup()
            self.first = made
        else:
            made.folder, made.client = self.first.folder, self.first.client
            made.api = made.args["api"] = self.first.api
        return made

    def close(self) -> None:
        """Close the first adapter: its server and its folder must be gone."""
        if self.first is not None and (folder := self.first.folder) is not None:
            self.first.close()
            assert all(p.poll() is not None for p in folder.processes), "the server outlived close"
            assert not folder.path.exists(), "its folder outlived close"


def server() -> Iterator[Server]:
    shared = Server()
    try:
        yield shared
    finally:
        shared.close()


def execute(adapter: PrefectAdapter, scenario: Scenario, workdir: Path) -> Example:
    """Run ``scenario`` and its fault-free oracle (once: the ci runs of
    docs/findings.md checked that two agree); check every property."""
    return run_one(adapter, scenario, workdir, determinism_runs=1)
