"""Approvals: authenticated, exact, re-checked right before the effect.

Every test pays attention to the world, where refunds are counted, and to the
audit trail, where an ignored decision must leave a reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from harness.adapters.reference._deployment import Deployment
from reference_runtime import MemoryRecord, Provenance, RunStatus

Factory = Callable[..., Deployment]

REFUND = {"customer_id": "c1", "amount_cents": 1250, "currency": "EUR", "approval_ttl": 60}


def refunds(d: Deployment) -> int:
    return len(d.world.effects("payments"))


def waiting(d: Deployment, run_id: str = "r1") -> Deployment:
    d.submit("refund", REFUND, tenant="acme", run_id=run_id)
    assert d.run_worker("w0").code == 0
    assert d.snapshot(run_id).run.status is RunStatus.WAITING_FOR_APPROVAL
    return d


def finish(d: Deployment, run_id: str = "r1") -> RunStatus:
    """Run workers (approving nothing) until the run stops moving."""
    for i in range(4):
        assert d.run_worker(f"fin{i}").code == 0
    return d.snapshot(run_id).run.status


def decision_for(d: Deployment, run_id: str = "r1", **overrides: Any) -> dict[str, Any]:
    snap = d.snapshot(run_id)
    (approval,) = snap.approvals
    fields: dict[str, Any] = {
        "tenant": snap.run.tenant,
        "approval_id": approval.approval_id,
        "run_id": run_id,
        "decision": "approved",
        "approver": "alice",
        "role": approval.approver_role,
        "params_hash": approval.params_hash,
        "message_id": "m-1",
    }
    fields.update(overrides)
    return fields


def ignored(d: Deployment, run_id: str = "r1") -> dict[str, str]:
    """message id -> reason, for each decision the run audited as ignored."""
    return {
        e.detail["message_id"]: e.detail["reason"]
        for e in d.runtime.store.audit(run_id)
        if e.action == "decision_ignored"
    }


def test_a_duplicated_approval_message_is_accepted_once_and_refunds_once(
    deployment: Deployment,
) -> None:
    d = waiting(deployment)
    message = d.approve("r1")
    assert d.deliver(message) is True
    assert d.deliver(message) is False  # same message_id: nothing changes
    assert len(d.snapshot("r1").pending_inbox) == 1
    assert finish(d) is RunStatus.COMPLETED
    assert refunds(d) == 1
    decisions = [e for e in d.runtime.store.audit("r1") if e.action == "decision"]
    assert len(decisions) == 1


def test_two_distinct_approvals_of_the_same_request_execute_the_refund_once(
    deployment: Deployment,
) -> None:
    d = waiting(deployment)
    assert d.deliver(d.approve("r1", message_id="m-alice", approver="alice"))
    assert d.deliver(d.approve("r1", message_id="m-bob", approver="bob"))
    assert finish(d) is RunStatus.COMPLETED
    assert refunds(d) == 1
    assert len(d.world.effects("email")) == 1
    (approval,) = d.snapshot("r1").approvals
    assert approval.approver == "alice"  # the first decision decided


def test_an_approval_that_expires_unanswered_cancels_the_run_without_a_refund(
    make_deployment: Factory,
) -> None:
    d = waiting(make_deployment("sqlite"))
    d.clock.advance(61)
    assert finish(d) is RunStatus.CANCELLED
    assert refunds(d) == 0
    assert [e.action for e in d.runtime.store.audit("r1")][-1] == "approval_expired"


def test_a_wait_reaching_exactly_its_expiry_does_not_spin_the_worker(
    make_deployment: Factory,
) -> None:
    d = waiting(make_deployment("sqlite"))
    d.clock.advance(60)  # the approval's expires_at, to the tick
    before = d.snapshot("r1").run
    assert d.run_worker("w1").code == 0
    after = d.snapshot("r1").run
    # A worker may end the wait or leave it alone, but must not claim the
    # run over and over while nothing changes.
    assert after.fencing_token - before.fencing_token <= 1
    assert after.status in (RunStatus.WAITING_FOR_APPROVAL, RunStatus.CANCELLED)
    assert refunds(d) == 0


def test_a_decision_arriving_after_the_expiry_is_ignored_and_cancels(
    make_deployment: Factory,
) -> None:
    d = waiting(make_deployment("sqlite"))
    message = d.approve("r1")
    d.clock.advance(61)
    assert d.deliver(message)
    assert finish(d) is RunStatus.CANCELLED
    assert refunds(d) == 0
    assert "after expiry" in ignored(d)[message["message_id"]]


def test_a_correctly_signed_decision_for_other_parameters_does_not_authorize(
    make_deployment: Factory,
) -> None:
    d = waiting(make_deployment("sqlite"))
    other = decision_for(d, params_hash="0" * 64)
    assert d.deliver(d.authority.decision(**other))
    assert finish(d) is RunStatus.WAITING_FOR_APPROVAL
    assert refunds(d) == 0
    assert "other parameters" in ignored(d)["m-1"]
    # The real decision still works afterwards.
    assert d.deliver(d.approve("r1", message_id="m-2"))
    assert finish(d) is RunStatus.COMPLETED
    assert refunds(d) == 1


def test_a_forged_signature_is_rejected_and_audited(make_deployment: Factory) -> None:
    d = waiting(make_deployment("sqlite"))
    assert d.deliver(d.authority.forge(**decision_for(d)))
    assert finish(d) is RunStatus.WAITING_FOR_APPROVAL
    assert refunds(d) == 0
    assert "invalid signature" in ignored(d)["m-1"]
    (approval,) = d.snapshot("r1").approvals
    assert approval.decision.value == "pending"


def test_a_decision_signed_for_another_tenant_is_rejected(make_deployment: Factory) -> None:
    d = waiting(make_deployment("sqlite"))
    # Signed with globex's real key but delivered as acme's: the signature
    # covers the tenant, so it does not verify under acme's key.
    message = d.authority.decision(**decision_for(d, tenant="globex"))
    message["tenant"] = "acme"
    assert d.deliver(message)
    assert finish(d) is RunStatus.WAITING_FOR_APPROVAL
    assert refunds(d) == 0
    assert "m-1" in ignored(d)


def test_a_decision_by_the_wrong_role_is_ignored(make_deployment: Factory) -> None:
    d = waiting(make_deployment("sqlite"))
    assert d.deliver(d.authority.decision(**decision_for(d, role="intern")))
    assert finish(d) is RunStatus.WAITING_FOR_APPROVAL
    assert refunds(d) == 0
    assert "requires role 'manager'" in ignored(d)["m-1"]


@pytest.mark.parametrize(
    "variant", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
@pytest.mark.parametrize(
    "site",
    [
        "before_intent_commit",  # the next worker decides the step again
        "after_intent_commit",  # the next worker reconciles, then would resend
    ],
)
def test_an_approval_that_expires_while_the_run_is_down_is_rechecked_before_the_refund(
    make_deployment: Factory, variant: str, site: str
) -> None:
    d = waiting(make_deployment(variant))
    assert d.deliver(d.approve("r1"))
    # The decision is committed, then the worker dies around the refund's
    # intent, before any call: the approval was valid when it was recorded.
    exit_ = d.run_worker("w1", crash=f"{site}=kill")
    assert exit_.killed
    snap = d.snapshot("r1")
    assert snap.run.status is RunStatus.RUNNING and snap.run.current_step == "refund"
    assert snap.approvals[0].decision.value == "approved"
    d.clock.advance(61)  # past the approval's expiry (and the dead worker's lease)
    assert finish(d) is RunStatus.CANCELLED
    assert refunds(d) == 0
    run = d.snapshot("r1").run
    assert run.error is not None and "expired" in run.error
    denied = [e for e in d.runtime.store.audit("r1") if e.action == "approval_denied"]
    assert len(denied) == 1 and "expired" in denied[0].detail["reason"]


def policy_record(
    d: Deployment, *, tenant: str, provenance: Provenance, trust: float, limit: int = 100_000
) -> MemoryRecord:
    now = d.clock.now()
    return MemoryRecord(
        tenant=tenant,
        created_at=now,
        updated_at=now,
        memory_id=f"{tenant}:policy:auto_approve_below_cents:{provenance.value}",
        namespace="policy",
        key="auto_approve_below_cents",
        value=limit,
        provenance=provenance,
        trust=trust,
    )


@pytest.mark.parametrize("trust", [0.2, 1.0], ids=["default-trust", "claims-full-trust"])
def test_user_supplied_memory_never_waives_the_approval(
    make_deployment: Factory, trust: float
) -> None:
    d = make_deployment("sqlite")
    d.runtime.store.put_memory(
        policy_record(d, tenant="acme", provenance=Provenance.USER_SUPPLIED, trust=trust)
    )
    waiting(d)
    assert refunds(d) == 0


def test_system_verified_memory_waives_the_approval(make_deployment: Factory) -> None:
    d = make_deployment("sqlite")
    d.runtime.store.put_memory(
        policy_record(d, tenant="acme", provenance=Provenance.SYSTEM_VERIFIED, trust=1.0)
    )
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    assert finish(d) is RunStatus.COMPLETED
    assert refunds(d) == 1
    assert d.snapshot("r1").approvals == ()


def test_another_tenants_system_verified_memory_is_not_used(make_deployment: Factory) -> None:
    d = make_deployment("sqlite")
    d.runtime.store.put_memory(
        policy_record(d, tenant="globex", provenance=Provenance.SYSTEM_VERIFIED, trust=1.0)
    )
    waiting(d)
    assert refunds(d) == 0
