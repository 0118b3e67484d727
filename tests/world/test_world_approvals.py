"""The approvals authority signs decisions; forged ones must not verify."""

from __future__ import annotations

import hashlib
import hmac
import json

import pytest

from harness.world import ApprovalAuthority, WorldUsageError

KEYS = {"t1": b"secret-one", "t2": b"secret-two"}
ARGS = ("t1", "ap-1", "r1", "approved", "alice", "finance_manager", "ph-123")


def _hmac(key: bytes, payload: object) -> str:
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def test_a_decision_is_an_inbound_message_signed_with_the_tenants_key() -> None:
    message = ApprovalAuthority(KEYS).decision(*ARGS)

    assert message == {
        "message_id": "msg-000001",
        "tenant": "t1",
        "run_id": "r1",
        "kind": "approval_decision",
        "payload": {
            "approval_id": "ap-1",
            "approver": "alice",
            "decision": "approved",
            "params_hash": "ph-123",
            "role": "finance_manager",
            "run_id": "r1",
            "tenant": "t1",
        },
        "signature": _hmac(b"secret-one", message["payload"]),
    }
    assert message["signature"] != _hmac(b"secret-two", message["payload"])


def test_a_genuine_decision_verifies_and_a_forged_or_tampered_one_does_not() -> None:
    authority = ApprovalAuthority(KEYS)
    genuine = authority.decision(*ARGS)
    forged = authority.forge(*ARGS)
    tampered = genuine | {"payload": genuine["payload"] | {"params_hash": "ph-999"}}
    moved = genuine | {"tenant": "t2"}

    assert authority.verify(genuine)
    assert forged["payload"] == genuine["payload"]
    assert forged["signature"] != genuine["signature"]
    assert not authority.verify(forged)
    assert not authority.verify(tampered)
    assert not authority.verify(moved)
    assert not authority.verify(genuine | {"signature": None})


def test_message_ids_count_up_deterministically_unless_given() -> None:
    authority = ApprovalAuthority(KEYS, id_prefix="auth")
    ids = [
        authority.decision(*ARGS)["message_id"],
        authority.webhook("t1", "r1", "shipment", {"n": 1})["message_id"],
        authority.decision(*ARGS, message_id="mine")["message_id"],
        authority.forge(*ARGS)["message_id"],
    ]
    assert ids == ["auth-000001", "auth-000002", "mine", "auth-000003"]


def test_a_webhook_is_an_unsigned_event_message() -> None:
    message = ApprovalAuthority(KEYS).webhook("t2", "r7", "payment_settled", {"ref": "pay-1"})

    assert message == {
        "message_id": "msg-000001",
        "tenant": "t2",
        "run_id": "r7",
        "kind": "event",
        "payload": {"event_key": "payment_settled", "data": {"ref": "pay-1"}},
        "signature": None,
    }


def test_a_decision_for_an_unknown_tenant_or_with_a_bad_value_is_refused() -> None:
    authority = ApprovalAuthority(KEYS)
    with pytest.raises(WorldUsageError, match=r"no secret for tenant 't3'; .* t1, t2"):
        authority.decision("t3", "ap-1", "r1", "approved", "a", "role", "ph")
    with pytest.raises(WorldUsageError, match="decision must be one of approved, rejected"):
        authority.decision("t1", "ap-1", "r1", "maybe", "a", "role", "ph")
    with pytest.raises(WorldUsageError, match="non-empty bytes"):
        ApprovalAuthority({"t1": "text"})  # type: ignore[dict-item]
