"""Rolling deploys: runs outlive the code version that started them.

Code v1 knows refund payload v1 (``amount``); code v2 renamed it to
``amount_cents`` and added ``currency`` (default "USD"). A v2 worker must
continue a v1 run; a v1 worker must refuse -- park, untouched -- a v2 run.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from harness.adapters.reference._deployment import Deployment
from reference_runtime import RunStatus, Runtime

Factory = Callable[..., Deployment]

VARIANTS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


def submit_v1(d: Deployment, run_id: str = "r1") -> None:
    with Runtime(d.config.with_(code_version=1), clock=d.clock) as v1:
        v1.submit("refund", {"customer_id": "c1", "amount": 1250}, tenant="acme", run_id=run_id)


def raw_state(d: Deployment, run_id: str) -> str:
    """The working state exactly as the store holds it."""
    return d.snapshot(run_id).state.model_dump_json()


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_run_started_by_code_v1_finishes_under_v2_with_its_payload_migrated(
    make_deployment: Factory, variant: str
) -> None:
    d = make_deployment(variant)
    submit_v1(d)
    assert d.run_worker("old", code_version=1).code == 0
    snap = d.snapshot("r1")
    assert snap.run.status is RunStatus.WAITING_FOR_APPROVAL
    assert snap.run.definition_version == 1
    assert snap.state.payload_version == 1 and snap.state.payload["amount"] == 1250
    # The approver decides on what the v1 worker asked for.
    assert d.deliver(d.approve("r1"))
    for i in range(3):
        assert d.run_worker(f"new{i}", code_version=2).code == 0
    snap = d.snapshot("r1")
    assert snap.run.status is RunStatus.COMPLETED, (snap.run, d.runtime.store.audit("r1")[-3:])
    assert snap.run.definition_version == 1  # no fraud_check inserted under a running run
    assert snap.state.payload_version == 2
    assert snap.state.payload["amount_cents"] == 1250
    assert snap.state.payload["currency"] == "USD"
    assert "amount" not in snap.state.payload
    (refund,) = d.world.effects("payments")
    assert refund.request == {"customer_id": "c1", "amount_cents": 1250, "currency": "USD"}
    assert len(d.world.effects("email")) == 1


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_v2_run_read_by_a_v1_worker_is_parked_untouched_until_unparked(
    make_deployment: Factory, variant: str
) -> None:
    d = make_deployment(variant)
    d.submit(
        "refund",
        {"customer_id": "c1", "amount_cents": 700, "currency": "EUR"},
        tenant="acme",
        run_id="r2",
    )
    before = raw_state(d, "r2")
    assert d.run_worker("old", code_version=1).code == 0
    run = d.snapshot("r2").run
    assert run.error is not None
    assert "schema_version 2" in run.error and "refund" in run.error
    assert "newer worker" in run.error  # says how to get out of it
    assert raw_state(d, "r2") == before
    assert d.world.requests() == []
    parked = [e for e in d.runtime.store.audit("r2") if e.action == "parked"]
    assert len(parked) == 1

    # Parked means off the queue: neither version claims it again, and a
    # worker finds nothing to do (it exits on its own, within run_worker's
    # timeout). How long that takes is benchmarks/parked_runs.py's business.
    token = run.fencing_token
    assert "r2" not in d.runtime.store.runnable(d.clock.now(), limit=100)
    assert d.run_worker("old2", code_version=1).code == 0
    assert d.run_worker("new-too-early", code_version=2).code == 0
    again = d.snapshot("r2")
    assert again.run.fencing_token == token
    assert again.run.state_version == run.state_version
    assert raw_state(d, "r2") == before
    assert [e.action for e in d.runtime.store.audit("r2")].count("parked") == 1

    assert d.runtime.unpark("r2") is True
    assert d.runtime.unpark("r2") is False
    assert d.drive("r2") == "Completed"
    (refund,) = d.world.effects("payments")
    assert refund.request == {"customer_id": "c1", "amount_cents": 700, "currency": "EUR"}


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_payload_migrated_by_v2_is_parked_by_a_rolled_back_v1_worker(
    make_deployment: Factory, variant: str
) -> None:
    d = make_deployment(variant)
    submit_v1(d, "r3")
    assert d.run_worker("old", code_version=1).code == 0
    assert d.deliver(d.approve("r3"))
    # The v2 worker pays and writes the payload back as v2, then dies before
    # the notification.
    exit_ = d.run_worker("new", code_version=2, crash="before_intent_commit=kill@2")
    assert exit_.killed
    snap = d.snapshot("r3")
    assert snap.state.payload_version == 2 and snap.run.current_step == "notify"
    before = raw_state(d, "r3")
    d.clock.advance(d.config.lease_seconds + 1)
    assert d.run_worker("rolled-back", code_version=1).code == 0
    run = d.snapshot("r3").run
    assert run.error is not None and "payload has schema_version 2" in run.error
    assert raw_state(d, "r3") == before
    assert len(d.world.effects("email")) == 0
    assert d.runtime.unpark("r3")
    assert d.run_worker("new2", code_version=2).code == 0
    assert d.snapshot("r3").run.status is RunStatus.COMPLETED
    assert len(d.world.effects("payments")) == 1
    assert len(d.world.effects("email")) == 1
