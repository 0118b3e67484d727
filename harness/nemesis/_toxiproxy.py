"""Network faults on Toxiproxy: one paused worker's proxies (see
:mod:`harness._toxiproxy`), each fault fired by an event, never a sleep.

The worker connects to its stores through proxies of its own, so a fault on
them reaches every connection it holds or opens and no other process's.
Toxiproxy acts on a proxy's connections as a whole; where a fault is about
one moment of one connection, the step waits for the event that marks it
(the server answered, the reply was delivered, the connection was cut)
before it heals, watching the kernel's sockets (``ss``, no root needed):

``commit_ack_lost``
    What the server sends the worker is dropped (a ``timeout`` toxic of 0,
    downstream); the worker goes on and sends its COMMIT; once the server
    has answered it (bytes arrive on the proxy's side of the connection:
    the COMMIT was applied), the proxy is switched off and on again, which
    closes the worker's connections: the worker sees its connection end
    with no reply, and its read back (a fresh connection) goes through.
``commit_lost``
    What the worker sends the server is dropped (a ``timeout`` toxic of 0,
    upstream); the worker goes on and sends its COMMIT; once the proxy has
    received it (bytes arrive on the proxy's side of the worker's
    connection), the proxy is switched off and on again: the server sees
    the connection end mid-transaction and rolls it back, the worker sees
    its connection end with no reply. To the worker, a lost
    acknowledgement; in the store, nothing was written.
``reset_mid_transaction``
    The proxy is switched off and on while the worker is paused between two
    statements: its connections are closed at both ends and the step waits
    until the server has let go of them (its transaction rolled back, its
    locks freed) before the worker goes on.
``partition``
    Every proxy of the worker switched off (its connections closed, new ones
    refused); the server lets go of its sessions; **the worker runs on**
    through the partition; the clock moves past its lease (with the clock
    capability; without it, the worker's sessions were its hold on the
    run), another worker runs until idle (it takes the run over); then the
    proxies come back on.
``latency``
    Each reply to the worker held back (``latency`` toxic, with jitter);
    with the clock capability the clock moves past the worker's lease while
    its next reply is in flight. Healed once that reply has arrived.
``slow_reply``
    Replies arrive in small fragments (``slicer``), for the rest of the
    worker's life.
``cut_reply``
    The next reply is cut after a few bytes (``limit_data``): the connection
    ends mid-message. Healed once the connection was cut.
``partition_after_apply``
    No crash point: the world holds the worker right after applying its
    call of an effect; every proxy of the worker is switched off; it goes
    on, unable to report the result; another worker runs until idle; then
    the proxies come back (:func:`partition_after_apply`).
"""

from __future__ import annotations

import contextlib
import ipaddress
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from typing import Any

from .. import _netfilter
from .. import _toxiproxy as tp
from ..adapters import Capability, WorkerHandle, tcp_connections
from ..model import NetworkFault
from ..world import FaultRule
from ._clock import advance
from ._context import StepContext
from ._world import STOP_MODE as STOP

#: seconds a step waits, at most, for the event it fires on
EVENT_WAIT = 20.0
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


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            stat = fh.read()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :][:1] not in ("Z", "X")


