"""Scenarios and helpers of the Prefect tests (a uniquely named module)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: every Prefect test module imports this first: skipped, with the reason, without Prefect
PREFECT = pytest.importorskip(
    "prefect", reason="prefect is not installed: pip install -e '.[prefect]'"
)

from scenario_support import execute as run_one  # noqa: E402
from scenario_support import result as result  # noqa: E402
from scenario_support import verdicts as verdicts  # noqa: E402

from harness import Engine, Example, load_settings  # noqa: E402
from harness.adapters.prefect import PrefectAdapter  # noqa: E402
from harness.model import (  # noqa: E402
    AdvanceClock,
    ArmWorldFault,
    ContinueWorker,
    CrashSpec,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)
from harness.outcome import Outcome  # noqa: E402
from harness.scenarios import Universe  # noqa: E402

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
    paused workers first). Five steps: the shrunk counterexample of
    :func:`zombie_schedule`."""
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


def zombie_schedule() -> Scenario:
    """The targeted schedule a ci search fails first (docs/findings.md): as
    :func:`zombie` at the first flow-run state, with z1 continued right
    before the quiesce -- six steps, one of which its failure does not need."""
    steps = zombie(1).steps
    return Scenario(
        name="targeted/refund/zombie_before/payments.refund/flow_state@1",
        steps=(*steps[:-1], ContinueWorker(worker_id="z1"), steps[-1]),
    )


def search(adapter: PrefectAdapter, regression: Scenario, workdir: Path) -> Outcome:
    """A search that runs ``regression`` first and stops at its failure:
    its counterexample shrunk as any search's is."""
    settings = load_settings(
        "dev", start=workdir, determinism_runs=1, targeted=False, max_examples=1,
        stop_on_first=True, report_dir=str(workdir / "report"),
    )  # fmt: skip
    universe = Universe(
        workflows=tuple(adapter.workflows()), crash_points=("flow_state",),
        pause_points=("flow_state",), capabilities=adapter.capabilities,
    )  # fmt: skip
    return Engine(adapter, settings, workdir=workdir).run(universe, [regression])


class Adapters:
    """A test's adapters, on the session's server (``api``: the
    ``prefect_api`` fixture), which none of them starts or stops; each is
    closed (its client) after the test (the ``prefect`` fixture)."""

    def __init__(self, api: str) -> None:
        self.api = api
        self.made: list[PrefectAdapter] = []

    def adapter(self, app: str, crash_detection: str = "exit") -> PrefectAdapter:
        """An adapter of ``examples.prefect_refund.<app>``."""
        spec = f"examples.prefect_refund.{app}:APP"
        made = PrefectAdapter(app=spec, crash_detection=crash_detection, api=self.api)
        self.made.append(made)
        return made

    def close(self) -> None:
        for made in self.made:
            made.close()


def owner() -> PrefectAdapter:
    """An adapter that starts a server of its own (the session's, unless
    HARNESS_PREFECT_URL names one you run)."""
    return PrefectAdapter(app="examples.prefect_refund.careful:APP")


def execute(adapter: PrefectAdapter, scenario: Scenario, workdir: Path) -> Example:
    """Run ``scenario`` and its fault-free oracle (once: the ci runs of
    docs/findings.md checked that two agree); check every property."""
    return run_one(adapter, scenario, workdir, determinism_runs=1)
