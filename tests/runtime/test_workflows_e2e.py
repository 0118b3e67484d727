"""Each workflow of the catalogue, end to end, with real worker processes."""

from __future__ import annotations

from collections import Counter

from harness.adapters.reference._deployment import Deployment
from reference_runtime import RunStatus
from reference_runtime._artifacts import ArtifactStore


def effects(d: Deployment) -> Counter[str]:
    return Counter(f"{e.service}.{e.action}" for e in d.world.effects())


def test_refund_waits_for_a_manager_then_refunds_once_and_notifies(deployment: Deployment) -> None:
    d = deployment
    d.submit(
        "refund",
        {"customer_id": "c1", "amount_cents": 1250, "currency": "EUR"},
        tenant="acme",
        run_id="r1",
    )
    assert d.run_worker("w1").code == 0
    snap = d.snapshot("r1")
    assert snap.run.status is RunStatus.WAITING_FOR_APPROVAL
    assert effects(d) == Counter()  # nothing is paid before the approval
    assert d.drive("r1") == "Completed"
    assert effects(d) == Counter({"payments.refund": 1, "email.notify": 1})
    (refund,) = d.world.effects("payments")
    assert refund.request == {"customer_id": "c1", "amount_cents": 1250, "currency": "EUR"}
    assert refund.tenant == "acme" and refund.run_id == "r1"


def test_onboarding_stores_the_contract_and_provisions_once(deployment: Deployment) -> None:
    d = deployment
    d.submit("onboarding", {"customer_id": "cust-9", "plan": "gold"}, tenant="acme", run_id="o1")
    assert d.drive("o1") == "Completed"
    assert effects(d) == Counter({"provisioning.create_account": 1, "email.notify": 1})
    state = d.snapshot("o1").state.payload
    contract = ArtifactStore(d.root / "artifacts").get(state["contract_uri"])
    assert b"cust-9" in contract and b"gold" in contract
    # the onboarding request's own key: a lookup finds this run's account only
    assert d.world.effects("provisioning")[0].business_key == "acme:cust-9:o1"


def test_research_accumulates_evidence_in_memory_and_sends_one_report(
    deployment: Deployment,
) -> None:
    d = deployment
    d.submit(
        "research", {"topic": "tides", "sources": 3, "requester": "u7"}, tenant="acme", run_id="q1"
    )
    assert d.drive("q1") == "Completed"
    memory = d.runtime.store.read_memory("acme", "research/tides", d.clock.now())
    keys = sorted(m.key for m in memory)
    assert keys == ["evidence-0", "evidence-1", "evidence-2", "summary"]
    summary = next(m for m in memory if m.key == "summary")
    assert len(summary.derived_from) == 3
    assert effects(d) == Counter({"email.send": 1})


def test_procurement_delegates_a_quote_to_a_child_run_and_pays_the_quote(
    deployment: Deployment,
) -> None:
    d = deployment
    d.submit("procurement", {"item": "bolts", "quantity": 4}, tenant="globex", run_id="p1")
    assert d.drive("p1") == "Completed"
    child = d.snapshot("p1.quote")
    assert child.run.parent_run_id == "p1"
    assert child.run.status is RunStatus.COMPLETED
    envelope = child.state.payload["_envelope"]
    assert envelope["parent_run_id"] == "p1" and envelope["child_run_id"] == "p1.quote"
    (charge,) = d.world.effects("payments")
    assert charge.request["amount_cents"] == child.state.payload["quote_cents"]
    assert charge.tenant == "globex"