def _ss_bytes(peer: tuple[str, int]) -> dict[tuple[str, int], int]:
    """``bytes_received`` of every TCP socket of this host connected to ``peer``,
    by its own end."""
    host = f"[{peer[0]}]" if ":" in peer[0] else peer[0]
    got = subprocess.run(
        ["ss", "-H", "-t", "-i", "-n", "dst", f"{host}:{peer[1]}"],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    out: dict[tuple[str, int], int] = {}
    local: tuple[str, int] | None = None
    for line in got.stdout.splitlines():
        if not line[:1].isspace():
            words = line.split()
            if len(words) >= 5:
                lhost, _, lport = words[3].rpartition(":")
                local = (lhost.strip("[]"), int(lport)) if lport.isdigit() else None
            continue
        if local is None:
            continue
        for word in line.split():
            if word.startswith("bytes_received:"):
                out[local] = int(word.partition(":")[2])
        out.setdefault(local, 0)
        local = None
    return out


def _peer(route: tp.Route) -> tuple[str, int]:
    """The store's address as the kernel's tables show it (a name resolved)."""
    host, port = route.upstream_addr
    try:
        ipaddress.ip_address(host)
    except ValueError:
        host = socket.gethostbyname(host)
    return host, port


def _proxy_side(srv: tp.Server, route: tp.Route) -> set[tuple[str, int]]:
    """The proxy server's own ends of its connections to ``route``'s store
    (of every proxy: Toxiproxy does not say which is whose; the step tells
    them apart by what changes). Without the server's pid (a user's server),
    every socket of this host to the store."""
    host, port = _peer(route)
    if srv.server_pid is not None:
        return {
            (e.local_host, e.local_port)
            for e in tcp_connections(srv.server_pid, {port})
            if e.remote_host == host
        }
    return set(_ss_bytes((host, port)))


def _worker_side(handle: WorkerHandle, route: tp.Route) -> set[tuple[str, int]]:
    """The worker's own ends of its connections to its proxy."""
    return {(e.local_host, e.local_port) for e in tcp_connections(handle.pid, {route.listen_port})}


def _wait(done: Any, handle: WorkerHandle | None = None) -> bool:
    """Poll ``done()`` (a barrier on the kernel's sockets) until true, the
    worker ends, or :data:`EVENT_WAIT` runs out; whether it came true."""
    deadline = time.monotonic() + EVENT_WAIT
    while time.monotonic() < deadline:
        if done():
            return True
        if handle is not None and not _alive(handle.pid):
            return bool(done())
        time.sleep(0.005)
    return False


def _server_let_go(route: tp.Route, ends: set[tuple[str, int]]) -> int:
    """Wait until the store has closed its side of each connection whose
    proxy side was ``ends``; how many it let go of."""
    server = _peer(route)
    open_ = set(ends)

    def gone() -> bool:
        open_.difference_update({e for e in open_ if not _netfilter.socket_open(server, e)})
        return not open_

    _wait(gone)
    return len(ends) - len(open_)


@contextlib.contextmanager
def _switched_off(srv: tp.Server, routes: list[tp.Route]) -> Iterator[set[tuple[str, int]]]:
    """The routes' proxies off (their connections closed, new ones refused)
    for the block; yields the proxy-side ends that closed with them, on the
    first route's store."""
    first = routes[0]
    before = _proxy_side(srv, first)
    try:
        for route in routes:
            srv.set_enabled(route, False)
        yield before - _proxy_side(srv, first)
    finally:
        for route in routes:
            with contextlib.suppress(tp.ToxiproxyError):
                srv.set_enabled(route, True)


def _store(ctx: StepContext, routes: Mapping[str, tp.Route]) -> tp.Route:
    named = getattr(ctx.adapter, "network_services", None)
    order = list(dict(named())) if named is not None else []
    for service in order:
        if service in routes:
            return routes[service]
    return next(iter(routes.values()))


def _value(step: NetworkFault, routes: list[tp.Route]) -> dict[str, Any]:
    return {
        "network": step.kind,
        "worker_id": step.worker_id,
        "backend": "toxiproxy",
        "proxies": [
            {"service": r.service, "proxy": r.name, "listen": r.listen, "server": r.upstream}
            for r in routes
        ],
    }


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


def _closed_by_proxy(route: tp.Route, ends: set[tuple[str, int]]) -> bool:
    """Whether the proxy closed one of the connections whose worker's ends
    are ``ends`` before the worker did: the side that closes first keeps
    the connection in TIME-WAIT (a minute), the other does not."""
    got = subprocess.run(
        ["ss", "-H", "-t", "-n", "state", "time-wait", "src", route.listen],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    for line in got.stdout.splitlines():
        host, _, port = line.split()[-1].rpartition(":")
        if port.isdigit() and (host.strip("[]"), int(port)) in ends:
            return True
    return False


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
