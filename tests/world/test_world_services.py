"""The four simulated services: keys, lookups, duplicates, records."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.world import (
    Caller,
    Capabilities,
    NotSupported,
    Rejected,
    RequestRecord,
    Response,
    ServiceCounts,
    World,
    WorldClient,
    WorldUsageError,
    open_world,
    request_hash,
)


def test_a_repeated_key_with_the_same_request_returns_the_first_response_deduplicated(
    world: World, client: WorldClient, caller: Caller
) -> None:
    first = client.call("payments", "charge", {"amount": 5}, idempotency_key="k1", caller=caller)
    again = client.call("payments", "charge", {"amount": 5}, idempotency_key="k1", caller=caller)

    assert first.deduplicated is False
    assert again == Response(first.external_ref, first.body, deduplicated=True)
    assert [r.outcome for r in world.requests()] == ["applied", "deduplicated"]
    assert len(world.effects()) == 1


def test_reusing_a_key_for_a_different_request_is_rejected_and_says_why(
    world: World, client: WorldClient, caller: Caller
) -> None:
    client.call("payments", "charge", {"amount": 5}, idempotency_key="k1", caller=caller)

    with pytest.raises(Rejected, match=r"idempotency key 'k1' was first used with a different"):
        client.call("payments", "charge", {"amount": 6}, idempotency_key="k1", caller=caller)

    last = world.requests()[-1]
    assert (last.outcome, last.applied, last.external_ref) == ("rejected", False, None)
    assert len(world.effects()) == 1


def test_idempotency_keys_are_scoped_per_tenant(world: World, client: WorldClient) -> None:
    a = client.call("payments", "charge", {"amount": 5}, idempotency_key="k", caller=Caller("ta"))
    b = client.call("payments", "charge", {"amount": 5}, idempotency_key="k", caller=Caller("tb"))

    assert a.external_ref != b.external_ref
    assert len(world.effects()) == 2


def test_payments_lookup_by_key_finds_the_first_response_or_none(
    client: WorldClient, caller: Caller
) -> None:
    first = client.call("payments", "charge", {"amount": 5}, idempotency_key="k1", caller=caller)

    assert client.lookup("payments", idempotency_key="k1", tenant="t1") == first
    assert client.lookup("payments", idempotency_key="k2", tenant="t1") is None
    assert client.lookup("payments", idempotency_key="k1", tenant="other") is None
    with pytest.raises(NotSupported, match="lookup by business key"):
        client.lookup("payments", business_key="order-1", tenant="t1")


def test_provisioning_has_no_keys_so_a_repeated_call_creates_a_second_account(
    world: World, client: WorldClient, caller: Caller
) -> None:
    req = {"plan": "pro"}
    one = client.call(
        "provisioning", "create_account", req, idempotency_key="k", business_key="cust-1",
        caller=caller,
    )  # fmt: skip
    two = client.call(
        "provisioning", "create_account", req, idempotency_key="k", business_key="cust-1",
        caller=caller,
    )  # fmt: skip

    # Refs name the logical request and count its applications: a real duplicate.
    assert one.external_ref.startswith("acct-") and one.external_ref.endswith("-1")
    assert two.external_ref == one.external_ref[:-1] + "2"
    assert not two.deduplicated
    assert [e.business_key for e in world.effects("provisioning")] == ["cust-1", "cust-1"]


def test_provisioning_lookup_by_business_key_finds_the_first_account(
    client: WorldClient, caller: Caller
) -> None:
    assert client.lookup("provisioning", business_key="cust-1", tenant="t1") is None
    one = client.call("provisioning", "create_account", {}, business_key="cust-1", caller=caller)
    client.call("provisioning", "create_account", {}, business_key="cust-1", caller=caller)

    assert client.lookup("provisioning", business_key="cust-1", tenant="t1") == one
    with pytest.raises(NotSupported):
        client.lookup("provisioning", idempotency_key="k", tenant="t1")


def test_email_has_no_lookup_and_every_send_is_a_real_effect(
    world: World, client: WorldClient, caller: Caller
) -> None:
    for _ in range(2):
        client.call("email", "send", {"to": "a@example.org"}, idempotency_key="k", caller=caller)

    assert client.capabilities("email") == Capabilities(False, False, False, True)
    with pytest.raises(NotSupported):
        client.lookup("email", idempotency_key="k", tenant="t1")
    with pytest.raises(NotSupported):
        client.lookup("email", business_key="k", tenant="t1")
    assert len(world.effects("email")) == 2


def test_identity_verify_is_recorded_but_is_not_an_effect(
    world: World, client: WorldClient, caller: Caller
) -> None:
    answer = client.call("identity", "verify", {"subject": "u1"}, caller=caller)

    assert answer.body["status"] == "verified"
    [record] = world.requests("identity")
    assert (record.outcome, record.applied) == ("applied", False)
    assert world.effects() == []


def test_lookup_needs_exactly_one_key_and_is_recorded_but_not_counted(
    world: World, client: WorldClient
) -> None:
    with pytest.raises(WorldUsageError, match="exactly one"):
        client.lookup("payments", tenant="t1")
    client.lookup("payments", idempotency_key="k", tenant="t1")

    assert [r.action for r in world.requests()] == ["lookup"]
    assert world.calls("payments") == 0
    assert world.summary()["payments"] == ServiceCounts()


def test_unknown_service_or_action_is_the_callers_mistake_and_names_the_choices(
    world: World, client: WorldClient, caller: Caller
) -> None:
    with pytest.raises(WorldUsageError, match=r"unknown service 'bank'.*payments"):
        client.call("bank", "charge", {}, caller=caller)
    with pytest.raises(WorldUsageError, match=r"no action 'send'.*charge, refund"):
        client.call("payments", "send", {}, caller=caller)
    assert world.requests() == []


def test_a_request_that_is_not_plain_json_is_refused_before_anything_is_recorded(
    world: World, client: WorldClient, caller: Caller
) -> None:
    with pytest.raises(WorldUsageError, match="not plain JSON"):
        client.call("email", "send", {"when": object()}, caller=caller)
    with pytest.raises(WorldUsageError, match="not plain JSON"):
        client.call("email", "send", {"x": float("nan")}, caller=caller)
    with pytest.raises(WorldUsageError, match="a request is a mapping"):
        client.call("email", "send", ["to", "x"], caller=caller)  # type: ignore[arg-type]
    assert world.requests() == []
    assert world.calls("email") == 0


def test_a_call_must_say_who_calls_exactly_once(client: WorldClient, caller: Caller) -> None:
    with pytest.raises(WorldUsageError, match="exactly one of caller= or context="):
        client.call("email", "send", {})
    with pytest.raises(WorldUsageError, match="exactly one of caller= or context="):
        client.call("email", "send", {}, caller=caller, context=caller)


@dataclass(frozen=True)
class _RuntimeContext:
    """Shaped like the reference runtime's CallContext, which the world cannot import."""

    tenant: str
    run_id: str
    op_id: str
    worker_id: str
    fencing_token: int


