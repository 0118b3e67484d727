"""Two workers on one run: one wins, the other is fenced, with real processes.

Races are built with crash points as barriers, never with timing: worker A
stops itself (SIGSTOP) at a chosen crash point, the virtual clock moves past
its lease, worker B runs to idle, and only then is A resumed (SIGCONT).
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from harness.adapters.reference._deployment import Deployment
from reference_runtime import (
    LeaseLostError,
    RunStatus,
    StaleWriteError,
)
from reference_runtime._executor import Executor, ExecutorSettings

Factory = Callable[..., Deployment]

REFUND = {"customer_id": "c1", "amount_cents": 1250, "currency": "EUR"}

#: Where a race matters, it must hold on every backend that has leases.
LEASE_VARIANTS = [
    "sqlite",
    pytest.param("postgres", marks=pytest.mark.postgres),
    pytest.param("postgres+redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
]


def effects(d: Deployment) -> Counter[str]:
    return Counter(f"{e.service}.{e.action}" for e in d.world.effects())


def approved_refund(d: Deployment, run_id: str = "r1") -> None:
    """A refund run that waits for nothing: approved, next step pays."""
    d.submit("refund", REFUND, tenant="acme", run_id=run_id)
    assert d.run_worker("w0").code == 0
    assert d.snapshot(run_id).run.status is RunStatus.WAITING_FOR_APPROVAL
    assert d.deliver(d.approve(run_id))


def fault_free(make: Factory, variant: str) -> tuple[str, Any, Counter[str]]:
    d = make(variant)
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    assert d.drive("r1") == "Completed"
    snap = d.snapshot("r1")
    return snap.run.status.value, snap.state.payload.get("_output"), effects(d)


class Paused:
    """Worker A, started and stopped at its armed ``pause`` crash point."""

    def __init__(self, d: Deployment, worker_id: str, crash: str) -> None:
        self.proc = d.start_worker(worker_id, crash=crash)
        _, status = os.waitpid(self.proc.pid, os.WUNTRACED)
        if not os.WIFSTOPPED(status):
            self.proc.kill()
            raise AssertionError(f"worker {worker_id} did not stop at {crash}: status {status}")

    def resume(self, timeout: float = 60.0) -> int:
        os.kill(self.proc.pid, signal.SIGCONT)
        _, err = self.proc.communicate(timeout=timeout)
        assert self.proc.returncode == 0, err.decode(errors="replace")
        return self.proc.returncode

    def cleanup(self) -> None:
        # SIGKILL ends a stopped process too; then reap it.
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.communicate(timeout=30)


@pytest.fixture
def paused() -> Iterator[list[Paused]]:
    """Every paused worker a test starts is killed and reaped, whatever happens."""
    started: list[Paused] = []
    yield started
    for p in started:
        p.cleanup()


def refund_callers(d: Deployment) -> list[str | None]:
    """Who sent a refund request to the world (lookups left out)."""
    return [r.worker_id for r in d.world.requests("payments") if r.action == "refund"]


def actors_in_order(d: Deployment, run_id: str) -> list[str]:
    return [e.actor for e in d.runtime.store.audit(run_id)]


@pytest.mark.parametrize("variant", LEASE_VARIANTS)
def test_a_worker_resumed_after_losing_its_lease_cannot_commit_its_stale_result(
    make_deployment: Factory, variant: str, paused: list[Paused]
) -> None:
    oracle = fault_free(make_deployment, variant)
    d = make_deployment(variant)
    approved_refund(d)
    # A pays, then stops itself before recording the result.
    a = Paused(d, "A", "before_result_commit=pause")
    paused.append(a)
    assert effects(d)["payments.refund"] == 1
    d.clock.advance(d.config.lease_seconds + 1)
    # B takes the run over, reconciles the refund by its key, and finishes.
    assert d.run_worker("B").code == 0
    assert d.snapshot("r1").run.status is RunStatus.COMPLETED
    b_events = len(d.runtime.store.audit("r1"))
    assert a.resume() == 0

    actors = actors_in_order(d, "r1")
    assert len(actors) == b_events, f"A committed after B: {actors[b_events:]}"
    first_b = actors.index("B")
    assert "A" not in actors[first_b:], f"a commit by A follows B's: {actors}"
    (refund,) = d.world.effects("payments")
    assert refund.worker_id == "A"
    reconciled = [e for e in d.runtime.store.audit("r1") if e.action == "effect_reconciled"]
    assert [e.actor for e in reconciled] == ["B"]
    snap = d.snapshot("r1")
    assert (snap.run.status.value, snap.state.payload.get("_output"), effects(d)) == oracle


@pytest.mark.parametrize("variant", LEASE_VARIANTS)
def test_a_zombie_paused_before_its_call_never_calls_the_service_after_another_worker_won(
    make_deployment: Factory, variant: str, paused: list[Paused]
) -> None:
    d = make_deployment(variant)
    approved_refund(d)
    a = Paused(d, "A", "before_external_call=pause")
    paused.append(a)
    assert effects(d)["payments.refund"] == 0  # the intent is recorded, nothing sent
    d.clock.advance(d.config.lease_seconds + 1)
    assert d.run_worker("B").code == 0
    assert d.snapshot("r1").run.status is RunStatus.COMPLETED
    assert refund_callers(d) == ["B"]
    assert a.resume() == 0
    # A woke up holding a dead lease: it must not even reach the service.
    assert refund_callers(d) == ["B"]
    assert effects(d) == Counter({"payments.refund": 1, "email.notify": 1})
    assert d.snapshot("r1").run.status is RunStatus.COMPLETED


@pytest.mark.parametrize(
    "variant", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_store_commit_under_a_lease_another_process_took_raises_lease_lost(
    make_deployment: Factory, variant: str
) -> None:
    d = make_deployment(variant)
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    store = d.runtime.store
    # This test process is worker A; it leases the run and then stalls.
    claim = store.claim("A", d.clock.now(), d.config.lease_seconds)
    assert claim is not None and claim.run.run_id == "r1"
    executor = Executor(
        store=store,
        services=None,
        registry=d.runtime.registry,
        clock=d.clock,
        worker_id="A",
        settings=ExecutorSettings(lease_seconds=d.config.lease_seconds),
    )
    executor.step_context.claim = claim
    d.clock.advance(d.config.lease_seconds + 1)
    # Worker B, a real process, takes the run over and advances it.
    assert d.run_worker("B").code == 0
    after_b = d.snapshot("r1")
    assert after_b.run.status is RunStatus.WAITING_FOR_APPROVAL
    assert after_b.run.fencing_token > claim.fencing_token
    with pytest.raises(LeaseLostError) as info:
        executor.step_context.commit(claim.run, status=RunStatus.RUNNING)
    assert info.value.run_id == "r1" and info.value.token == claim.fencing_token
    assert "another worker claimed it" in str(info.value)
    with pytest.raises(LeaseLostError):
        store.renew_lease(claim, d.clock.now(), d.config.lease_seconds)
    # Nothing of A's reached the store.
    assert d.snapshot("r1") == after_b
    assert "A" not in actors_in_order(d, "r1")


@pytest.mark.parametrize(
    "variant", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_a_commit_after_the_lease_expired_is_fenced_even_if_nobody_took_the_run(
    make_deployment: Factory, variant: str
) -> None:
    d = make_deployment(variant)
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    claim = d.runtime.store.claim("A", d.clock.now(), d.config.lease_seconds)
    assert claim is not None
    executor = Executor(
        store=d.runtime.store,
        services=None,
        registry=d.runtime.registry,
        clock=d.clock,
        worker_id="A",
    )
    executor.step_context.claim = claim
    d.clock.advance(d.config.lease_seconds + 1)
    before = d.snapshot("r1")
    with pytest.raises(LeaseLostError, match="expired"):
        executor.step_context.commit(claim.run, status=RunStatus.RUNNING)
    assert d.snapshot("r1") == before


def test_two_executors_committing_from_the_same_state_version_the_second_is_stale(
    make_deployment: Factory,
) -> None:
    d = make_deployment("sqlite")
    d.submit("refund", REFUND, tenant="acme", run_id="r1")
    store = d.runtime.store
    claim = store.claim("A", d.clock.now(), d.config.lease_seconds)
    assert claim is not None

    def executor() -> Executor:
        ex = Executor(
            store=store,
            services=None,
            registry=d.runtime.registry,
            clock=d.clock,
            worker_id="A",
        )
        # Both hold the same lease: only the version can tell them apart.
        ex.step_context.claim = claim
        return ex

    first, second = executor(), executor()
    read = store.load("r1").run
    assert read.state_version == 0
    won = first.step_context.commit(read, status=RunStatus.RUNNING, action="first")
    assert won.state_version == 1
    with pytest.raises(StaleWriteError) as info:
        second.step_context.commit(read, status=RunStatus.CANCELLED, action="second")
    assert (info.value.expected, info.value.actual) == (0, 1)
    run = store.get_run("r1")
    assert run is not None
    assert run.status is RunStatus.RUNNING and run.state_version == 1
    assert [e.action for e in store.audit("r1")] == ["created", "first"]
