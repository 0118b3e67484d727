"""Fault rules that do not kill: what each mode does and how rules are counted."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import time

import pytest

from harness.world import (
    LOOKUP,
    Caller,
    FaultRule,
    Rejected,
    Unknown,
    World,
    WorldClient,
    WorldUsageError,
)

CHARGE = {"amount": 5, "currency": "EUR"}


def test_reject_raises_rejected_applies_nothing_and_records_the_fault(
    world: World, client: WorldClient, caller: Caller
) -> None:
    rule_id = world.arm(FaultRule("payments", nth=1, mode="reject"))

    with pytest.raises(Rejected, match=r"injected fault: reject \(rule 1\)"):
        client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)

    [record] = world.requests()
    assert (record.outcome, record.applied, record.rule_id) == ("rejected", False, rule_id)
    [fired] = world.fired()
    assert (fired.rule_id, fired.mode, fired.nth, fired.request_seq) == (
        rule_id, "reject", 1, record.seq,
    )  # fmt: skip
    assert world.effects() == []


def test_timeout_before_apply_is_unknown_to_the_caller_but_applied_nothing(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("payments", nth=1, mode="timeout_before_apply"))

    with pytest.raises(Unknown) as info:
        client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)

    assert isinstance(info.value, TimeoutError)
    assert world.requests()[0].outcome == "unknown_not_applied"
    assert client.lookup("payments", idempotency_key="k", tenant="t1") is None
    retry = client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)
    assert not retry.deduplicated
    assert len(world.effects()) == 1


def test_apply_then_timeout_commits_the_effect_and_a_retry_with_the_key_is_deduplicated(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("payments", nth=1, mode="apply_then_timeout"))

    with pytest.raises(Unknown):
        client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)

    [record] = world.effects()
    assert record.outcome == "unknown_applied"
    assert record.external_ref is not None and record.external_ref.startswith("pay-")
    found = client.lookup("payments", idempotency_key="k", tenant="t1")
    assert found is not None and found.external_ref == record.external_ref
    retry = client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)
    assert (retry.external_ref, retry.deduplicated) == (record.external_ref, True)
    assert len(world.effects()) == 1


def test_apply_then_timeout_without_a_key_support_makes_a_retry_a_real_duplicate(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("email", nth=1, mode="apply_then_timeout"))
    with pytest.raises(Unknown):
        client.call("email", "send", {"to": "x"}, idempotency_key="k", caller=caller)
    client.call("email", "send", {"to": "x"}, idempotency_key="k", caller=caller)

    assert [e.outcome for e in world.effects("email")] == ["unknown_applied", "applied"]


def test_slow_waits_the_delay_then_applies_and_links_the_fault_to_the_request(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("email", nth=1, mode="slow", delay=0.05))

    started = time.monotonic()
    answer = client.call("email", "send", {"to": "x"}, caller=caller)

    assert time.monotonic() - started >= 0.05
    [record] = world.effects()
    assert (record.external_ref, record.outcome) == (answer.external_ref, "applied")
    [fired] = world.fired()
    assert (fired.mode, fired.request_seq) == ("slow", record.seq)


def test_a_rule_fires_once_on_its_nth_call_and_never_again(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("email", nth=2, mode="reject"))
    outcomes = []
    for _ in range(4):
        try:
            client.call("email", "send", {}, caller=caller)
            outcomes.append("ok")
        except Rejected:
            outcomes.append("rejected")

    assert outcomes == ["ok", "rejected", "ok", "ok"]
    assert [(r.rule.nth, r.fired) for r in world.rules()] == [(2, True)]
    assert len(world.fired()) == 1


def test_a_rule_with_an_action_counts_only_calls_of_that_action(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("payments", action="refund", nth=1, mode="reject"))
    world.arm(FaultRule("payments", nth=3, mode="timeout_before_apply"))

    client.call("payments", "charge", {"n": 1}, caller=caller)  # payments call 1
    with pytest.raises(Rejected):
        client.call("payments", "refund", {"n": 2}, caller=caller)  # refund 1, payments 2
    with pytest.raises(Unknown):
        client.call("payments", "charge", {"n": 3}, caller=caller)  # payments call 3

    assert [(f.action, f.nth, f.mode) for f in world.fired()] == [
        ("refund", 1, "reject"),
        ("*", 3, "timeout_before_apply"),
    ]
    assert (world.calls("payments"), world.calls("payments", "refund")) == (3, 1)


def test_when_two_rules_match_one_call_the_earliest_armed_fires_and_the_other_never_does(
    world: World, client: WorldClient, caller: Caller
) -> None:
    first = world.arm(FaultRule("email", nth=1, mode="reject"))
    world.arm(FaultRule("email", action="send", nth=1, mode="timeout_before_apply"))

    with pytest.raises(Rejected):
        client.call("email", "send", {}, caller=caller)
    client.call("email", "send", {}, caller=caller)

    assert [f.rule_id for f in world.fired()] == [first]
    assert [r.fired for r in world.rules()] == [True, False]


def test_arming_a_rule_whose_call_already_happened_is_refused(
    world: World, client: WorldClient, caller: Caller
) -> None:
    client.call("email", "send", {}, caller=caller)

    with pytest.raises(WorldUsageError, match=r"already had 1 call\(s\). Arm nth=2"):
        world.arm(FaultRule("email", nth=1, mode="reject"))
    with pytest.raises(WorldUsageError, match="no action 'charge'"):
        world.arm(FaultRule("email", action="charge", nth=5, mode="reject"))
    assert world.rules() == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nth": 1, "mode": "explode"}, "unknown fault mode 'explode'"),
        ({"nth": 0, "mode": "reject"}, "nth counts calls from 1"),
        ({"nth": 1, "mode": "slow", "delay": 60.0}, "slow delay must be within"),
        ({"nth": 1, "mode": "reject", "delay": 1.0}, "only means something with mode='slow'"),
    ],
)
def test_an_invalid_rule_is_refused_when_it_is_built(
    kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(WorldUsageError, match=message):
        FaultRule("payments", **kwargs)  # type: ignore[arg-type]


def _send_many(path: str, count: int, tenant: str) -> None:
    client = WorldClient(path)
    for i in range(count):
        with contextlib.suppress(Rejected):
            client.call("email", "send", {"i": i}, caller=Caller(tenant, worker_id=tenant))


def test_nth_counts_calls_of_all_processes_together(world: World, caller: Caller) -> None:
    ctx = multiprocessing.get_context("fork")
    world.arm(FaultRule("email", nth=3, mode="reject"))
    world.arm(FaultRule("email", nth=15, mode="reject"))

    child = ctx.Process(target=_send_many, args=(world.path, 2, "first"))
    child.start()
    child.join()
    assert child.exitcode == 0
    with pytest.raises(Rejected):  # the third call overall, made by another process
        world.client().call("email", "send", {}, caller=caller)

    racers = [ctx.Process(target=_send_many, args=(world.path, 10, f"w{i}")) for i in range(2)]
    for p in racers:
        p.start()
    for p in racers:
        p.join()
    assert [p.exitcode for p in racers] == [0, 0]

    assert world.calls("email") == 23
    assert [r.seq for r in world.requests()] == list(range(1, 24))
    fired = world.fired()
    assert [f.nth for f in fired] == [3, 15]
    assert fired[0].pid == os.getpid()
    assert fired[1].pid in {p.pid for p in racers}
    assert world.summary()["email"].rejected == 2


def test_an_after_apply_fault_on_a_reused_key_records_the_refusal_and_no_effect(
    world: World, client: WorldClient, caller: Caller
) -> None:
    client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)
    world.arm(FaultRule("payments", nth=2, mode="apply_then_timeout"))

    with pytest.raises(Unknown):
        client.call("payments", "charge", {"amount": 999}, idempotency_key="k", caller=caller)

    last = world.requests()[-1]
    assert (last.outcome, last.applied) == ("unknown_applied", False)
    assert last.error is not None and "first used with a different request" in last.error
    assert len(world.effects()) == 1


def test_unavailable_turns_the_call_away_like_a_rejection_and_names_its_mode(
    world: World, client: WorldClient, caller: Caller
) -> None:
    rule_id = world.arm(FaultRule("payments", nth=1, mode="unavailable"))

    with pytest.raises(Rejected, match=r"injected fault: unavailable \(rule 1\)"):
        client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)

    [record] = world.requests()
    assert (record.outcome, record.applied, record.rule_id) == ("rejected", False, rule_id)
    [fired] = world.fired()
    assert (fired.mode, fired.run_id, fired.request_seq) == ("unavailable", "r1", record.seq)
    assert world.effects() == []


def test_an_outage_is_one_rule_per_call_and_the_service_comes_back_after_it(
    world: World, client: WorldClient, caller: Caller
) -> None:
    for nth in (1, 2, 3):
        world.arm(FaultRule("payments", nth=nth, mode="unavailable"))

    for _ in range(3):
        with pytest.raises(Rejected):
            client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)
    response = client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)

    assert not response.deduplicated
    assert [f.nth for f in world.fired()] == [1, 2, 3]
    assert len(world.effects()) == 1


def test_a_lookup_rule_refuses_the_lookup_once_and_records_it_as_no_effect(
    world: World, client: WorldClient, caller: Caller
) -> None:
    client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)
    world.arm(FaultRule("payments", nth=1, mode="reject", action=LOOKUP))
    world.arm(FaultRule("payments", nth=2, mode="timeout_before_apply", action=LOOKUP))

    with pytest.raises(Rejected, match=r"injected fault: reject"):
        client.lookup("payments", idempotency_key="k", tenant="t1")
    with pytest.raises(Unknown):
        client.lookup("payments", idempotency_key="k", tenant="t1")
    found = client.lookup("payments", idempotency_key="k", tenant="t1")

    assert found is not None and found.external_ref.startswith("pay-")
    lookups = [r for r in world.requests() if r.action == LOOKUP]
    assert [(r.outcome, r.applied) for r in lookups] == [
        ("rejected", False),
        ("unknown_not_applied", False),
        ("applied", False),
    ]
    assert [(f.action, f.mode, f.nth) for f in world.fired()] == [
        (LOOKUP, "reject", 1),
        (LOOKUP, "timeout_before_apply", 2),
    ]
    assert world.calls("payments", LOOKUP) == 3
    assert world.calls("payments") == 1  # lookups are not calls
    assert len(world.effects()) == 1
    counts = world.summary()["payments"]
    assert (counts.calls, counts.rejected, counts.unknown) == (1, 0, 0)


def test_a_service_wide_rule_never_fires_on_a_lookup(
    world: World, client: WorldClient, caller: Caller
) -> None:
    world.arm(FaultRule("payments", nth=1, mode="reject"))
    assert client.lookup("payments", idempotency_key="k", tenant="t1") is None
    with pytest.raises(Rejected):
        client.call("payments", "charge", CHARGE, idempotency_key="k", caller=caller)


def test_a_lookup_rule_is_refused_for_a_mode_or_a_service_it_cannot_fire_on(
    world: World,
) -> None:
    for mode in ("apply_then_timeout", "kill_after_apply", "unavailable", "slow"):
        with pytest.raises(WorldUsageError, match="a lookup applies nothing"):
            FaultRule("payments", nth=1, mode=mode, action=LOOKUP)  # type: ignore[arg-type]
    with pytest.raises(WorldUsageError, match=r"'email' offers no lookup.*payments, provisioning"):
        world.arm(FaultRule("email", nth=1, mode="reject", action=LOOKUP))
    world.arm(FaultRule("provisioning", nth=1, mode="reject", action=LOOKUP))