def test_every_record_carries_the_caller_keys_hash_and_clock_time(
    world: World, client: WorldClient
) -> None:
    ctx = _RuntimeContext("t9", "r9", "op9", "w9", 42)
    req = {"amount": 5, "currency": "EUR"}
    client.call("payments", "charge", req, idempotency_key="k", business_key="b", context=ctx)

    [r] = world.requests()
    assert (r.tenant, r.run_id, r.op_id, r.worker_id, r.fencing_token) == (
        "t9", "r9", "op9", "w9", 42,
    )  # fmt: skip
    assert (r.idempotency_key, r.business_key, r.request) == ("k", "b", req)
    canonical = json.dumps(req, sort_keys=True, separators=(",", ":"))
    assert r.request_hash == hashlib.sha256(canonical.encode()).hexdigest() == request_hash(req)
    assert r.at == 1_700_000_000.0
    logical = hashlib.sha256(f"t9\nr9\n{r.request_hash}".encode()).hexdigest()[:10]
    assert r.response == {
        "external_ref": f"pay-{logical}-1",
        "body": {"status": "succeeded", "external_ref": f"pay-{logical}-1"},
        "deduplicated": False,
    }


def test_the_same_scenario_gives_byte_identical_records_in_two_worlds(
    tmp_path: Path, clock: Callable[[], float]
) -> None:
    def scenario(name: str) -> str:
        world = World(tmp_path / name, clock=clock).create()
        client = world.client()
        who = Caller("t1", "r1")
        client.call("payments", "charge", {"amount": 1}, idempotency_key="a", caller=who)
        client.call("payments", "charge", {"amount": 1}, idempotency_key="a", caller=who)
        client.call("provisioning", "create_account", {}, business_key="c", caller=who)
        client.call("email", "send", {"to": "x"}, caller=who)
        records = [r.to_dict() | {"at": 0} for r in world.requests()]
        return json.dumps(records, sort_keys=True)

    assert scenario("one.db") == scenario("two.db")


def test_records_round_trip_through_their_tagged_dict_form(
    world: World, client: WorldClient, caller: Caller
) -> None:
    client.call("payments", "refund", {"charge": "pay-1"}, idempotency_key="k", caller=caller)
    [record] = world.requests()
    data = json.loads(json.dumps(record.to_dict()))

    assert data["type"] == "world.request"
    assert RequestRecord.from_dict(data) == record
    with pytest.raises(WorldUsageError, match="schema_version 99"):
        RequestRecord.from_dict(data | {"schema_version": 99})


def test_summary_counts_each_service_and_lists_those_never_called(
    world: World, client: WorldClient, caller: Caller
) -> None:
    client.call("payments", "charge", {"amount": 1}, idempotency_key="k", caller=caller)
    client.call("payments", "charge", {"amount": 1}, idempotency_key="k", caller=caller)
    with pytest.raises(Rejected):
        client.call("payments", "charge", {"amount": 2}, idempotency_key="k", caller=caller)

    summary = world.summary()
    assert list(summary) == ["email", "identity", "payments", "provisioning"]
    assert summary["payments"] == ServiceCounts(calls=3, applied=1, deduplicated=1, rejected=1)
    assert summary["email"] == ServiceCounts()


def test_a_world_is_created_once_and_must_exist_to_be_opened(tmp_path: Path) -> None:
    path = tmp_path / "w.db"
    with pytest.raises(WorldUsageError, match="create it first"):
        World(path).open()
    assert not path.exists()
    World(path).create()
    with pytest.raises(WorldUsageError, match="already exists"):
        World(path).create()
    assert World(path).open().requests() == []

    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    with pytest.raises(WorldUsageError, match="not a world file"):
        World(junk).open()


def test_open_world_takes_the_path_as_argument_or_from_the_environment(
    world: World, caller: Caller, monkeypatch: pytest.MonkeyPatch
) -> None:
    open_world(world.path).call("email", "send", {}, caller=caller)
    monkeypatch.setenv("HARNESS_WORLD_PATH", world.path)
    open_world(None).call("email", "send", {}, caller=caller)
    assert len(world.effects("email")) == 2

    monkeypatch.delenv("HARNESS_WORLD_PATH")
    with pytest.raises(WorldUsageError, match="HARNESS_WORLD_PATH"):
        open_world(None)
    with pytest.raises(WorldUsageError, match="create it first"):
        open_world(world.path + ".missing")
