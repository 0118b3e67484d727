"""What a step watches and switches: the kernel's sockets (``ss``), the
proxies switched off and on, the event waited for."""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from typing import Any

from ... import _netfilter
from ... import _toxiproxy as tp
from ...adapters import WorkerHandle, tcp_connections
from ...model import NetworkFault
from .._context import StepContext

#: seconds a step waits, at most, for the event it fires on
EVENT_WAIT = 20.0


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
