"""The final quiesce of an adapter whose workers drain (``Adapter.drains``,
issue 33), or whose environment says nothing is ``runnable()`` now, ends
with the first worker that exits 0 with nothing delivered and no fault
fired: no extra worker started only to see that nothing moves. A round
that begins with nothing runnable starts no worker at all. The same
runtime without either still gets those workers, and both end in the
same state. Real worker processes, SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapters.reference import ReferenceAdapter, ReferenceEnvironment
from harness.history import History
from harness.model import ArmWorldFault, EventF, Quiesce, RunSpec, RunWorker, Scenario, Submit
from harness.runner import run_scenario

RESEARCH = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="research",
    input={"topic": "tides", "sources": 2, "requester": "u-1"},
)


class Unprobed(ReferenceAdapter):
    """The reference runtime, its environment without ``runnable()``."""

    def open(self, workdir: Path, *, seed: int) -> ReferenceEnvironment:
        env = super().open(workdir, seed=seed)
        env.runnable = None  # type: ignore[assignment,method-assign]
        return env


class Undeclared(Unprobed):
    """The reference runtime without ``runnable()``, its workers' draining
    not declared."""

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
    q0 is turned away by the fault; the next round, which finds the run in
    its backoff (nothing runnable), starts no worker and ticks the clock; q1
    runs the run and ends the quiesce: it drained. Without ``runnable()``,
    that round's worker (q1) is started to find nothing, and q2 runs it."""
    scenario = Scenario(
        name="t",
        steps=(
            Submit(run=RESEARCH),
            ArmWorldFault(service="email", action="send", mode="reject"),
            Quiesce(),
        ),
    )
    history = History.load(run_scenario(ReferenceAdapter(), scenario, tmp_path / "f").history_path)
    assert quiesce_workers(history) == ["q0", "q1"]
    ticks = [e.index for e in history.by_f(EventF.NOTE) if e.value["text"] == "scheduler tick"]
    q1 = next(e.index for e in history.by_f(EventF.WORKER) if e.value["worker_id"] == "q1")
    assert len(ticks) == 1 and ticks[0] < q1
    unprobed = History.load(run_scenario(Unprobed(), scenario, tmp_path / "u").history_path)
    assert quiesce_workers(unprobed) == ["q0", "q1", "q2"]
    assert finals(history) == finals(unprobed) == [("r1", "completed")]


def test_a_quiesce_with_nothing_runnable_starts_no_worker(tmp_path: Path) -> None:
    """The run is finished before the quiesce: the reference environment
    says nothing is runnable, so no worker starts; without ``runnable()``
    one starts, finds nothing and exits."""
    scenario = Scenario(
        name="t", steps=(Submit(run=RESEARCH), RunWorker(worker_id="w1"), Quiesce())
    )
    history = History.load(run_scenario(ReferenceAdapter(), scenario, tmp_path / "r").history_path)
    unprobed = History.load(run_scenario(Unprobed(), scenario, tmp_path / "u").history_path)
    assert quiesce_workers(history) == []
    assert quiesce_workers(unprobed) == ["q0"]
    assert finals(history) == finals(unprobed) == [("r1", "completed")]


def test_the_reference_environment_says_what_is_runnable(tmp_path: Path) -> None:
    """``runnable()`` from the store at the deployment's clock: a submitted
    run is runnable, a completed one is not; with a Redis queue, no promise."""
    adapter = ReferenceAdapter()
    env = adapter.open(tmp_path / "e", seed=0)
    try:
        assert env.runnable() is False
        env.submit(RESEARCH)
        assert env.runnable() is True
        assert env.start_worker("w1").wait(60).code == 0
        assert [r.state.value for r in env.observe().runs] == ["completed"]
        assert env.runnable() is False
    finally:
        env.close()


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
