"""The final quiesce of an adapter whose workers drain (``Adapter.drains``,
issue 33), or whose environment says nothing is ``runnable()`` now, ends
with the first worker that exits 0 with nothing delivered and no fault
fired: no extra worker started only to see that nothing moves. The same
runtime without either still gets that confirming worker, and both end in
the same state. Real worker processes, SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapters.reference import ReferenceAdapter, ReferenceEnvironment
from harness.history import History
from harness.model import ArmWorldFault, EventF, Quiesce, RunSpec, Scenario, Submit
from harness.runner import run_scenario

RESEARCH = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="research",
    input={"topic": "tides", "sources": 2, "requester": "u-1"},
)


class Undeclared(ReferenceAdapter):
    """The reference runtime, its workers' draining not declared."""

    drains = False


class Probed(Undeclared):
    """Undeclared, its environment answering ``runnable()`` from the store
    (a run not yet completed is runnable), or always True (``says``)."""

    says: bool | None = None

    def open(self, workdir: Path, *, seed: int) -> ReferenceEnvironment:
        env = super().open(workdir, seed=seed)
        store = env.d.runtime.store

        def runnable() -> bool:
            if self.says is not None:
                return self.says
            return any(run.status != "Completed" for run in store.list_runs())

        env.runnable = runnable  # type: ignore[attr-defined]
        return env


def quiesce_workers(history: History) -> list[str]:
    return [
        str(e.value["worker_id"])
        for e in history.by_f(EventF.WORKER)
        if e.type == "invoke" and str(e.value["worker_id"]).startswith("q")
    ]


def finals(history: History) -> list[tuple[str, str]]:
    return [(e.value["run_id"], e.value["state"]) for e in history.by_f(EventF.FINAL)]


def test_a_draining_worker_ends_the_quiesce_without_a_confirming_one(tmp_path: Path) -> None:
    scenario = Scenario(name="t", steps=(Submit(run=RESEARCH), Quiesce()))
    assert ReferenceAdapter.drains is True
    drained = History.load(run_scenario(ReferenceAdapter(), scenario, tmp_path / "d").history_path)
    undeclared = History.load(run_scenario(Undeclared(), scenario, tmp_path / "u").history_path)
    # one worker ran the run to its end; without the declaration a second
    # one had to start, find nothing and exit
    assert quiesce_workers(drained) == ["q0"]
    assert quiesce_workers(undeclared) == ["q0", "q1"]
    assert finals(drained) == finals(undeclared) == [("r1", "completed")]


def test_a_round_where_a_fault_fired_is_not_idle(tmp_path: Path) -> None:
    """A world fault that fires during a round is movement: the quiesce goes
    on even though that round's worker exited 0 (the run is left to retry).
    q0 is turned away by the fault; q1, though it only finds the run in its
    backoff, is still started (counting q0 idle would tick the clock and let
    q1 finish the run); q2 runs it after the scheduler's tick, and ends the
    quiesce: it drained."""
    scenario = Scenario(
        name="t",
        steps=(
            Submit(run=RESEARCH),
            ArmWorldFault(service="email", action="send", mode="reject"),
            Quiesce(),
        ),
    )
    history = History.load(run_scenario(ReferenceAdapter(), scenario, tmp_path / "f").history_path)
    assert quiesce_workers(history) == ["q0", "q1", "q2"]
    assert finals(history) == [("r1", "completed")]


@pytest.mark.parametrize(("says", "workers"), [(None, ["q0"]), (True, ["q0", "q1"])])
def test_nothing_runnable_ends_the_quiesce_without_a_confirming_worker(
    tmp_path: Path, says: bool | None, workers: list[str]
) -> None:
    scenario = Scenario(name="t", steps=(Submit(run=RESEARCH), Quiesce()))
    adapter = Probed()
    adapter.says = says
    history = History.load(run_scenario(adapter, scenario, tmp_path / "p").history_path)
    # the probe saw the run completed after q0: no q1, unless it says otherwise
    assert quiesce_workers(history) == workers
    assert finals(history) == [("r1", "completed")]
