"""Same scenario, same seed, same history: the premise of shrinking and replay."""

from __future__ import annotations

from pathlib import Path

from broken_runtime import BrokenAdapter

from harness.adapters.reference import ReferenceAdapter
from harness.model import (
    Approve,
    ArmWorldFault,
    CrashSpec,
    Event,
    EventF,
    Quiesce,
    RunSpec,
    RunWorker,
    Scenario,
    Submit,
)
from harness.runner import run_scenario

REFUND = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)
PROCUREMENT = RunSpec(
    run_id="r2", tenant="globex", workflow="procurement", input={"item": "bolts", "quantity": 3}
)

#: A crash before the approval, a duplicated approval, a crash right after the
#: refund reached the world, and recovery.
SCENARIO = Scenario(
    name="determinism",
    seed=7,
    steps=(
        Submit(run=REFUND),
        Submit(run=PROCUREMENT),
        RunWorker(worker_id="w1", crash=CrashSpec(site="after_step_commit", nth=1)),
        RunWorker(worker_id="w2"),
        Approve(run_id="r1", copies=2),
        RunWorker(worker_id="w3", crash=CrashSpec(site="after_external_call", nth=1)),
        Quiesce(),
    ),
)


def _events(path: Path) -> list[Event]:
    return [Event.model_validate_json(line) for line in path.read_text().splitlines()]


def test_one_scenario_run_twice_gives_byte_identical_histories(tmp_path: Path) -> None:
    adapter = ReferenceAdapter()
    # Folders of different lengths: no path may leak into the history.
    first = run_scenario(adapter, SCENARIO, tmp_path / "a")
    second = run_scenario(adapter, SCENARIO, tmp_path / "second-run" / "nested")
    assert first.coverage == second.coverage
    # The scenario did what it says, or the comparison would prove little.
    assert first.coverage.fired == {"crash_point": 2, "duplicate_message": 1, "lease_wait": 2}
    kinds = {e.f.value for e in _events(first.history_path)}
    assert {"effect", "transition", "deliver", "approval", "context", "final"} <= kinds
    assert first.history_path.read_bytes() == second.history_path.read_bytes()


def test_a_worker_s_effects_are_recorded_before_its_kill_and_the_lease_wait(
    tmp_path: Path,
) -> None:
    events = _events(run_scenario(ReferenceAdapter(), SCENARIO, tmp_path).history_path)
    refund = next(
        e for e in events if e.f is EventF.EFFECT and e.value["kind"] == "payments.refund"
    )
    kill = next(
        e
        for e in events
        if e.f is EventF.FAULT and e.value["kind"] == "crash_point" and e.value["worker_id"] == "w3"
    )
    lease_wait = next(
        e
        for e in events
        if e.f is EventF.FAULT and e.value["kind"] == "lease_wait" and e.index > kill.index
    )
    assert refund.index < kill.index < lease_wait.index
    # Virtual time: the effect is stamped before the supervisor waited out the lease.
    assert refund.time == refund.value["at"] < lease_wait.time


def test_the_broken_runtime_s_histories_are_reproducible_too(tmp_path: Path) -> None:
    run = RunSpec(
        run_id="r1",
        tenant="acme",
        workflow="pay",
        input={"customer_id": "c-1", "amount_cents": 500},
    )
    scenario = Scenario(
        steps=(
            Submit(run=run),
            ArmWorldFault(service="payments", action="charge", mode="kill_after_apply"),
            RunWorker(worker_id="w1"),
            Quiesce(),
        )
    )
    adapter = BrokenAdapter()
    a = run_scenario(adapter, scenario, tmp_path / "a")
    b = run_scenario(adapter, scenario, tmp_path / "bb")
    assert a.coverage.fired == {"effect_boundary": 1}
    assert a.history_path.read_bytes() == b.history_path.read_bytes()


def test_scenarios_with_one_workload_share_one_fault_free_run(tmp_path: Path) -> None:
    from harness import Engine, load_settings

    engine = Engine(ReferenceAdapter(), load_settings("dev"), workdir=tmp_path)
    renamed = SCENARIO.model_copy(update={"name": "another name"})
    fault_free = Scenario(
        name="no faults", seed=7, steps=(Submit(run=REFUND), Submit(run=PROCUREMENT), Quiesce())
    )
    reseeded = SCENARIO.model_copy(update={"seed": 8})
    paths = [engine.oracle(s) for s in (SCENARIO, renamed, fault_free, reseeded)]
    # The name does not change what runs; the seed may.
    assert paths[0] == paths[1] == paths[2] != paths[3]
    assert sorted(p.parent.name for p in tmp_path.glob("oracle-*/oracle.jsonl")) == [
        "oracle-0",
        "oracle-1",
    ]
