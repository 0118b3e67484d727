"""Partitions: every proxy of a worker switched off while it runs on, at a
crash point or right after it applied an effect."""

from __future__ import annotations

from typing import Any

from ... import _toxiproxy as tp
from ...adapters import Capability, WorkerHandle
from ...model import NetworkFault
from ...world import FaultRule
from .._clock import advance
from .._context import StepContext
from .._world import STOP_MODE as STOP
from ._watch import (
    _server_let_go,
    _switched_off,
    _value,
)


def _partition(
    ctx: StepContext,
    step: NetworkFault,
    handle: WorkerHandle,
    srv: tp.Server,
    routes: list[tp.Route],
) -> None:
    value = _value(step, routes)
    # Without the clock capability there is no lease on the virtual clock
    # to outlive: the worker's hold on its runs is its sessions (LangGraph's
    # single-writer lock is a session's advisory lock), which the store lets
    # go of once the proxy has closed them. The clock then stays put.
    clock = Capability.CLOCK in ctx.capabilities
    if not clock:
        value["lease_wait"] = False  # (with the clock, the event is as it was)
    try:
        with _switched_off(srv, routes) as closed:
            # The server's ends go once the proxy closed them (a row lock the
            # worker held in a transaction goes with them).
            value["server_let_go"] = _server_let_go(routes[0], closed)
            ctx.recorder.fault(step.kind, True, **value)
            # The worker runs on through the partition: every connection it
            # had is gone, every new one refused.
            handle.cont()
            ctx.recorder.fault("continue", True, worker_id=step.worker_id)
            if clock:
                lease = float(getattr(ctx.adapter, "lease_seconds", 30.0))
                advance(ctx, lease + 1, kind="lease_wait")
            peer = ctx.start(f"{step.worker_id}-peer")
            ctx.await_worker(peer)
    except tp.ToxiproxyError as exc:
        ctx.recorder.fault(step.kind, False, **value, reason=str(exc))
        handle.cont()
    ctx.await_worker(handle)


def partition_after_apply(ctx: StepContext, step: NetworkFault) -> None:
    """Start worker ``step.worker_id``; the world holds it right after
    applying its ``step.nth`` call of ``step.effect`` from now (a
    ``stop_after_apply`` rule); switch off every proxy of its own (to its
    runtime's server or database: it cannot report what it did); let it go
    on, move the clock past its lease (with the clock capability), run
    another worker until idle; heal; wait for the first worker to end.

    No crash point is needed: the world's effect boundary is the event.
    Toxiproxy only: the worker must have been routed through proxies of its
    own when it started (the contract's ``route_worker``); a worker that
    was not is let go untouched, and the fault recorded not fired, with why.
    """
    assert step.effect is not None  # NetworkFault's validator
    service, _, action = step.effect.partition(".")
    world = ctx.env.world
    value: dict[str, Any] = {
        "network": step.kind,
        "worker_id": step.worker_id,
        "backend": "toxiproxy",
        "effect": step.effect,
        "nth": step.nth,
    }
    # ``nth`` counts from now, as an ArmWorldFault's does.
    rule = FaultRule(service, nth=world.calls(service, action) + step.nth, mode=STOP, action=action)
    rule_id = world.arm(rule)
    handle = ctx.start(step.worker_id)
    if not ctx.await_worker(handle).stopped:
        world.disarm(rule_id)  # never left for a later worker to meet
        ctx.recorder.fault(
            step.kind,
            False,
            **value,
            reason=f"the worker ended without making call {step.nth} of {step.effect} (the run "
            "ended or went another way first)",
        )
        return
    handle = ctx.paused.pop(step.worker_id)
    reason = None
    routes: list[tp.Route] = []
    if Capability.NETWORK_FAULTS in ctx.capabilities:
        routes = list(tp.routes_of(getattr(ctx.env, "unguarded", ctx.env), step.worker_id).values())
    if not routes:
        try:
            choice = tp.choose().describe()
        except ValueError as exc:
            choice = str(exc)
        reason = (
            "the worker was not routed through proxies of its own (the adapter's "
            f"route_worker; network faults run on {choice}): a partition after an effect needs "
            "the Toxiproxy backend"
        )
    if reason is None:
        value |= _value(step, routes)
        try:
            srv = tp.server()
            for route in routes:
                srv.touch(route)  # deleted when released, never reused
            with _switched_off(srv, routes) as closed:
                value["closed"] = len(closed)
                ctx.recorder.fault(step.kind, True, **value)
                # It has the effect's answer and cannot report it: every
                # connection it had is gone, every new one refused.
                handle.cont()
                ctx.recorder.fault("continue", True, worker_id=step.worker_id)
                if Capability.CLOCK in ctx.capabilities:
                    lease = float(getattr(ctx.adapter, "lease_seconds", 30.0))
                    advance(ctx, lease + 1, kind="lease_wait")
                # The environment may time out what the worker holds, as its
                # server would at a deadline of real time (the hook's doc).
                cut_off = getattr(ctx.env, "cut_off", None)
                try:
                    if cut_off is not None:
                        cut_off(handle, True)
                    peer = ctx.start(f"{step.worker_id}-peer")
                    ctx.await_worker(peer)
                finally:
                    if cut_off is not None:
                        cut_off(handle, False)
        except tp.ToxiproxyError as exc:
            reason = str(exc)
    if reason is not None:
        ctx.recorder.fault(step.kind, False, **value, reason=reason)
        handle.cont()
    ctx.await_worker(handle)
