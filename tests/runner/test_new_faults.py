"""The faults the targeted schedules added fire on a real runtime: a
persistent outage (and the runs it turned away are named, so a run that
rightly gives up is not a divergence), memory versions arriving out of
order, memory that lapses as the clock moves, and workers released together
from a barrier. Each runs the reference runtime for real (worker processes,
SQLite files), with its fault-free oracle, and is judged by the checkers."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness.adapters._loading import load_adapter
from harness.adapters.reference._adapter import ReferenceEnvironment
from harness.checkers import check_all
from harness.history import History
from harness.model import (
    AdvanceClock,
    Approve,
    ArmWorldFault,
    CrashSpec,
    EventF,
    InjectMemory,
    PropertyResult,
    Quiesce,
    ReleaseWorkers,
    RunSpec,
    RunWorker,
    Scenario,
    Step,
    Submit,
    Verdict,
)
from harness.runner import run_scenario
from harness.scenarios import profile_workflow

ADAPTER = load_adapter("reference", {})
REFUND = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="refund",
    input={"customer_id": "c-1", "amount_cents": 1250, "currency": "EUR"},
)
RESEARCH = RunSpec(
    run_id="r1",
    tenant="acme",
    workflow="research",
    input={"topic": "tides", "sources": 2, "requester": "u-1"},
)


def run(tmp: Path, run_spec: RunSpec, *steps: Step) -> tuple[History, dict[str, PropertyResult]]:
    scenario = Scenario(name="t", steps=(Submit(run=run_spec), *steps, Quiesce()))
    done = run_scenario(ADAPTER, scenario, tmp / "faulted")
    oracle = run_scenario(ADAPTER, scenario.fault_free(), tmp / "oracle")
    history = History.load(done.history_path)
    results = check_all(history, History.load(oracle.history_path))
    return history, {r.name: r for r in results}


def test_a_persistent_outage_makes_the_run_give_up_and_names_it(tmp_path: Path) -> None:
    history, results = run(
        tmp_path,
        REFUND,
        ArmWorldFault(service="payments", mode="unavailable", calls=32),
        RunWorker(worker_id="w1"),
    )
    turned_away = [e for e in history.faults("outage") if e.value.get("mode") == "unavailable"]
    assert len(turned_away) > 1  # retried, then gave up: several calls hit the outage
    [named] = [e for e in history.faults("outage") if "runs" in e.value]
    assert named.value["runs"] == ["r1"] and named.value["services"] == ["payments"]
    assert history.finals()["r1"].value["state"] == "failed"
    # it gave up where its workflow says it does (retry_limit), no later
    limit = named.value["retry_limits"]["r1"]
    assert 1 < named.value["refused"]["r1"]["payments"] <= limit
    assert results["progress"].verdict is Verdict.PASS, results["progress"].message
    assert results["progress"].counts["retry_limits_checked"] == 1
    # the oracle completed it; giving up during an outage is no divergence
    for name in ("resume_equivalence", "state_equivalence"):
        assert results[name].verdict is Verdict.PASS, results[name].message
        assert results[name].counts["excluded_by_fault"] == 1


def test_a_newer_memory_version_landing_first_does_not_make_the_older_current(
    tmp_path: Path,
) -> None:
    history, results = run(
        tmp_path,
        RESEARCH,
        InjectMemory(
            tenant="acme",
            namespace="research/tides",
            key="evidence-9",
            value={"claim": "c"},
            kind="stale_reordered",
            provenance="system_verified",
        ),
        RunWorker(worker_id="w1"),
    )
    [planted] = history.by_f(EventF.MEMORY)
    assert (planted.value["kind"], planted.value["arrival"]) == ("stale", "late")
    older = planted.value["memory_id"]
    read = {m for c in history.by_f(EventF.CONTEXT) for m in c.value.get("memory_ids") or []}
    assert older[:-1] + "2" in read  # the newer version reached the run...
    assert older not in read  # ...and the older one, arriving last, never did
    assert results["memory_safety"].verdict is Verdict.PASS
    assert results["memory_safety"].evidence > 0


def test_a_record_that_lapses_as_the_clock_moves_is_not_read(tmp_path: Path) -> None:
    history, results = run(
        tmp_path,
        RESEARCH,
        InjectMemory(
            tenant="acme",
            namespace="research/tides",
            key="evidence-9",
            value={"claim": "c"},
            kind="expired",
            provenance="system_verified",
            expires_in=10.0,
        ),
        AdvanceClock(seconds=31.0),
        RunWorker(worker_id="w1"),
    )
    [planted] = history.by_f(EventF.MEMORY)
    read = {m for c in history.by_f(EventF.CONTEXT) for m in c.value.get("memory_ids") or []}
    assert planted.value["expires_at"] > history.events[0].time  # live when planted
    assert planted.value["memory_id"] not in read
    assert results["memory_safety"].verdict is Verdict.PASS


def test_workers_held_at_one_crash_point_are_released_together(tmp_path: Path) -> None:
    refund = next(w for w in ADAPTER.workflows() if w.name == "refund")
    site, nth = profile_workflow(ADAPTER, refund, effects=False).rounds[0][0]
    history, results = run(
        tmp_path,
        REFUND,
        RunWorker(worker_id="b1", crash=CrashSpec(site=site, nth=nth, action="pause")),
        RunWorker(worker_id="b2", crash=CrashSpec(site=site, nth=nth, action="pause")),
        ReleaseWorkers(worker_ids=("b1", "b2")),
    )
    [race] = history.faults("race")
    assert race.value["fired"] is True and race.value["workers"] == ["b1", "b2"]
    exits = [
        e.value["worker_id"]
        for e in history.by_f(EventF.WORKER)
        if e.type == "ok" and e.value["worker_id"] in ("b1", "b2")
    ]
    assert sorted(exits) == ["b1", "b2"]
    assert history.finals()["r1"].value["state"] == "completed"
    bad = {n: r.message for n, r in results.items() if r.verdict is Verdict.FAIL}
    assert not bad


def test_a_kill_right_after_a_hand_off_commit_fires_and_the_runs_recover(tmp_path: Path) -> None:
    env = ADAPTER.open(tmp_path / "probe", seed=0)
    try:
        in_txn = frozenset(env.crash_points()) - frozenset(env.pause_points())
    finally:
        env.close()
    flows = {w.name: w for w in ADAPTER.workflows()}
    # procurement delegates to a child run and waits for its result; refund
    # hands nothing to another run
    commits = profile_workflow(ADAPTER, flows["procurement"], effects=False).commits(in_txn)
    handoffs = [c for c in commits if c.handoff]
    assert len(handoffs) == 2  # the child spawned; the child's result delivered
    refund = profile_workflow(ADAPTER, flows["refund"], effects=False).commits(in_txn)
    assert refund and not [c for c in refund if c.handoff]
    last = handoffs[-1]
    assert last.after is not None and last.round == 0
    spec = RunSpec(
        run_id="r1", tenant="acme", workflow="procurement", input={"item": "bolts", "quantity": 3}
    )
    history, results = run(
        tmp_path,
        spec,
        RunWorker(worker_id="w1", crash=CrashSpec(site=last.after[0], nth=last.after[1])),
    )
    [crash] = history.faults("crash_point")
    assert crash.value["fired"] is True
    assert history.finals()["r1"].value["state"] == "completed"
    bad = {n: r.message for n, r in results.items() if r.verdict is Verdict.FAIL}
    assert not bad


PROCUREMENT = RunSpec(
    run_id="r1", tenant="acme", workflow="procurement", input={"item": "bolts", "quantity": 3}
)
#: the parent's worker killed right after the commit that starts its wait
WAITING = RunWorker(worker_id="w1", crash=CrashSpec(site="after_step_commit", nth=2))
CROSS = Approve(run_id="r1", variant="cross_tenant", decision="opposite")


def _cross_faults(history: History) -> list[dict[str, object]]:
    return [e.value for e in history.faults("cross_tenant_message")]


def test_another_tenants_decision_and_event_name_the_run_and_move_nothing(
    tmp_path: Path,
) -> None:
    # The decision: genuinely signed, by globex's approver, for acme's run.
    history, results = run(tmp_path / "d", REFUND, RunWorker(worker_id="w1"), CROSS)
    assert [f["sent_as"] for f in _cross_faults(history)] == ["globex"]
    sent = [e.value for e in history.by_f(EventF.DELIVER) if e.type == "invoke"]
    assert (sent[0]["variant"], sent[0]["tenant"], sent[0]["run_tenant"]) == (
        "cross_tenant",
        "globex",
        "acme",
    )
    assert sent[0]["kind"] == "approval_decision"
    assert {r.verdict for r in results.values()} == {Verdict.PASS}, results
    # The event the parent waits on (its child's quote), sent by globex.
    history, results = run(tmp_path / "e", PROCUREMENT, WAITING, CROSS)
    assert [f["sent_as"] for f in _cross_faults(history)] == ["globex"]
    sent = [e.value for e in history.by_f(EventF.DELIVER) if e.type == "invoke"]
    assert sent[0]["kind"] == "event" and sent[0]["tenant"] == "globex"
    assert history.finals()["r1"].value["state"] == "completed"
    assert {r.verdict for r in results.values()} == {Verdict.PASS}, results


def test_an_environment_that_makes_no_event_message_leaves_it_not_fired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delattr(ReferenceEnvironment, "event_message")
    history, _ = run(tmp_path, PROCUREMENT, WAITING, CROSS)
    (fault,) = _cross_faults(history)
    assert fault["fired"] is False and "event_message" in str(fault["reason"])
    assert not [e for e in history.by_f(EventF.DELIVER) if e.type == "invoke"]


MISDIRECTED = Approve(run_id="r1", variant="misdirected", decision="opposite", signed_for="r2")


def test_a_decision_signed_for_the_twins_approval_is_addressed_to_the_run(
    tmp_path: Path,
) -> None:
    rejected = REFUND.model_copy(update={"decision": "rejected"})
    twin = Submit(run=REFUND.model_copy(update={"run_id": "r2"}))
    history, results = run(tmp_path / "d", rejected, twin, RunWorker(worker_id="w1"), MISDIRECTED)
    (fault,) = [e.value for e in history.faults("misdirected_message")]
    assert (fault["fired"], fault["run_id"], fault["signed_for"]) == (True, "r1", "r2")
    sent = [e.value for e in history.by_f(EventF.DELIVER) if e.type == "invoke"]
    # r2's approver's genuine approval (its approval id, signed), for r1
    assert (sent[0]["run_id"], sent[0]["approval_id"], sent[0]["variant"]) == (
        "r1",
        "r2:refund",
        "misdirected",
    )
    assert (sent[0]["decision"], sent[0]["tenant"]) == ("approved", "acme")
    # the runtime refuses it: r1 ends as its approver decides
    assert history.finals()["r1"].value["state"] == "cancelled"
    assert history.finals()["r2"].value["state"] == "completed"
    assert {r.verdict for r in results.values()} == {Verdict.PASS}, results
    # a run that waits for no approval: nothing to misdirect, said
    history, _ = run(
        tmp_path / "n",
        REFUND,
        Submit(run=RESEARCH.model_copy(update={"run_id": "r2"})),
        RunWorker(worker_id="w1"),
        MISDIRECTED,
    )
    (fault,) = [e.value for e in history.faults("misdirected_message")]
    assert fault["fired"] is False and "waits for no approval" in str(fault["reason"])
    assert not [
        e
        for e in history.by_f(EventF.DELIVER)
        if e.type == "invoke" and e.value["variant"] == "misdirected"
    ]


def test_a_key_whose_newest_version_lapsed_is_absent_not_its_older_version(
    tmp_path: Path,
) -> None:
    history, results = run(
        tmp_path,
        RESEARCH,
        InjectMemory(
            tenant="acme",
            namespace="research/tides",
            key="evidence-9",
            value={"claim": "c"},
            kind="lapsed_newest",
            provenance="system_verified",
        ),
        RunWorker(worker_id="w1"),
    )
    # recorded as what it is to a reader: the live older version, superseded
    [planted] = history.by_f(EventF.MEMORY)
    assert (planted.value["kind"], planted.value["newest"]) == ("stale", "expired")
    assert planted.value["expires_at"] is None
    older = planted.value["memory_id"]
    read = {m for c in history.by_f(EventF.CONTEXT) for m in c.value.get("memory_ids") or []}
    assert not {older, older[:-1] + "2"} & read  # neither version answers for the key
    # the key is absent, as in the oracle: the run is compared with it
    (fault,) = history.faults("memory")
    assert fault.value["runs"] == []
    assert {r.verdict for r in results.values()} == {Verdict.PASS}, results
    assert results["memory_safety"].evidence > 0


def test_a_key_whose_newest_version_only_a_user_supplied_never_reads_the_older(
    tmp_path: Path,
) -> None:
    history, results = run(
        tmp_path,
        RESEARCH,
        InjectMemory(
            tenant="acme",
            namespace="research/tides",
            key="evidence-9",
            value={"claim": "c"},
            kind="untrusted_newest",
            provenance="system_verified",
        ),
        RunWorker(worker_id="w1"),
    )
    [planted, newer] = history.by_f(EventF.MEMORY)
    assert (planted.value["kind"], planted.value["newest"]) == ("stale", "user_supplied")
    older = planted.value["memory_id"]
    # the newer version is recorded too, with the trust the harness gave it
    assert newer.value["memory_id"] == older[:-1] + "2"
    assert (newer.value["kind"], newer.value["provenance"]) == ("untrusted", "user_supplied")
    assert newer.value["trust"] == 0.0
    read = {m for c in history.by_f(EventF.CONTEXT) for m in c.value.get("memory_ids") or []}
    # research reads at trust 0: the user's newer version answers, never the older
    assert older[:-1] + "2" in read and older not in read
    # a record the run may read: named, so its outcome is not held to the oracle's
    (fault,) = history.faults("memory")
    assert fault.value["runs"] == ["r1"]
    assert {r.verdict for r in results.values()} == {Verdict.PASS}, results
