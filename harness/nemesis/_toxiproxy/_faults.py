"""The network faults aimed at one moment of one connection (and the
partition, in ``_partition``)."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import Any

from ... import _toxiproxy as tp
from ...adapters import Capability, WorkerHandle
from ...model import NetworkFault
from .._clock import advance
from .._context import StepContext
from ._partition import _partition
from ._watch import (
    _alive,
    _closed_by_proxy,
    _peer,
    _proxy_side,
    _server_let_go,
    _ss_bytes,
    _store,
    _switched_off,
    _value,
    _wait,
    _worker_side,
)

#: ``latency``: the delay of each reply, and its jitter (milliseconds)
LATENCY_MS, JITTER_MS = 500, 100
#: ``slow_reply``: the average fragment (bytes), its variation, and the delay between two (µs)
SLICE_BYTES, SLICE_VARIATION, SLICE_DELAY_US = 24, 16, 200
#: ``cut_reply``: how much of the next reply gets through (bytes)
CUT_AFTER = 16
#: the fault kinds aimed at the store of the worker's transactions (the first service)
ON_THE_STORE = (
    "commit_ack_lost",
    "reset_mid_transaction",
    "latency",
    "slow_reply",
    "cut_reply",
    "commit_lost",
)


def network_fault(
    ctx: StepContext, step: NetworkFault, handle: WorkerHandle, routes: Mapping[str, tp.Route]
) -> None:
    """Fire ``step`` on the paused worker ``handle`` through its proxies."""
    if shutil.which("ss") is None:
        value = _value(step, list(routes.values()))
        reason = "ss (iproute2) is not installed: the step cannot see its events on the sockets"
        ctx.recorder.fault(step.kind, False, **value, reason=reason)
        handle.cont()
        ctx.await_worker(handle)
        return
    srv = tp.server()
    for route in routes.values():
        srv.touch(route)  # never reused by another environment
    if step.kind == "partition":
        _partition(ctx, step, handle, srv, list(routes.values()))
        return
    route = _store(ctx, routes)
    value = _value(step, [route])
    toxic = f"sah-{step.kind}"
    try:
        if step.kind == "commit_ack_lost":
            _commit_ack_lost(ctx, handle, srv, route, toxic, value)
        elif step.kind == "commit_lost":
            _commit_lost(ctx, handle, srv, route, toxic, value)
        elif step.kind == "reset_mid_transaction":
            with _switched_off(srv, [route]) as closed:
                value["server_let_go"] = _server_let_go(route, closed)
            fired = bool(closed)
            if not fired:
                value["reason"] = "the worker held no connection through its proxy"
            ctx.recorder.fault(step.kind, fired, **value)
            handle.cont()
        elif step.kind == "latency":
            _latency(ctx, handle, srv, route, toxic, value)
        elif step.kind == "slow_reply":
            attrs = {
                "average_size": SLICE_BYTES,
                "size_variation": SLICE_VARIATION,
                "delay": SLICE_DELAY_US,
            }
            srv.add_toxic(route, toxic, "slicer", "downstream", attrs)
            ctx.recorder.fault(step.kind, True, **value, toxic={"slicer": attrs})
            handle.cont()
        elif step.kind == "cut_reply":
            _cut_reply(ctx, handle, srv, route, toxic, value)
        else:  # pragma: no cover - NetworkKind is closed
            raise ValueError(f"unknown network fault {step.kind!r}")
    except tp.ToxiproxyError as exc:
        ctx.recorder.fault(step.kind, False, **value, reason=str(exc))
        handle.cont()
    finally:
        # Healed once the worker has gone on (or ended); a no-op for a toxic
        # never added.
        srv.remove_toxic(route, toxic)
    ctx.await_worker(handle)


def _commit_ack_lost(
    ctx: StepContext,
    handle: WorkerHandle,
    srv: tp.Server,
    route: tp.Route,
    toxic: str,
    value: dict[str, Any],
) -> None:
    host, port = _peer(route)
    ends = _proxy_side(srv, route)
    before = {e: n for e, n in _ss_bytes((host, port)).items() if e in ends}
    srv.add_toxic(route, toxic, "timeout", "downstream", {"timeout": 0})
    handle.cont()

    def answered() -> bool:
        now = _ss_bytes((host, port))
        return any(now.get(e, n) > n for e, n in before.items())

    # The server answered the worker's next statement -- its COMMIT -- and
    # the answer was dropped: the commit is applied, its acknowledgement lost.
    got = _wait(answered, handle)
    with _switched_off(srv, [route]) as closed:
        srv.remove_toxic(route, toxic)
    value["closed"] = len(closed)
    if got:
        ctx.recorder.fault("commit_ack_lost", True, **value)
    else:
        ctx.recorder.fault(
            "commit_ack_lost",
            False,
            **value,
            reason="the server never answered the worker's next statement (it sent none, or "
            "ended first)",
        )


def _commit_lost(
    ctx: StepContext,
    handle: WorkerHandle,
    srv: tp.Server,
    route: tp.Route,
    toxic: str,
    value: dict[str, Any],
) -> None:
    # The proxy's ends of the worker's connections: what the worker sends
    # arrives there (and, with the toxic on, goes no further).
    mine = _worker_side(handle, route)
    received = {e: _ss_bytes(e) for e in mine}
    srv.add_toxic(route, toxic, "timeout", "upstream", {"timeout": 0})
    handle.cont()

    def sent() -> bool:
        return any(
            any(n > received[e].get(p, n) for p, n in _ss_bytes(e).items()) for e in received
        )

    # The worker sent its next statement -- its COMMIT -- and the proxy
    # kept it: the server never saw it. Closing the proxy's connections now
    # ends the server's side (it rolls the transaction back) and the
    # worker's (no reply).
    got = _wait(sent, handle)
    with _switched_off(srv, [route]) as closed:
        srv.remove_toxic(route, toxic)
        value["server_let_go"] = _server_let_go(route, closed)
    value["closed"] = len(closed)
    if got:
        ctx.recorder.fault("commit_lost", True, **value)
    else:
        ctx.recorder.fault(
            "commit_lost",
            False,
            **value,
            reason="the worker never sent its next statement (it sent none, or ended first)",
        )


def _latency(
    ctx: StepContext,
    handle: WorkerHandle,
    srv: tp.Server,
    route: tp.Route,
    toxic: str,
    value: dict[str, Any],
) -> None:
    attrs = {"latency": LATENCY_MS, "jitter": JITTER_MS}
    # Every connection to the proxy is the worker's: the proxy is its own.
    proxy = ("127.0.0.1", route.listen_port)
    before = _ss_bytes(proxy)
    srv.add_toxic(route, toxic, "latency", "downstream", attrs)
    ctx.recorder.fault("latency", True, **value, toxic={"latency": attrs})
    handle.cont()
    if Capability.CLOCK in ctx.capabilities:
        # The worker's next reply is in flight, held back, while its lease runs out.
        advance(ctx, float(getattr(ctx.adapter, "lease_seconds", 30.0)) + 1, kind="lease_wait")

    def delivered() -> bool:  # a reply reached the worker, on any of its connections
        return any(n > before.get(e, 0) for e, n in _ss_bytes(proxy).items())

    _wait(delivered, handle)


def _cut_reply(
    ctx: StepContext,
    handle: WorkerHandle,
    srv: tp.Server,
    route: tp.Route,
    toxic: str,
    value: dict[str, Any],
) -> None:
    seen = _worker_side(handle, route)
    srv.add_toxic(route, toxic, "limit_data", "downstream", {"bytes": CUT_AFTER})
    handle.cont()

    def one_cut() -> bool:  # a connection of the worker's, seen open, no longer is
        now = _worker_side(handle, route)
        gone = bool(seen - now) and _alive(handle.pid)  # not its own exit closing them
        seen.update(now)
        return gone

    # Healed once one of the worker's connections was cut (the proxy ended it).
    cut = _wait(one_cut, handle)
    # A worker that ends as soon as its connection does (a LangGraph worker
    # with one run: the write raises, the worker exits) can be gone before a
    # poll sees it alive without that connection; the proxy's end of a
    # connection it closed first says so after (TIME-WAIT: the closer's).
    cut = cut or _closed_by_proxy(route, seen)
    srv.remove_toxic(route, toxic)
    if cut:
        ctx.recorder.fault("cut_reply", True, **value, toxic={"limit_data": CUT_AFTER})
    else:
        ctx.recorder.fault(
            "cut_reply",
            False,
            **value,
            reason="no connection of the worker was cut (it read no further reply)",
        )
